MATCH (n0:`Town`)-[r1:`TownOf`]->(n1:`Land`)
WHERE NOT EXISTS {
  MATCH (n1)-[r2:`Owes`]->(n2:`Land`)
    WHERE vector.similarity.cosine(n2.embedding, $v2_0) >= $threshold
}
WITH n0, r1, n1, 1.0 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, r1.id AS r1_id, r1 {.*} AS r1_props, startNode(r1) = n0 AS r1_forward, n1.id AS n1_id, n1 {.*, embedding: null} AS n1_props, score
ORDER BY score DESC, n0_id, r1_id, n1_id
LIMIT $k
