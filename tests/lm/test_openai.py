"""OpenAICompatibleLM against a real local HTTP server speaking chat/completions."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
from typing import Any, Literal

import httpx
import pydantic
import pytest

from kag.errors import GenerationError, LanguageModelError
from kag.lm import Message, OpenAICompatibleLM
from kag.lm.openai import strict_json_schema
from tests.helpers.http_server import LocalHTTPServer, Reply

PATH = "/v1/chat/completions"
ASK: list[Message] = [{"role": "user", "content": "Capital of France?"}]


class City(pydantic.BaseModel):
    name: str = pydantic.Field(description="The city's name")
    population: int | None = None


class Answer(pydantic.BaseModel):
    label: Literal["City", "Country"]
    city: City = pydantic.Field(description="The city")
    aliases: list[str] = []


GOOD = {"label": "City", "city": {"name": "Paris", "population": None}, "aliases": []}


def chat_reply(content: str | None, finish_reason: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
            }
        ],
    }


def ok(data: Any = GOOD, **kwargs: Any) -> Reply:
    return Reply.json(chat_reply(json.dumps(data), **kwargs))


async def test_token_usage_is_counted_and_logged(server: LocalHTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    first = chat_reply(json.dumps(GOOD))
    first["usage"] = {"prompt_tokens": 41, "completion_tokens": 9, "total_tokens": 50}
    second = chat_reply(json.dumps(GOOD))  # a server that reports no usage counts as 0
    server.queue("POST", PATH, [Reply.json(first), Reply.json(second)])
    async with make_lm(server) as lm:
        with caplog.at_level("INFO", logger="kag.lm.base"):
            await lm.generate(ASK, Answer, schema_name="answer")
            await lm.generate(ASK, Answer, schema_name="answer")
    assert lm.usage["calls"] == 2 and lm.usage["prompt_tokens"] == 41 and lm.usage["completion_tokens"] == 9
    assert lm.last_usage["prompt_tokens"] == 0 and lm.usage["seconds"] > 0
    lines = [r.getMessage() for r in caplog.records if r.name == "kag.lm.base"]
    assert "41 prompt + 9 completion tokens" in lines[0] and "0 prompt + 0 completion tokens" in lines[1]


def make_lm(server: LocalHTTPServer, **kwargs: Any) -> OpenAICompatibleLM:
    kwargs.setdefault("backoff_base", 0.001)
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatibleLM("test-model", base_url=server.url + "/v1", **kwargs)


def walk(node: Any) -> list[dict[str, Any]]:
    """Every dict nested in a schema."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(walk(value))
    return found


async def test_happy_path_request_body_and_auth(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server, api_key="sk-test", temperature=0.3) as lm:
        out = await lm.generate(ASK, Answer, schema_name="answer")
    assert out == GOOD
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    body = request.json()
    assert body["model"] == "test-model"
    assert body["messages"] == ASK
    assert body["temperature"] == 0.3
    assert "max_tokens" not in body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "answer"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == strict_json_schema(Answer.model_json_schema())


async def test_strict_schema_shape_sent_on_the_wire(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server) as lm:
        await lm.generate(ASK, Answer)
    schema = server.requests[0].json()["response_format"]["json_schema"]["schema"]
    objects = [n for n in walk(schema) if n.get("type") == "object"]
    assert len(objects) >= 2  # Answer and the nested City
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert not any("default" in n for n in walk(schema))
    # $ref with a sibling description is inlined (strict mode forbids the combination)
    assert schema["properties"]["city"]["description"] == "The city"
    assert "$ref" not in schema["properties"]["city"]


def test_strict_json_schema_leaves_input_untouched() -> None:
    original = Answer.model_json_schema()
    before = json.dumps(original, sort_keys=True)
    strict_json_schema(original)
    assert json.dumps(original, sort_keys=True) == before


async def test_non_strict_sends_schema_unchanged(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server, strict=False, max_tokens=128) as lm:
        await lm.generate(ASK, Answer)
    body = server.requests[0].json()
    assert body["response_format"]["json_schema"]["strict"] is False
    assert body["response_format"]["json_schema"]["schema"] == Answer.model_json_schema()
    assert body["max_tokens"] == 128


async def test_no_authorization_header_without_key(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [ok()])
    async with make_lm(server) as lm:
        await lm.generate(ASK, Answer)
    assert "authorization" not in server.requests[0].headers


async def test_api_key_falls_back_to_environment(server: LocalHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.queue("POST", PATH, [ok()])
    async with make_lm(server, headers={"X-Trace": "1"}) as lm:
        await lm.generate(ASK, Answer)
        assert "sk-env" not in json.dumps(lm.get_config())
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    assert server.requests[0].headers["x-trace"] == "1"


async def test_retries_429_honouring_retry_after(server: LocalHTTPServer) -> None:
    server.queue(
        "POST",
        PATH,
        [Reply.json({"error": {"message": "slow down"}}, 429, {"Retry-After": "0.3"}), ok()],
    )
    async with make_lm(server) as lm:
        start = time.monotonic()
        assert await lm.generate(ASK, Answer) == GOOD
        elapsed = time.monotonic() - start
    assert len(server.requests) == 2
    assert elapsed >= 0.3  # backoff_base alone would wait ~1 ms


async def test_retries_503_then_succeeds(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [Reply(503, "busy"), Reply(502, "bad gw"), ok()])
    async with make_lm(server) as lm:
        assert await lm.generate(ASK, Answer) == GOOD
    assert len(server.requests) == 3


async def test_gives_up_after_max_retries(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json({"error": {"message": "overloaded"}}, 500))
    async with make_lm(server, max_retries=2) as lm:
        with pytest.raises(LanguageModelError) as info:
            await lm.generate(ASK, Answer)
    assert len(server.requests) == 3
    message = str(info.value)
    assert "HTTP 500" in message and "3 attempt(s)" in message and "overloaded" in message
    assert not isinstance(info.value, GenerationError)


async def test_timeout_raises_language_model_error(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json(chat_reply("{}"), delay=3.0))
    async with make_lm(server, timeout=0.2, max_retries=1) as lm:
        start = time.monotonic()
        with pytest.raises(LanguageModelError, match=r"did not answer within 0\.2 s") as info:
            await lm.generate(ASK, Answer)
        elapsed = time.monotonic() - start
    assert "timeout=" in str(info.value)
    assert len(server.requests) == 2  # timeouts are retried, boundedly
    assert elapsed < 2.0


async def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lm = OpenAICompatibleLM("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_base=0.001)
    async with lm:
        with pytest.raises(LanguageModelError, match="Could not connect") as info:
            await lm.generate(ASK, Answer)
    assert "base_url" in str(info.value)


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_mention_the_api_key(server: LocalHTTPServer, status: int) -> None:
    server.route("POST", PATH, lambda _: Reply.json({"error": {"message": "Incorrect API key"}}, status))
    async with make_lm(server, api_key="sk-wrong") as lm:
        with pytest.raises(LanguageModelError) as info:
            await lm.generate(ASK, Answer)
    message = str(info.value)
    assert "API key" in message and "OPENAI_API_KEY" in message
    assert f"HTTP {status}" in message
    assert "sk-wrong" not in message
    assert len(server.requests) == 1  # not retried


async def test_404_mentions_base_url_and_model(server: LocalHTTPServer) -> None:
    async with OpenAICompatibleLM("ghost", base_url=server.url + "/nope", max_retries=0) as lm:
        with pytest.raises(LanguageModelError) as info:
            await lm.generate(ASK, Answer)
    message = str(info.value)
    assert "HTTP 404" in message and "base_url" in message and "'ghost'" in message


async def test_other_4xx_include_a_body_snippet(server: LocalHTTPServer) -> None:
    detail = "Invalid schema for response_format 'output': 'default' is not permitted."
    server.route("POST", PATH, lambda _: Reply.json({"error": {"message": detail}}, 400))
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError, match="HTTP 400") as info:
            await lm.generate(ASK, Answer)
    assert detail in str(info.value)
    assert len(server.requests) == 1


async def test_long_error_bodies_are_truncated(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply(422, "e" * 5000))
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError) as info:
            await lm.generate(ASK, Answer)
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(200, "<html>proxy login</html>"), "not JSON"),
        (Reply.json({"object": "list", "data": []}), r"no choices\[0\]\.message"),
        (Reply.json({"choices": []}), r"no choices\[0\]\.message"),
    ],
)
async def test_malformed_success_responses(server: LocalHTTPServer, reply: Reply, match: str) -> None:
    server.route("POST", PATH, lambda _: reply)
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError, match=match):
            await lm.generate(ASK, Answer)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("first", "error_text"),
    [
        ('{"label": "City"}', "city: Field required"),
        ('{"label": "Town", "city": {"name": "Paris"}}', "label: Input should be 'City' or"),
        ("I think the answer is Paris.", "not valid JSON"),
    ],
)
async def test_repair_loop_over_http(server: LocalHTTPServer, first: str, error_text: str) -> None:
    server.queue("POST", PATH, [Reply.json(chat_reply(first)), ok()])
    async with make_lm(server) as lm:
        assert await lm.generate(ASK, Answer) == GOOD
    assert len(server.requests) == 2
    messages = server.requests[1].json()["messages"]
    assert messages[0] == ASK[0]
    assert messages[1] == {"role": "assistant", "content": first}
    assert messages[2]["role"] == "user"
    assert error_text in messages[2]["content"]


async def test_truncated_answer_is_repaired(server: LocalHTTPServer) -> None:
    server.queue(
        "POST",
        PATH,
        [Reply.json(chat_reply('{"label": "City", "ci', finish_reason="length")), ok()],
    )
    async with make_lm(server, max_tokens=8) as lm:
        assert await lm.generate(ASK, Answer) == GOOD
    repair = server.requests[1].json()["messages"]
    assert repair[1] == {"role": "assistant", "content": '{"label": "City", "ci'}
    assert "cut off at the token limit" in repair[2]["content"]


async def test_truncated_even_if_the_prefix_parses(server: LocalHTTPServer) -> None:
    # finish_reason=length means incomplete output even when the text happens to parse
    server.queue("POST", PATH, [ok(finish_reason="length"), ok()])
    async with make_lm(server) as lm:
        await lm.generate(ASK, Answer)
    assert len(server.requests) == 2


async def test_always_invalid_raises_after_exactly_1_plus_max_repairs(
    server: LocalHTTPServer,
) -> None:
    server.route("POST", PATH, lambda _: Reply.json(chat_reply('{"label": "City"}')))
    async with make_lm(server, max_repairs=2) as lm:
        with pytest.raises(GenerationError) as info:
            await lm.generate(ASK, Answer)
    assert len(server.requests) == 3
    assert "city: Field required" in str(info.value)
    assert "openai:test-model" in str(info.value)


async def test_refusal_is_not_repaired(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: Reply.json(chat_reply(None, refusal="I can't help.")))
    async with make_lm(server) as lm:
        with pytest.raises(GenerationError, match=r'refused to answer: "I can\'t help\."'):
            await lm.generate(ASK, Answer)
    assert len(server.requests) == 1


async def test_missing_content_is_repaired(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [Reply.json(chat_reply(None)), ok()])
    async with make_lm(server) as lm:
        assert await lm.generate(ASK, Answer) == GOOD
    assert "no text content" in server.requests[1].json()["messages"][-1]["content"]


async def test_injected_client_is_used_and_left_open(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: ok())
    async with httpx.AsyncClient(headers={"X-Injected": "yes"}) as client:
        lm = make_lm(server, client=client)
        await lm.generate(ASK, Answer)
        await lm.aclose()
        assert not client.is_closed
        assert "client" not in lm.get_config()
    assert server.requests[0].headers["x-injected"] == "yes"


def test_owned_client_can_be_closed_and_reused_across_event_loops(
    server: LocalHTTPServer,
) -> None:
    server.route("POST", PATH, lambda _: ok())
    lm = make_lm(server)

    async def once() -> dict[str, Any]:
        try:
            return await lm.generate(ASK, Answer)
        finally:
            await lm.aclose()  # release sockets before the loop goes away

    assert asyncio.run(once()) == GOOD
    assert asyncio.run(once()) == GOOD  # a fresh client after aclose, on a new loop
    assert len(server.requests) == 2


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_owned_client_is_rebuilt_when_the_event_loop_changes(server: LocalHTTPServer) -> None:
    server.route("POST", PATH, lambda _: ok())
    lm = make_lm(server)
    assert asyncio.run(lm.generate(ASK, Answer)) == GOOD
    # the first client's connections belong to a closed loop; they must not be reused
    assert asyncio.run(lm.generate(ASK, Answer)) == GOOD
    asyncio.run(lm.aclose())
    gc.collect()  # surface the abandoned sockets' warnings here, where they are filtered
    assert len(server.requests) == 2


def test_config_never_contains_the_api_key(server: LocalHTTPServer) -> None:
    lm = make_lm(server, api_key="sk-top-secret", headers={"Authorization": "Bearer x"})
    config = lm.get_config()
    assert "api_key" not in config
    assert "sk-top-secret" not in json.dumps(config)
    assert config["headers"] == {}
    assert set(config) == {"type", *OpenAICompatibleLM.CONFIG_KEYS}
