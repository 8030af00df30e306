"""The library logs through ``logging`` (model calls, invalid answers, retries) and prints nothing."""

from __future__ import annotations

import logging

import pytest

from kag.errors import GenerationError
from kag.lm import ScriptedLM
from kag.lm.base import MAX_OUTPUT_CHARS, REPAIR_ECHO_CHARS
from kag.lm.openai import OpenAICompatibleLM
from tests.helpers.http_server import LocalHTTPServer, Reply

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def test_a_model_call_is_logged_with_its_latency(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    lm = ScriptedLM(['{"oops": 1}', '{"answer": "Paris"}'])
    with caplog.at_level(logging.INFO, logger="kag.lm.base"):
        out = await lm.generate([{"role": "user", "content": "q"}], SCHEMA)
    assert out == {"answer": "Paris"}
    messages = [r.getMessage() for r in caplog.records]
    assert any("invalid answer" in m and "attempt 1 of" in m for m in messages)
    assert any("answered 'output' in" in m and "attempt 2" in m for m in messages)
    assert capsys.readouterr() == ("", "")  # nothing printed


async def test_a_huge_invalid_answer_is_not_echoed_back_in_full() -> None:
    huge = '{"answer": ' + "1" * (MAX_OUTPUT_CHARS + 10) + "}"
    lm = ScriptedLM([huge, '{"answer": "ok"}'])
    assert await lm.generate([{"role": "user", "content": "q"}], SCHEMA) == {"answer": "ok"}
    repair_turn = lm.calls[1]["messages"]
    echoed = [m["content"] for m in repair_turn if m["role"] == "assistant"]
    assert echoed and len(echoed[0]) < REPAIR_ECHO_CHARS + 100
    assert "over the limit" in repair_turn[-1]["content"]


async def test_an_oversized_answer_fails_after_the_repairs() -> None:
    huge = '{"answer": "' + "x" * (MAX_OUTPUT_CHARS + 1) + '"}'
    lm = ScriptedLM([huge, huge], max_repairs=1)
    with pytest.raises(GenerationError, match="over the limit"):
        await lm.generate([{"role": "user", "content": "q"}], SCHEMA)


async def test_http_retries_are_logged(local_http_server: LocalHTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    body = {"choices": [{"message": {"content": '{"answer": "Paris"}'}, "finish_reason": "stop"}]}
    local_http_server.queue(
        "POST", "/v1/chat/completions", [Reply.json({"error": "busy"}, status=503, headers={"Retry-After": "0"}), body]
    )
    lm = OpenAICompatibleLM("m", base_url=local_http_server.url + "/v1", api_key="k", backoff_base=0.0)
    with caplog.at_level(logging.WARNING, logger="kag.lm._http"):
        assert await lm.generate([{"role": "user", "content": "q"}], SCHEMA) == {"answer": "Paris"}
    assert any("HTTP 503" in r.getMessage() and "retry 1" in r.getMessage() for r in caplog.records)
