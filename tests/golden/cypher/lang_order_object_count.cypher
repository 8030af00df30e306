MATCH (n0:`Town`)-[r1:`TownOf`]->(n1:`Land`)
WITH n0, r1, n1, 1.0 AS score
WITH score LIMIT $limit
RETURN count(*) AS count
