"""Metadata filters: one small language, evaluated in Python or compiled to Cypher.

Syntax (MongoDB-like)::

    {"lang": "en"}                                   # equality
    {"year": {"$gte": 2020, "$lt": 2024}}            # several operators: AND
    {"author.name": {"$in": ["Ada", "Alan"]}}        # dotted keys reach nested dicts
    {"$or": [{"tags": {"$contains": "graph"}}, {"draft": {"$exists": False}}]}

Operators: ``$eq $ne $in $nin $gt $gte $lt $lte $contains $exists``; combinators
``$and`` / ``$or`` take non-empty lists of filters; several keys in one dict are
ANDed. ``{"field": None}`` means ``{"field": {"$exists": False}}``.

Both backends see the same data: Neo4j nodes store metadata flattened by
:func:`flatten_metadata` into properties ``meta__<key path joined by __>``, and
:func:`matches` evaluates the filter on that same flattened form, so the two
agree by construction. Semantics follow Cypher:

* a missing field (or ``None``) never equals anything; ``$ne`` and ``$nin``
  *do* match a missing field (as in MongoDB);
* ``$gt``/``$gte``/``$lt``/``$lte`` compare numbers with numbers and strings with
  strings; any other pairing is false, never an error; booleans are not numbers;
* ``$contains`` is substring on strings and membership on lists;
* edge values compare as Neo4j compares a stored property with a parameter: strings
  by UTF-16 code units (``"\\U00010000" < "\\uffff"``), ``-0.0`` equals ``0`` but orders
  just below it, and an integer equals a float the way Neo4j casts (``2**63 - 1 == 2.0**63``);
* filters address leaves: a nested dict is only reachable through its leaves.

Field paths: each dot-separated segment must match ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``
and may not contain ``__`` (the flattening separator); in a dotted path only the
first segment may start with ``_`` and only the last may end with ``_``, which
keeps the flattened names unambiguous.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from kag.errors import InvalidInputError

PROPERTY_PREFIX = "meta__"
SEPARATOR = "__"
COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
OPERATORS = (*COMPARISONS, "$in", "$nin", "$contains", "$exists")
COMBINATORS = ("$and", "$or")

_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_INT64 = (-(2**63), 2**63 - 1)
_SUPPORTED = f"supported operators: {', '.join(OPERATORS)}; combinators: {', '.join(COMBINATORS)}"
_CYPHER_OPS = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}

Primitive = str | int | float | bool
FlatValue = Primitive | list[str] | list[int] | list[float] | list[bool]


# --------------------------------------------------------------------------- flattening


def _is_segment(key: str, *, first: bool = True, last: bool = True) -> bool:
    """Whether ``key`` may sit at this position of a path.

    Besides the identifier pattern and no ``__`` inside, a segment may not end
    with ``_`` when another follows, nor start with ``_`` unless it is first:
    that keeps ``__``-joined property names unambiguous (``a_.x`` vs ``a._x``).
    """
    if not _SEGMENT.fullmatch(key) or SEPARATOR in key:
        return False
    if not first and key.startswith("_"):
        return False
    return last or not key.endswith("_")


def _storable_primitive(value: Any) -> bool:
    if isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return _INT64[0] <= value <= _INT64[1]
    return isinstance(value, float) and math.isfinite(value)


def _flat_list(values: list[Any]) -> FlatValue | None:
    """A homogeneous list Neo4j can store, a JSON string otherwise (None if empty)."""
    if not values:
        return None  # an empty list cannot be typed as a property array; treat as absent
    if all(_storable_primitive(v) for v in values):
        kinds = {bool if isinstance(v, bool) else str if isinstance(v, str) else float for v in values}
        if len(kinds) == 1:
            if kinds == {float}:
                if all(isinstance(v, int) for v in values):
                    return list(values)
                return [float(v) for v in values]  # int/float mix: Neo4j needs one type
            return list(values)
    return json.dumps(values, sort_keys=True, default=str, ensure_ascii=False)


def flatten_metadata(metadata: Mapping[str, Any]) -> dict[str, FlatValue]:
    """Node properties for ``metadata``: ``{"meta__a__b": leaf, ...}``.

    Nested dicts are flattened with ``__``; ``None`` and empty lists are
    dropped (absent); homogeneous lists of primitives are kept (int/float mixes
    become floats); other values (mixed lists, lists of dicts, ints outside
    int64, non-JSON objects) become JSON strings. Keys that are not valid path
    segments (see the module docstring) cannot be filtered on and are skipped;
    persist the full metadata separately (e.g. as JSON) to keep them.
    """
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, got {type(metadata).__name__}.")
    out: dict[str, FlatValue] = {}

    def walk(prefix: str, node: Mapping[str, Any], depth: int) -> None:
        for key, value in node.items():
            nested = isinstance(value, Mapping)
            if not isinstance(key, str) or not _is_segment(key, first=not prefix, last=not nested):
                continue
            name = f"{prefix}{SEPARATOR}{key}" if prefix else key
            if nested:
                if depth < SCOPED_FILTER_DEPTH:
                    walk(name, value, depth + 1)
                continue
            flat: FlatValue | None
            if value is None:
                flat = None
            elif _storable_primitive(value):
                flat = value
            elif isinstance(value, list | tuple):
                flat = _flat_list(list(value))
            else:
                flat = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
            if flat is not None:
                out[PROPERTY_PREFIX + name] = flat

    walk("", metadata, 0)
    return out


def property_name(field: str) -> str:
    """The node property holding dotted ``field`` (validated)."""
    return PROPERTY_PREFIX + SEPARATOR.join(_split_field(field))


def _split_field(field: str) -> list[str]:
    if not isinstance(field, str) or not field:
        raise InvalidInputError(f"filter field {shown(field)} must be a non-empty string.")
    parts = field.split(".")
    for i, part in enumerate(parts):
        if not _is_segment(part, first=i == 0, last=i == len(parts) - 1):
            raise InvalidInputError(
                f"filter field {shown(field)}: segment {shown(part)} is not allowed; each dot-separated "
                "segment must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$, must not contain '__', and "
                "only the first may start (only the last may end) with '_'."
            )
    return parts


# --------------------------------------------------------------------------- validation

SHOWN_CHARS = 80
"""How much of a rejected value an error message quotes (a 200k-value ``$in`` must not make a MB-sized message)."""


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, saying how long it was (lists: how many items)."""
    if isinstance(value, list | tuple | Mapping) and len(value) > limit:
        # repr of a huge operand costs memory and time before it is cut: show its head only
        head = list(value)[:8] if not isinstance(value, Mapping) else list(value.items())[:8]
        text = repr(head)
    else:
        text = repr(value)
    if len(text) <= limit and not (isinstance(value, list | tuple | Mapping) and len(value) > limit):
        return text
    size = f"{len(value)} items" if isinstance(value, list | tuple | Mapping) else f"{len(text)} characters"
    return f"{text[:limit]}... ({type(value).__name__} of {size})"


def _check_value(value: Any, op: str, field: str) -> None:
    def bad(expected: str) -> InvalidInputError:
        return InvalidInputError(f"filter {shown(field)}: {op} expects {expected}, got {shown(value)}. {_SUPPORTED}.")

    if op == "$exists":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif op in ("$in", "$nin"):
        if not isinstance(value, list | tuple) or not all(_storable_primitive(v) for v in value):
            raise bad("a list of strings, numbers or booleans")
        if len(value) > MAX_LIST_VALUES:
            raise bad(f"at most {MAX_LIST_VALUES} values")
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(value, bool) or not _storable_primitive(value):
            raise bad("a number or a string")
    elif op == "$contains":
        if not _storable_primitive(value):
            raise bad("a string, number or boolean")
    elif op in ("$eq", "$ne"):
        if value is None:
            return  # means $exists false / true
        if isinstance(value, list | tuple):
            if not value or not all(_storable_primitive(v) for v in value):
                raise bad("a primitive or a non-empty list of primitives")
            if len(value) > MAX_LIST_VALUES:
                raise bad(f"at most {MAX_LIST_VALUES} values")
        elif not _storable_primitive(value):
            raise bad("a string, number, boolean, list of those, or null")


MAX_FILTER_DEPTH = 32
"""How deeply a caller's filter may nest ``$and``/``$or``."""
SCOPED_FILTER_DEPTH = MAX_FILTER_DEPTH + 1
"""What the stores accept: a caller's filter of the deepest allowed nesting, inside a configured scope."""


MAX_FILTER_CONDITIONS = 128
"""How many field conditions and ``$and``/``$or`` branches one filter may hold in all."""
MAX_LIST_VALUES = 1024
"""How many values one ``$in``/``$nin``/list operand may hold."""


def validate_filter(where: Any, *, max_depth: int = MAX_FILTER_DEPTH) -> None:
    """Raise ``InvalidInputError`` if ``where`` is not a well-formed filter.

    ``None`` and ``{}`` are valid (they match everything). Stores validate what they run with
    ``max_depth=SCOPED_FILTER_DEPTH``: ``Knowledge`` puts a caller's filter, itself checked against
    ``MAX_FILTER_DEPTH``, inside its scope's ``$and``.
    """
    if where is None:
        return
    _validate(where, 0, max_depth, [0])


def _count(budget: list[int], limit: int = MAX_FILTER_CONDITIONS) -> None:
    # filters are evaluated per chunk on memory and planned by Neo4j: their size must be bounded
    budget[0] += 1
    if budget[0] > limit:
        raise InvalidInputError(f"filter has more than {limit} conditions and branches; split the query or use $in.")


def _validate(where: Any, depth: int, max_depth: int = MAX_FILTER_DEPTH, budget: list[int] | None = None) -> None:
    budget = [0] if budget is None else budget
    if depth > max_depth:
        raise InvalidInputError(f"filter is nested deeper than {max_depth} levels.")
    if not isinstance(where, Mapping):
        raise InvalidInputError(
            f"a filter must be a dict like {{'field': value}}, got {type(where).__name__}. {_SUPPORTED}."
        )
    for key, value in where.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"filter keys must be strings, got {shown(key)}.")
        if key in COMBINATORS:
            if not isinstance(value, list | tuple) or not value:
                raise InvalidInputError(f"{key} takes a non-empty list of filters, got {shown(value)}.")
            for sub in value:
                _count(budget)
                _validate(sub, depth + 1, max_depth, budget)
            continue
        if key.startswith("$"):
            raise InvalidInputError(f"unknown filter operator {shown(key)} at the top level. {_SUPPORTED}.")
        _split_field(key)
        _count(budget)
        if isinstance(value, Mapping):
            if not value:
                raise InvalidInputError(f"filter {shown(key)}: empty operator dict. {_SUPPORTED}.")
            for op, operand in value.items():
                if op not in OPERATORS:
                    raise InvalidInputError(f"filter {shown(key)}: unknown operator {shown(op)}. {_SUPPORTED}.")
                _check_value(operand, op, key)
        else:
            _check_value(value, "$eq", key)


def _conditions(field: str, value: Any) -> list[tuple[str, Any]]:
    """``(operator, operand)`` pairs for one field entry, with ``None`` shorthands resolved."""
    pairs = list(value.items()) if isinstance(value, Mapping) else [("$eq", value)]
    out: list[tuple[str, Any]] = []
    for op, operand in pairs:
        if op == "$eq" and operand is None:
            out.append(("$exists", False))
        elif op == "$ne" and operand is None:
            out.append(("$exists", True))
        else:
            out.append((op, list(operand) if isinstance(operand, tuple) else operand))
    return out


# --------------------------------------------------------------------------- evaluation


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "other"


def _number_equal(a: int | float, b: int | float) -> bool:
    """Neo4j's ``=`` on numbers: exact, except an integer against an integral float.

    There the float is cast to a 64-bit integer (saturating, as Java casts) and the
    integers are compared, so ``2**63 - 1 = 2.0**63`` holds on Neo4j and here.
    """
    if isinstance(a, int) == isinstance(b, int):
        return bool(a == b)
    i, f = (a, b) if isinstance(a, int) else (b, a)
    if not math.isfinite(f):
        return False
    cast = min(max(math.trunc(f), _INT64[0]), _INT64[1])
    if float(cast) == f:
        return i == cast
    return float(i) == f


def _equal(a: Any, b: Any) -> bool:
    """Cypher equality: no bool/number mixing, lists element-wise."""
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if ka == "number":
        return _number_equal(a, b)
    return bool(a == b)


def _order_key(value: Any) -> Any:
    """How Neo4j compares a stored number or string with a parameter: UTF-16 code units; -0.0 below 0."""
    if isinstance(value, str):
        return value.encode("utf-16-be", "surrogatepass")
    negative_zero = isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) < 0
    return (value, -1 if negative_zero else 0)


def _ordered(a: Any, op: str, b: Any) -> bool:
    ka = _kind(a)
    if ka not in ("number", "string") or ka != _kind(b):
        return False
    x, y = _order_key(a), _order_key(b)
    if op == "$gt":
        return bool(x > y)
    if op == "$gte":
        return bool(x >= y)
    if op == "$lt":
        return bool(x < y)
    return bool(x <= y)


def _holds(prop: Any, op: str, operand: Any) -> bool:
    if op == "$exists":
        return (prop is not None) is operand
    if op == "$ne":
        return prop is None or not _equal(prop, operand)
    if op == "$nin":
        return prop is None or not any(_equal(prop, v) for v in operand)
    if prop is None:
        return False
    if op == "$eq":
        return _equal(prop, operand)
    if op == "$in":
        return any(_equal(prop, v) for v in operand)
    if op == "$contains":
        if isinstance(prop, str):
            return isinstance(operand, str) and operand in prop
        if isinstance(prop, list):
            return any(_equal(item, operand) for item in prop)
        return False
    return _ordered(prop, op, operand)


def _member_key(value: Any) -> tuple[str, Any] | None:
    """A hashable key that two primitives share exactly when :func:`_equal` holds (None for lists).

    Numbers: an integral float that Neo4j casts to a 64-bit integer (see :func:`_number_equal`)
    keys as that integer, so ``1``, ``1.0`` and ``-0.0``/``0`` meet as Neo4j's ``IN`` has them meet.
    """
    kind = _kind(value)
    if kind == "number" and isinstance(value, float) and math.isfinite(value):
        cast = min(max(math.trunc(value), _INT64[0]), _INT64[1])
        return ("number", cast if float(cast) == value else value)
    if kind in ("number", "string", "bool"):
        return (kind, value)
    return None


# a prepared filter: ("and" | "or", [sub-filters]) or ("field", property name, [(op, operand, members)])
_Clause = tuple[Any, ...]


def _prepare(where: Mapping[str, Any]) -> list[_Clause]:
    """``where`` (validated) as clauses; ``$in``/``$nin`` lists become sets (one lookup per record)."""
    clauses: list[_Clause] = []
    for key, value in where.items():
        if key in COMBINATORS:
            clauses.append((key, [_prepare(sub) for sub in value]))
            continue
        conditions = []
        for op, operand in _conditions(key, value):
            members = frozenset(_member_key(v) for v in operand) if op in ("$in", "$nin") else None
            conditions.append((op, operand, members))
        clauses.append(("field", property_name(key), conditions))
    return clauses


def _run(clauses: list[_Clause], props: Mapping[str, Any]) -> bool:
    for clause in clauses:
        if clause[0] == "$and":
            if not all(_run(sub, props) for sub in clause[1]):
                return False
        elif clause[0] == "$or":
            if not any(_run(sub, props) for sub in clause[1]):
                return False
        else:
            prop = props.get(clause[1])
            for op, operand, members in clause[2]:
                if members is None:
                    if not _holds(prop, op, operand):
                        return False
                elif op == "$in":
                    if prop is None or _member_key(prop) not in members:
                        return False
                elif prop is not None and _member_key(prop) in members:  # $nin
                    return False
    return True


def matches(where: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` satisfies ``where`` (validated first; ``None``/``{}`` match all)."""
    return compile_matcher(where)(metadata)


def compile_matcher(where: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], bool]:
    """Validate once and return ``metadata -> bool`` (for filtering many records)."""
    validate_filter(where, max_depth=SCOPED_FILTER_DEPTH)
    if not where:
        return lambda metadata: True
    clauses = _prepare(where)
    return lambda metadata: _run(clauses, flatten_metadata(metadata))


# --------------------------------------------------------------------------- Cypher


def _quote(identifier: str) -> str:
    # identifiers are validated to [A-Za-z0-9_], so backticks cannot occur inside
    return f"`{identifier}`"


class _Params:
    def __init__(self, params: dict[str, Any], prefix: str) -> None:
        self.params = params
        self.prefix = prefix
        self.counter = 0

    def add(self, value: Any) -> str:
        while f"{self.prefix}{self.counter}" in self.params:
            self.counter += 1
        name = f"{self.prefix}{self.counter}"
        self.params[name] = value
        self.counter += 1
        return f"${name}"


_IS_NUMBER = "({x} IS :: INTEGER NOT NULL OR {x} IS :: FLOAT NOT NULL)"
_IS_STRING = "{x} IS :: STRING NOT NULL"
_IS_LIST = "{x} IS :: LIST<ANY> NOT NULL"
_IS_BOOL = "{x} IS :: BOOLEAN NOT NULL"


def _type_guard(value: Any, x: str) -> str:
    kind = _kind(value)
    if kind == "number":
        return _IS_NUMBER.format(x=x)
    if kind == "string":
        return _IS_STRING.format(x=x)
    if kind == "bool":
        return _IS_BOOL.format(x=x)
    return _IS_LIST.format(x=x)


def _compile_condition(x: str, op: str, operand: Any, params: _Params) -> str:
    if op == "$exists":
        return f"{x} IS NOT NULL" if operand else f"{x} IS NULL"
    p = params.add(operand)
    if op == "$eq":
        # guard by type so Cypher's cross-type rules (e.g. true <> 1) match matches()
        return f"(CASE WHEN {_type_guard(operand, x)} THEN {x} = {p} ELSE false END)"
    if op == "$ne":
        guard = _type_guard(operand, x)
        return f"({x} IS NULL OR (CASE WHEN {guard} THEN {x} <> {p} ELSE true END))"
    if op == "$in":
        return f"(CASE WHEN {x} IS NULL THEN false ELSE {x} IN {p} END)"
    if op == "$nin":
        return f"({x} IS NULL OR NOT ({x} IN {p}))"
    if op == "$contains":
        branches = []
        if isinstance(operand, str):
            branches.append(f"WHEN {_IS_STRING.format(x=x)} THEN {x} CONTAINS {p}")
        branches.append(f"WHEN {_IS_LIST.format(x=x)} THEN {p} IN {x}")
        return f"(CASE {' '.join(branches)} ELSE false END)"
    # ordering: only same-kind comparisons can be true (CASE evaluates lazily)
    return f"(CASE WHEN {_type_guard(operand, x)} THEN {x} {_CYPHER_OPS[op]} {p} ELSE false END)"


def _compile(where: Mapping[str, Any], alias: str, params: _Params) -> str:
    parts: list[str] = []
    for key, value in where.items():
        if key in COMBINATORS:
            subs = [_compile(sub, alias, params) for sub in value]
            joiner = " AND " if key == "$and" else " OR "
            parts.append(subs[0] if len(subs) == 1 else "(" + joiner.join(subs) + ")")
            continue
        x = f"{alias}.{_quote(property_name(key))}"
        for op, operand in _conditions(key, value):
            parts.append(_compile_condition(x, op, operand, params))
    if not parts:
        return "true"
    return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"


def compile_cypher(where: Mapping[str, Any] | None, alias: str, params: dict[str, Any], prefix: str = "f") -> str:
    """A parameterized Cypher boolean expression equivalent to :func:`matches`.

    Property names come from validated identifiers (backtick-quoted); every
    value goes into ``params`` as ``$<prefix><n>`` (existing keys are never
    overwritten). ``None``/``{}`` compile to ``true``. Uses Neo4j 5 type
    predicates (``x IS :: STRING``) inside ``CASE`` so no comparison can raise.
    """
    validate_filter(where, max_depth=SCOPED_FILTER_DEPTH)
    for name, what in ((alias, "alias"), (prefix, "parameter prefix")):
        if not isinstance(name, str) or not _SEGMENT.fullmatch(name):
            raise InvalidInputError(f"Cypher {what} {name!r} must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$.")
    if not isinstance(params, dict):
        raise InvalidInputError("params must be a dict the caller passes to the query.")
    if not where:
        return "true"
    return _compile(where, _quote(alias), _Params(params, prefix))
