"""OpenAICompatibleLM.chat: free chat completions with native tools, against a real local HTTP server."""

from __future__ import annotations

from typing import Any

import pytest

from kag.errors import LanguageModelError
from kag.lm import OpenAICompatibleLM
from tests.helpers.http_server import LocalHTTPServer, Reply

PATH = "/v1/chat/completions"
TOOL = {
    "type": "function",
    "function": {"name": "search_docs", "description": "Search.", "parameters": {"type": "object", "properties": {}}},
}


def reply(message: Any, usage: dict[str, int] | None = None) -> Reply:
    data: dict[str, Any] = {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    if usage:
        data["usage"] = usage
    return Reply.json(data)


def make_lm(server: LocalHTTPServer, **kwargs: Any) -> OpenAICompatibleLM:
    kwargs.setdefault("backoff_base", 0.001)
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatibleLM("test-model", base_url=server.url + "/v1", **kwargs)


async def test_chat_declares_tools_and_returns_the_assistant_message(server: LocalHTTPServer) -> None:
    call = {"id": "call_0", "type": "function", "function": {"name": "search_docs", "arguments": '{"query": "x"}'}}
    answer = {"role": "assistant", "content": None, "tool_calls": [call]}
    server.queue("POST", PATH, [reply(answer, {"prompt_tokens": 12, "completion_tokens": 3})])
    messages = [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Find x."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "nothing"},
    ]
    async with make_lm(server, api_key="sk-chat", temperature=0.2, max_tokens=64) as lm:
        message = await lm.chat(messages, tools=[TOOL])
    assert message == answer
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-chat"
    body = request.json()
    assert body["messages"] == messages  # tool results and tool calls go out as given
    assert body["tools"] == [TOOL] and body["tool_choice"] == "auto"
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("test-model", 0.2, 64)
    assert "response_format" not in body
    assert lm.usage["calls"] == 1 and lm.usage["prompt_tokens"] == 12 and lm.usage["completion_tokens"] == 3


async def test_chat_without_tools_asks_for_text(server: LocalHTTPServer) -> None:
    server.queue("POST", PATH, [reply({"role": "assistant", "content": "Paris."})])
    async with make_lm(server) as lm:
        message = await lm.chat([{"role": "user", "content": "Capital of France?"}])
    assert message["content"] == "Paris."
    body = server.requests[0].json()
    assert "tools" not in body and "tool_choice" not in body
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("data", [{"choices": []}, {"error": "overloaded"}, {"choices": [{"message": "text"}]}])
async def test_chat_refuses_a_response_without_a_message(server: LocalHTTPServer, data: dict[str, Any]) -> None:
    server.queue("POST", PATH, [Reply.json(data)])
    async with make_lm(server) as lm:
        with pytest.raises(LanguageModelError, match=r"choices\[0\]\.message"):
            await lm.chat([{"role": "user", "content": "hi"}], tools=[TOOL])
