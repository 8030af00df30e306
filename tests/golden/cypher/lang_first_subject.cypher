MATCH (n1:`Land`)
WITH n1, vector.similarity.cosine(n1.embedding, $v1_0) AS s1_0
WHERE s1_0 >= $threshold
MATCH (n0:`Land`)-[r1:`Owes`]->(n1), (n0)-[r2:`Borders`]-(n2:`Land`)
WITH n0, r1, n1, r2, n2, s1_0, vector.similarity.cosine(n2.embedding, $v2_0) AS s2_0
WHERE s2_0 >= $threshold
WITH n0, r1, n1, r2, n2, (s1_0 * s2_0) ^ 0.25 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, r1.id AS r1_id, r1 {.*} AS r1_props, startNode(r1) = n0 AS r1_forward, n1.id AS n1_id, n1 {.*, embedding: null} AS n1_props, r2.id AS r2_id, r2 {.*} AS r2_props, startNode(r2) = n0 AS r2_forward, n2.id AS n2_id, n2 {.*, embedding: null} AS n2_props, score
ORDER BY score DESC, n0_id, r1_id, n1_id, r2_id, n2_id
LIMIT $k
