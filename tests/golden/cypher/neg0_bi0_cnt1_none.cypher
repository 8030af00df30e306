MATCH (n0:`City`)-[r1:`IsCapitalOf`]->(n1:`Country`)
WITH n0, r1, n1, 1.0 AS score
RETURN count(*) AS count
