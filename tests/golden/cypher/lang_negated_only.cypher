MATCH (n0:`Land`)
WHERE NOT EXISTS {
  MATCH (n0)-[r1:`Owes`]->(n1:`Land`)
    WHERE n1.`code` = $w1_0
} AND NOT EXISTS {
  MATCH (n0)-[r2:`Borders`]-(n2:`Land`)
    WHERE vector.similarity.cosine(n2.embedding, $v2_0) >= $threshold
}
WITH n0, 1.0 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, score
ORDER BY score DESC, n0_id
LIMIT $k
