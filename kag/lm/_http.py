"""Shared JSON-over-HTTP transport for the language-model clients.

One POST with a timeout, bounded retries with exponential backoff and jitter on
transient failures (429/500/502/503/504, connect/read errors and timeouts),
``Retry-After`` honoured but capped, and status codes mapped to
:class:`~kag.errors.LanguageModelError` messages that say what to fix.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import time
from collections.abc import Mapping
from typing import Any

import httpx

from kag.errors import ConfigError, LanguageModelError
from kag.validation import check_int, check_number

log = logging.getLogger(__name__)

__all__ = [
    "RETRY_STATUSES",
    "JSONHTTPClient",
    "backoff_delay",
    "check_base_url",
    "parse_retry_after",
    "public_headers",
    "safe_url",
]

RETRY_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})
DEFAULT_MAX_BACKOFF = 10.0
_SNIPPET = 500
# Transient transport failures worth another attempt; other httpx errors (bad URL,
# unsupported protocol...) will fail identically every time.
_RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.ConnectError,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


def safe_url(url: str) -> str:
    """``url`` without user:password, fit for messages and configs."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return url
    if parsed.userinfo:
        return str(parsed.copy_with(username=None, password=None))
    return url


# Header names that may carry secrets; they are used but never put in a config.
_SECRET_HINTS = ("auth", "key", "token", "secret", "cookie", "password", "credential")


def public_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The headers safe to serialize: anything that looks like a credential is dropped."""
    return {k: v for k, v in (headers or {}).items() if not any(hint in k.lower() for hint in _SECRET_HINTS)}


def check_base_url(base_url: str) -> str:
    """Validate an ``http(s)://`` base URL and return it without a trailing slash."""
    if not isinstance(base_url, str):
        raise ConfigError(f"base_url must be a string, got {type(base_url).__name__}.")
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"base_url {safe_url(base_url)!r} is not a valid URL: {exc}.") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"base_url {safe_url(base_url)!r} must be an http:// or https:// URL with a host.")
    return base_url.rstrip("/")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or HTTP date), else None."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None = None) -> float:
    """Delay before retry number ``attempt`` (0-based).

    A server-given ``Retry-After`` wins but is capped at ``cap`` so a misbehaving
    server cannot stall the caller; otherwise exponential backoff with jitter
    (between half and the full step) so concurrent clients do not retry in lockstep.
    """
    if retry_after is not None:
        return min(retry_after, cap)
    step = min(cap, base * (2.0**attempt))
    return step * random.uniform(0.5, 1.0)


def _error_detail(response: httpx.Response) -> str:
    """The server's error message when it sends a JSON error, else a body snippet."""
    text = response.text
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and "error" in data:
        err = data["error"]
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
    text = " ".join(text.split())
    if len(text) > _SNIPPET:
        text = text[:_SNIPPET] + "..."
    return text or "(empty body)"


class JSONHTTPClient:
    """POST JSON, get JSON, with retries; owns a lazily created ``httpx.AsyncClient``.

    An injected ``client`` is used as is and never closed here (its owner closes it).
    An owned client is bound to the event loop that created it; if the caller
    moves to another loop (e.g. successive ``asyncio.run``), a fresh one is made.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        timeout: float,
        max_retries: int,
        backoff_base: float,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        auth_hint: str = "check the credentials",
        not_found_hint: str = "check base_url",
    ) -> None:
        check_number(timeout, name="timeout (seconds)", minimum=0, exclusive_minimum=True)
        check_int(max_retries, name="max_retries", minimum=0)
        if not isinstance(backoff_base, int | float) or backoff_base < 0:
            raise ConfigError(f"backoff_base must be >= 0 seconds, got {backoff_base!r}.")
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise ConfigError(f"client must be an httpx.AsyncClient, got {type(client).__name__}.")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff_base = float(backoff_base)
        self.max_backoff = float(max_backoff)
        self.headers = dict(headers or {})
        self.auth_hint = auth_hint
        self.not_found_hint = not_found_hint
        self._injected = client
        self._owned: httpx.AsyncClient | None = None
        self._owned_loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        if self._owned is None or self._owned.is_closed or self._owned_loop is not loop:
            # Connections of a client made on another (likely closed) loop are unusable.
            self._owned = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)))
            self._owned_loop = loop
        return self._owned

    async def aclose(self) -> None:
        """Close the owned client, if any; an injected client is left to its owner."""
        owned, loop = self._owned, self._owned_loop
        self._owned, self._owned_loop = None, None
        if owned is None or owned.is_closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            await owned.aclose()

    async def post_json(self, path: str, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None) -> Any:
        """POST ``body`` to ``base_url + path`` and return the decoded JSON response."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        shown = safe_url(url)
        request_headers = {**self.headers, **(headers or {})}
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0))
        attempts = self.max_retries + 1
        client = self._client()
        for attempt in range(attempts):
            last_try = attempt == attempts - 1
            try:
                response = await client.post(url, json=body, headers=request_headers, timeout=timeout)
            except _RETRY_EXCEPTIONS as exc:
                if last_try:
                    raise self._transport_error(exc, shown, attempts) from exc
                delay = backoff_delay(attempt, self.backoff_base, self.max_backoff)
                log.warning(
                    "%s request to %s failed (%s); retry %d in %.2fs",
                    self.provider,
                    shown,
                    type(exc).__name__,
                    attempt + 1,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise LanguageModelError(
                    f"{self.provider} request to {shown} failed: {type(exc).__name__}: {exc}. Check base_url."
                ) from exc

            status = response.status_code
            if status in RETRY_STATUSES and not last_try:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                delay = backoff_delay(attempt, self.backoff_base, self.max_backoff, retry_after)
                log.warning(
                    "%s answered HTTP %d from %s; retry %d in %.2fs", self.provider, status, shown, attempt + 1, delay
                )
                await asyncio.sleep(delay)
                continue
            if status >= 400:
                raise self._status_error(response, shown, attempt + 1)
            try:
                return response.json()
            except ValueError as exc:
                raise LanguageModelError(
                    f"{self.provider} at {shown} answered HTTP {status} with a body that is "
                    f"not JSON: {_error_detail(response)!r}. Check that base_url points at the "
                    "API (not a web page or proxy)."
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _transport_error(self, exc: Exception, url: str, attempts: int) -> LanguageModelError:
        tries = f"{attempts} attempt(s)"
        if isinstance(exc, httpx.TimeoutException):
            return LanguageModelError(
                f"{self.provider} at {url} did not answer within {self.timeout:g} s "
                f"({tries}, {type(exc).__name__}). Increase timeout= or check that the server "
                "is not overloaded."
            )
        if isinstance(exc, httpx.ConnectError):
            return LanguageModelError(
                f"Could not connect to {self.provider} at {url} ({tries}): {exc}. "
                "Is the server running? Check base_url."
            )
        return LanguageModelError(f"{self.provider} at {url} failed ({tries}): {type(exc).__name__}: {exc}.")

    def _status_error(self, response: httpx.Response, url: str, attempts: int) -> LanguageModelError:
        status = response.status_code
        detail = _error_detail(response)
        if status in (401, 403):
            return LanguageModelError(
                f"{self.provider} at {url} refused the request (HTTP {status}): {detail}. {self.auth_hint}."
            )
        if status == 404:
            return LanguageModelError(f"{self.provider} at {url} answered HTTP 404: {detail}. {self.not_found_hint}.")
        if status in RETRY_STATUSES:
            return LanguageModelError(
                f"{self.provider} at {url} kept failing with HTTP {status} after "
                f"{attempts} attempt(s): {detail}. Wait and retry later, or raise max_retries."
            )
        if status < 500:
            return LanguageModelError(
                f"{self.provider} at {url} rejected the request (HTTP {status}): {detail}. "
                "Check the model name, the schema and the request options."
            )
        return LanguageModelError(f"{self.provider} at {url} failed with HTTP {status}: {detail}.")
