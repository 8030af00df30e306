"""A client for OpenAI-compatible ``/chat/completions`` endpoints with structured outputs.

The same wire format is served by OpenAI, vLLM, llama.cpp's ``llama-server``,
LM Studio and most gateways, so one client covers them all via ``base_url``.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from kag.errors import ConfigError, GenerationError, LanguageModelError
from kag.lm._http import JSONHTTPClient, check_base_url, public_headers, safe_url
from kag.lm.base import BaseLanguageModel, InvalidOutputError, Message
from kag.validation import check_int, check_number

__all__ = ["OpenAICompatibleLM", "strict_json_schema"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``schema`` shaped for OpenAI strict structured outputs.

    Strict mode demands ``additionalProperties: false`` and every property listed in
    ``required`` on each object, and rejects ``default``. Pydantic schemas satisfy
    none of these, so they are rewritten here; optional fields become required but
    keep their nullable ``anyOf`` form. ``$ref`` nodes with sibling keywords
    (pydantic adds descriptions next to them) are inlined, as strict mode forbids that.
    """
    root = copy.deepcopy(dict(schema))
    return _strictify(root, root)


def _resolve_local(ref: str, root: Mapping[str, Any]) -> Any:
    node: Any = root
    if not ref.startswith("#/"):
        return None
    for part in ref[2:].split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _strictify(node: Any, root: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        target = _resolve_local(ref, root)
        if isinstance(target, dict):
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**copy.deepcopy(target), **siblings}
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        rest = {k: v for k, v in node.items() if k != "allOf"}
        node = {**all_of[0], **rest}
        return _strictify(node, root)
    node.pop("default", None)

    for defs_key in ("$defs", "definitions"):
        defs = node.get(defs_key)
        if isinstance(defs, dict):
            node[defs_key] = {name: _strictify(sub, root) for name, sub in defs.items()}
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        props = properties if isinstance(properties, dict) else {}
        node["properties"] = {name: _strictify(sub, root) for name, sub in props.items()}
        node["required"] = list(props)
        node.setdefault("additionalProperties", False)
    if isinstance(node.get("items"), dict):
        node["items"] = _strictify(node["items"], root)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strictify(sub, root) for sub in node[key]]
    return node


def _text_content(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers return content parts
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


class OpenAICompatibleLM(BaseLanguageModel):
    """Structured JSON generation through an OpenAI-compatible chat completions API.

    Args:
        model: the model name as the server knows it (``"gpt-4o-mini"``, a vLLM model id...).
        base_url: the API root, ending before ``/chat/completions``.
        api_key: bearer token; defaults to ``$OPENAI_API_KEY``; may be absent for
            local servers, in which case no ``Authorization`` header is sent.
        temperature: sampling temperature.
        max_tokens: cap on generated tokens (``None``: the server's default).
        timeout: seconds per HTTP attempt.
        max_retries: extra attempts on 429/5xx/connection errors/timeouts.
        max_repairs: how many times an invalid answer is sent back for correction.
        strict: request strict schema adherence (the schema is rewritten to the
            strict subset, see :func:`strict_json_schema`).
        headers: extra HTTP headers; credential-like ones are never serialized.
        client: an ``httpx.AsyncClient`` to use (its owner closes it).
        backoff_base: first retry delay in seconds, doubled per retry, with jitter.
    """

    CONFIG_KEYS = frozenset(
        {
            "model",
            "base_url",
            "temperature",
            "max_tokens",
            "timeout",
            "max_retries",
            "max_repairs",
            "strict",
            "headers",
            "backoff_base",
        }
    )

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_repairs: int = 2,
        strict: bool = True,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        backoff_base: float = 0.5,
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty string such as 'gpt-4o-mini'.")
        check_number(temperature, name="temperature")
        if max_tokens is not None:
            check_int(max_tokens, name="max_tokens (or None)")
        self.model = model
        self.base_url = check_base_url(base_url)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.strict = bool(strict)
        self.headers = dict(headers or {})
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._api_key = key or None  # private: never in config, repr or messages
        self._http = JSONHTTPClient(
            provider=f"OpenAI-compatible endpoint ({self.model})",
            base_url=self.base_url,
            timeout=timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            headers=self.headers,
            client=client,
            auth_hint=(
                "Check the API key (api_key= or the OPENAI_API_KEY environment variable) and that it may use this model"
            ),
            not_found_hint=(
                f"Check base_url ({safe_url(self.base_url)}, usually ending in /v1) and the model name ({self.model!r})"
            ),
        )

    @property
    def name(self) -> str:
        """``"openai:<model>"``."""
        return f"openai:{self.model}"

    def get_config(self) -> dict[str, Any]:
        """Settings to rebuild this client with ``language_model_from_config`` (no secrets)."""
        return {
            "type": "openai",
            "model": self.model,
            "base_url": safe_url(self.base_url),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self._http.timeout,
            "max_retries": self._http.max_retries,
            "max_repairs": self.max_repairs,
            "strict": self.strict,
            "headers": public_headers(self.headers),
            "backoff_base": self._http.backoff_base,
        }

    def __repr__(self) -> str:
        return f"OpenAICompatibleLM(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this object created (an injected one is left open)."""
        await self._http.aclose()

    async def chat(
        self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """One free chat completion: the assistant message (``choices[0].message``) as the server sent it.

        ``messages`` go out as given (``tool`` results and assistant ``tool_calls`` included);
        ``tools`` (OpenAI function tools) are declared with ``tool_choice: "auto"``, and without
        them the model must answer in text. No JSON schema is asked for and nothing is repaired:
        read ``content`` and ``tool_calls`` yourself. The request uses this client's connection,
        retries, credentials and token accounting, as :meth:`generate` does.

        Raises:
            LanguageModelError: the endpoint failed, or its answer has no ``choices[0].message`` object.
        """
        body: dict[str, Any] = {"messages": [dict(m) for m in messages]}
        if tools:
            body["tools"] = [dict(t) for t in tools]
            body["tool_choice"] = "auto"
        _, message = self._message(await self._post_chat(body), "with tool calling")
        return message

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        schema = strict_json_schema(json_schema) if self.strict else json_schema
        body: dict[str, Any] = {
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": self.strict},
            },
        }
        return self._read_answer(await self._post_chat(body))

    async def _post_chat(self, body: dict[str, Any]) -> Any:
        """POST ``chat/completions`` with the model, sampling settings and key added; usage counted."""
        body = {"model": self.model, **body, "temperature": self.temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        started = time.perf_counter()
        data = await self._http.post_json("chat/completions", body, headers=headers)
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        self.count_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), time.perf_counter() - started)
        return data

    def _message(self, data: Any, api: str = "") -> tuple[Any, dict[str, Any]]:
        """``(choices[0], choices[0].message)`` of a response, or ``LanguageModelError`` saying what is missing."""
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            detail = data.get("error") if isinstance(data, dict) else None
            raise LanguageModelError(
                f"{self.name} returned an unexpected response (no choices[0].message)"
                + (f": {detail}" if detail else "")
                + f". Check that base_url serves the OpenAI chat completions API{' ' + api if api else ''}."
            ) from None
        if not isinstance(message, dict):
            raise LanguageModelError(f"{self.name} returned a non-object choices[0].message.")
        return choice, message

    def _read_answer(self, data: Any) -> str:
        choice, message = self._message(data)
        refusal = message.get("refusal")
        if refusal:
            # A refusal is a policy decision; asking again rarely changes it.
            raise GenerationError(f"{self.name} refused to answer: {refusal!r}. Rephrase the request.")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        if finish == "content_filter":
            raise GenerationError(f"{self.name} stopped because of its content filter. Rephrase the request.")
        content = _text_content(message.get("content"))
        if finish == "length":
            limit = f" (max_tokens={self.max_tokens})" if self.max_tokens else ""
            raise InvalidOutputError(
                f"the answer was cut off at the token limit{limit} (finish_reason 'length'), "
                "so the JSON is incomplete; give a shorter answer",
                raw=content or "",
            )
        if content is None:
            raise InvalidOutputError("the answer had no text content; expected a JSON object")
        return content
