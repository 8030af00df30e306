"""Native tool calling on OpenAI-compatible chat completions servers.

:class:`~kag.lm.OpenAICompatibleLM` only asks for schema-constrained JSON; an agent
that talks to such a server sends the same request with ``tools=[...]`` instead
through :meth:`OpenAICompatibleLM.chat <kag.lm.openai.OpenAICompatibleLM.chat>` (the client's own
connection, retries and credentials) and reads ``tool_calls`` back. Models without native tools use the JSON action of
:mod:`kag.agents.actions`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    message = await llm.chat(messages, tools=tools)
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
