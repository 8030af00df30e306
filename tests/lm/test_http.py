"""The shared retry/backoff transport."""

from __future__ import annotations

import email.utils
import time

import pytest

from kag.errors import ConfigError, LanguageModelError
from kag.lm._http import (
    JSONHTTPClient,
    backoff_delay,
    parse_retry_after,
    public_headers,
    safe_url,
)
from tests.helpers.http_server import LocalHTTPServer, Reply


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        ("0.5", 0.5),
        (" 2 ", 2.0),
        ("0", 0.0),
        (None, None),
        ("", None),
        ("soon", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    now = time.time()
    header = email.utils.formatdate(now + 30, usegmt=True)
    delay = parse_retry_after(header, now=now)
    assert delay is not None and 28 <= delay <= 31
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after(past, now=now) == 0.0


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    for attempt in range(5):
        step = 0.5 * 2**attempt
        for _ in range(20):
            delay = backoff_delay(attempt, 0.5, 100.0)
            assert step / 2 <= delay <= step
    assert backoff_delay(20, 0.5, 10.0) <= 10.0
    assert backoff_delay(0, 0.5, 10.0, retry_after=3.0) == 3.0
    assert backoff_delay(0, 0.5, 10.0, retry_after=3600.0) == 10.0  # capped


def test_safe_url_and_public_headers() -> None:
    assert safe_url("http://u:p@host:1/v1") == "http://host:1/v1"
    assert safe_url("http://host/v1") == "http://host/v1"
    headers = {"X-Team": "a", "Authorization": "b", "api-key": "c", "X-Auth-Token": "d"}
    assert public_headers(headers) == {"X-Team": "a"}


async def test_retry_after_is_capped(server: LocalHTTPServer) -> None:
    server.queue("POST", "/x", [Reply(429, headers={"Retry-After": "120"}), Reply.json({"a": 1})])
    http = JSONHTTPClient(
        provider="test",
        base_url=server.url,
        timeout=5,
        max_retries=1,
        backoff_base=0.001,
        max_backoff=0.05,
    )
    start = time.monotonic()
    assert await http.post_json("/x", {"q": 1}) == {"a": 1}
    assert time.monotonic() - start < 2
    await http.aclose()
    assert [r.json() for r in server.requests] == [{"q": 1}, {"q": 1}]


async def test_non_retryable_5xx_fails_at_once(server: LocalHTTPServer) -> None:
    server.route("POST", "/x", lambda _: Reply(501, "not implemented"))
    http = JSONHTTPClient(provider="test", base_url=server.url, timeout=5, max_retries=3, backoff_base=0.001)
    with pytest.raises(LanguageModelError, match="HTTP 501: not implemented"):
        await http.post_json("x", {})
    await http.aclose()
    assert len(server.requests) == 1


async def test_zero_retries_means_one_attempt(server: LocalHTTPServer) -> None:
    server.route("POST", "/x", lambda _: Reply(503))
    http = JSONHTTPClient(provider="test", base_url=server.url, timeout=5, max_retries=0, backoff_base=0.001)
    with pytest.raises(LanguageModelError, match=r"1 attempt\(s\)"):
        await http.post_json("x", {})
    await http.aclose()
    assert len(server.requests) == 1


async def test_unsupported_scheme_is_not_retried() -> None:
    http = JSONHTTPClient(
        provider="test",
        base_url="gopher://127.0.0.1:1",
        timeout=1,
        max_retries=3,
        backoff_base=0.001,
    )
    with pytest.raises(LanguageModelError, match="Check base_url"):
        await http.post_json("x", {})
    await http.aclose()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_base": -0.1},
        {"client": object()},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    params: dict[str, object] = {
        "provider": "t",
        "base_url": "http://x",
        "timeout": 1,
        "max_retries": 1,
        "backoff_base": 0.1,
    }
    params.update(kwargs)
    with pytest.raises(ConfigError):
        JSONHTTPClient(**params)  # type: ignore[arg-type]
