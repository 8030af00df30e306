"""Embeddings from an OpenAI-compatible ``POST /embeddings`` endpoint (OpenAI, vLLM,
LiteLLM, Ollama's ``/v1``...), over httpx.

Inputs are sent in batches of ``batch_size``; each response is re-ordered by its
``index`` field, validated (one finite vector per input, consistent dimensions)
and L2-normalized with :func:`kag.rag.embedders.check_matrix`. HTTP 408/409/429
and 5xx answers and transport errors are retried ``max_retries`` times with
bounded exponential backoff (honouring ``Retry-After``). The API key is sent as a
bearer token and never appears in messages, ``repr`` or ``get_config()``.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from kag.errors import (
    ConfigError,
    DimensionsUnknownError,
    EmbeddingError,
    EmbeddingServiceError,
    InvalidInputError,
)
from kag.rag.embedders import check_matrix

#: Native output sizes of known models (used when ``dimensions`` is not given).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
OPENAI_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_BACKOFF = 20.0
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class OpenAIEmbedder:
    """An :class:`~kag.rag.embedders.Embedder` backed by an OpenAI-compatible API.

    ``dimensions`` is sent to the API when given (models such as
    text-embedding-3-* shorten their vectors); when ``None`` it comes from
    :data:`KNOWN_DIMENSIONS` or, for other models, from the first response
    (call :meth:`ensure_dimensions` to probe before reading ``dimensions``).
    ``client`` lets callers share an ``httpx.AsyncClient`` (not closed here);
    otherwise a client is opened per ``embed`` call, which keeps the embedder
    usable from any event loop.

    ``OpenAIEmbedder(embedding_client, model="...")`` instead adapts a caller's
    already configured OpenAI SDK client, sync (``openai.OpenAI``) or async
    (``openai.AsyncOpenAI``), or any object with ``embeddings.create(model=, input=)``:
    kag sends the batches through it (its base URL, key and retries are the
    client's) and checks the vectors as above.
    """

    def __init__(
        self,
        model: Any = None,
        /,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        max_retries: int = 3,
        client: httpx.AsyncClient | None = None,
        *,
        backoff_base: float = 0.5,
        **named: Any,
    ) -> None:
        self._sdk: Any = None
        if model is not None and not isinstance(model, str):
            if not callable(getattr(getattr(model, "embeddings", None), "create", None)):
                raise ConfigError(
                    f"OpenAIEmbedder takes a model name or an OpenAI client (with embeddings.create), "
                    f"got {type(model).__name__}."
                )
            # OpenAIEmbedder(embedding_client, model="..."): the caller's SDK client comes first
            self._sdk, model = model, named.pop("model", None)
            if model is None:
                raise ConfigError("OpenAIEmbedder(client, model=...) needs the embedding model's name.")
        elif "model" in named:
            if model is not None:
                raise ConfigError("give the model name once: OpenAIEmbedder('name') or OpenAIEmbedder(model='name').")
            model = named.pop("model")
        elif model is None:
            model = "text-embedding-3-small"
        if named:
            raise ConfigError(f"OpenAIEmbedder got unexpected arguments: {', '.join(sorted(named))}.")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIEmbedder model must be a non-empty string.")
        if dimensions is not None and (
            not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1
        ):
            raise ConfigError(f"OpenAIEmbedder dimensions must be a positive int, got {dimensions!r}.")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("OpenAIEmbedder batch_size must be an int >= 1.")
        if timeout <= 0 or max_retries < 0 or backoff_base < 0:
            raise ConfigError("OpenAIEmbedder needs timeout > 0, max_retries >= 0 and backoff_base >= 0.")
        try:
            parsed = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ConfigError(f"OpenAIEmbedder base_url {base_url!r} is not a URL.") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(f"OpenAIEmbedder base_url {base_url!r} must be an http(s) URL.")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not key and parsed.host == "api.openai.com" and self._sdk is None:
            raise ConfigError(
                "OpenAIEmbedder needs an API key for api.openai.com: pass api_key=... or set OPENAI_API_KEY."
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = key or None
        self._requested_dimensions = dimensions
        self._dimensions: int | None = dimensions or KNOWN_DIMENSIONS.get(model)
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff_base = float(backoff_base)
        self._client = client

    # Embedder protocol ----------------------------------------------------------

    @property
    def dimensions(self) -> int:
        """Vector size; raises ``DimensionsUnknownError`` while unknown.

        That error is a ``ConfigError`` and an ``AttributeError`` (so ``hasattr``
        and protocol checks say "not ready" instead of raising); see
        :meth:`ensure_dimensions`.
        """
        if self._dimensions is None:
            raise DimensionsUnknownError(
                f"the dimensions of model {self.model!r} are not known yet: pass "
                "OpenAIEmbedder(dimensions=...) or await embedder.ensure_dimensions() first."
            )
        return self._dimensions

    @dimensions.setter
    def dimensions(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"dimensions must be a positive int, got {value!r}.")
        self._dimensions = value

    @property
    def name(self) -> str:
        """``openai:<model>`` plus ``:<dimensions>`` when shortened vectors were requested."""
        suffix = f":{self._requested_dimensions}" if self._requested_dimensions else ""
        return f"openai:{self.model}{suffix}"

    def get_config(self) -> dict[str, Any]:
        """Settings to recreate this embedder (the API key is never included)."""
        return {
            "type": "openai",
            "model": self.model,
            "base_url": self.base_url,
            "dimensions": self._dimensions,
            "batch_size": self.batch_size,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r}, dimensions={self._dimensions!r})"

    async def ensure_dimensions(self) -> int:
        """Return ``dimensions``, embedding one probe text if they are still unknown."""
        if self._dimensions is None:
            await self.embed(["dimension probe"])
        return self.dimensions

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns ``(len(texts), dimensions)`` normalized float32."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInputError(f"text #{i} is {type(text).__name__}, expected str.")
        if not items:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        if self._sdk is not None:
            parts = [
                await self._sdk_batch(items[start : start + self.batch_size])
                for start in range(0, len(items), self.batch_size)
            ]
            return np.concatenate(parts)
        if self._client is not None:
            return await self._embed_all(self._client, items)
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            return await self._embed_all(client, items)

    # internals ------------------------------------------------------------------

    async def _embed_all(self, client: httpx.AsyncClient, items: list[str]) -> np.ndarray:
        parts = []
        for start in range(0, len(items), self.batch_size):
            parts.append(await self._embed_batch(client, items[start : start + self.batch_size]))
        return np.concatenate(parts)

    async def _sdk_batch(self, batch: list[str]) -> np.ndarray:
        options: dict[str, Any] = {"model": self.model, "input": [t if t.strip() else " " for t in batch]}
        if self._requested_dimensions is not None:
            options["dimensions"] = self._requested_dimensions
        create = self._sdk.embeddings.create
        try:
            if asyncio.iscoroutinefunction(create):
                response = await create(**options)
            else:  # a blocking client: keep the event loop free
                response = await asyncio.to_thread(create, **options)
                if asyncio.iscoroutine(response):
                    response = await response
        except Exception as exc:  # the client's own errors (auth, rate limits) after its retries
            raise EmbeddingServiceError(
                f"the embedding client failed for model {self.model!r}: {type(exc).__name__}: {exc}"
            ) from exc
        dump = getattr(response, "model_dump", None)
        body = dump() if callable(dump) else response
        return self._parse(body, len(batch))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _embed_batch(self, client: httpx.AsyncClient, batch: list[str]) -> np.ndarray:
        # the API rejects empty strings; a single space embeds as "no content"
        payload: dict[str, Any] = {
            "model": self.model,
            "input": [t if t.strip() else " " for t in batch],
            "encoding_format": "float",
        }
        if self._requested_dimensions is not None:
            payload["dimensions"] = self._requested_dimensions
        body = await self._post(client, payload)
        return self._parse(body, len(batch))

    async def _post(self, client: httpx.AsyncClient, payload: dict[str, Any]) -> Any:
        url = f"{self.base_url}/embeddings"
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.post(url, json=payload, headers=self._headers(), timeout=self.timeout)
            except httpx.TransportError as exc:
                problem = f"transport error ({type(exc).__name__}: {exc})"
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise EmbeddingError(
                            f"{url} answered 200 with a body that is not JSON: {response.text[:200]!r}"
                        ) from exc
                snippet = response.text[:300]
                problem = f"HTTP {response.status_code}: {snippet}"
                if response.status_code not in _RETRY_STATUSES:
                    hint = " (check the API key)" if response.status_code in (401, 403) else ""
                    raise EmbeddingServiceError(f"embedding request to {url} failed with {problem}{hint}")
                retry_after = _retry_after(response.headers.get("retry-after"))
            if attempt >= self.max_retries:
                raise EmbeddingServiceError(
                    f"embedding request to {url} failed after {attempt + 1} attempt(s): {problem}"
                )
            delay = min(_MAX_BACKOFF, self.backoff_base * (2**attempt))
            delay = delay * (0.5 + random.random() / 2)  # jitter spreads concurrent retries
            if retry_after is not None:
                delay = max(delay, min(retry_after, _MAX_BACKOFF))
            attempt += 1
            await asyncio.sleep(delay)

    def _parse(self, body: Any, rows: int) -> np.ndarray:
        source = f"OpenAIEmbedder({self.model})"
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbeddingError(f"{source}: response has no 'data' list.")
        if len(data) != rows:
            raise EmbeddingError(f"{source}: sent {rows} inputs but got {len(data)} embeddings.")
        vectors: list[Any] = [None] * rows
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < rows:
                raise EmbeddingError(f"{source}: embedding #{position} has a bad index {index!r}.")
            if vectors[index] is not None:
                raise EmbeddingError(f"{source}: index {index} appears twice in the response.")
            vector = item.get("embedding") if isinstance(item, dict) else None
            if (
                not isinstance(vector, list)
                or not vector
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in vector)
            ):
                raise EmbeddingError(f"{source}: embedding #{index} is not a non-empty list of numbers.")
            vectors[index] = vector
        width = len(vectors[0])
        if any(len(v) != width for v in vectors):
            raise EmbeddingError(f"{source}: embeddings in one response have different lengths.")
        expected = self._dimensions if self._dimensions is not None else width
        raw = np.asarray(vectors, dtype=np.float64)
        if not np.isfinite(raw).all() or (np.abs(raw) > _FLOAT32_MAX).any():
            raise EmbeddingError(f"{source} returned NaN or infinite values; refusing to store them.")
        matrix = check_matrix(raw, rows, expected, source)
        self._dimensions = expected  # learned from the first response when unknown
        return matrix


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # HTTP-date form: fall back to our own backoff
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
