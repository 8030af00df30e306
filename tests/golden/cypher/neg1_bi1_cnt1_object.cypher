MATCH (n0:`City`)
WHERE NOT EXISTS {
  MATCH (n0)-[r1:`IsCapitalOf`]-(n1:`Country`)
    WHERE vector.similarity.cosine(n1.embedding, $v1_0) >= $threshold
}
WITH n0, 1.0 AS score
RETURN count(*) AS count
