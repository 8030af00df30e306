"""The backend-neutral query plan (IR) built from triplet searches.

A plan is a tree of node patterns (path positions) joined by hop patterns: hop
``h`` goes from position ``source(h)`` (by default ``h``, a path) to position
``h + 1``. Every label and field name in it has been checked against the
declared ``GraphSchema``; every text becomes a vector parameter. Both executors
(``query/cypher.py`` for Neo4j and ``graph/memory.py``) implement exactly these
semantics:

* A node matches if its label is in ``labels``, each of its similarity texts
  scores at least ``threshold`` (score = (1 + cosine) / 2, in [0, 1]) and it
  passes each of its ``filters`` (a node without the field never passes).
  Numbers compare exactly (an integer field with an integer); strings with
  ``<``, ``<=``, ``>``, ``>=`` by UTF-16 code units, as Neo4j compares a
  property with a parameter (code-point order differs only for characters
  beyond U+FFFF against U+E000..U+FFFF).
* A hop matches a relationship whose type is in ``relation_labels`` going from
  its source position to its object position (either way when
  ``bidirectional``, and for the types in ``symmetric`` always); the
  relationships of one row are pairwise distinct.
* A ``negated`` hop adds nothing to the row: it keeps the rows whose source node
  has no matching relationship (any relationship, also one of the row) to any
  node matching the hop's object pattern.
* A row's score is the geometric mean of its sides: each non-negated hop has a
  subject and an object side, a ``"*"`` side scores 1.0; a plan without such hops
  has one side (its first subject's texts).
* Rows are ordered by ``order`` first when it is set (that node's field, entities
  without it last in both directions; strings by code point, as Neo4j orders
  stored strings), then by score (descending), then by node
  and relationship ids along the row (n0, r1, n1, r2, ...); ``k`` rows are
  returned, or their number (at most ``limit``) when ``count``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kag.datamodels.schema import ANY, GraphSchema, RelationSpec
from kag.errors import InvalidInputError, SchemaError
from kag.query.triplet import TripletChain, TripletSearch
from kag.validation import check_k, check_threshold

MAX_TEXT = 4_096
MAX_HOPS = 4


OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class FilterSpec:
    """``node.field <op> value``: ``value`` is an ``int`` for an integer field, a ``float`` or a ``str``."""

    field: str
    op: str
    value: int | float | str


@dataclass(frozen=True)
class OrderSpec:
    """Order rows by ``field`` of path position ``node`` (entities without the field last)."""

    node: int
    field: str
    descending: bool
    kind: str  # "number" or "string": the values that count as set


@dataclass(frozen=True)
class NodeSpec:
    """Allowed labels of a path position, the similarity texts and the field filters it must match."""

    labels: tuple[str, ...]
    texts: tuple[str, ...] = ()
    vectors: tuple[np.ndarray, ...] = field(default=(), compare=False, repr=False)
    # per text: the entities it was linked to, id -> score (see kag.ranking.linking); a linked
    # text matches only those ids, with those scores, instead of scoring every node by cosine
    links: tuple[Mapping[str, float] | None, ...] = field(default=(), compare=False, repr=False)
    filters: tuple[FilterSpec, ...] = ()

    def link_of(self, j: int) -> Mapping[str, float] | None:
        """The linked entities of text ``j``, or ``None`` when it is scored by cosine."""
        return self.links[j] if j < len(self.links) else None


@dataclass(frozen=True)
class HopSpec:
    """Allowed relationship types between two path positions (see the module docstring)."""

    relation_labels: tuple[str, ...]
    bidirectional: bool = False
    # the declared-symmetric types among relation_labels: matched either way even when not bidirectional
    symmetric: tuple[str, ...] = ()
    negated: bool = False
    # the position the hop starts from; None: the position before its object (a path)
    source: int | None = None

    @property
    def both_ways(self) -> tuple[str, ...]:
        """The relation types this hop matches in either direction."""
        if self.bidirectional:
            return self.relation_labels
        return tuple(t for t in self.relation_labels if t in self.symmetric)

    @property
    def undirected(self) -> bool:
        """Every type of the hop is matched in either direction."""
        return len(self.both_ways) == len(self.relation_labels)

    @property
    def mixed(self) -> bool:
        """Some types either way (symmetric), the others only forward."""
        return bool(self.both_ways) and not self.undirected


@dataclass(frozen=True)
class QueryPlan:
    """A validated tree query; see the module docstring for its semantics."""

    nodes: tuple[NodeSpec, ...]
    hops: tuple[HopSpec, ...]
    k: int
    threshold: float
    count: bool = False
    # approximate mode: take the anchor side's candidates from the Neo4j vector index
    # (at most this many), then score them exactly; None = exact scan (the default)
    candidates: int | None = None
    order: OrderSpec | None = None
    # order_by's limit (k is already at most this): kept for counts, which are at most this
    limit: int | None = None
    # the namespace (tenant) every node pattern is restricted to; a store that has one
    # sets it before executing (it never trusts the caller's), None: no restriction
    namespace: str | None = None

    def source(self, h: int) -> int:
        """The position hop ``h`` starts from (its object is position ``h + 1``)."""
        src = self.hops[h].source
        return h if src is None else src

    @property
    def negated(self) -> bool:
        """True when some hop is negated."""
        return any(h.negated for h in self.hops)

    @property
    def row_hops(self) -> tuple[int, ...]:
        """The hops whose relationships a row holds (the non-negated ones), in order."""
        return tuple(h for h, hop in enumerate(self.hops) if not hop.negated)

    @property
    def row_nodes(self) -> tuple[int, ...]:
        """The positions a row holds: the first subject, then each non-negated hop's object."""
        return (0, *(h + 1 for h in self.row_hops))

    @property
    def row_ends(self) -> tuple[tuple[int, int], ...]:
        """For each relationship of a row: the indices (into the row's nodes) of its hop's source and object.

        ``((0, 1), (1, 2), ...)`` for a path; ``((0, 1), (0, 2))`` for two conditions on the first subject.
        """
        at = {pos: i for i, pos in enumerate(self.row_nodes)}
        return tuple((at[self.source(h)], at[h + 1]) for h in self.row_hops)

    @property
    def sides(self) -> int:
        """How many sides the geometric mean is taken over."""
        return max(1, 2 * len(self.row_hops))

    @property
    def bound(self) -> bool:
        """True once every text has its vector."""
        return all(len(n.vectors) == len(n.texts) for n in self.nodes)

    def texts(self) -> list[str]:
        """All similarity texts in path order (embed these, then ``bind``)."""
        return [t for n in self.nodes for t in n.texts]

    def bind(self, vectors: np.ndarray | Sequence[np.ndarray]) -> QueryPlan:
        """Attach query vectors (one row per text of ``texts()``, in order)."""
        rows = list(vectors)
        if len(rows) != len(self.texts()):
            raise InvalidInputError(f"expected {len(self.texts())} query vectors, got {len(rows)}.")
        nodes, i = [], 0
        for n in self.nodes:
            vecs = tuple(_check_vector(rows[i + j]) for j in range(len(n.texts)))
            i += len(n.texts)
            nodes.append(replace(n, vectors=vecs))
        return replace(self, nodes=tuple(nodes))

    def link(self, links: Sequence[Mapping[str, float] | None]) -> QueryPlan:
        """Attach linked entities (one entry per text of ``texts()``, in order; ``None``: cosine)."""
        rows = list(links)
        if len(rows) != len(self.texts()):
            raise InvalidInputError(f"expected {len(self.texts())} link maps, got {len(rows)}.")
        nodes, i = [], 0
        for n in self.nodes:
            nodes.append(replace(n, links=tuple(rows[i : i + len(n.texts)])))
            i += len(n.texts)
        return replace(self, nodes=tuple(nodes))

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary (no vectors)."""
        nodes: list[dict[str, Any]] = []
        for n in self.nodes:
            node: dict[str, Any] = {"labels": list(n.labels), "texts": list(n.texts)}
            if n.filters:
                node["filters"] = [[f.field, f.op, f.value] for f in n.filters]
            nodes.append(node)
        hops: list[dict[str, Any]] = []
        for h, hop in enumerate(self.hops):
            item: dict[str, Any] = {"relation_labels": list(hop.relation_labels), "bidirectional": hop.bidirectional}
            if hop.symmetric:
                item["symmetric"] = list(hop.symmetric)
            if hop.negated:
                item["negated"] = True
            if hop.source is not None:
                item["source"] = self.source(h)
            hops.append(item)
        out: dict[str, Any] = {
            "nodes": nodes,
            "hops": hops,
            "k": self.k,
            "threshold": self.threshold,
            "negated": self.negated,
            "count": self.count,
            "candidates": self.candidates,
        }
        if self.order is not None:
            out["order"] = {"node": self.order.node, "field": self.order.field, "descending": self.order.descending}
            out["limit"] = self.limit
        return out


def _check_vector(vec: Any) -> np.ndarray:
    arr = np.asarray(vec, dtype=np.float32)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError("a query vector must be a non-empty 1-d array.")
    if not np.isfinite(arr).all():
        raise InvalidInputError("a query vector contains NaN or infinite values.")
    if not np.any(arr):
        raise InvalidInputError("a query vector is all zeros; it has no direction to compare.")
    return arr


def check_candidates(candidates: Any, k: int) -> int | None:
    """Validate the candidate count of approximate search (``None`` = exact)."""
    if candidates is None:
        return None
    return check_k(candidates, name="candidates", minimum=k)


def _text(value: Any, what: str) -> str | None:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}.")
    text = value.strip()
    if text == ANY:
        return None
    if not text:
        raise InvalidInputError(f'{what} is empty; give a text to match, or "*" to match any.')
    if len(text) > MAX_TEXT:
        raise InvalidInputError(f"{what} is {len(text)} characters long; the limit is {MAX_TEXT}.")
    return text


def _entity_labels(schema: GraphSchema, label: Any) -> tuple[str, ...]:
    if label == ANY:
        return schema.entity_labels
    schema.entity_model(label)  # raises SchemaError naming the allowed labels
    return (label,)


def _fits(spec: RelationSpec, search: TripletSearch) -> bool:
    """Can ``spec`` link the search's subject label to its object label (either way if bidirectional/symmetric)?"""
    s, o = search.subject_label, search.object_label

    def fits(subj_ok: tuple[str, ...], obj_ok: tuple[str, ...]) -> bool:
        return (s == ANY or s in subj_ok) and (o == ANY or o in obj_ok)

    either = search.bidirectional or spec.symmetric
    return fits(spec.subj_labels, spec.obj_labels) or (either and fits(spec.obj_labels, spec.subj_labels))


def _relation_specs(schema: GraphSchema, search: TripletSearch, hop: int) -> list[RelationSpec]:
    """The relation types a hop may traverse; refuses endpoint types that cannot fit.

    ``"*"`` is narrowed to the declared relations whose endpoint types fit the
    given labels: other types cannot connect them, so results are unchanged.
    """
    where = f" (hop {hop + 1})" if hop else ""
    s, o = search.subject_label, search.object_label
    if search.relation_label != ANY:
        spec = schema.relation_spec(search.relation_label)
        if not _fits(spec, search):
            raise SchemaError(
                f"relation {spec.label!r} connects {'|'.join(spec.subj_labels)} -> "
                f"{'|'.join(spec.obj_labels)}, so it cannot link subject {s!r} to object {o!r}{where}; "
                'pick matching labels, use "*", or set bidirectional.'
            )
        return [spec]
    if not schema.relations:
        raise SchemaError("the schema declares no relation models, so there is nothing to traverse.")
    specs = [spec for spec in schema.relations.values() if _fits(spec, search)]
    if not specs:
        raise SchemaError(
            f"no declared relation links subject {s!r} to object {o!r}{where}; relations: "
            + "; ".join(f"{x.label}: {x.arrow()}" for x in schema.relations.values())
            + (". Set bidirectional to read them the other way." if not search.bidirectional else ".")
        )
    return specs


def _endpoint_labels(
    specs: list[RelationSpec], search: TripletSearch, side: str, labels: tuple[str, ...]
) -> tuple[str, ...]:
    # narrow to the relations' declared endpoint types: same results, smaller scans
    allowed: set[str] = set()
    for spec in specs:
        allowed.update(spec.subj_labels if side == "subj" else spec.obj_labels)
        if search.bidirectional or spec.symmetric:
            allowed.update(spec.subj_labels + spec.obj_labels)
    return tuple(label for label in labels if label in allowed)


def _field_kind(schema: GraphSchema, labels: tuple[str, ...], name: str, what: str) -> tuple[tuple[str, ...], str]:
    """The labels among ``labels`` that declare field ``name``, and its kind there (one kind only)."""
    if not isinstance(name, str) or name == ANY:
        raise SchemaError(f"{what}: {name!r} is not a declared field.")
    kinds = {label: schema.field_kinds(label).get(name) for label in labels}
    having = tuple(label for label in labels if kinds[label] is not None)
    if not having:
        declared = sorted({f for label in labels for f in schema.field_kinds(label)})
        raise SchemaError(
            f"{what}: {'|'.join(labels)} declares no comparable field {name!r}; fields: {declared} "
            "(numbers and strings only)."
        )
    found = {kinds[label] for label in having}
    if len(found) > 1:
        raise SchemaError(f"{what}: field {name!r} has different types on {'|'.join(having)}; give one entity label.")
    return having, str(found.pop())


def _number(value: Any, what: str) -> float | int:
    if isinstance(value, bool):
        raise InvalidInputError(f"{what}: expected a number, got {value!r}.")
    if isinstance(value, int | float):
        number: float | int = value
    elif isinstance(value, str):
        text = value.strip().replace(",", "").replace("_", "")
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise InvalidInputError(f"{what}: expected a number, got {value!r}.") from None
    else:
        raise InvalidInputError(f"{what}: expected a number, got {type(value).__name__}.")
    if isinstance(number, float) and not math.isfinite(number):
        raise InvalidInputError(f"{what}: {value!r} is not a finite number.")
    return number


def _filter(schema: GraphSchema, labels: tuple[str, ...], cond: Any, what: str) -> tuple[tuple[str, ...], FilterSpec]:
    """Check a condition against the node's labels; its value typed by the declared field."""
    having, kind = _field_kind(schema, labels, cond.field, what)
    op, value = cond.op, cond.value
    if op not in OPERATORS:
        raise InvalidInputError(f"{what}: unknown operator {op!r}; use one of {list(OPERATORS)}.")
    where = f"{what} ({cond.field} {op} {value!r})"
    if kind == "str":
        if not isinstance(value, str):
            raise InvalidInputError(f"{where}: {cond.field!r} is a text field; give the value as a string.")
        if len(value) > MAX_TEXT:
            raise InvalidInputError(f"{where}: the value is {len(value)} characters long; the limit is {MAX_TEXT}.")
        return having, FilterSpec(cond.field, op, value)
    number = _number(value, where)
    if kind == "float":
        return having, FilterSpec(cond.field, op, float(number))
    # an integer field: compare with an integer, so both backends compare exactly
    if isinstance(number, float) and not number.is_integer():
        if op in ("=", "!="):
            raise InvalidInputError(f"{where}: {cond.field!r} holds whole numbers; give a whole number.")
        # x > 2.5 <=> x > 2, x >= 2.5 <=> x >= 3, x < 2.5 <=> x < 3, x <= 2.5 <=> x <= 2
        number = math.floor(number) if op in (">", "<=") else math.ceil(number)
    number = int(number)
    if not INT64_MIN <= number <= INT64_MAX:
        raise InvalidInputError(f"{where}: {number} is out of the 64-bit integer range.")
    return having, FilterSpec(cond.field, op, number)


def plan_triplet_search(
    search: TripletSearch | TripletChain | Sequence[TripletSearch] | dict[str, Any],
    schema: GraphSchema,
    *,
    k: int = 10,
    threshold: float = 0.7,
    candidates: int | None = None,
) -> QueryPlan:
    """Validate a search (or chain of searches) against ``schema`` and build its plan.

    ``candidates`` opts into approximate search on Neo4j (see ``QueryPlan.candidates``).
    """
    hops_in = _as_hops(search)
    k = check_k(k)
    candidates = check_candidates(candidates, k)
    threshold = check_threshold(threshold)
    if not hops_in:
        raise InvalidInputError("a triplet chain needs at least one hop.")
    if len(hops_in) > MAX_HOPS:
        raise InvalidInputError(f"a chain may have at most {MAX_HOPS} hops, got {len(hops_in)}.")
    if sum(h.order_by is not None for h in hops_in) > 1:
        raise InvalidInputError("at most one hop of a chain may set order_by.")

    nodes: list[NodeSpec] = []
    hops: list[HopSpec] = []
    conditions: list[list[tuple[Any, str]]] = []  # per position: (condition, where it was given)
    order: tuple[int, Any, str] | None = None
    limit: int | None = None
    current = 0  # the position the chain has reached: the latest non-negated hop's object
    for i, ts in enumerate(hops_in):
        # unknown labels are reported before endpoint mismatches
        subj_all = _entity_labels(schema, ts.subject_label)
        obj_all = _entity_labels(schema, ts.object_label)
        specs = _relation_specs(schema, ts, i)
        bidirectional = bool(ts.bidirectional) or all(spec.symmetric for spec in specs)
        rel_labels = tuple(spec.label for spec in specs)
        symmetric = tuple(spec.label for spec in specs if spec.symmetric)
        subj_labels = _endpoint_labels(specs, ts, "subj", subj_all)
        obj_labels = _endpoint_labels(specs, ts, "obj", obj_all)
        subj_text = _text(ts.subject_similarity_search, f"hop {i + 1} subject_similarity_search")
        obj_text = _text(ts.object_similarity_search, f"hop {i + 1} object_similarity_search")
        src = 0 if i == 0 or ts.subject_from == "first_subject" else current
        if i == 0:
            nodes.append(NodeSpec(subj_labels, (subj_text,) if subj_text else ()))
            conditions.append([])
        else:
            prev = nodes[src]
            shared = tuple(label for label in prev.labels if label in subj_labels)
            if not shared:
                start = "hop 1 starts" if src == 0 else f"hop {src} ends"
                raise SchemaError(
                    f"{start} at {list(prev.labels)} but hop {i + 1} starts at "
                    f"{list(subj_labels)}: the hops must share an entity label."
                )
            nodes[src] = NodeSpec(shared, prev.texts + ((subj_text,) if subj_text else ()))
        nodes.append(NodeSpec(obj_labels, (obj_text,) if obj_text else ()))
        conditions.append([])
        conditions[src].extend((c, f"hop {i + 1} subject_where") for c in ts.subject_where)
        conditions[i + 1].extend((c, f"hop {i + 1} object_where") for c in ts.object_where)
        hops.append(HopSpec(rel_labels, bidirectional, symmetric, bool(ts.negated), None if src == i else src))
        if ts.limit is not None and ts.order_by is None:
            raise InvalidInputError(f"hop {i + 1}: limit needs order_by (which field decides the first results).")
        if ts.order_by is not None:
            if ts.negated and ts.order_by.side == "object":
                raise InvalidInputError(
                    f"hop {i + 1} is negated: its object is not part of the results, so it cannot order them."
                )
            order = (src if ts.order_by.side == "subject" else i + 1, ts.order_by, f"hop {i + 1} order_by")
            limit = None if ts.limit is None else check_k(ts.limit, name=f"hop {i + 1} limit")
        if not ts.negated:
            current = i + 1
    for pos, conds in enumerate(conditions):
        filters: list[FilterSpec] = []
        labels = nodes[pos].labels
        for cond, what in conds:
            labels, spec = _filter(schema, labels, cond, what)  # narrowed: a label without the field cannot pass
            filters.append(spec)
        nodes[pos] = replace(nodes[pos], labels=labels, filters=tuple(filters))
    if any(not n.labels for n in nodes):
        raise SchemaError("no declared entity label fits this search's relation endpoints.")
    order_spec = None
    if order is not None:
        pos, by, what = order
        # not narrowed: entities without the field stay, ordered last
        _, kind = _field_kind(schema, nodes[pos].labels, by.field, what)
        order_spec = OrderSpec(pos, by.field, by.direction == "desc", "string" if kind == "str" else "number")
    return QueryPlan(
        nodes=tuple(nodes),
        hops=tuple(hops),
        k=k if limit is None else min(k, limit),
        threshold=threshold,
        count=any(h.count for h in hops_in),
        candidates=candidates,
        order=order_spec,
        limit=limit,
    )


def plan_similarity_search(
    label: str, text: str, schema: GraphSchema, *, k: int = 10, threshold: float = 0.0
) -> QueryPlan:
    """A zero-hop plan: entities of ``label`` (or ``"*"``) ranked by similarity to ``text``."""
    labels = _entity_labels(schema, label)
    value = _text(text, "text")
    if value is None:
        raise InvalidInputError('similarity_search needs a text; "*" matches everything, use get() instead.')
    if not labels:
        raise SchemaError("the schema declares no entity models.")
    return QueryPlan(nodes=(NodeSpec(labels, (value,)),), hops=(), k=check_k(k), threshold=check_threshold(threshold))


def _as_hops(search: Any) -> list[TripletSearch]:
    if isinstance(search, TripletSearch):
        return [search]
    if isinstance(search, TripletChain):
        return list(search.hops)
    if isinstance(search, dict):
        if "hops" in search:
            return list(TripletChain.from_dict(search).hops)
        return [TripletSearch.from_dict(search)]
    if isinstance(search, Sequence) and not isinstance(search, str):
        return [s if isinstance(s, TripletSearch) else TripletSearch.from_dict(s) for s in search]
    raise InvalidInputError(f"expected a TripletSearch, TripletChain or dict, got {type(search).__name__}.")
