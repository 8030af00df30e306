MATCH (n0:`Town`)
WITH n0, vector.similarity.cosine(n0.embedding, $v0_0) AS s0_0
WHERE s0_0 >= $threshold
MATCH (n0)-[r1:`TownOf`]->(n1:`Land`)
WHERE NOT EXISTS {
  MATCH (n1)-[r2:`Borders`|`Owes`]-(n2:`Land`)
    WHERE vector.similarity.cosine(n2.embedding, $v2_0) >= $threshold AND (startNode(r2) = n1 OR type(r2) IN $t2)
}
WITH n0, r1, n1, (s0_0) ^ 0.5 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, r1.id AS r1_id, r1 {.*} AS r1_props, startNode(r1) = n0 AS r1_forward, n1.id AS n1_id, n1 {.*, embedding: null} AS n1_props, score
ORDER BY score DESC, n0_id, r1_id, n1_id
LIMIT $k
