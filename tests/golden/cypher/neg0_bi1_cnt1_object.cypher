MATCH (n1:`Country`)
WITH n1, vector.similarity.cosine(n1.embedding, $v1_0) AS s1_0
WHERE s1_0 >= $threshold
MATCH (n0:`City`)-[r1:`IsCapitalOf`]-(n1)
WITH n0, r1, n1, (s1_0) ^ 0.5 AS score
RETURN count(*) AS count
