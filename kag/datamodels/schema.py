"""The declared graph schema and JSON-schema helpers for language models.

``GraphSchema`` is the allow-list every query is checked against: only labels
declared here can ever reach Cypher. ``dynamic_enum`` and ``strict_schema``
turn pydantic schemas into the self-contained, strict JSON schemas that
structured-output APIs (OpenAI strict mode, Ollama ``format``) accept.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from kag.datamodels.base import Entity, Relation
from kag.errors import SchemaError

ANY = "*"


@dataclass(frozen=True)
class RelationSpec:
    """A relation label and the entity labels allowed at each end."""

    label: str
    subj_labels: tuple[str, ...]
    obj_labels: tuple[str, ...]
    model: type[Relation]
    # declared ``symmetric=True``: stored once per pair, matched in either direction
    symmetric: bool = False

    def arrow(self) -> str:
        """``City -> Country``, or ``Country <-> Country (symmetric)``."""
        sep = " <-> " if self.symmetric else " -> "
        text = "|".join(self.subj_labels) + sep + "|".join(self.obj_labels)
        return text + (" (symmetric)" if self.symmetric else "")


FieldKind = Literal["int", "float", "str"]


def field_kind(annotation: Any) -> FieldKind | None:
    """The comparable kind of a declared field (``int``, ``float``, ``str``, optional or not), else ``None``.

    Lists, dicts, nested models, booleans and unions of several kinds cannot be compared
    the same way on both backends, so they are not filterable.
    """
    origin = get_origin(annotation)
    if origin is Annotated:
        return field_kind(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        kinds = {field_kind(a) for a in get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else None
    if origin is Literal:
        values = get_args(annotation)
        return "str" if values and all(isinstance(v, str) for v in values) else None
    if annotation is bool:
        return None
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    if annotation is str:
        return "str"
    return None


@dataclass
class GraphSchema:
    """Entity and relation models, indexed by label, validated for consistency."""

    entity_models: Sequence[type[Entity]] = ()
    relation_models: Sequence[type[Relation]] = ()
    entities: dict[str, type[Entity]] = field(init=False, default_factory=dict)
    relations: dict[str, RelationSpec] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for model in self.entity_models:
            self._add_entity(model)
        for rel in self.relation_models:
            label = _label_of(rel, Relation)
            if label in self.relations and self.relations[label].model is not rel:
                raise SchemaError(f"relation label {label!r} is declared by two models.")
            if label in self.entities:
                raise SchemaError(f"label {label!r} is used by an entity and a relation.")
            sides = []
            for side in ("subj", "obj"):
                labels: list[str] = []
                for m in rel.endpoint_models(side):
                    if m.graph_label is None:  # typed by the abstract Entity: any declared entity
                        labels.extend(self.entities)
                        continue
                    # endpoint models are part of the schema even if not listed explicitly
                    self._add_entity(m)
                    labels.append(m.graph_label)
                sides.append(tuple(dict.fromkeys(labels)))
            self.relations[label] = RelationSpec(label, sides[0], sides[1], rel, rel.is_symmetric())
        self.entity_models = tuple(self.entities.values())
        self.relation_models = tuple(s.model for s in self.relations.values())

    def _add_entity(self, model: type[Entity]) -> None:
        label = _label_of(model, Entity)
        existing = self.entities.get(label)
        if existing is not None and existing is not model:
            raise SchemaError(
                f"entity label {label!r} is declared by two models "
                f"({existing.__name__} and {model.__name__}); labels must be unique."
            )
        self.entities[label] = model

    @property
    def entity_labels(self) -> tuple[str, ...]:
        return tuple(self.entities)

    @property
    def relation_labels(self) -> tuple[str, ...]:
        return tuple(self.relations)

    def field_kinds(self, label: str) -> dict[str, FieldKind]:
        """The filterable fields of an entity label (scalar ``int``/``float``/``str``) and their kinds."""
        model = self.entity_model(label)
        out: dict[str, FieldKind] = {}
        for name, info in model.model_fields.items():
            kind = field_kind(info.annotation) if name != "label" else None
            if kind is not None:
                out[name] = kind
        return out

    def filterable_fields(self) -> dict[str, tuple[str, ...]]:
        """Every filterable field name, with the entity labels that declare it (declaration order)."""
        out: dict[str, list[str]] = {}
        for label in self.entities:
            for name in self.field_kinds(label):
                out.setdefault(name, []).append(label)
        return {name: tuple(labels) for name, labels in out.items()}

    def entity_model(self, label: str) -> type[Entity]:
        """The model of an entity label, or ``SchemaError`` naming the allowed labels."""
        try:
            return self.entities[label]
        except (KeyError, TypeError):
            raise SchemaError(f"unknown entity label {label!r}; allowed: {sorted(self.entities)}") from None

    def relation_spec(self, label: str) -> RelationSpec:
        """The spec of a relation label, or ``SchemaError`` naming the allowed labels."""
        try:
            return self.relations[label]
        except (KeyError, TypeError):
            raise SchemaError(f"unknown relation label {label!r}; allowed: {sorted(self.relations)}") from None

    def check_entity(self, entity: Entity) -> None:
        model = self.entity_model(entity.label)
        if not isinstance(entity, model):
            raise SchemaError(f"{type(entity).__name__} is not the declared model for {entity.label!r}.")

    def check_relation(self, relation: Relation) -> None:
        spec = self.relation_spec(relation.label)
        if not isinstance(relation, spec.model):
            raise SchemaError(f"{type(relation).__name__} is not the declared model for {relation.label!r}.")
        for side, allowed in (("subj", spec.subj_labels), ("obj", spec.obj_labels)):
            ent: Entity = getattr(relation, side)
            if ent.label not in allowed:
                raise SchemaError(f"{relation.label}.{side} must be one of {list(allowed)}, got {ent.label!r}.")
            self.check_entity(ent)

    def describe(self, relation_note: Callable[[type[Relation]], str] | None = None) -> str:
        """A compact text description of the schema (for prompts).

        ``relation_note``: a sentence said after each relation's arrow (the extraction prompt gives
        the relation's docstring there), or nothing when it returns ``""``.
        """
        lines = ["Entity labels:"]
        for label, model in self.entities.items():
            doc = (model.__doc__ or "").strip().splitlines()
            lines.append(f"- {label}" + (f": {doc[0]}" if doc and model.__doc__ != Entity.__doc__ else ""))
        lines.append("Relation labels (subject -> object):")
        for label, spec in self.relations.items():
            note = relation_note(spec.model) if relation_note is not None else ""
            lines.append(f"- {label}: {spec.arrow()}" + (f". {note}" if note else ""))
        return "\n".join(lines)


def _label_of(model: Any, base: type) -> str:
    if not (isinstance(model, type) and issubclass(model, base)):
        raise SchemaError(f"{model!r} is not a {base.__name__} model class.")
    label = getattr(model, "graph_label", None)
    if label is None:
        raise SchemaError(
            f"{model.__name__} has no `label: Literal[...]` field; declare e.g. "
            f'label: Literal["{model.__name__}"] = "{model.__name__}".'
        )
    return str(label)


def dynamic_enum(
    schema: dict[str, Any],
    prop_to_update: str,
    labels: Iterable[str],
    description: str | None = None,
    *,
    include_any: bool = True,
) -> dict[str, Any]:
    """Return a copy of ``schema`` whose ``prop_to_update`` is an enum of ``labels`` (plus ``"*"``).

    Labels keep their order, duplicates (a ``"*"`` already given included) are dropped.
    """
    prop = prop_to_update
    out = copy.deepcopy(schema)
    props = out.get("properties")
    if not isinstance(props, dict) or prop not in props:
        raise SchemaError(f"schema has no property {prop!r} to turn into an enum.")
    values = list(dict.fromkeys(labels))
    if include_any and ANY not in values:
        values.append(ANY)
    if not values:
        raise SchemaError(f"dynamic_enum({prop!r}) needs at least one label.")
    new: dict[str, Any] = {"type": "string", "enum": values}
    desc = description if description is not None else props[prop].get("description")
    if desc:
        new["description"] = desc
    props[prop] = new
    return out


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve every local ``$ref`` into its definition and drop ``$defs``."""
    defs = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if not ref.startswith("#/$defs/") or name not in defs:
                    raise SchemaError(f"cannot inline dangling $ref {ref!r}.")
                if name in seen:
                    raise SchemaError(f"recursive $ref {ref!r} cannot be inlined.")
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged, (*seen, name))
            return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    result: dict[str, Any] = walk(schema, ())
    return result


_UNSUPPORTED_STRICT = ("default", "title", "examples", "format", "minLength", "maxLength", "pattern")
# kag's own annotation: the default of a property a model may omit (strict mode cannot say "optional");
# the answer checker fills it in, and ``provider_schema`` removes it before a schema leaves kag
DEFAULT_KEY = "kag:default"


def provider_schema(schema: Any) -> Any:
    """``schema`` without kag's private annotations (``kag:*`` keys): what is sent to a model provider."""
    if isinstance(schema, dict):
        return {k: provider_schema(v) for k, v in schema.items() if not (isinstance(k, str) and k.startswith("kag:"))}
    if isinstance(schema, list):
        return [provider_schema(v) for v in schema]
    return schema


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Make a schema self-contained and acceptable to OpenAI strict structured outputs.

    Inlines refs, forbids extra properties, marks every property required (optional
    values stay nullable through ``anyOf``/``null``) and drops keywords strict mode rejects.
    """

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items() if k not in _UNSUPPORTED_STRICT}
        if "default" in node and _is_json(node["default"]):
            out[DEFAULT_KEY] = copy.deepcopy(node["default"])
        if "const" in out and "enum" not in out:
            out["enum"] = [out.pop("const")]
        if out.get("type") == "object" or "properties" in out:
            out.setdefault("type", "object")
            out.setdefault("properties", {})
            out["additionalProperties"] = False
            out["required"] = list(out["properties"])
        return out

    result: dict[str, Any] = walk(inline_refs(schema))
    return result


def _is_json(value: Any) -> bool:
    """A plain JSON value (defaults of pydantic models are; a factory's product may not be)."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def find_refs(schema: Any) -> list[str]:
    """Every ``$ref`` string in ``schema`` (used to prove a schema is self-contained)."""
    if isinstance(schema, dict):
        found = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
        for v in schema.values():
            found.extend(find_refs(v))
        return found
    if isinstance(schema, list):
        return [r for v in schema for r in find_refs(v)]
    return []
