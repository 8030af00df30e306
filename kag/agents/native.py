"""Native tool calling on OpenAI-compatible chat completions servers.

:class:`~kag.lm.OpenAICompatibleLM` only asks for schema-constrained JSON; an agent
that talks to such a server sends the same request with ``tools=[...]`` instead
(through the client's own HTTP connection, retries and credentials) and reads
``tool_calls`` back. Models without native tools use the JSON action of
:mod:`kag.agents.actions`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kag.errors import LanguageModelError
from kag.lm.openai import OpenAICompatibleLM

__all__ = ["NativeReply", "ToolCall", "native_turn"]


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for: its id, the tool name and the decoded arguments (or the decoding error)."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str = ""


@dataclass(frozen=True)
class NativeReply:
    """The assistant message as sent back to the server, its text, and the tool calls it makes."""

    message: dict[str, Any]
    text: str
    calls: list[ToolCall]


def _call(raw: Any, index: int) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        return ToolCall(f"call_{index}", "", {}, "the tool call has no function")
    call_id = str(raw.get("id") or f"call_{index}")
    name = str(function.get("name") or "")
    text = function.get("arguments") or "{}"
    try:
        arguments = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, name, {}, f"the arguments are not valid JSON ({exc.msg})")
    if not isinstance(arguments, dict):
        return ToolCall(call_id, name, {}, "the arguments must be a JSON object")
    return ToolCall(call_id, name, arguments)


async def native_turn(
    llm: OpenAICompatibleLM, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> NativeReply:
    """One chat completion with ``tools`` declared (none: the model must answer in text)."""
    body: dict[str, Any] = {"model": llm.model, "messages": list(messages), "temperature": llm.temperature}
    if tools:
        body["tools"] = list(tools)
        body["tool_choice"] = "auto"
    if llm.max_tokens is not None:
        body["max_tokens"] = llm.max_tokens
    # the client's private key and connection: the agent is one more request of the same client
    headers = {"Authorization": f"Bearer {llm._api_key}"} if llm._api_key else None
    data = await llm._http.post_json("chat/completions", body, headers=headers)
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise LanguageModelError(
            f"{llm.name} returned an unexpected response (no choices[0].message). "
            "Check that base_url serves the OpenAI chat completions API with tool calling."
        ) from None
    if not isinstance(message, dict):
        raise LanguageModelError(f"{llm.name} returned a non-object choices[0].message.")
    raw_calls = message.get("tool_calls") or []
    calls = [_call(raw, i) for i, raw in enumerate(raw_calls)] if isinstance(raw_calls, list) else []
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    sent: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        sent["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in calls
        ]
    return NativeReply(sent, text, calls)
