"""The ``GraphStore`` protocol and the records both stores exchange.

Entities are stored as flat property maps that Neo4j accepts as-is: primitives
and lists of primitives are kept, anything nested is JSON-encoded. Both stores
keep exactly the same maps, so results hydrate identically on either backend.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kag.datamodels.base import Entity, Relation
from kag.errors import StoreFormatError
from kag.query.cypher import CompiledQuery
from kag.query.plan import QueryPlan

SOURCES = "kag_sources"
"""The provenance property (ids of the chunks an item came from): a store merges it, never replaces it."""
DIRECT = "kag_direct"
"""Set (true, never unset) on an item upserted without provenance: it survives losing every source."""


@dataclass(frozen=True)
class NodeRecord:
    """An entity ready to be written: id, label, flat properties and embedding."""

    id: str
    label: str
    properties: dict[str, Any]
    embedding: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class RelationRecord:
    """A relation ready to be written: id, type, endpoint ids and flat properties."""

    id: str
    label: str
    start: str
    end: str
    properties: dict[str, Any]


@dataclass(frozen=True)
class PlanRow:
    """One result row of a plan: the path's ids and properties, and its score."""

    node_ids: tuple[str, ...]
    node_props: tuple[dict[str, Any], ...]
    rel_ids: tuple[str, ...]
    rel_props: tuple[dict[str, Any], ...]
    rel_forward: tuple[bool, ...]
    score: float


@dataclass
class PlanResult:
    """Rows of a plan, or the number of matches for a ``count`` plan."""

    rows: list[PlanRow]
    count: int | None = None
    query: CompiledQuery | None = None  # set by stores that compiled the plan to run it


@runtime_checkable
class GraphStore(Protocol):
    """What the knowledge base needs from a graph backend."""

    uri: str

    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        """Create constraints and indexes (idempotent)."""
        ...

    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        """Merge nodes (properties merged, embedding replaced) and relations by id."""
        ...

    async def execute(self, plan: QueryPlan) -> PlanResult:
        """Run a bound plan."""
        ...

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Properties of the nodes that exist among ``ids``."""
        ...

    async def get_relations(self, ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        """``(start_id, end_id, properties)`` of the relations that exist among ``ids``."""
        ...

    async def delete(self, ids: Sequence[str]) -> int:
        """Delete nodes (with their relations) and relations by id; return how many ids existed."""
        ...

    async def counts(self) -> dict[str, int]:
        """Node and relation counts per label, plus ``nodes`` and ``relations`` totals."""
        ...

    async def aclose(self) -> None:
        """Release connections and files."""
        ...


def json_fields(model: type[Entity] | type[Relation]) -> frozenset[str]:
    """Fields whose values are not Neo4j-storable primitives (stored JSON-encoded)."""
    cached = model.__dict__.get("_kag_json_fields")
    if cached is not None:
        return frozenset(cached)
    out = set()
    schema = model.model_json_schema()
    for name, prop in schema.get("properties", {}).items():
        if name in ("subj", "obj"):
            continue
        if not _primitive_schema(prop, schema.get("$defs", {})):
            out.add(name)
    result = frozenset(out)
    model._kag_json_fields = result  # type: ignore[union-attr]
    return result


def _primitive_schema(prop: dict[str, Any], defs: dict[str, Any]) -> bool:
    if "$ref" in prop:
        target = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        return "enum" in target and target.get("type") in ("string", "integer", "number")
    if "anyOf" in prop:
        return all(_primitive_schema(p, defs) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind in ("string", "integer", "number", "boolean", "null") or "const" in prop or "enum" in prop:
        return True
    if kind == "array":
        items = prop.get("items", {})
        return bool(items) and "anyOf" not in items and items.get("type") in ("string", "integer", "number", "boolean")
    return False


def flatten(model_obj: Entity | Relation, include: set[str] | None = None) -> dict[str, Any]:
    """Storable properties of a model: primitives as-is, nested values JSON-encoded, None dropped."""
    data = model_obj.model_dump(mode="json", include=include, exclude={"subj", "obj"})
    encoded = json_fields(type(model_obj))
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue  # Neo4j cannot store null; a missing property reads back as None
        out[key] = json.dumps(value, sort_keys=True) if key in encoded else value
    return out


def _fields_of(model: type[Entity] | type[Relation]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The model's storable field names and its required ones, cached on the class: reading
    ``model_fields`` per row costs more than the rest of hydrating it."""
    cached = model.__dict__.get("_kag_fields")
    if cached is None:
        fields = {k: v for k, v in model.model_fields.items() if k not in ("subj", "obj", "id", "embedding")}
        cached = (frozenset(fields), tuple(k for k, info in fields.items() if info.is_required()))
        model._kag_fields = cached  # type: ignore[union-attr]
    return cached


def unflatten(model: type[Entity] | type[Relation], props: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten` (minus bookkeeping keys), ready for ``model_validate``."""
    encoded = json_fields(model)
    fields, required = _fields_of(model)
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key not in fields:
            continue
        if key in encoded and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise StoreFormatError(f"property {key!r} of a {model.__name__} is not valid JSON.") from exc
        out[key] = value
    for key in required:
        if key not in out:
            out[key] = None  # stored None was dropped; let validation decide
    return out
