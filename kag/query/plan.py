"""The backend-neutral query plan (IR) built from triplet searches.

A plan is a path of node patterns joined by hop patterns. Every label in it has
been checked against the declared ``GraphSchema``; every text becomes a vector
parameter. Both executors (``query/cypher.py`` for Neo4j and ``graph/memory.py``)
implement exactly these semantics:

* A node matches if its label is in ``labels`` and each of its similarity texts
  scores at least ``threshold`` (score = (1 + cosine) / 2, in [0, 1]).
* A hop matches a relationship whose type is in ``relation_labels`` going from
  node i to node i+1 (either way when ``bidirectional``); the relationships of
  one row are pairwise distinct.
* A row's score is the geometric mean of its sides: each hop has a subject and
  an object side, a ``"*"`` side scores 1.0.
* ``negated``: rows are the subjects with no matching hop to a matching object;
  the score is the subject side's.
* Rows are ordered by score (descending), then by node and relationship ids
  along the path; ``k`` rows are returned, or their number when ``count``.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class NodeSpec:
    """Allowed labels of a path position and the similarity texts it must match."""

    labels: tuple[str, ...]
    texts: tuple[str, ...] = ()
    vectors: tuple[np.ndarray, ...] = field(default=(), compare=False, repr=False)
    # per text: the entities it was linked to, id -> score (see kag.ranking.linking); a linked
    # text matches only those ids, with those scores, instead of scoring every node by cosine
    links: tuple[Mapping[str, float] | None, ...] = field(default=(), compare=False, repr=False)

    def link_of(self, j: int) -> Mapping[str, float] | None:
        """The linked entities of text ``j``, or ``None`` when it is scored by cosine."""
        return self.links[j] if j < len(self.links) else None


@dataclass(frozen=True)
class HopSpec:
    """Allowed relationship types between two path positions."""

    relation_labels: tuple[str, ...]
    bidirectional: bool = False


@dataclass(frozen=True)
class QueryPlan:
    """A validated path query; see the module docstring for its semantics."""

    nodes: tuple[NodeSpec, ...]
    hops: tuple[HopSpec, ...]
    k: int
    threshold: float
    negated: bool = False
    count: bool = False
    # approximate mode: take the anchor side's candidates from the Neo4j vector index
    # (at most this many), then score them exactly; None = exact scan (the default)
    candidates: int | None = None

    @property
    def sides(self) -> int:
        """How many sides the geometric mean is taken over."""
        if self.negated or not self.hops:
            return 1
        return 2 * len(self.hops)

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
        return {
            "nodes": [{"labels": list(n.labels), "texts": list(n.texts)} for n in self.nodes],
            "hops": [{"relation_labels": list(h.relation_labels), "bidirectional": h.bidirectional} for h in self.hops],
            "k": self.k,
            "threshold": self.threshold,
            "negated": self.negated,
            "count": self.count,
            "candidates": self.candidates,
        }


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
    """Can ``spec`` link the search's subject label to its object label (either way if bidirectional)?"""
    s, o = search.subject_label, search.object_label

    def fits(subj_ok: tuple[str, ...], obj_ok: tuple[str, ...]) -> bool:
        return (s == ANY or s in subj_ok) and (o == ANY or o in obj_ok)

    return fits(spec.subj_labels, spec.obj_labels) or (search.bidirectional and fits(spec.obj_labels, spec.subj_labels))


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
            + "; ".join(
                f"{x.label}: {'|'.join(x.subj_labels)} -> {'|'.join(x.obj_labels)}" for x in schema.relations.values()
            )
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
        if search.bidirectional:
            allowed.update(spec.subj_labels + spec.obj_labels)
    return tuple(label for label in labels if label in allowed)


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
    if len(hops_in) > 1 and any(h.negated for h in hops_in):
        raise InvalidInputError("negated is only supported on a single-hop search.")

    nodes: list[NodeSpec] = []
    hops: list[HopSpec] = []
    for i, ts in enumerate(hops_in):
        # unknown labels are reported before endpoint mismatches
        subj_all = _entity_labels(schema, ts.subject_label)
        obj_all = _entity_labels(schema, ts.object_label)
        specs = _relation_specs(schema, ts, i)
        if not ts.bidirectional and specs and all(spec.model.is_symmetric() for spec in specs):
            # symmetric relations (stored once per pair) are matched from either end
            ts = ts.model_copy(update={"bidirectional": True})
            specs = _relation_specs(schema, ts, i)
        rel_labels = tuple(spec.label for spec in specs)
        subj_labels = _endpoint_labels(specs, ts, "subj", subj_all)
        obj_labels = _endpoint_labels(specs, ts, "obj", obj_all)
        subj_text = _text(ts.subject_similarity_search, f"hop {i + 1} subject_similarity_search")
        obj_text = _text(ts.object_similarity_search, f"hop {i + 1} object_similarity_search")
        if i == 0:
            nodes.append(NodeSpec(subj_labels, (subj_text,) if subj_text else ()))
        else:
            prev = nodes[-1]
            shared = tuple(label for label in prev.labels if label in subj_labels)
            if not shared:
                raise SchemaError(
                    f"hop {i} ends at {list(prev.labels)} but hop {i + 1} starts at "
                    f"{list(subj_labels)}: consecutive hops must share an entity label."
                )
            texts = prev.texts + ((subj_text,) if subj_text else ())
            nodes[-1] = NodeSpec(shared, texts)
        nodes.append(NodeSpec(obj_labels, (obj_text,) if obj_text else ()))
        hops.append(HopSpec(rel_labels, bool(ts.bidirectional)))
    if not nodes[0].labels or not nodes[-1].labels:
        raise SchemaError("no declared entity label fits this search's relation endpoints.")
    return QueryPlan(
        nodes=tuple(nodes),
        hops=tuple(hops),
        k=k,
        threshold=threshold,
        negated=hops_in[0].negated,
        count=any(h.count for h in hops_in),
        candidates=candidates,
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
