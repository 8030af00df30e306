"""The language-model contract and the validation + repair loop shared by every client.

A language model in kag only ever answers with one JSON object that matches a
schema. :class:`BaseLanguageModel` owns everything around the raw completion:
schema preparation, JSON parsing, validation (pydantic model, dict JSON schema,
caller hook) and a bounded repair dialogue when the answer is invalid.
Subclasses implement :meth:`BaseLanguageModel._complete` only.
"""

from __future__ import annotations

import abc
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, NotRequired, Protocol, Self, TypedDict, runtime_checkable

import pydantic

from kag.datamodels.schema import provider_schema
from kag.errors import GenerationError, InvalidInputError, InvalidOutputError
from kag.lm.jsonschema_check import fill_defaults, validate_json_schema
from kag.validation import check_int, loads_json

__all__ = [
    "BaseLanguageModel",
    "InvalidOutputError",
    "LanguageModel",
    "Message",
    "ModelCapabilities",
    "capabilities_of",
    "check_messages",
    "parse_json_object",
    "resolve_schema",
]

Role = Literal["system", "user", "assistant"]
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant"})
# OpenAI's rule for response_format names; applied to every client so configs stay portable.
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*(.*?)\s*```$", re.DOTALL)
_RAW_PREVIEW = 600
log = logging.getLogger(__name__)
MAX_OUTPUT_CHARS = 1_000_000  # a structured answer longer than this is refused (and not parsed)
REPAIR_ECHO_CHARS = 4_000  # how much of an invalid answer the repair turn shows the model again


class Message(TypedDict):
    """One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.

    Two optional keys carry structure beside the text, for models that read data rather than prose
    (providers are sent ``role`` and ``content`` only):

    * ``repair``: ``True`` on the user turn the repair loop adds after an invalid answer (its
      ``content`` says what was wrong);
    * ``data``: what the text renders, as JSON-like data: a program puts the request's fields here
      (``{"question": ...}``) and the retrieved context (``{"facts": [...], "passages": [...]}``), so a
      model never has to parse a header back out of the prompt.
    """

    role: Role
    content: str
    repair: NotRequired[bool]
    data: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class ModelCapabilities:
    """What a language model guarantees and wants, read by programs instead of probing its class.

    Args:
        grammar: every token is sampled under the schema's grammar, so a narrower per-call schema
            (an endpoint-typed search, enums of the question's spans, of the shown demos' choices)
            is *enforced*, not only validated: programs send such schemas to it.
        full_search_language: under a grammar, the model is also given the extended triplet
            language (field conditions, ordering); a small model fills those badly.
        narrow_to_demos: the model writes more reliably when each call's schema is narrowed to the
            patterns of the demos it is shown (a small model picking among its nearest worked
            examples); needs ``grammar``.
        scope_gate: programs hold the model to the schema's boundary by default (a question no
            relation can answer gets the abstention search without a model call): a model that
            would otherwise pick the nearest demo's relation for any question.
        context_window: the tokens the model reads at once (prompt and answer), where that is
            small enough to shape prompts: a retriever then describes in full only the labels and
            relations a question touches (``None``: large enough not to matter).
    """

    grammar: bool = False
    full_search_language: bool = False
    narrow_to_demos: bool = False
    scope_gate: bool = False
    context_window: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The capabilities as JSON (for ``kag schema``, logs and docs)."""
        return {
            "grammar": self.grammar,
            "full_search_language": self.full_search_language,
            "narrow_to_demos": self.narrow_to_demos,
            "scope_gate": self.scope_gate,
            "context_window": self.context_window,
        }


NO_CAPABILITIES = ModelCapabilities()
"""What a model that declares nothing gets: validated JSON output, nothing narrowed, no gate."""


def capabilities_of(model: Any) -> ModelCapabilities:
    """A model's declared :class:`ModelCapabilities` (the defaults for a model that declares none)."""
    declared = getattr(model, "capabilities", None)
    return declared if isinstance(declared, ModelCapabilities) else NO_CAPABILITIES


@runtime_checkable
class LanguageModel(Protocol):
    """What kag needs from a language model: schema-constrained JSON generation.

    Implement ``name``, ``generate`` and ``get_config``; declare what the model guarantees in
    ``capabilities`` (:class:`ModelCapabilities`: grammar-constrained decoding, the full search
    language, demos narrowed, the scope gate). :class:`BaseLanguageModel` gives the validation and
    repair loop and the default capabilities (none).
    """

    @property
    def name(self) -> str:
        """A short human-readable identifier, e.g. ``"openai:gpt-4o-mini"``."""
        ...

    @property
    def capabilities(self) -> ModelCapabilities:
        """What the model guarantees and wants (see :class:`ModelCapabilities`)."""
        ...

    async def generate(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | type[pydantic.BaseModel],
        *,
        validate: Callable[[dict[str, Any]], Any] | None = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """Return one JSON object answering ``messages`` that satisfies ``schema``."""
        ...

    def get_config(self) -> dict[str, Any]:
        """Return a JSON-serializable config (no API keys, clients or callables)."""
        ...


def resolve_schema(
    schema: dict[str, Any] | type[pydantic.BaseModel],
) -> tuple[dict[str, Any], type[pydantic.BaseModel] | None]:
    """Return ``(json_schema, model_class_or_None)`` for a dict schema or a pydantic class."""
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        return schema.model_json_schema(), schema
    if isinstance(schema, dict):
        if schema.get("type", "object") != "object":
            raise InvalidInputError(
                f"The output schema must describe a JSON object (type 'object'), got type "
                f"{schema.get('type')!r}: wrap the value in an object property."
            )
        return schema, None
    raise InvalidInputError(
        f"schema must be a JSON-schema dict or a pydantic.BaseModel subclass, got {type(schema).__name__}."
    )


def parse_json_object(raw: str) -> dict[str, Any]:
    """Parse a model answer into a JSON object.

    Tolerates surrounding whitespace and one Markdown code fence (```json ... ```),
    nothing more: anything else is reported so the model can correct itself.
    Raises ``ValueError`` with a message meant to be shown to the model.
    """
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise ValueError("the answer was empty; expected a JSON object")

    try:
        value = loads_json(text, what="the answer")
    except InvalidInputError as exc:  # a ValueError already; re-raised plain, as the repair loop shows it
        raise ValueError(str(exc).rstrip(".")) from None
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
        raise ValueError(f"expected a JSON object at the top level, got {kind}")
    return value


def describe_error(exc: BaseException) -> str:
    """Render a validation error compactly, as the model should read it."""
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:10]:
            loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        more = exc.error_count() - len(parts)
        return "; ".join(parts) + (f"; ... and {more} more" if more > 0 else "")
    text = str(exc).strip()
    return text or type(exc).__name__


def _preview(raw: str) -> str:
    if len(raw) <= _RAW_PREVIEW:
        return raw
    return raw[:_RAW_PREVIEW] + f"... [truncated, {len(raw)} characters in total]"


def check_messages(messages: Sequence[Message]) -> list[Message]:
    """Checked copies of a conversation's messages: a non-empty sequence of ``{'role', 'content'}``
    dicts, each role ``system``/``user``/``assistant`` and each content a string; else
    :class:`~kag.errors.InvalidInputError` saying which message is wrong."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidInputError(
            f"messages must be a sequence of {{'role': ..., 'content': ...}} dicts, got {type(messages).__name__}."
        )
    if not messages:
        raise InvalidInputError("messages is empty: pass at least one user message.")
    checked: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidInputError(
                f"messages[{index}] must be a dict with 'role' and 'content', got {type(message).__name__}."
            )
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise InvalidInputError(f"messages[{index}] has role {role!r}; use one of 'system', 'user', 'assistant'.")
        if not isinstance(content, str):
            raise InvalidInputError(f"messages[{index}] content must be a string, got {type(content).__name__}.")
        checked.append(_copy_message(message))
    return checked


def _copy_message(message: Mapping[str, Any]) -> Message:
    """A checked copy of one message, keeping its structured keys (``repair``, ``data``)."""
    copy = Message(role=message["role"], content=message["content"])
    if message.get("repair"):
        copy["repair"] = True
    data = message.get("data")
    if data is not None:
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"a message's data must be a dict, got {type(data).__name__}.")
        copy["data"] = dict(data)
    return copy


def is_repair(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a repair turn the validation loop added (its ``repair`` key)."""
    return bool(message.get("repair"))


class BaseLanguageModel(abc.ABC):
    """Validation + repair loop around one abstract raw completion call.

    ``generate`` sends the conversation with the JSON schema, parses the answer,
    validates it and, when it is invalid, shows the model its own answer plus
    the exact error and asks again, at most ``max_repairs`` times. Transport
    failures (:class:`~kag.errors.LanguageModelError`) are never repaired.
    """

    def __init__(self, *, max_repairs: int = 2) -> None:
        check_int(max_repairs, name="max_repairs", minimum=0)
        self.max_repairs = max_repairs
        # tokens and seconds of every call (and of the last one), when the provider reports them
        self.usage: dict[str, float] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self.last_usage: dict[str, float] = {}

    def count_usage(self, prompt_tokens: Any, completion_tokens: Any, seconds: float) -> None:
        """Record one call's token counts (what the provider reported; missing counts are 0)."""

        def number(value: Any) -> float:
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        self.last_usage = {
            "prompt_tokens": number(prompt_tokens),
            "completion_tokens": number(completion_tokens),
            "seconds": float(seconds),
        }
        self.usage["calls"] += 1
        for key in ("prompt_tokens", "completion_tokens", "seconds"):
            self.usage[key] += self.last_usage[key]

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A short human-readable identifier of the model."""

    @property
    def capabilities(self) -> ModelCapabilities:
        """What the model guarantees and wants; none by default (its JSON is validated, then repaired)."""
        return NO_CAPABILITIES

    @abc.abstractmethod
    def get_config(self) -> dict[str, Any]:
        """A JSON-serializable config; never API keys, clients or callables."""

    @abc.abstractmethod
    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        """Send ``messages`` constrained by ``json_schema`` and return the raw answer text.

        Raise :class:`~kag.errors.LanguageModelError` for transport/protocol failures
        and :class:`InvalidOutputError` for an unusable answer worth repairing.
        """

    async def _fit_messages(self, messages: list[Message]) -> list[Message]:
        """The conversation to send, fitted to the model's context window (unchanged by default).

        Called once per ``generate``, before the first attempt; a local model with a
        small window overrides it to drop worked examples that do not fit.
        """
        return messages

    async def aclose(self) -> None:
        """Release network resources (nothing by default)."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def generate(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | type[pydantic.BaseModel],
        *,
        validate: Callable[[dict[str, Any]], Any] | None = None,
        schema_name: str = "output",
    ) -> dict[str, Any]:
        """Return one JSON object answering ``messages`` that satisfies ``schema``.

        Args:
            messages: the conversation; it is not modified.
            schema: a JSON-schema dict describing an object, or a pydantic model class
                (the answer is then validated by the model and returned as
                ``model_dump(mode="json")``).
            validate: optional extra check called with the parsed object; raising
                ``ValueError`` (including ``pydantic.ValidationError`` and kag's
                ``ValueError`` errors) marks the answer invalid. Its return value is ignored.
            schema_name: the name sent with the schema (``[A-Za-z0-9_-]{1,64}``).

        Raises:
            GenerationError: the answer was still invalid after ``max_repairs`` repairs.
            LanguageModelError: the endpoint failed (not retried by the repair loop).
            InvalidInputError: ``messages``, ``schema`` or ``schema_name`` is malformed.
        """
        conversation = check_messages(messages)
        if not isinstance(schema_name, str) or not _SCHEMA_NAME.fullmatch(schema_name):
            raise InvalidInputError(f"schema_name {schema_name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        json_schema, model_cls = resolve_schema(schema)
        sent_schema = provider_schema(json_schema)  # kag's own annotations never reach a provider
        conversation = await self._fit_messages(conversation)

        last_error = ""
        last_raw = ""
        for attempt in range(1 + self.max_repairs):
            started = time.perf_counter()
            self.last_usage = {}
            try:
                raw = await self._complete(list(conversation), sent_schema, schema_name)
            except InvalidOutputError as exc:
                raw, last_error = exc.raw, str(exc)
            else:
                try:
                    if len(raw) > MAX_OUTPUT_CHARS:
                        raise InvalidOutputError(
                            f"the answer is {len(raw)} characters long, over the limit of {MAX_OUTPUT_CHARS}; "
                            "give a much shorter answer"
                        )
                    result = self._validate(raw, json_schema, model_cls, validate)
                except ValueError as exc:  # pydantic.ValidationError is a ValueError
                    last_error = describe_error(exc)
                else:
                    tokens = self.last_usage
                    log.info(
                        "%s answered %r in %.3fs (attempt %d, %d chars, %d prompt + %d completion tokens)",
                        self.name,
                        schema_name,
                        time.perf_counter() - started,
                        attempt + 1,
                        len(raw),
                        tokens.get("prompt_tokens", 0),
                        tokens.get("completion_tokens", 0),
                    )
                    return result
            log.warning(
                "%s gave an invalid answer for %r (attempt %d of %d): %s",
                self.name,
                schema_name,
                attempt + 1,
                1 + self.max_repairs,
                _preview(last_error),
            )
            last_raw = raw
            if attempt < self.max_repairs:
                # only the head of an invalid answer goes back: a huge answer is not re-sent in full
                conversation.append(Message(role="assistant", content=_clip(raw)))
                conversation.append(Message(role="user", content=_repair_prompt(last_error), repair=True))

        raise GenerationError(
            f"{self.name} produced invalid output {1 + self.max_repairs} time(s) "
            f"(schema {schema_name!r}). Last error: {last_error}. Last output: "
            f"{_preview(last_raw)!r}. Simplify the schema or the prompt, raise max_repairs, "
            f"or use a stronger model.",
            output=last_raw or None,
        )

    @staticmethod
    def _validate(
        raw: str,
        json_schema: dict[str, Any],
        model_cls: type[pydantic.BaseModel] | None,
        validate: Callable[[dict[str, Any]], Any] | None,
    ) -> dict[str, Any]:
        obj = parse_json_object(raw)
        if model_cls is not None:
            obj = model_cls.model_validate(obj).model_dump(mode="json")
        else:
            obj = fill_defaults(obj, json_schema)
            validate_json_schema(obj, json_schema)
        if validate is not None:
            validate(obj)
        return obj


def _clip(raw: str, limit: int = REPAIR_ECHO_CHARS) -> str:
    return raw if len(raw) <= limit else raw[:limit] + f" [... {len(raw) - limit} more characters cut]"


def _repair_prompt(error: str) -> str:
    return (
        f"Your previous answer was invalid: {error}\n"
        "Reply with only the corrected JSON object that satisfies the schema: "
        "no explanations, no Markdown."
    )
