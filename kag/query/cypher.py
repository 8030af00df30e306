"""Compile a ``QueryPlan`` into parameterized Cypher: ``(text, params)``.

Only two kinds of things are ever written into the query text: identifiers
taken from the plan (already checked against the declared schema) which are
re-validated and backtick-quoted here, and fixed syntax. Every value — vectors,
thresholds, ``k`` — is a ``$parameter``. The output is deterministic: the same
plan always gives the same text, so it can be golden-tested and cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from kag.datamodels.base import check_identifier
from kag.query.plan import QueryPlan


@dataclass(frozen=True)
class CompiledQuery:
    """Cypher text plus its parameters."""

    text: str
    params: dict[str, Any]

    def __str__(self) -> str:
        return self.text


def quote(identifier: str) -> str:
    """Backtick-quote an identifier after checking it against the identifier pattern."""
    return f"`{check_identifier(identifier, 'identifier')}`"


_INTERNAL = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")


def quote_name(name: str) -> str:
    """Backtick-quote a name kag derives from a checked label (index/constraint names may be longer)."""
    if not _INTERNAL.fullmatch(name):
        raise ValueError(f"refusing unsafe schema object name {name!r}")
    return f"`{name}`"


def vector_index_name(label: str) -> str:
    """Name of the vector index kag creates for an entity label."""
    return f"kag_{check_identifier(label, 'label')}_embedding"


def label_expr(labels: tuple[str, ...]) -> str:
    """``:`A`|`B``` (Neo4j 5 label expression)."""
    return ":" + "|".join(quote(label) for label in labels)


def _rel(i: int, labels: tuple[str, ...], bidirectional: bool) -> str:
    body = f"[r{i}{label_expr(labels)}]"
    return f"-{body}-" if bidirectional else f"-{body}->"


def compile_plan(plan: QueryPlan) -> CompiledQuery:
    """Compile ``plan`` to Cypher. Vectors must be bound (``plan.bind``)."""
    if not plan.bound:
        raise ValueError("bind the plan's vectors before compiling it")
    # the threshold at float32 precision, the precision Neo4j's cosine returns: a score exactly at
    # the threshold then passes here as it does on the memory store (which compares in float32)
    params: dict[str, Any] = {"threshold": float(np.float32(plan.threshold)), "k": plan.k}
    scores: dict[int, list[str]] = {}

    def side_score(i: int, j: int) -> str:
        """The score expression of text ``j`` of node ``i``: a linked map lookup, or a cosine."""
        links = plan.nodes[i].link_of(j)
        if links is not None:  # linked entities: their scores by id (a missing id is null: no match)
            params[f"l{i}_{j}"] = dict(links)
            return f"$l{i}_{j}[n{i}.id]"
        name = f"v{i}_{j}"
        params[name] = [float(x) for x in plan.nodes[i].vectors[j]]
        return f"vector.similarity.cosine(n{i}.embedding, ${name})"

    def score_items(i: int) -> list[str]:
        items = [f"{side_score(i, j)} AS s{i}_{j}" for j in range(len(plan.nodes[i].vectors))]
        scores[i] = [f"s{i}_{j}" for j in range(len(items))]
        return items

    def conds(i: int) -> list[str]:
        return [f"{s} >= $threshold" for s in scores[i]]

    lines: list[str] = []
    n_nodes = len(plan.nodes)

    if plan.negated:
        subj, obj, hop = plan.nodes[0], plan.nodes[1], plan.hops[0]
        lines.append(f"MATCH (n0{label_expr(subj.labels)})")
        items = score_items(0)
        exists_lines = [f"MATCH (n0){_rel(1, hop.relation_labels, hop.bidirectional)}(n1{label_expr(obj.labels)})"]
        obj_conds = []
        for j in range(len(obj.vectors)):
            obj_conds.append(f"{side_score(1, j)} >= $threshold")
        if obj_conds:
            exists_lines.append("  WHERE " + " AND ".join(obj_conds))
        not_exists = "NOT EXISTS {\n  " + "\n  ".join(exists_lines) + "\n}"
        if items:
            lines.append("WITH n0, " + ", ".join(items))
        lines.append("WHERE " + " AND ".join([*conds(0), not_exists]))
        lines.append(f"WITH n0, {_score_expr(scores, plan.sides)} AS score")
        return _finish(lines, plan, params, ["n0"], [])

    anchor = next((i for i, n in enumerate(plan.nodes) if n.texts), None)
    if anchor is not None:
        node = plan.nodes[anchor]
        first = node.link_of(0)
        if first is not None:
            # a linked anchor: only its linked entities, found through the id index
            params[f"l{anchor}_0_ids"] = sorted(first)
            lines.append(f"MATCH (n{anchor}{label_expr(node.labels)}) WHERE n{anchor}.id IN $l{anchor}_0_ids")
        elif plan.candidates is not None and len(node.labels) == 1:
            # approximate: candidates from the label's vector index, then exact scores
            params["index"] = vector_index_name(node.labels[0])
            params["candidates"] = plan.candidates
            lines.append(f"CALL db.index.vector.queryNodes($index, $candidates, $v{anchor}_0) YIELD node AS n{anchor}")
        else:
            lines.append(f"MATCH (n{anchor}{label_expr(node.labels)})")
        lines.append(f"WITH n{anchor}, " + ", ".join(score_items(anchor)))
        lines.append("WHERE " + " AND ".join(conds(anchor)))
    if plan.hops:
        parts = []
        for i in range(n_nodes):
            labels = "" if i == anchor else label_expr(plan.nodes[i].labels)
            parts.append(f"(n{i}{labels})")
            if i < len(plan.hops):
                hop = plan.hops[i]
                parts.append(_rel(i + 1, hop.relation_labels, hop.bidirectional))
        lines.append("MATCH " + "".join(parts))
        path_vars = [v for i in range(n_nodes) for v in ([f"n{i}"] + ([f"r{i + 1}"] if i < len(plan.hops) else []))]
        rest = [i for i in range(n_nodes) if i != anchor and plan.nodes[i].texts]
        if rest:
            items = [item for i in rest for item in score_items(i)]
            carried = [s for i in range(n_nodes) if i == anchor for s in scores[i]]
            lines.append("WITH " + ", ".join(path_vars + carried + items))
            lines.append("WHERE " + " AND ".join(c for i in rest for c in conds(i)))
    else:
        path_vars = ["n0"]
    lines.append("WITH " + ", ".join(path_vars) + f", {_score_expr(scores, plan.sides)} AS score")
    node_vars = [f"n{i}" for i in range(n_nodes)]
    rel_vars = [f"r{i + 1}" for i in range(len(plan.hops))]
    return _finish(lines, plan, params, node_vars, rel_vars)


def _score_expr(scores: dict[int, list[str]], sides: int) -> str:
    names = [s for i in sorted(scores) for s in scores[i]]
    if not names:
        return "1.0"
    product = " * ".join(names)
    if sides == 1:
        return product
    return f"({product}) ^ {1.0 / sides!r}"


def _finish(
    lines: list[str], plan: QueryPlan, params: dict[str, Any], node_vars: list[str], rel_vars: list[str]
) -> CompiledQuery:
    if plan.count:
        lines.append("RETURN count(*) AS count")
        del params["k"]
        return CompiledQuery("\n".join(lines), params)
    cols, order = [], ["score DESC"]
    for i, n in enumerate(node_vars):
        cols.append(f"{n}.id AS {n}_id, {n} {{.*, embedding: null}} AS {n}_props")
        order.append(f"{n}_id")
        if i < len(rel_vars):
            r = rel_vars[i]
            cols.append(f"{r}.id AS {r}_id, {r} {{.*}} AS {r}_props, startNode({r}) = {n} AS {r}_forward")
            order.append(f"{r}_id")
    lines.append("RETURN " + ", ".join(cols) + ", score")
    # ties are broken along the path: n0, r1, n1, r2, ...
    lines.append("ORDER BY " + ", ".join(order))
    lines.append("LIMIT $k")
    return CompiledQuery("\n".join(lines), params)
