"""The proposed extensions of the triplet language, as models the gold searches are checked against.

See ``benchmarks/kgqa/README.md`` for the semantics. Nothing here runs a search: kag
does not implement these fields yet. :func:`extensions_used` says which extensions a
search needs (empty: today's ``kag.TripletSearch`` / ``kag.TripletChain`` express it),
and :func:`check_search` validates a search against a knowledge base's schema — the
plain part with kag's own planner, the extension fields against the declared fields.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import InvalidInputError, SchemaError
from kag.query.plan import plan_triplet_search

EXTENSIONS = ("negated_hop", "where", "order_by", "symmetric")


class Condition(BaseModel):
    """``<field> <op> <value>`` on one side's entity; a missing value never passes."""

    model_config = ConfigDict(extra="forbid")
    field: str = Field(description="A numeric field declared by the side's entity label.")
    op: Literal["=", "!=", "<", "<=", ">", ">="]
    value: float


class OrderBy(BaseModel):
    """Order the rows by a numeric field of one side's entity (missing values last)."""

    model_config = ConfigDict(extra="forbid")
    side: Literal["subject", "object"]
    field: str
    direction: Literal["asc", "desc"]


class ProposedTripletSearch(BaseModel):
    """``kag.TripletSearch`` plus the proposed fields (all optional, defaults = today's behaviour)."""

    model_config = ConfigDict(extra="forbid")
    subject_label: str = ANY
    subject_similarity_search: str = ANY
    relation_label: str = ANY
    object_label: str = ANY
    object_similarity_search: str = ANY
    negated: bool = False
    bidirectional: bool = False
    count: bool = False
    subject_where: list[Condition] = []
    object_where: list[Condition] = []
    order_by: OrderBy | None = None
    limit: int | None = Field(default=None, ge=1)


class ProposedTripletChain(BaseModel):
    """``kag.TripletChain`` whose hops may carry the proposed fields; hop i > 0 may be ``negated``."""

    model_config = ConfigDict(extra="forbid")
    hops: list[ProposedTripletSearch] = Field(min_length=1)


PLAIN_FIELDS = frozenset(
    (
        "subject_label",
        "subject_similarity_search",
        "relation_label",
        "object_label",
        "object_similarity_search",
        "negated",
        "bidirectional",
        "count",
    )
)


def hops_of(search: dict[str, Any]) -> list[dict[str, Any]]:
    """The hops of a search dict (one hop for a plain search)."""
    return list(search["hops"]) if "hops" in search else [search]


def extensions_used(search: dict[str, Any]) -> list[str]:
    """The proposed extensions a search dict needs (``[]``: today's language expresses it)."""
    hops = hops_of(search)
    used = set()
    if len(hops) > 1 and any(h.get("negated") for h in hops):
        used.add("negated_hop")
    for h in hops:
        if h.get("subject_where") or h.get("object_where"):
            used.add("where")
        if h.get("order_by") is not None or h.get("limit") is not None:
            used.add("order_by")
    return sorted(used)


def _numeric_fields(schema: GraphSchema, label: str) -> set[str]:
    model = schema.entity_model(label)
    numeric = set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
        if any(o in (int, float) for o in options):
            numeric.add(name)
    return numeric


def check_search(search: dict[str, Any], schema: GraphSchema) -> list[str]:
    """Validate a (possibly extended) search dict against ``schema``; return the extensions it uses.

    Raises ``InvalidInputError`` / ``SchemaError`` (from kag's planner for the plain part).
    """
    parsed = (
        ProposedTripletChain.model_validate(search)
        if "hops" in search
        else ProposedTripletSearch.model_validate(search)
    )
    hops = parsed.hops if isinstance(parsed, ProposedTripletChain) else [parsed]
    used = extensions_used(search)
    if len(hops) > 1 and hops[0].negated:
        raise InvalidInputError("a negated hop inside a chain filters the node before it: hop 1 cannot be negated.")
    if sum(h.order_by is not None for h in hops) > 1:
        raise InvalidInputError("at most one hop may carry order_by.")
    for i, h in enumerate(hops):
        if h.limit is not None and h.order_by is None:
            raise InvalidInputError(f"hop {i + 1}: limit needs order_by.")
        for side, conditions in (("subject", h.subject_where), ("object", h.object_where)):
            label = h.subject_label if side == "subject" else h.object_label
            if conditions and label == ANY:
                raise SchemaError(f"hop {i + 1}: a {side}_where needs a {side}_label.")
            for c in conditions:
                if c.field not in _numeric_fields(schema, label):
                    raise SchemaError(f"hop {i + 1}: {label} declares no numeric field {c.field!r}.")
        if h.order_by is not None:
            label = h.subject_label if h.order_by.side == "subject" else h.object_label
            if label == ANY or h.order_by.field not in _numeric_fields(schema, label):
                raise SchemaError(f"hop {i + 1}: cannot order {label!r} by {h.order_by.field!r}.")
    # the plain part must plan today: labels, endpoint types, chain joins
    plain = [{k: v for k, v in h.model_dump().items() if k in PLAIN_FIELDS} for h in hops]
    if "negated_hop" in used:
        # a negated hop joins its subject to the node before it like any hop: check the joins as a plain chain
        plain = [{**p, "negated": False} for p in plain]
    plan_triplet_search({"hops": plain} if len(plain) > 1 else plain[0], schema)
    return used
