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


NAMESPACE = "kag_ns"
"""The property that holds a node's (and a relationship's) namespace on Neo4j."""
IN_NAMESPACE = f"{NAMESPACE}: $ns"
"""The property-map entry that confines a pattern to the namespace in the ``$ns`` parameter:
``(n:KagEntity {id: $id, ...})`` with it spliced in, or :data:`NAMESPACE_MAP` alone."""
NAMESPACE_MAP = f"{{{IN_NAMESPACE}}}"
"""The property map ``{kag_ns: $ns}`` of a pattern that names no other property: ``(n:KagEntity {...})``."""


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


# the plan's comparison operators in Cypher
_OPERATORS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


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
    # every node pattern carries the namespace (a parameter): no row can reach another tenant's nodes
    ns = ""
    if plan.namespace is not None:
        params["ns"] = plan.namespace
        ns = f" {{{IN_NAMESPACE}}}"

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

    def filter_conds(i: int) -> list[str]:
        """``n0.`population` > $w0_0``: the field name from the schema, the value a parameter."""
        out = []
        for j, f in enumerate(plan.nodes[i].filters):
            params[f"w{i}_{j}"] = f.value
            out.append(f"n{i}.{quote(f.field)} {_OPERATORS[f.op]} $w{i}_{j}")
        return out

    def direction_conds(h: int) -> list[str]:
        """A hop mixing symmetric and directed types: the directed ones only forward."""
        hop = plan.hops[h]
        if not hop.mixed:
            return []
        params[f"t{h + 1}"] = list(hop.both_ways)
        return [f"(startNode(r{h + 1}) = n{plan.source(h)} OR type(r{h + 1}) IN $t{h + 1})"]

    def not_exists(h: int) -> str:
        """A negated hop: no matching relationship from its source to a node matching its object."""
        hop, obj = plan.hops[h], plan.nodes[h + 1]
        rel = _rel(h + 1, hop.relation_labels, bool(hop.both_ways))
        exists_lines = [f"MATCH (n{plan.source(h)}){rel}(n{h + 1}{label_expr(obj.labels)}{ns})"]
        inner = [f"{side_score(h + 1, j)} >= $threshold" for j in range(len(obj.vectors))]
        inner += filter_conds(h + 1) + direction_conds(h)
        if inner:
            exists_lines.append("  WHERE " + " AND ".join(inner))
        return "NOT EXISTS {\n  " + "\n  ".join(exists_lines) + "\n}"

    lines: list[str] = []
    row_hops = plan.row_hops
    negations = [h for h, hop in enumerate(plan.hops) if hop.negated]

    if negations and not row_hops:
        # only negated hops: the rows are first subjects without any of those relationships
        lines.append(f"MATCH (n0{label_expr(plan.nodes[0].labels)}{ns})")
        items = score_items(0)
        if items:
            lines.append("WITH n0, " + ", ".join(items))
        lines.append("WHERE " + " AND ".join([*conds(0), *filter_conds(0), *(not_exists(h) for h in negations)]))
        lines.append(f"WITH n0, {_score_expr(scores, plan.sides)} AS score")
        return _finish(lines, plan, params)

    row = plan.row_nodes
    anchor = next((i for i in row if plan.nodes[i].texts), None)
    if anchor is not None:
        node = plan.nodes[anchor]
        first = node.link_of(0)
        own: list[str] = []
        if first is not None:
            # a linked anchor: only its linked entities, found through the id index
            params[f"l{anchor}_0_ids"] = sorted(first)
            lines.append(f"MATCH (n{anchor}{label_expr(node.labels)}{ns}) WHERE n{anchor}.id IN $l{anchor}_0_ids")
        elif plan.candidates is not None and len(node.labels) == 1:
            # approximate: candidates from the label's vector index, then exact scores
            params["index"] = vector_index_name(node.labels[0])
            params["candidates"] = plan.candidates
            if plan.namespace is not None:  # the vector index spans every namespace: check its candidates
                own.append(f"n{anchor}.{NAMESPACE} = $ns")
            lines.append(f"CALL db.index.vector.queryNodes($index, $candidates, $v{anchor}_0) YIELD node AS n{anchor}")
        else:
            lines.append(f"MATCH (n{anchor}{label_expr(node.labels)}{ns})")
        lines.append(f"WITH n{anchor}, " + ", ".join(score_items(anchor)))
        lines.append("WHERE " + " AND ".join([*own, *conds(anchor), *filter_conds(anchor)]))
    path_vars = ["n0", *(v for h in row_hops for v in (f"r{h + 1}", f"n{h + 1}"))]
    if row_hops:
        # one MATCH (relationships pairwise distinct): a path, with a new pattern where a hop
        # starts from an earlier position than the one the pattern reached
        declared = {anchor}
        parts: list[str] = []
        end: int | None = None

        def node_pattern(i: int) -> str:
            if i in declared:
                return f"(n{i})"
            declared.add(i)
            return f"(n{i}{label_expr(plan.nodes[i].labels)}{ns})"

        for h in row_hops:
            src, hop = plan.source(h), plan.hops[h]
            rel = _rel(h + 1, hop.relation_labels, bool(hop.both_ways))
            if parts and end == src:
                parts[-1] += rel + node_pattern(h + 1)
            else:
                parts.append(node_pattern(src) + rel + node_pattern(h + 1))
            end = h + 1
        lines.append("MATCH " + ", ".join(parts))
        post = [c for i in row if i != anchor for c in filter_conds(i)]
        post += [c for h in row_hops for c in direction_conds(h)]
        rest = [i for i in row if i != anchor and plan.nodes[i].texts]
        if rest:
            if post:
                lines.append("WHERE " + " AND ".join(post))
            items = [item for i in rest for item in score_items(i)]
            carried = scores[anchor] if anchor is not None else []
            lines.append("WITH " + ", ".join(path_vars + carried + items))
            checks = [c for i in rest for c in conds(i)] + [not_exists(h) for h in negations]
            lines.append("WHERE " + " AND ".join(checks))
        elif post or negations:
            lines.append("WHERE " + " AND ".join(post + [not_exists(h) for h in negations]))
    lines.append("WITH " + ", ".join(path_vars) + f", {_score_expr(scores, plan.sides)} AS score")
    return _finish(lines, plan, params)


def _score_expr(scores: dict[int, list[str]], sides: int) -> str:
    names = [s for i in sorted(scores) for s in scores[i]]
    if not names:
        return "1.0"
    product = " * ".join(names)
    if sides == 1:
        return product
    return f"({product}) ^ {1.0 / sides!r}"


def _finish(lines: list[str], plan: QueryPlan, params: dict[str, Any]) -> CompiledQuery:
    if plan.count:
        if plan.limit is not None:  # a count of the first `limit` rows
            params["limit"] = plan.limit
            lines.append("WITH score LIMIT $limit")
        lines.append("RETURN count(*) AS count")
        del params["k"]
        return CompiledQuery("\n".join(lines), params)
    cols, order = ["n0.id AS n0_id, n0 {.*, embedding: null} AS n0_props"], []
    if plan.order is not None:
        # entities without the field last in both directions (Cypher puts nulls first in DESC)
        prop = f"n{plan.order.node}.{quote(plan.order.field)}"
        order += [f"{prop} IS NULL", f"{prop} {'DESC' if plan.order.descending else 'ASC'}"]
    order += ["score DESC", "n0_id"]
    for h in plan.row_hops:
        r, n = f"r{h + 1}", f"n{h + 1}"
        cols.append(f"{r}.id AS {r}_id, {r} {{.*}} AS {r}_props, startNode({r}) = n{plan.source(h)} AS {r}_forward")
        cols.append(f"{n}.id AS {n}_id, {n} {{.*, embedding: null}} AS {n}_props")
        order += [f"{r}_id", f"{n}_id"]
    lines.append("RETURN " + ", ".join(cols) + ", score")
    # ties are broken along the row: n0, r1, n1, r2, ...
    lines.append("ORDER BY " + ", ".join(order))
    lines.append("LIMIT $k")
    return CompiledQuery("\n".join(lines), params)
