MATCH (n0:`City`)
WHERE NOT EXISTS {
  MATCH (n0)-[r1:`IsCapitalOf`]->(n1:`Country`)
}
WITH n0, 1.0 AS score
RETURN n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props, score
ORDER BY score DESC, n0_id
LIMIT $k
