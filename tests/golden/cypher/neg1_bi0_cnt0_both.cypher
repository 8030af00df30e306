MATCH (n0:`City`)
WITH n0, vector.similarity.cosine(n0.embedding, $v0_0) AS s0_0
WHERE s0_0 >= $threshold AND NOT EXISTS {
  MATCH (n0)-[r1:`IsCapitalOf`]->(n1:`Country`)
    WHERE vector.similarity.cosine(n1.embedding, $v1_0) >= $threshold
}
WITH n0, s0_0 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, score
ORDER BY score DESC, n0_id
LIMIT $k
