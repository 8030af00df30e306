"""A client for a local (or remote) Ollama server's ``/api/chat`` with a JSON-schema format."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from kag.errors import ConfigError, LanguageModelError
from kag.lm._http import JSONHTTPClient, check_base_url, safe_url
from kag.lm.base import BaseLanguageModel, InvalidOutputError, Message
from kag.validation import check_number

__all__ = ["OllamaLM"]

DEFAULT_OLLAMA_BASE_URL = "http://127.0.0.1:11434"


class OllamaLM(BaseLanguageModel):
    """Structured JSON generation through Ollama's chat API (``format`` = the JSON schema).

    Args:
        model: a pulled model tag, e.g. ``"llama3.1:8b"``.
        base_url: the server root (``/api/chat`` is appended).
        temperature: sampling temperature (sent in ``options``).
        timeout: seconds per HTTP attempt; local models can be slow to load.
        max_retries: extra attempts on 429/5xx/connection errors/timeouts.
        max_repairs: how many times an invalid answer is sent back for correction.
        options: extra Ollama ``options`` (``num_ctx``, ``num_predict``, ``seed``...);
            they override ``temperature`` when both set it.
        client: an ``httpx.AsyncClient`` to use (its owner closes it).
        keep_alive: how long the server keeps the model loaded (``"5m"``, seconds, -1).
        backoff_base: first retry delay in seconds, doubled per retry, with jitter.
    """

    CONFIG_KEYS = frozenset(
        {
            "model",
            "base_url",
            "temperature",
            "timeout",
            "max_retries",
            "max_repairs",
            "options",
            "keep_alive",
            "backoff_base",
        }
    )

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_OLLAMA_BASE_URL,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 3,
        max_repairs: int = 2,
        options: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
        keep_alive: str | float | None = None,
        backoff_base: float = 0.5,
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty string such as 'llama3.1:8b'.")
        check_number(temperature, name="temperature")
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"options must be a dict, got {type(options).__name__}.")
        if keep_alive is not None and (isinstance(keep_alive, bool) or not isinstance(keep_alive, str | int | float)):
            raise ConfigError(f"keep_alive must be a duration string or seconds, got {keep_alive!r}.")
        self.model = model
        self.base_url = check_base_url(base_url)
        self.temperature = float(temperature)
        self.options = dict(options or {})
        self.keep_alive = keep_alive
        self._http = JSONHTTPClient(
            provider=f"Ollama ({self.model})",
            base_url=self.base_url,
            timeout=timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            client=client,
            auth_hint="Check the credentials expected by the proxy in front of Ollama",
            not_found_hint=(
                f"Check base_url ({safe_url(self.base_url)}) and that the model is pulled (`ollama pull {self.model}`)"
            ),
        )

    @property
    def name(self) -> str:
        """``"ollama:<model>"``."""
        return f"ollama:{self.model}"

    def get_config(self) -> dict[str, Any]:
        """Settings to rebuild this client with ``language_model_from_config``."""
        return {
            "type": "ollama",
            "model": self.model,
            "base_url": safe_url(self.base_url),
            "temperature": self.temperature,
            "timeout": self._http.timeout,
            "max_retries": self._http.max_retries,
            "max_repairs": self.max_repairs,
            "options": dict(self.options),
            "keep_alive": self.keep_alive,
            "backoff_base": self._http.backoff_base,
        }

    def __repr__(self) -> str:
        return f"OllamaLM(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this object created (an injected one is left open)."""
        await self._http.aclose()

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        # Ollama takes the schema itself as `format`; it has no notion of a schema name.
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "stream": False,
            "format": json_schema,
            "options": {"temperature": self.temperature, **self.options},
        }
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        started = time.perf_counter()
        data = await self._http.post_json("api/chat", body)
        if not isinstance(data, dict):
            raise LanguageModelError(f"{self.name} returned a non-object response.")
        self.count_usage(data.get("prompt_eval_count"), data.get("eval_count"), time.perf_counter() - started)
        if data.get("error"):
            raise LanguageModelError(f"{self.name} reported an error: {data['error']}.")
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict):
            raise LanguageModelError(
                f"{self.name} returned an unexpected response (no message). "
                "Check that base_url points at an Ollama server."
            )
        if data.get("done_reason") == "length":
            raise InvalidOutputError(
                "the answer was cut off at the token limit (done_reason 'length'), "
                "so the JSON is incomplete; give a shorter answer",
                raw=content if isinstance(content, str) else "",
            )
        if not isinstance(content, str):
            raise InvalidOutputError("the answer had no text content; expected a JSON object")
        return content
