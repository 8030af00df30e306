"""Prompt templates: sandboxed jinja2 rendering and structured message building.

Templates are rendered in jinja2's ``ImmutableSandboxedEnvironment`` (a stricter
``SandboxedEnvironment``: no access to private/dunder attributes, no mutation
of lists or dicts) with ``StrictUndefined``, so a typo in a variable name fails
loudly instead of rendering an empty string, and unsafe access (``''.__class__``)
raises :class:`UnsafeTemplateError`. Only JSON values (from ``model_dump(mode="json")``)
are exposed to templates, never live Python objects.

Role messages are always built as a list of ``{"role", "content"}`` dicts; the
rendered text of a template only ever becomes the *content* of one message, so
input data cannot forge a system or assistant turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import pydantic
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kag.errors import TemplateError, UnsafeTemplateError
from kag.lm.base import Message

__all__ = [
    "DEFAULT_GENERATOR_INSTRUCTIONS",
    "DEFAULT_INPUT_TEMPLATE",
    "DEFAULT_RETRIEVER_INSTRUCTIONS",
    "TemplateError",
    "UnsafeTemplateError",
    "build_messages",
    "compile_template",
    "describe_fields",
    "format_value",
    "render_template",
    "template_variables",
]


DEFAULT_INPUT_TEMPLATE = (
    "{% for name, value in inputs.items() %}{% if not loop.first %}\n{% endif %}"
    "{{ name }}:{{ value | kag_format }}{% endfor %}"
)
"""Renders every input field as ``name: value``; lists become ``- item`` lines."""

DEFAULT_GENERATOR_INSTRUCTIONS = (
    "Answer the request in the user message using only the information it contains "
    "(for example the facts retrieved from the knowledge graph). If that information "
    "is not enough, say so instead of guessing."
)

DEFAULT_RETRIEVER_INSTRUCTIONS = (
    "Turn the user's request into a search of the knowledge graph described below: "
    "fill in a (subject)-[relation]->(object) pattern. Use only the declared labels, or "
    '"*" for any. Put the names mentioned in the request in the similarity-search '
    'fields of the matching side and "*" on the side being asked for. Set count for '
    '"how many" questions and negated for questions about what does NOT hold.'
)


def format_value(value: Any) -> str:
    """Render one input value for a prompt (the ``kag_format`` template filter).

    Scalars render inline after a space; multi-line strings and lists render on
    indented / ``- `` lines below their name; facts (dicts with a ``text``) render
    as their text, score and entity properties. Everything else is compact JSON.
    """
    if value is None:
        return " (none)"
    if isinstance(value, str):
        if "\n" in value:
            return "\n" + "\n".join("  " + line for line in value.splitlines())
        return " " + value
    if isinstance(value, bool | int | float):
        return " " + json.dumps(value)
    if isinstance(value, list | tuple):
        if not value:
            return " (none)"
        return "\n" + "\n".join("- " + _format_item(v) for v in value)
    return " " + json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _format_item(item: Any) -> str:
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        details: list[str] = []
        if isinstance(item.get("score"), int | float):
            details.append(f"score {item['score']:.2f}")
        for side in ("subject", "object"):
            entity = item.get(side)
            if isinstance(entity, dict):
                props = _entity_props(entity)
                if props:
                    details.append(f"{_entity_name(entity)}: {props}")
        text = " ".join(item["text"].split())
        return f"{text} ({'; '.join(details)})" if details else text
    if isinstance(item, str):
        return " ".join(item.split())
    return json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)


def _entity_name(entity: dict[str, Any]) -> str:
    return str(entity.get("name", entity.get("label", "?")))


def _entity_props(entity: dict[str, Any]) -> str:
    parts = [
        f"{k} {v}"
        for k, v in entity.items()
        if k not in ("label", "name") and v is not None and isinstance(v, str | int | float)
    ]
    return ", ".join(parts)


_ENV = ImmutableSandboxedEnvironment(
    autoescape=False,  # prompts are plain text, not HTML
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
)
_ENV.filters["kag_format"] = format_value
_ENV.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def compile_template(source: str, what: str = "prompt_template") -> jinja2.Template:
    """Compile a template in the sandbox; syntax errors raise :class:`TemplateError`."""
    if not isinstance(source, str):
        raise TemplateError(f"{what} must be a string, got {type(source).__name__}.")
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{what} has a syntax error at line {exc.lineno}: {exc.message}") from exc


def render_template(template: jinja2.Template, variables: Mapping[str, Any]) -> str:
    """Render a compiled template with JSON-like ``variables``.

    Raises:
        UnsafeTemplateError: the template tried unsafe access (private attributes, mutation).
        TemplateError: an undefined variable or any other rendering failure.
    """
    try:
        return template.render(dict(variables))
    except SecurityError as exc:
        raise UnsafeTemplateError(f"the prompt template was refused by the sandbox: {exc}") from exc
    except jinja2.UndefinedError as exc:
        names = ", ".join(sorted(variables)) or "(none)"
        raise TemplateError(
            f"the prompt template uses an undefined value ({exc.message}); available variables: {names}."
        ) from exc
    except jinja2.TemplateError as exc:
        raise TemplateError(f"the prompt template failed to render: {exc}") from exc
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError) as exc:
        raise TemplateError(f"the prompt template failed to render: {type(exc).__name__}: {exc}") from exc


def _as_json(value: Any) -> dict[str, Any]:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return json.loads(json.dumps(dict(value), default=str))
    raise TemplateError(f"prompt inputs must be pydantic models or dicts, got {type(value).__name__}.")


def template_variables(inputs: Any) -> dict[str, Any]:
    """Template variables for a module's inputs (one model/dict, or a list of them).

    Each input's fields are top-level variables (later inputs win on a clash) and
    ``inputs`` holds the merged dict, so templates can write ``{{ query }}`` or
    loop over ``inputs.items()``. Values are JSON-only (no methods to call).
    """
    items = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
    merged: dict[str, Any] = {}
    for item in items:
        merged.update(_as_json(item))
    return {**merged, "inputs": merged}


def describe_fields(schema: dict[str, Any]) -> str:
    """A short text list of a JSON schema's top-level fields, for system prompts."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    lines = []
    for name, prop in props.items():
        kind = _type_name(prop, schema.get("$defs") or {})
        desc = prop.get("description") or ""
        need = "required" if name in required else "optional"
        lines.append(f"- {name} ({kind}, {need})" + (f": {desc}" if desc else ""))
    return "\n".join(lines)


def _type_name(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        target = defs.get(str(prop["$ref"]).rsplit("/", 1)[-1], {})
        return str(target.get("title") or "object")
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_type_name(p, defs) for p in prop[key])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type_name(prop.get('items') or {}, defs)}"
    return str(kind)


def build_messages(
    system: str,
    user: str,
    examples: Sequence[tuple[str, str]] = (),
) -> list[Message]:
    """Role messages built structurally: system, then (user, assistant) example pairs, then user."""
    messages: list[Message] = []
    if system.strip():
        messages.append(Message(role="system", content=system))
    for example_user, example_assistant in examples:
        messages.append(Message(role="user", content=example_user))
        messages.append(Message(role="assistant", content=example_assistant))
    messages.append(Message(role="user", content=user))
    return messages
