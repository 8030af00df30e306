"""Guards for structured answers: schema bounds, grounded name lists and a repetition detector.

Pure functions and one small incremental scanner, shared by every client that
decodes under a schema:

- :func:`bound_schema` gives every array without ``maxItems`` a bound, so a
  grammar built from the schema cannot let a list grow until the token limit;
- :func:`choices_schema` narrows the enums of a schema (and of its union's variants) to the
  values a caller allows, such as the labels and flags of the worked examples a call shows;
  :func:`positional_schema` does it per item of an array (each pattern of a chain in its place);
- :func:`grounded_schema` turns the ``list[str]`` name fields of an answer schema
  into a dynamic enum of the names a caller allows (an empty list says "not found");
- :class:`RepetitionGuard` reads a JSON answer as it is generated and reports the
  first degenerate repetition (a string whose tail repeats one unit, an array that
  repeats an item) with the place to cut it and the character that closes it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kag.errors import InvalidInputError
from kag.validation import check_int

__all__ = [
    "NOT_FOUND_NOTE",
    "NOT_FOUND_TEXT",
    "Repetition",
    "RepetitionGuard",
    "bound_schema",
    "choices_schema",
    "grounded_numbers",
    "grounded_schema",
    "grounded_text",
    "positional_schema",
    "spans_schema",
    "text_spans",
    "text_words",
    "whole_list_schema",
]

NOT_FOUND_NOTE = "An empty list means the answer is not in the retrieved facts (not found in the knowledge graph)."
"""Appended to the description of every grounded field."""

NOT_FOUND_TEXT = "Not found in the knowledge graph."
"""The free-text answer a grounded text field offers when the facts do not answer."""

_SCHEMA_CHILDREN = ("anyOf", "oneOf", "allOf", "prefixItems")


def _walk(node: Any, visit: Any) -> None:
    """Call ``visit`` on every sub-schema dict of ``node`` (properties, items, $defs, unions)."""
    if not isinstance(node, dict):
        return
    visit(node)
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        children = node.get(key)
        if isinstance(children, dict):
            for child in children.values():
                _walk(child, visit)
    for key in ("items", "additionalProperties", "not"):
        _walk(node.get(key), visit)
    for key in _SCHEMA_CHILDREN:
        children = node.get(key)
        if isinstance(children, list):
            for child in children:
                _walk(child, visit)


def bound_schema(schema: dict[str, Any], max_items: int) -> dict[str, Any]:
    """A copy of ``schema`` where every array without ``maxItems`` gets ``maxItems=max_items``.

    An enum-valued item list is also bounded by the number of values (a list that
    cannot repeat an item cannot be longer). Arrays that already have a bound keep it.

    Raises:
        InvalidInputError: ``max_items`` is not a positive integer.
    """
    check_int(max_items, name="max_items", error=InvalidInputError)
    bounded = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        if node.get("type") != "array" or "maxItems" in node:
            return
        limit = max_items
        items = node.get("items")
        if isinstance(items, dict) and isinstance(items.get("enum"), list) and items["enum"]:
            limit = min(limit, len(items["enum"]))
        node["maxItems"] = max(limit, int(node.get("minItems", 0)))

    _walk(bounded, visit)
    return bounded


_WORD = re.compile(r"[^\W_](?:[\w'’.-]*[^\W_])?")
_POSSESSIVE = re.compile(r"['’]s$")


def text_words(text: str) -> list[str]:
    """The words of ``text`` in order, as written (a word may hold ``'``, ``.`` and ``-`` inside)."""
    return _WORD.findall(text)


# words that never make a name on their own: a question's "On", "Which" or "the" is no entity
_FUNCTION_WORDS = frozenset(
    str.split(
        "a an the of in on at to for by with from into onto and or but not no is are was were be been do does did "
        "has have had can could will would should may might what which who whom whose where when why how many much "
        "this that these those it its there here all any some each every me my you your we our they their"
    )
)


# function words a name never holds, even inside ("Bosnia and Herzegovina", "Isle of Man" do hold some)
_NOT_IN_NAMES = frozenset(
    str.split(
        "is are was were be been do does did has have had can could will would should may might "
        "what which who whom whose where when why how many much"
    )
)


def _name_like(words: list[str]) -> bool:
    folded = [w.casefold() for w in words]
    return not (folded[0] in _FUNCTION_WORDS or folded[-1] in _FUNCTION_WORDS or _NOT_IN_NAMES & set(folded))


def text_spans(texts: Iterable[str], max_words: int = 5, *, names_only: bool = False) -> list[str]:
    """Every run of 1 to ``max_words`` consecutive words of ``texts``, as written, once each.

    The values a search's similarity text may take when it must quote the question: a name in a
    question is one such run ("New York City", "Côte d'Ivoire"). ``names_only`` leaves out the runs
    that read as no name: starting or ending with a function word ("On", "On Peru", "the Isle";
    "The Hague" too, while "Hague" is still offered) or holding a verb or question word
    ("landmass is Romania").
    """
    spans: dict[str, None] = {}
    for text in texts:
        words = text_words(text)
        for word in words:  # "Ghana's capital" names Ghana: the possessive's stem is a span too
            stem = _POSSESSIVE.sub("", word)
            if stem != word and stem:
                spans.setdefault(stem, None)
        for size in range(1, max_words + 1):
            for start in range(len(words) - size + 1):
                run = words[start : start + size]
                if names_only and not _name_like(run):
                    continue
                spans.setdefault(" ".join(run), None)
    return list(spans)


def spans_schema(schema: dict[str, Any], fields: Iterable[str], values: Iterable[str]) -> dict[str, Any]:
    """A copy of ``schema`` where every string property named in ``fields`` is an enum of ``values``.

    Used per call, like :func:`grounded_schema`: a model under a grammar can then only write
    similarity texts quoted from its input (plus whatever ``values`` adds, such as ``"*"``).
    """
    names = set(fields)
    allowed = list(dict.fromkeys(values))
    narrowed = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return
        for name in names & set(properties):
            child = properties[name]
            if isinstance(child, dict) and child.get("type") == "string":
                kept = {k: v for k, v in child.items() if k not in ("pattern", "maxLength")}
                properties[name] = {**kept, "enum": allowed}

    _walk(narrowed, visit)
    return narrowed


def linked_spans_schema(
    schema: dict[str, Any],
    sides: Mapping[str, str],
    linked: Mapping[str, Iterable[str]],
    anywhere: Iterable[str] = ("*",),
) -> dict[str, Any]:
    """A copy of ``schema`` where each text field of ``sides`` (``{text field: label field}``) may only
    be one of ``anywhere`` or a span linked to an entity of the label the same object names.

    ``linked`` maps an entity label to the spans of the input that name one of its entities. Where
    the label field's enum holds several labels (or ``"*"``), the spans of all of them are allowed:
    under a grammar, a model that chose a label can then only quote a name the graph holds for it.
    """
    always = list(dict.fromkeys(anywhere))
    every = list(dict.fromkeys(span for spans in linked.values() for span in spans))
    narrowed = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return
        for text_field, label_field in sides.items():
            child, label = properties.get(text_field), properties.get(label_field)
            if not isinstance(child, dict) or child.get("type") != "string":
                continue
            labels = label.get("enum") if isinstance(label, dict) else None
            if not isinstance(labels, list) or "*" in labels:
                spans = every
            else:
                spans = list(dict.fromkeys(span for lab in labels for span in linked.get(str(lab), ())))
            kept = {k: v for k, v in child.items() if k not in ("pattern", "maxLength")}
            properties[text_field] = {**kept, "enum": list(dict.fromkeys([*always, *spans]))}

    _walk(narrowed, visit)
    return narrowed


def choices_schema(schema: dict[str, Any], allowed: Mapping[str, Iterable[Any]]) -> dict[str, Any]:
    """A copy of ``schema`` where each property named in ``allowed`` may only take those values.

    A property with an enum keeps the values of its enum that are allowed (in its order); a
    string or boolean property without one gets the allowed values as its enum. A union
    (``anyOf`` / ``oneOf``) variant left with an empty enum is dropped, so a variant survives
    only when it can still be written. Fields not named keep their schema.

    Raises:
        InvalidInputError: no variant of the schema can hold the allowed values.
    """
    wanted = {name: list(dict.fromkeys(values)) for name, values in allowed.items()}
    narrowed = copy.deepcopy(schema)

    def empty(node: dict[str, Any]) -> bool:
        properties = node.get("properties")
        if not isinstance(properties, dict):
            return False
        return any(isinstance(p, dict) and p.get("enum") == [] for p in properties.values())

    def visit(node: dict[str, Any]) -> None:
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name in set(wanted) & set(properties):
                child = properties[name]
                if not isinstance(child, dict):
                    continue
                if isinstance(child.get("enum"), list):
                    child["enum"] = [v for v in child["enum"] if v in wanted[name]]
                elif child.get("type") in ("string", "boolean"):
                    kind = str if child["type"] == "string" else bool
                    child["enum"] = [v for v in wanted[name] if isinstance(v, kind)]
        for key in ("anyOf", "oneOf"):
            variants = node.get(key)
            if isinstance(variants, list):
                for variant in variants:
                    if isinstance(variant, dict):
                        visit(variant)
                node[key] = [v for v in variants if not (isinstance(v, dict) and empty(v))]
                if not node[key]:
                    raise InvalidInputError(f"no variant of the schema can hold the allowed values {wanted}.")

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        visit(node)
        for key in ("properties", "$defs", "definitions"):
            children = node.get(key)
            if isinstance(children, dict):
                for child in children.values():
                    walk(child)
        walk(node.get("items"))

    walk(narrowed)
    if empty(narrowed):
        raise InvalidInputError(f"the schema cannot hold the allowed values {wanted}.")
    return narrowed


T = TypeVar("T")


def _unique(values: Iterable[T], kind: type[T], what: str, plural: str) -> list[T]:
    """``values`` in order, once each; each must be a ``kind`` (a bool is no integer)."""
    out: list[T] = []
    for value in values:
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise InvalidInputError(f"{what} must be {plural}, got {type(value).__name__}: {value!r}.")
        if value not in out:
            out.append(value)
    return out


def positional_schema(
    schema: dict[str, Any], field: str, positions: Sequence[Mapping[str, Iterable[Any]]]
) -> dict[str, Any]:
    """A copy of ``schema`` whose array ``field`` holds exactly ``len(positions)`` items, the i-th
    narrowed to ``positions[i]`` as :func:`choices_schema` narrows (a ``prefixItems`` tuple).

    Raises:
        InvalidInputError: ``field`` is not an array property with ``items``, or an item cannot
            hold its position's values.
    """
    prop = schema.get("properties", {}).get(field) if isinstance(schema, dict) else None
    if not isinstance(prop, dict) or prop.get("type") != "array" or not isinstance(prop.get("items"), dict):
        raise InvalidInputError(f"positional_schema: {field!r} is not an array property with 'items'.")
    if not positions:
        raise InvalidInputError("positional_schema needs at least one position.")
    out = copy.deepcopy(schema)
    array = {k: v for k, v in prop.items() if k != "items"}
    # prefixItems, not items: llama.cpp's converter reads "items" first when both are there
    array["prefixItems"] = [choices_schema(prop["items"], allowed) for allowed in positions]
    array["minItems"] = array["maxItems"] = len(positions)
    out["properties"][field] = array
    return out


def _is_string_list(node: Any) -> bool:
    if not isinstance(node, dict) or node.get("type") != "array":
        return False
    items = node.get("items")
    return isinstance(items, dict) and items.get("type") == "string" and "enum" not in items


def grounded_schema(
    schema: dict[str, Any], allowed_names: Iterable[str], *, fields: Iterable[str] | None = None
) -> dict[str, Any]:
    """A copy of an answer schema whose ``list[str]`` name fields may only hold ``allowed_names``.

    Every top-level property that is a list of strings (also inside ``anyOf`` /
    ``oneOf``, e.g. an optional list), or only the ones named in ``fields``,
    becomes a list of unique items from the enum ``allowed_names`` with
    ``minItems`` 0: the empty list is the explicit way to say "not found"
    (:data:`NOT_FOUND_NOTE` is added to its description). With no allowed name the
    field can only be the empty list. Build it per call from the names in the
    retrieved facts; a grammar built from it cannot write any other name.

    Raises:
        InvalidInputError: the schema is not an object schema, a name is not a
            string, or a field named in ``fields`` is not a list of strings.
    """
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise InvalidInputError("grounded_schema needs an object JSON schema with 'properties'.")
    names = _unique(allowed_names, str, "allowed_names", "strings")
    wanted = None if fields is None else set(fields)
    grounded = copy.deepcopy(schema)
    found: set[str] = set()
    for key, prop in grounded["properties"].items():
        if wanted is not None and key not in wanted:
            continue
        variants = [prop, *(v for k in ("anyOf", "oneOf") for v in prop.get(k, []) if isinstance(v, dict))]
        lists = [v for v in variants if _is_string_list(v)]
        if not lists:
            continue
        found.add(key)
        for variant in lists:
            variant["minItems"] = 0
            variant["uniqueItems"] = True
            if names:
                variant["items"] = {**variant["items"], "enum": list(names)}
                variant["maxItems"] = min(int(variant.get("maxItems", len(names))), len(names))
            else:
                variant["items"] = {"type": "string"}
                variant["maxItems"] = 0
        described = prop.get("description", "")
        prop["description"] = f"{described} {NOT_FOUND_NOTE}".strip()
    missing = sorted((wanted or set()) - found)
    if missing:
        raise InvalidInputError(f"grounded_schema: field(s) {missing} are not lists of strings in the schema.")
    return grounded


def whole_list_schema(
    schema: dict[str, Any], names: Iterable[str], *, fields: Iterable[str], empty: bool = True
) -> dict[str, Any]:
    """A copy of an answer schema whose list ``fields`` are either empty or exactly ``names``.

    For an answer whose set the search already decided (the entities it found on the side it asked
    for): the model only says whether the facts answer the question (``names``) or not (``[]``,
    "not found"), instead of picking names one by one, which a small model stops doing early.
    With ``empty=False`` (and some names) the fields are exactly ``names``: the search decided.

    Raises:
        InvalidInputError: a field is not a property of the schema, or a name is not a string.
    """
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise InvalidInputError("whole_list_schema needs an object JSON schema with 'properties'.")
    chosen = _unique(names, str, "names", "strings")
    whole = copy.deepcopy(schema)
    for key in fields:
        prop = whole["properties"].get(key)
        if not isinstance(prop, dict):
            raise InvalidInputError(f"whole_list_schema: {key!r} is not a property of the schema.")
        described = f"{prop.get('description', '')} {NOT_FOUND_NOTE}".strip()
        options: list[list[str]] = ([[]] if empty or not chosen else []) + ([chosen] if chosen else [])
        whole["properties"][key] = {"description": described, "enum": options}
    return whole


def grounded_text(
    schema: dict[str, Any], options: Iterable[str], *, fields: Iterable[str], not_found: bool = True
) -> dict[str, Any]:
    """A copy of an answer schema whose free-text ``fields`` may only be one of ``options``.

    For a model that decodes under a grammar and answers from retrieved facts: the text it may
    write is the answer those facts give (the names found, the count, the value stated) or, with
    ``not_found`` (not after a count, which answers even when it is 0), :data:`NOT_FOUND_TEXT`.
    A nullable field keeps ``null``.

    Raises:
        InvalidInputError: a field is not a string property of the schema, or an option is not a string.
    """
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise InvalidInputError("grounded_text needs an object JSON schema with 'properties'.")
    chosen = _unique([*options, *([NOT_FOUND_TEXT] if not_found else [])], str, "options", "strings")
    if not chosen:
        raise InvalidInputError("grounded_text: no option left (give options, or keep not_found).")
    texts = copy.deepcopy(schema)
    for key in fields:
        prop = texts["properties"].get(key)
        variants = [prop, *(v for v in prop.get("anyOf", []) if isinstance(v, dict))] if isinstance(prop, dict) else []
        if not any(v.get("type") == "string" and "enum" not in v for v in variants):
            raise InvalidInputError(f"grounded_text: {key!r} is not a free-text string property of the schema.")
        nullable = any(v.get("type") == "null" for v in variants)
        described = f"{prop.get('description', '')} The answer the retrieved facts give."
        texts["properties"][key] = {"description": described.strip(), "enum": [*chosen, *([None] if nullable else [])]}
    return texts


def grounded_numbers(
    schema: dict[str, Any], allowed: Iterable[int], *, fields: Iterable[str], required: bool = False
) -> dict[str, Any]:
    """A copy of an answer schema whose integer ``fields`` may only hold ``allowed`` (or ``null``).

    The integer variant of each field becomes an enum of ``allowed``; a nullable field keeps its
    ``null`` (unless ``required``: then, given any allowed number, the field must hold one), and
    with no allowed number it can only be ``null``. A field that is neither an integer nor a
    nullable integer is refused. A non-nullable field with no allowed number is left as it is
    (there is nothing it could be grounded in).

    Raises:
        InvalidInputError: a field is not an integer field of the schema, or a value is not an integer.
    """
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise InvalidInputError("grounded_numbers needs an object JSON schema with 'properties'.")
    numbers = _unique(allowed, int, "allowed numbers", "integers")
    grounded = copy.deepcopy(schema)
    for key in fields:
        prop = grounded["properties"].get(key)
        if not isinstance(prop, dict):
            raise InvalidInputError(f"grounded_numbers: {key!r} is not a property of the schema.")
        options = prop.get("anyOf")
        if isinstance(options, list):
            ints = [o for o in options if isinstance(o, dict) and o.get("type") == "integer"]
            nulls = [o for o in options if isinstance(o, dict) and o.get("type") == "null"]
            if len(ints) != 1 or len(ints) + len(nulls) != len(options):
                raise InvalidInputError(f"grounded_numbers: {key!r} is not an integer or a nullable integer.")
            if numbers:
                ints[0]["enum"] = list(numbers)
                if required:
                    prop["anyOf"] = ints
            else:
                prop["anyOf"] = nulls
        elif prop.get("type") == "integer":
            if numbers:
                prop["enum"] = list(numbers)
        else:
            raise InvalidInputError(f"grounded_numbers: {key!r} is not an integer or a nullable integer.")
    return grounded


# -- the repetition guard -------------------------------------------------------------------


@dataclass(frozen=True)
class Repetition:
    """A degenerate repetition in a partial JSON answer: keep ``text[:cut]``, then write ``closer``."""

    cut: int
    closer: str
    description: str


@dataclass
class _Frame:
    kind: str  # "array" or "object"
    items: list[str] = field(default_factory=list)
    item_start: int | None = None
    comma: int | None = None  # where the separator before the current item is


_TRIM = " ,;:-\t\n"


class RepetitionGuard:
    """Incremental detector of degenerate repetition in a JSON answer being generated.

    Feed it the text as it grows (:meth:`feed`); it returns the first
    :class:`Repetition` found, or ``None``:

    - inside a string: the tail repeats one unit that holds a letter back to back
      (a unit of 1-3 characters ``short_repeats`` times, 4-15 characters 3 times,
      16-64 characters twice; numbers and punctuation runs are left alone). The cut keeps the first
      occurrence (trailing separators trimmed) and closes the string with ``"``;
    - inside an array: an item equal to an earlier item of the same array. The
      cut ends the array after the last distinct item with ``]``.

    Why: a small model decoding greedily under a grammar loops ("Paris, Paris,
    Paris, ..." or the same entity again and again) until the token limit cuts
    the JSON off; stopping at the first repeat saves those tokens and a repair.
    """

    def __init__(self, *, short_repeats: int = 8, max_unit: int = 64) -> None:
        self.short_repeats = short_repeats
        self.max_unit = max_unit
        self.text = ""
        self._stack: list[_Frame] = []
        self._in_string = False
        self._escape = False
        self._string_start = 0

    def feed(self, new_text: str) -> Repetition | None:
        """Scan ``new_text`` (appended to what was fed before); the first repetition found, if any."""
        for char in new_text:
            index = len(self.text)
            self.text += char
            found = self._step(char, index)
            if found is not None:
                return found
        return None

    # -- scanning ----------------------------------------------------------------------------
    def _step(self, char: str, index: int) -> Repetition | None:
        if self._in_string:
            if self._escape:
                self._escape = False
            elif char == "\\":
                self._escape = True
            elif char == '"':
                self._in_string = False
            else:
                return self._string_repetition()
            return None
        top = self._stack[-1] if self._stack else None
        if char in " \t\r\n":
            return None
        if char in "]}":
            found = self._end_item(top, index) if top is not None and top.kind == "array" and char == "]" else None
            if self._stack:
                self._stack.pop()
            return found
        if char == ",":
            return self._end_item(top, index) if top is not None and top.kind == "array" else None
        if top is not None and top.kind == "array" and top.item_start is None:
            top.item_start = index
        if char == '"':
            self._in_string, self._string_start = True, index + 1
        elif char == "[":
            self._stack.append(_Frame("array"))
        elif char == "{":
            self._stack.append(_Frame("object"))
        return None

    def _end_item(self, frame: _Frame | None, index: int) -> Repetition | None:
        if frame is None or frame.item_start is None:
            return None
        item = self.text[frame.item_start : index].strip()
        frame.item_start = None
        if item in frame.items and frame.comma is not None:
            return Repetition(frame.comma, "]", f"the list repeats the item {item[:60]}")
        frame.items.append(item)
        frame.comma = index
        return None

    def _string_repetition(self) -> Repetition | None:
        content = self.text[self._string_start :]
        size = len(content)
        for unit_len in range(1, min(self.max_unit, size // 2) + 1):
            unit = content[size - unit_len :]
            need = self.short_repeats if unit_len <= 3 else 3 if unit_len < 16 else 2
            if unit_len * need > size:
                continue
            if not any(c.isalpha() for c in unit):
                continue  # "1000000", "....", runs of spaces: not the loops worth cutting
            repeats = 1
            while repeats < need and content[size - (repeats + 1) * unit_len : size - repeats * unit_len] == unit:
                repeats += 1
            if repeats >= need:
                keep = content[: size - (repeats - 1) * unit_len].rstrip(_TRIM)
                while keep.endswith("\\"):  # never leave an escape that would swallow the closing quote
                    keep = keep[:-1]
                return Repetition(
                    self._string_start + len(keep), '"', f"the text repeats {unit.strip()[:60]!r} {repeats} times"
                )
        return None
