"""OllamaLM against a real local HTTP server speaking /api/chat."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kag.errors import ConfigError, GenerationError, LanguageModelError
from kag.lm import Message, OllamaLM, language_model_from_config
from tests.helpers.http_server import LocalHTTPServer, Reply

PATH = "/api/chat"
ASK: list[Message] = [
    {"role": "system", "content": "You extract entities."},
    {"role": "user", "content": "Paris is the capital of France."},
]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["City", "Country"]},
        "name": {"type": "string"},
    },
    "required": ["label", "name"],
    "additionalProperties": False,
}
GOOD = {"label": "City", "name": "Paris"}


def ollama_reply(content: str, done_reason: str = "stop") -> dict[str, Any]:
    return {
        "model": "llama-test",
        "created_at": "2024-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": done_reason,
    }


def ok(data: Any = GOOD, **kwargs: Any) -> Reply:
    return Reply.json(ollama_reply(json.dumps(data), **kwargs))


def make_lm(server: LocalHTTPServer, **kwargs: Any) -> OllamaLM:
    kwargs.setdefault("backoff_base", 0.001)
    kwargs.setdefault("timeout", 5.0)
    return OllamaLM("llama-test", base_url=server.url, **kwargs)


async def test_happy_path_request_body(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server, temperature=0.2) as lm:
        assert await lm.generate(ASK, SCHEMA) == GOOD
    (request,) = server.requests
    body = request.json()
    assert body == {
        "model": "llama-test",
        "messages": ASK,
        "stream": False,
        "format": SCHEMA,
        "options": {"temperature": 0.2},
    }
    assert "authorization" not in request.headers


async def test_options_and_keep_alive_are_sent(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    lm = make_lm(server, options={"num_ctx": 8192, "seed": 7}, keep_alive="10m")
    async with lm:
        await lm.generate(ASK, SCHEMA)
    body = server.requests[0].json()
    assert body["options"] == {"temperature": 0.0, "num_ctx": 8192, "seed": 7}
    assert body["keep_alive"] == "10m"


async def test_options_override_temperature(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server, temperature=0.9, options={"temperature": 0.1}) as lm:
        await lm.generate(ASK, SCHEMA)
    assert server.requests[0].json()["options"]["temperature"] == 0.1


async def test_retries_503_then_succeeds(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [Reply(503, "loading model"), Reply(504), ok()])
    async with make_lm(server) as lm:
        assert await lm.generate(ASK, SCHEMA) == GOOD
    assert len(server.requests) == 3


async def test_retries_429_honouring_retry_after(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [Reply(429, headers={"Retry-After": "0.25"}), ok()])
    async with make_lm(server) as lm:
        start = time.monotonic()
        await lm.generate(ASK, SCHEMA)
        assert time.monotonic() - start >= 0.25
    assert len(server.requests) == 2


async def test_gives_up_after_max_retries(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json({"error": "server busy"}, 503))
    async with make_lm(server, max_retries=3) as lm:
        with pytest.raises(LanguageModelError, match=r"HTTP 503 after 4 attempt\(s\): server busy"):
            await lm.generate(ASK, SCHEMA)
    assert len(server.requests) == 4


async def test_model_not_found_suggests_pulling_it(server: LocalHTTPServer) -> None:
    server.route(
        "POST",
        PATH,
        lambda _: Reply.json({"error": "model 'llama-test' not found, try pulling it first"}, 404),
    )
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError) as info:
            await lm.generate(ASK, SCHEMA)
    message = str(info.value)
    assert "not found, try pulling it first" in message
    assert "ollama pull llama-test" in message and "base_url" in message
    assert len(server.requests) == 1


async def test_timeout_raises_language_model_error(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json(ollama_reply("{}"), delay=3.0))
    async with make_lm(server, timeout=0.2, max_retries=0) as lm:
        with pytest.raises(LanguageModelError, match="did not answer within"):
            await lm.generate(ASK, SCHEMA)
    assert len(server.requests) == 1


async def test_error_field_in_a_200_response(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json({"error": "unexpected EOF"}))
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError, match="unexpected EOF"):
            await lm.generate(ASK, SCHEMA)


@pytest.mark.parametrize(
    ("first", "error_text"),
    [
        ('{"label": "City"}', "missing required property 'name'"),
        ('{"label": "Village", "name": "Paris"}', '"Village" is not one of'),
        ("{not json", "not valid JSON"),
    ],
)
async def test_repair_loop_over_http(server: LocalHTTPServer, first: str, error_text: str) -> None:
    server.queue("POST", PATH, [Reply.json(ollama_reply(first)), ok()])
    async with make_lm(server) as lm:
        assert await lm.generate(ASK, SCHEMA) == GOOD
    messages = server.requests[1].json()["messages"]
    assert messages[:2] == ASK
    assert messages[2] == {"role": "assistant", "content": first}
    assert error_text in messages[3]["content"]


async def test_truncation_is_repaired(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [Reply.json(ollama_reply('{"label": "Ci', done_reason="length")), ok()])
    async with make_lm(server, options={"num_predict": 5}) as lm:
        assert await lm.generate(ASK, SCHEMA) == GOOD
    assert "done_reason 'length'" in server.requests[1].json()["messages"][-1]["content"]


async def test_always_invalid_raises_after_exactly_1_plus_max_repairs(
    server: LocalHTTPServer,
) -> None:
    server.route("POST", PATH, lambda _: Reply.json(ollama_reply("[]")))
    async with make_lm(server, max_repairs=1) as lm:
        with pytest.raises(GenerationError, match="expected a JSON object at the top level"):
            await lm.generate(ASK, SCHEMA)
    assert len(server.requests) == 2


def test_config_round_trip_and_validation() -> None:
    lm = OllamaLM("qwen2.5:7b", base_url="http://127.0.0.1:11434/", timeout=30)
    config = lm.get_config()
    assert config["base_url"] == "http://127.0.0.1:11434"
    assert language_model_from_config(config).get_config() == config
    with pytest.raises(ConfigError):
        OllamaLM("")
    with pytest.raises(ConfigError):
        OllamaLM("m", options="num_ctx=4")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        OllamaLM("m", base_url="127.0.0.1:11434")
