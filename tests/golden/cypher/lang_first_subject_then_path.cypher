MATCH (n1:`Land`)
WITH n1, vector.similarity.cosine(n1.embedding, $v1_0) AS s1_0
WHERE s1_0 >= $threshold
MATCH (n0:`Land`)-[r1:`Owes`]->(n1), (n0)-[r2:`Owes`]->(n2:`Land`)-[r3:`Borders`]-(n3:`Land`)
WITH n0, r1, n1, r2, n2, r3, n3, s1_0, vector.similarity.cosine(n3.embedding, $v3_0) AS s3_0
WHERE s3_0 >= $threshold
WITH n0, r1, n1, r2, n2, r3, n3, (s1_0 * s3_0) ^ 0.16666666666666666 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, r1.id AS r1_id, r1 {.*} AS r1_props, startNode(r1) = n0 AS r1_forward, n1.id AS n1_id, n1 {.*, embedding: null} AS n1_props, r2.id AS r2_id, r2 {.*} AS r2_props, startNode(r2) = n0 AS r2_forward, n2.id AS n2_id, n2 {.*, embedding: null} AS n2_props, r3.id AS r3_id, r3 {.*} AS r3_props, startNode(r3) = n2 AS r3_forward, n3.id AS n3_id, n3 {.*, embedding: null} AS n3_props, score
ORDER BY score DESC, n0_id, r1_id, n1_id, r2_id, n2_id, r3_id, n3_id
LIMIT $k
