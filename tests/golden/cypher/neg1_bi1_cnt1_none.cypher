MATCH (n0:`City`)
WHERE NOT EXISTS {
  MATCH (n0)-[r1:`IsCapitalOf`]-(n1:`Country`)
}
WITH n0, 1.0 AS score
RETURN count(*) AS count
