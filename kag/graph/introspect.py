"""Describe an existing Neo4j graph (one kag did not create) as kag ``Entity``/``Relation`` models.

>>> description = await introspect("neo4j://localhost:7687", username="neo4j", password="...")
>>> print(description.source())          # Python: one Entity per label, one Relation per type
>>> schema = description.schema()         # the same models, built in memory, as a GraphSchema

Labels, relationship types and property types come from ``db.schema.nodeTypeProperties()``
and ``db.schema.relTypeProperties()``; each relationship type's endpoint labels from the
relationships themselves (all of them, or the first ``sample`` of each type). Every query runs behind the
store's ``EXPLAIN`` read-only guard: introspection never writes.

What kag cannot declare is left out and named in the source's header comment: labels and
property names that are not identifiers (``^[A-Za-z][A-Za-z0-9_]{0,63}$``), kag's own labels
and bookkeeping properties (``id``, ``embedding``, ...), names a model already uses, and
property types with no JSON equivalent (points, durations). Temporal values become ``str``.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.datamodels.base import COUNT_KEYS, IDENTIFIER, RESERVED_FIELDS, RESERVED_LABELS, Entity, Relation
from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_anchor import STAMP
from kag.query.cypher import quote
from kag.validation import check_int

# Neo4j property type names (as db.schema.*TypeProperties reports them) -> Python annotations
_SCALARS = {
    "String": "str",
    "Long": "int",
    "Integer": "int",
    "Double": "float",
    "Float": "float",
    "Boolean": "bool",
    # temporal values have an ISO text form; kag stores primitives, so they are declared as text
    "Date": "str",
    "DateTime": "str",
    "LocalDateTime": "str",
    "LocalTime": "str",
    "Time": "str",
}
# names a generated module uses itself
_TAKEN = frozenset({"Entity", "Relation", "Field", "GraphSchema", "Literal", "ENTITY_MODELS", "RELATION_MODELS"})


@dataclass(frozen=True)
class PropertyInfo:
    """One property of a label or relationship type: its Neo4j types and whether every item has it."""

    name: str
    types: tuple[str, ...]
    mandatory: bool

    def annotation(self) -> str | None:
        """The Python annotation of the field (``None`` when a type has no JSON equivalent)."""
        out: list[str] = []
        for kind in self.types:
            base = kind.removesuffix("Array")
            python = _SCALARS.get(base)
            if python is None:
                return None
            text = f"list[{python}]" if kind.endswith("Array") and kind != base else python
            if text not in out:
                out.append(text)
        if not out:
            return None
        return " | ".join(out)


@dataclass(frozen=True)
class LabelInfo:
    """A node label and the properties its nodes carry."""

    label: str
    properties: tuple[PropertyInfo, ...]


@dataclass(frozen=True)
class RelationTypeInfo:
    """A relationship type, the labels of its start and end nodes, and its properties."""

    type: str
    starts: tuple[str, ...]
    ends: tuple[str, ...]
    properties: tuple[PropertyInfo, ...]


@dataclass(frozen=True)
class GraphDescription:
    """What :func:`introspect` found: labels, relationship types, and what kag cannot declare."""

    labels: tuple[LabelInfo, ...]
    relation_types: tuple[RelationTypeInfo, ...]
    skipped: tuple[str, ...] = field(default=())
    origin: str = ""

    def source(self) -> str:
        """Python source of one ``Entity`` per label and one ``Relation`` per relationship type.

        The module defines ``ENTITY_MODELS``, ``RELATION_MODELS`` and ``SCHEMA`` (a ``GraphSchema``).
        """
        return _Generator(self).render()

    def schema(self) -> GraphSchema:
        """The models of :meth:`source`, built in memory, as a ``GraphSchema``."""
        namespace: dict[str, Any] = {"__name__": "kag_introspected"}
        # built from checked identifiers and repr()'d literals only (see _Generator); dont_inherit:
        # this module's `from __future__ import annotations` would leave Literal labels unresolved
        exec(compile(self.source(), "<kag introspect>", "exec", dont_inherit=True), namespace)
        schema: GraphSchema = namespace["SCHEMA"]
        return schema


async def introspect(
    target: str | Neo4jGraphStore | None = None, *, sample: int | None = None, **store_options: Any
) -> GraphDescription:
    """Describe the Neo4j graph at ``target`` (a URI, or an open :class:`Neo4jGraphStore`).

    ``store_options`` (``username``, ``password``, ``database``, ``driver``...) open the store
    for a URI (settings not given come from ``NEO4J_*``); a URI-opened store is closed after.
    ``sample`` bounds how many relationships of each type are read to find endpoint labels
    (default: all).
    """
    if sample is not None:
        check_int(sample, name="sample (relationships read to find endpoint labels, or None)")
    if isinstance(target, Neo4jGraphStore):
        return await _describe(target, sample)
    uri = target if target is not None else _env_uri()
    if not uri.startswith(("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")):
        raise ConfigError(f"introspect() reads a Neo4j graph; {uri!r} is not a neo4j:// or bolt:// URI.")
    store = Neo4jGraphStore(uri, **store_options)
    try:
        return await _describe(store, sample)
    finally:
        await store.aclose()


def _env_uri() -> str:
    import os

    uri = os.environ.get("NEO4J_URI")
    if not uri:
        raise ConfigError("introspect() needs a Neo4j URI: pass one, or set NEO4J_URI.")
    return uri


async def _describe(store: Neo4jGraphStore, sample: int | None) -> GraphDescription:
    nodes = await store.read(
        "CALL db.schema.nodeTypeProperties() YIELD nodeLabels, propertyName, propertyTypes, mandatory "
        "RETURN nodeLabels, propertyName, propertyTypes, mandatory",
        {},
        "reading node types",
    )
    rels = await store.read(
        "CALL db.schema.relTypeProperties() YIELD relType, propertyName, propertyTypes, mandatory "
        "RETURN relType, propertyName, propertyTypes, mandatory",
        {},
        "reading relationship types",
    )
    rel_rows = [r.data() for r in rels.records]
    if sample is None:
        ends = await store.read(
            "MATCH (a)-[r]->(b) RETURN DISTINCT labels(a) AS starts, type(r) AS type, labels(b) AS ends",
            {},
            "reading relationship endpoints",
        )
        end_rows = [r.data() for r in ends.records]
    else:
        end_rows = await _sample_ends(store, rel_rows, sample)
    skipped: list[str] = []
    labels = _labels([r.data() for r in nodes.records], skipped)
    relation_types = _relation_types(rel_rows, end_rows, {i.label for i in labels}, skipped)
    return GraphDescription(labels, relation_types, tuple(dict.fromkeys(skipped)), store.uri)


async def _sample_ends(store: Neo4jGraphStore, rel_rows: list[dict[str, Any]], sample: int) -> list[dict[str, Any]]:
    """Endpoint labels from the first ``sample`` relationships *of each type*.

    One bound over all relationships would let a large type crowd a rare one out of the sample
    (and out of the models); a type that is not an identifier is skipped later anyway, so only
    checked identifiers are quoted into the pattern.
    """
    rows: list[dict[str, Any]] = []
    for rel_type in dict.fromkeys(_strip_type(rec["relType"]) for rec in rel_rows):
        if not IDENTIFIER.fullmatch(rel_type):
            continue
        result = await store.read(
            f"MATCH (a)-[r:{quote(rel_type)}]->(b) WITH a, b LIMIT $sample "
            "RETURN DISTINCT labels(a) AS starts, labels(b) AS ends",
            {"sample": sample},
            "reading relationship endpoints",
        )
        rows.extend({**r.data(), "type": rel_type} for r in result.records)
    return rows


def _usable_label(label: str, skipped: list[str], what: str) -> bool:
    if not IDENTIFIER.fullmatch(label):
        skipped.append(f"{what} {label!r}: not an identifier kag can quote")
        return False
    if label in RESERVED_LABELS or label in COUNT_KEYS or label.startswith(STAMP):  # STAMP: kag's write stamps
        skipped.append(f"{what} {label!r}: reserved by kag")
        return False
    return True


def _usable_property(owner: str, name: str, model: type[Entity] | type[Relation], skipped: list[str]) -> bool:
    reserved = name in RESERVED_FIELDS or name in ("label", "subj", "obj") or name.startswith("model_")
    if not IDENTIFIER.fullmatch(name) or keyword.iskeyword(name):
        skipped.append(f"property {owner}.{name!r}: not an identifier kag can quote")
        return False
    if reserved or hasattr(model, name):
        skipped.append(f"property {owner}.{name!r}: the name is reserved by kag or the model")
        return False
    return True


def _merge(
    rows: Sequence[tuple[str, str | None, Sequence[str] | None, bool]], owners: Mapping[str, int]
) -> dict[str, dict[str, PropertyInfo]]:
    """Per owner (label or type): its properties, types unioned; mandatory when every group has it."""
    seen: dict[str, dict[str, tuple[list[str], int, bool]]] = {}
    for owner, name, types, mandatory in rows:
        props = seen.setdefault(owner, {})
        if name is None:
            continue
        kinds, groups, all_mandatory = props.get(name, ([], 0, True))
        props[name] = ([*kinds, *(t for t in types or () if t not in kinds)], groups + 1, all_mandatory and mandatory)
    return {
        owner: {
            name: PropertyInfo(name, tuple(kinds), mandatory and groups == owners.get(owner, groups))
            for name, (kinds, groups, mandatory) in sorted(props.items())
        }
        for owner, props in seen.items()
    }


def _labels(records: list[dict[str, Any]], skipped: list[str]) -> tuple[LabelInfo, ...]:
    rows: list[tuple[str, str | None, Sequence[str] | None, bool]] = []
    groups: dict[str, set[tuple[str, ...]]] = {}
    for rec in records:
        combo = tuple(sorted(rec["nodeLabels"] or ()))
        for label in combo:
            groups.setdefault(label, set()).add(combo)
            rows.append((label, rec["propertyName"], rec["propertyTypes"], bool(rec["mandatory"])))
    merged = _merge(rows, {label: len(combos) for label, combos in groups.items()})
    out = []
    for label in sorted(merged):
        if not _usable_label(label, skipped, "label"):
            continue
        props = tuple(p for p in merged[label].values() if _usable_property(label, p.name, Entity, skipped))
        out.append(LabelInfo(label, props))
    return tuple(out)


def _relation_types(
    records: list[dict[str, Any]], ends: list[dict[str, Any]], labels: set[str], skipped: list[str]
) -> tuple[RelationTypeInfo, ...]:
    rows = [
        (_strip_type(rec["relType"]), rec["propertyName"], rec["propertyTypes"], bool(rec["mandatory"]))
        for rec in records
    ]
    merged = _merge(rows, {})
    starts: dict[str, set[str]] = {}
    finishes: dict[str, set[str]] = {}
    for rec in ends:
        starts.setdefault(rec["type"], set()).update(x for x in rec["starts"] if x in labels)
        finishes.setdefault(rec["type"], set()).update(x for x in rec["ends"] if x in labels)
    out = []
    for rel_type in sorted(set(merged) | set(starts)):
        if not _usable_label(rel_type, skipped, "relationship type"):
            continue
        if not starts.get(rel_type) or not finishes.get(rel_type):
            skipped.append(f"relationship type {rel_type!r}: no declared label at one of its ends")
            continue
        props = tuple(
            p for p in merged.get(rel_type, {}).values() if _usable_property(rel_type, p.name, Relation, skipped)
        )
        out.append(
            RelationTypeInfo(rel_type, tuple(sorted(starts[rel_type])), tuple(sorted(finishes[rel_type])), props)
        )
    return tuple(out)


def _strip_type(text: str) -> str:
    """``:`ACTED_IN``` (how db.schema.relTypeProperties names a type) -> ``ACTED_IN``."""
    text = text.removeprefix(":")
    if text.startswith("`") and text.endswith("`"):
        text = text[1:-1].replace("``", "`")
    return text


def _camel(text: str) -> str:
    parts = [p for p in re.split(r"[^A-Za-z0-9]+|_", text) if p]
    if not parts:
        return "Model"
    # an all-caps word (ACTED) becomes Acted; a camel word (MovieStar) keeps its inner capitals
    name = "".join(p.capitalize() if p.isupper() or p.islower() else p[0].upper() + p[1:] for p in parts)
    return name if name[0].isalpha() else "M" + name


class _Generator:
    """Renders a description as a Python module (checked identifiers, repr()'d literals)."""

    def __init__(self, description: GraphDescription) -> None:
        self.description = description
        self.names: dict[tuple[str, str], str] = {}
        used: set[str] = set(_TAKEN)
        for kind, owners in (
            ("label", [i.label for i in description.labels]),
            ("type", [r.type for r in description.relation_types]),
        ):
            for owner in owners:
                base = _camel(owner)
                name, n = base, 2
                while name in used or keyword.iskeyword(name):
                    name, n = f"{base}{n}", n + 1
                used.add(name)
                self.names[kind, owner] = name

    def render(self) -> str:
        d = self.description
        lines = [
            f'"""kag models of the Neo4j graph at {_safe_doc(d.origin) or "(unknown)"} (generated by kag schema)."""',
            "",
        ]
        if d.skipped:
            lines.append("# not declared (kag cannot store or query these as they are):")
            lines.extend(f"#   {_safe_comment(s)}" for s in d.skipped)
            lines.append("")
        lines += ["from typing import Literal", "", "from kag import Entity, Field, GraphSchema, Relation", ""]
        for info in d.labels:
            lines += ["", *self._entity(info), ""]
        for rel in d.relation_types:
            lines += ["", *self._relation(rel), ""]
        entities = ", ".join(self.names["label", i.label] for i in d.labels)
        relations = ", ".join(self.names["type", r.type] for r in d.relation_types)
        lines += [
            "",
            f"ENTITY_MODELS: list[type[Entity]] = [{entities}]",
            f"RELATION_MODELS: list[type[Relation]] = [{relations}]",
            "SCHEMA = GraphSchema(ENTITY_MODELS, RELATION_MODELS)",
            "",
        ]
        return "\n".join(lines)

    def _entity(self, info: LabelInfo) -> list[str]:
        props = list(info.properties)
        usable = [p for p in props if p.annotation() is not None]
        key = _key_property(usable)
        lines = [
            f"class {self.names['label', info.label]}(Entity):",
            f"    label: Literal[{info.label!r}] = {info.label!r}",
        ]
        if key is not None and key.name != "name":
            lines.append(f"    {key.name}: {_annotation(key)} = Field({_default(key)}key=True)")
        elif key is None:
            lines.append("    name: str | None = None  # no usable property: kag identifies an entity by one")
        ordered = ([key] if key is not None and key.name == "name" else []) + [p for p in props if p is not key]
        lines += self._fields(ordered)
        return lines

    def _relation(self, rel: RelationTypeInfo) -> list[str]:
        subj = " | ".join(self.names["label", s] for s in rel.starts)
        obj = " | ".join(self.names["label", s] for s in rel.ends)
        lines = [
            f"class {self.names['type', rel.type]}(Relation):",
            f"    subj: {subj}",
            f"    label: Literal[{rel.type!r}] = {rel.type!r}",
            f"    obj: {obj}",
        ]
        return lines + self._fields(list(rel.properties))

    @staticmethod
    def _fields(props: list[PropertyInfo]) -> list[str]:
        lines = []
        for prop in props:
            annotation = prop.annotation()
            if annotation is None:
                lines.append(f"    # {prop.name}: {'|'.join(prop.types)} has no JSON form; not declared")
            elif prop.mandatory:
                lines.append(f"    {prop.name}: {annotation}")
            else:
                lines.append(f"    {prop.name}: {annotation} | None = None")
        return lines


def _key_property(props: list[PropertyInfo]) -> PropertyInfo | None:
    """The identifying property: ``name``, else the first mandatory text property, else the first."""
    for prop in props:
        if prop.name == "name":
            return prop
    for prop in props:
        if prop.mandatory and prop.annotation() == "str":
            return prop
    return props[0] if props else None


def _annotation(prop: PropertyInfo) -> str:
    annotation = prop.annotation() or "str"
    return annotation if prop.mandatory else f"{annotation} | None"


def _default(prop: PropertyInfo) -> str:
    return "" if prop.mandatory else "default=None, "


def _safe_comment(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ")


def _safe_doc(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9:/._+@-]", "", text.split("@")[-1])


__all__ = [
    "GraphDescription",
    "LabelInfo",
    "PropertyInfo",
    "RelationTypeInfo",
    "introspect",
]
