MATCH (n1:`Land`)
WITH n1, vector.similarity.cosine(n1.embedding, $v1_0) AS s1_0
WHERE s1_0 >= $threshold
MATCH (n0:`Land`)-[r1:`Borders`]-(n1)
WITH n0, r1, n1, (s1_0) ^ 0.5 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, r1.id AS r1_id, r1 {.*} AS r1_props, startNode(r1) = n0 AS r1_forward, n1.id AS n1_id, n1 {.*, embedding: null} AS n1_props, score
ORDER BY score DESC, n0_id, r1_id, n1_id
LIMIT $k
