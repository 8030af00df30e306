"""Typed data models: ``DataModel``, ``Field``, ``Entity`` and ``Relation``.

Entities and relations are pydantic v2 models whose ``label`` is a ``Literal``.
That literal is the graph label (node label or relationship type) and the value
a language model may name, so it must be a safe identifier.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Self, TypeVar, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.fields import FieldInfo

from kag.errors import InvalidInputError, SchemaError

_T = TypeVar("_T")

IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
# Names the stores use for their own bookkeeping; models may not declare them.
RESERVED_FIELDS = frozenset(
    {"id", "embedding", "kag_data", "kag_text", "kag_subj", "kag_obj", "kag_sources", "kag_direct", "kag_ns"}
)
# Labels the graph uses for passages; entity/relation models may not take them.
RESERVED_LABEL_PREFIX = "KagWrites_"
RESERVED_LABELS = frozenset({"Document", "Chunk", "HAS_CHUNK", "NEXT", "MENTIONS", "KagEntity"})
# the totals that counts() reports beside the per-label counts: a label of that name would merge with them
COUNT_KEYS = frozenset({"nodes", "relations", "documents", "chunks", "mentions"})


def per_class(cls: type, attr: str, make: Callable[[], _T]) -> _T:
    """``make()`` computed once per model class and kept on it as ``attr`` (not inherited by subclasses).

    For what every written row asks of its model: reading pydantic's ``model_fields`` per row cost
    more than the rest of preparing it.
    """
    cached: _T | None = cls.__dict__.get(attr)
    if cached is None:
        cached = make()
        type.__setattr__(cls, attr, cached)
    return cached


class _KeyMarker:
    """Marks a field as part of an entity's identity (kept out of JSON schemas)."""

    def __repr__(self) -> str:
        return "kag.key"


KEY = _KeyMarker()


class _AliasMarker:
    """Marks a field whose value(s) are other names of the entity (``Field(alias=True)``)."""

    def __repr__(self) -> str:
        return "alias"


ALIAS = _AliasMarker()


def check_identifier(name: str, what: str) -> str:
    """Return ``name`` if it is a safe graph identifier, else raise ``SchemaError``."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise SchemaError(
            f"{what} {name!r} is not a valid identifier: use a letter followed by up to 63 "
            "letters, digits or underscores (pattern ^[A-Za-z][A-Za-z0-9_]{0,63}$)."
        )
    return name


def Field(
    default: Any = ...,
    *,
    description: str | None = None,
    key: bool = False,
    alias: bool = False,
    **kwargs: Any,
) -> Any:
    """Declare a model field.

    ``key=True`` makes it part of the entity's identity. ``alias=True`` marks a ``str`` or
    ``list[str]`` field as other names of the entity (translations, long forms, codes):
    they are matched like the name when a search or a passage names the entity. A field
    called ``aliases`` is an alias field without the flag.
    """
    info: FieldInfo = pydantic.Field(default, description=description, **kwargs)
    if key:
        info.metadata.append(KEY)
    if alias:
        info.metadata.append(ALIAS)
    return info


def stable_hash(prefix: str, *parts: Any) -> str:
    """A short, stable, collision-resistant id from JSON-serializable parts."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return prefix + hashlib.sha256(payload.encode()).hexdigest()[:24]


def literal_value(annotation: Any) -> str | None:
    """The single string of ``Literal["X"]`` (or ``None`` if it is not one)."""
    if get_origin(annotation) is Literal:
        values = get_args(annotation)
        if len(values) == 1 and isinstance(values[0], str):
            return values[0]
    return None


class DataModel(BaseModel):
    """Base of every kag model: strict about unknown fields, JSON round-trippable."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict of the model (nested models included)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Validate ``data`` into the model; raises ``InvalidInputError`` with the details."""
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as exc:
            raise InvalidInputError(f"invalid {cls.__name__} data: {exc}") from exc

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The model's JSON schema (pydantic's, in validation mode)."""
        return cls.model_json_schema()

    @classmethod
    def get_schema(cls) -> dict[str, Any]:
        """Another name of :meth:`json_schema` (its ``title`` is the class name)."""
        return cls.model_json_schema()


class _Labelled(DataModel):
    """Shared label handling of entities and relations."""

    label: str
    graph_label: ClassVar[str | None] = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields.get("label")
        value = literal_value(field.annotation) if field is not None else None
        if value is None:
            cls.graph_label = None  # an abstract intermediate class
            return
        check_identifier(value, f"{cls.__name__} label")
        if value in RESERVED_LABELS:
            raise SchemaError(f"label {value!r} is reserved for passages; choose another label.")
        if value.startswith(RESERVED_LABEL_PREFIX):  # Neo4j write stamps (kag.graph.neo4j_anchor)
            raise SchemaError(f"labels starting with {RESERVED_LABEL_PREFIX!r} are reserved by kag; choose another.")
        if value in COUNT_KEYS:
            raise SchemaError(
                f"label {value!r} would collide with the {value!r} total of counts(); "
                f"choose another label (reserved: {sorted(COUNT_KEYS)})."
            )
        for name in cls.model_fields:
            if name in RESERVED_FIELDS:
                raise SchemaError(
                    f"{cls.__name__}.{name}: field name {name!r} is reserved by kag "
                    f"(reserved: {sorted(RESERVED_FIELDS)}); rename the field."
                )
            check_identifier(name, f"{cls.__name__} field")
        cls.graph_label = value
        if field is not None and field.is_required():
            # fill in the label default so callers never have to repeat it
            field.default = value
            cls.model_rebuild(force=True)


class Entity(_Labelled):
    """A graph node. Subclass with ``label: Literal["City"] = "City"`` and fields.

    Identity is the label plus the key fields (``Field(key=True)``; else ``name``;
    else the first field), so upserting the same entity twice is idempotent.
    """

    @classmethod
    def key_fields(cls) -> tuple[str, ...]:
        """Names of the fields that identify an entity of this model."""
        return per_class(cls, "_kag_key_fields", cls._compute_key_fields)

    @classmethod
    def _compute_key_fields(cls) -> tuple[str, ...]:
        keys = tuple(n for n, f in cls.model_fields.items() if KEY in f.metadata)
        if keys:
            return keys
        if "name" in cls.model_fields:
            return ("name",)
        others = tuple(n for n in cls.model_fields if n != "label")
        if not others:
            raise SchemaError(f"{cls.__name__} has no fields to identify it; add a `name` field.")
        return others[:1]

    _id: str | None = PrivateAttr(default=None)

    @property
    def id(self) -> str:
        """Stable id: a hash of the label and the key field values (cached until a field changes)."""
        private = self.__pydantic_private__  # direct access: this is on every write's hot path
        cached = private.get("_id") if private is not None else None
        if cached is None:
            keys = type(self).key_fields()
            cached = stable_hash("e_", self.label, [getattr(self, k) for k in keys])
            if private is not None:
                private["_id"] = cached
        return cached

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields and self.__pydantic_private__ is not None:
            self.__pydantic_private__["_id"] = None

    def search_text(self) -> str:
        """The text embedded for similarity search: the key field values."""
        return " ".join(str(getattr(self, k)) for k in type(self).key_fields())

    @classmethod
    def alias_fields(cls) -> tuple[str, ...]:
        """Fields holding other names of the entity: ``Field(alias=True)`` ones and ``aliases``."""
        return tuple(n for n, f in cls.model_fields.items() if ALIAS in f.metadata or n == "aliases")

    def names(self) -> list[str]:
        """The names the entity goes by: its key text first, then its aliases (each once)."""
        names = [self.search_text()]
        for field_name in type(self).alias_fields():
            value = getattr(self, field_name, None)
            values = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else []
            names.extend(v for v in values if isinstance(v, str) and v.strip() and v not in names)
        return names


class Relation(_Labelled):
    """A graph relationship. Subclass with ``subj: City``, ``label: Literal["X"]``, ``obj: Country``.

    Endpoints may be unions of entity models. Identity is label + endpoint ids
    (+ any ``Field(key=True)`` properties, for parallel relations).
    """

    subj: Entity
    obj: Entity

    def __init_subclass__(cls, *, symmetric: bool | None = None, **kwargs: Any) -> None:
        """``class Borders(kag.Relation, symmetric=True)``: the relation holds both ways.

        A symmetric relation stored once per pair is found from either end: searches match it
        in both directions without ``bidirectional``. Subclasses inherit the declaration.
        """
        super().__init_subclass__(**kwargs)
        if symmetric is not None:
            if not isinstance(symmetric, bool):
                raise SchemaError(f"{cls.__name__}: symmetric must be True or False, got {symmetric!r}.")
            type.__setattr__(cls, "__kag_symmetric__", symmetric)

    @classmethod
    def is_symmetric(cls) -> bool:
        """Whether the relation was declared ``symmetric=True`` (here or on a parent class)."""
        return bool(getattr(cls, "__kag_symmetric__", False))

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.graph_label is not None:
            cls.endpoint_models("subj")
            cls.endpoint_models("obj")

    @classmethod
    def endpoint_models(cls, side: str) -> tuple[type[Entity], ...]:
        """Entity models allowed at ``side`` (``"subj"`` or ``"obj"``)."""
        annotation = cls.model_fields[side].annotation
        models = _entity_members(annotation)
        if not models:
            raise SchemaError(
                f"{cls.__name__}.{side} must be typed by Entity models (or a union of them), got {annotation!r}."
            )
        return models

    @classmethod
    def key_fields(cls) -> tuple[str, ...]:
        """Relation properties that take part in identity (besides label and endpoints)."""
        return per_class(
            cls, "_kag_key_fields", lambda: tuple(n for n, f in cls.model_fields.items() if KEY in f.metadata)
        )

    @classmethod
    def property_fields(cls) -> tuple[str, ...]:
        """The relation's own properties (everything but label and endpoints)."""
        return tuple(n for n in cls.model_fields if n not in ("label", "subj", "obj"))

    _id: tuple[str, str, str] | None = PrivateAttr(default=None)

    @property
    def id(self) -> str:
        """Stable id from the label, both endpoint ids and any key properties.

        Cached per endpoint ids, so a change to an endpoint (``rel.subj.name = ...``)
        still gives the new id; a change to the relation's own fields clears the cache.
        """
        subj, obj = self.subj.id, self.obj.id
        private = self.__pydantic_private__
        cached = private.get("_id") if private is not None else None
        if cached is not None and cached[0] == subj and cached[1] == obj:
            return cached[2]
        keys = type(self).key_fields()
        rel_id = stable_hash("r_", self.label, subj, obj, [getattr(self, k) for k in keys])
        if private is not None:
            private["_id"] = (subj, obj, rel_id)
        return rel_id

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields and self.__pydantic_private__ is not None:
            self.__pydantic_private__["_id"] = None

    def properties(self) -> dict[str, Any]:
        """The relation's own properties as JSON-compatible values."""
        data = self.model_dump(mode="json", include=set(type(self).property_fields()))
        return data


def _entity_members(annotation: Any) -> tuple[type[Entity], ...]:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _entity_members(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[type[Entity]] = []
        for arg in get_args(annotation):
            members = _entity_members(arg)
            if not members:
                return ()
            out.extend(members)
        return tuple(out)
    if isinstance(annotation, type) and issubclass(annotation, Entity):
        return (annotation,)
    return ()


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_storable(model_obj: BaseModel) -> None:
    """Refuse values no backend can store faithfully: NaN, infinities, integers beyond 64 bits.

    Neo4j stores 64-bit integers and would overflow; an infinity would reach the saved JSON
    as ``Infinity`` and break every later search. Both backends refuse the same values here,
    before anything is written.
    """
    for name in _own_fields(type(model_obj)):  # endpoints are checked as entities of their own
        value = getattr(model_obj, name)
        if not _plain(value):  # most fields: decided without building the field's path
            _walk(value, f"{type(model_obj).__name__}.{name}")


def _own_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The model's field names but the endpoints."""
    return per_class(model, "_kag_own_fields", lambda: tuple(n for n in model.model_fields if n not in ("subj", "obj")))


def _plain(value: Any) -> bool:
    """A storable scalar of an exact builtin type (subclasses and containers go through :func:`_walk`)."""
    kind = type(value)
    return (
        kind is str
        or kind is bool
        or value is None
        or (kind is int and INT64_MIN <= value <= INT64_MAX)
        or (kind is float and math.isfinite(value))
    )


def _walk(value: Any, where: str) -> None:
    if _plain(value) or isinstance(value, str):  # a str subclass (an enum member) is a text too
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{where} is {value!r}; store a finite number (or leave it unset).")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInputError(f"{where} is {value} which does not fit in 64 bits; store it as a string.")
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{where}.{key}")
    elif isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            _walk(item, f"{where}[{i}]")
    elif isinstance(value, BaseModel):
        for key in type(value).model_fields:
            _walk(getattr(value, key), f"{where}.{key}")
