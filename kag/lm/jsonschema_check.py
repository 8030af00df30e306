"""A small JSON-schema checker for language-model answers.

It covers the subset that structured-output schemas use (and that pydantic emits):
``type`` (one or a list), ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties`` (bool or schema), ``items``, ``prefixItems``, ``anyOf``, ``oneOf``, ``allOf``,
``$ref`` into ``#/$defs`` or ``#/definitions``, plus ``minLength``/``maxLength``,
``minItems``/``maxItems`` and ``minimum``/``maximum``. Unknown keywords and
unresolvable references are ignored: the checker is a guard rail for the repair
loop, not a full validator, and it must never reject an answer because of a
feature it does not understand.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from kag.errors import JSONSchemaValidationError

__all__ = ["JSONSchemaValidationError", "check_json_schema", "fill_defaults", "validate_json_schema"]

# the annotation kag.datamodels.schema.strict_schema writes where a model declares a default
_DEFAULT_KEY = "kag:default"


def fill_defaults(instance: Any, schema: Mapping[str, Any]) -> Any:
    """Add the omitted properties that carry a ``kag:default``, as pydantic would fill a default.

    Strict structured-output schemas must mark every property required; a model that omits
    one whose declared default keeps the old meaning (a new optional field) is not wrong.
    Returns a new object; the input is not modified.
    """
    return _fill(instance, schema, schema, 0)


def _fill(value: Any, schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > 64:
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        return _fill(value, target, root, depth + 1) if target is not None else value
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            out = dict(value)
            for key, sub in props.items():
                if key in out:
                    out[key] = _fill(out[key], sub, root, depth + 1)
                elif isinstance(sub, Mapping) and _DEFAULT_KEY in sub:
                    out[key] = json.loads(json.dumps(sub[_DEFAULT_KEY]))
            return out
        objects = [
            alt
            for alt in schema.get("anyOf") or []
            if isinstance(alt, Mapping) and (alt.get("type") == "object" or "properties" in alt)
        ]
        chosen = _selected(value, objects)
        return _fill(value, chosen, root, depth + 1) if chosen is not None else value
    if isinstance(value, list) and isinstance(schema.get("prefixItems"), list):
        tuple_ = schema["prefixItems"]
        return [
            _fill(v, tuple_[i], root, depth + 1) if i < len(tuple_) and isinstance(tuple_[i], Mapping) else v
            for i, v in enumerate(value)
        ]
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_fill(v, schema["items"], root, depth + 1) for v in value]
    return value


def _fixed(alternative: Mapping[str, Any]) -> dict[str, Any]:
    """The properties an object alternative pins to one value (``const`` or a one-value ``enum``): its tags."""
    props = alternative.get("properties")
    out: dict[str, Any] = {}
    for key, sub in (props if isinstance(props, Mapping) else {}).items():
        if isinstance(sub, Mapping) and "const" in sub:
            out[key] = sub["const"]
        elif isinstance(sub, Mapping) and isinstance(sub.get("enum"), list) and len(sub["enum"]) == 1:
            out[key] = sub["enum"][0]
    return out


def _selected(value: dict[str, Any], alternatives: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The object alternative whose defaults an answer takes: the only one, or the only one its tags select.

    With several alternatives the defaults are never a guess: an answer that omits the tag
    (``label``) or matches no alternative gets none, and the check then says what is missing.
    """
    if len(alternatives) == 1:
        return alternatives[0]
    fitting = [alt for alt in alternatives if _tagged(value, _fixed(alt))]
    return fitting[0] if len(fitting) == 1 else None


def _tagged(value: dict[str, Any], tags: Mapping[str, Any]) -> bool:
    """Whether ``value`` carries at least one of ``tags`` and every one it carries has the pinned value."""
    present = [key for key in tags if key in value]
    return bool(present) and all(_equal(value[key], tags[key]) for key in present)


def _untagged(value: Any, options: list[Any], path: str) -> str | None:
    """The error of an object that names no alternative by its tag (a missing or unknown ``label``), or None.

    The tag is a property every alternative pins to one value; the message lists every allowed
    value, which the per-branch errors cannot (each branch knows only its own).
    """
    if not isinstance(value, dict) or len(options) < 2 or not all(isinstance(o, Mapping) for o in options):
        return None
    tags = [_fixed(option) for option in options]
    for key in tags[0]:
        if not all(key in t for t in tags):
            continue
        allowed = [t[key] for t in tags]
        if key not in value:
            return f"{path}: missing required property {key!r} (one of {_short(allowed, 200)})"
        if not any(_equal(value[key], want) for want in allowed):
            return f"{path}.{key}: {_short(value[key])} is not one of {_short(allowed, 200)}"
    return None


def validate_json_schema(instance: Any, schema: Mapping[str, Any]) -> None:
    """Raise :class:`JSONSchemaValidationError` if ``instance`` violates ``schema``."""
    errors = check_json_schema(instance, schema)
    if errors:
        raise JSONSchemaValidationError(errors)


def check_json_schema(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Return the list of problems of ``instance`` against ``schema`` (empty when valid).

    Each problem starts with a JSON path such as ``$.items[2].label``.
    """
    errors: list[str] = []
    _check(instance, schema, schema, "$", errors)
    return errors


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_matches(value: Any, name: str) -> bool:
    # bool is a subclass of int in Python but a distinct type in JSON.
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    if name == "null":
        return value is None
    return True  # unknown type name: do not reject


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: 1 == 1.0 but True != 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _check(value: Any, schema: Any, root: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    if not isinstance(schema, Mapping):  # True or an unknown form: anything goes
        return

    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        if target is not None:
            _check(value, target, root, path, errors)

    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_type_matches(value, n) for n in names):
            want = " or ".join(names)
            errors.append(f"{path}: expected {want}, got {_json_type(value)} {_short(value)}")
            return  # further keyword checks would only repeat the type error

    if "enum" in schema and isinstance(schema["enum"], list):
        allowed = schema["enum"]
        if not any(_equal(value, option) for option in allowed):
            errors.append(f"{path}: {_short(value)} is not one of {_short(allowed, 200)}")
    if "const" in schema and not _equal(value, schema["const"]):
        errors.append(f"{path}: expected {_short(schema['const'])}, got {_short(value)}")

    if isinstance(value, dict):
        _check_object(value, schema, root, path, errors)
    elif isinstance(value, list):
        _check_array(value, schema, root, path, errors)
    elif isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            errors.append(f"{path}: string shorter than {schema['minLength']} characters")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            errors.append(f"{path}: string longer than {schema['maxLength']} characters")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{path}: {value} is not a finite number")
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if isinstance(minimum, int | float) and value < minimum:
            errors.append(f"{path}: {value} is less than the minimum {minimum}")
        if isinstance(maximum, int | float) and value > maximum:
            errors.append(f"{path}: {value} is greater than the maximum {maximum}")

    for sub in schema.get("allOf") or []:
        _check(value, sub, root, path, errors)
    _check_alternatives(value, schema, root, path, errors)


def _check_alternatives(
    value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if not isinstance(options, list) or not options:
            continue
        branch_errors = []
        matches = 0
        for option in options:
            found: list[str] = []
            _check(value, option, root, path, found)
            if not found:
                matches += 1
            else:
                branch_errors.append(found[0])
        if matches == 0:
            untagged = _untagged(value, options, path)
            detail = " | ".join(branch_errors[:3])
            errors.append(untagged or f"{path}: matches none of the allowed alternatives ({detail})")
        elif keyword == "oneOf" and matches > 1:
            errors.append(f"{path}: matches {matches} alternatives of oneOf, expected exactly 1")


def _check_object(
    value: dict[str, Any],
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    path: str,
    errors: list[str],
) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(f"{path}: missing required property {key!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        child = f"{path}.{key}"
        if key in properties:
            _check(item, properties[key], root, child, errors)
        elif extra is False:
            allowed = ", ".join(repr(k) for k in properties) or "none"
            errors.append(f"{path}: unexpected property {key!r} (allowed: {allowed})")
        elif isinstance(extra, Mapping):
            _check(item, extra, root, child, errors)


def _check_array(
    value: list[Any],
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    path: str,
    errors: list[str],
) -> None:
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    if isinstance(min_items, int) and len(value) < min_items:
        errors.append(f"{path}: expected at least {min_items} items, got {len(value)}")
    if isinstance(max_items, int) and len(value) > max_items:
        errors.append(f"{path}: expected at most {max_items} items, got {len(value)}")
    prefix = schema.get("prefixItems")
    positional = prefix if isinstance(prefix, list) else []
    items = schema.get("items")
    for index, item in enumerate(value):
        if index < len(positional):
            if isinstance(positional[index], Mapping):
                _check(item, positional[index], root, f"{path}[{index}]", errors)
        elif isinstance(items, Mapping):
            _check(item, items, root, f"{path}[{index}]", errors)
