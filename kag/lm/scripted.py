"""A language model that replays canned answers, for tests and offline examples."""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from kag.errors import ConfigError, LanguageModelError
from kag.lm.base import BaseLanguageModel, Message

__all__ = ["ScriptedCall", "ScriptedLM", "ScriptedResponse"]

ScriptedResponse = dict[str, Any] | str | BaseException | Callable[[list[Message], dict[str, Any]], Any]


class ScriptedCall(TypedDict):
    """One recorded completion request."""

    messages: list[Message]
    schema: dict[str, Any]
    schema_name: str


class ScriptedLM(BaseLanguageModel):
    """Answers each completion with the next scripted response.

    Responses are consumed in order: a dict is sent as its JSON text, a str as is
    (so invalid answers can be scripted), a callable is called with
    ``(messages, json_schema)`` and its dict/str result used, and an exception
    instance is raised (to simulate transport failures). Answers go through the
    same validation + repair loop as real clients, and every request is recorded
    in :attr:`calls`.
    """

    def __init__(
        self,
        responses: Sequence[ScriptedResponse],
        name: str = "scripted",
        *,
        max_repairs: int = 2,
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        if isinstance(responses, str | bytes | dict) or not isinstance(responses, Sequence):
            raise ConfigError("responses must be a list of dicts, strings, callables or exceptions.")
        self._name = name
        self._responses: deque[ScriptedResponse] = deque(responses)
        self._total = len(responses)
        self.calls: list[ScriptedCall] = []

    @property
    def name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._responses)

    def get_config(self) -> dict[str, Any]:
        """Descriptive only: scripted responses are Python objects and are not serialized."""
        return {"type": "scripted", "name": self._name, "max_repairs": self.max_repairs}

    def __repr__(self) -> str:
        return f"ScriptedLM(name={self._name!r}, remaining={self.remaining})"

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        # Deep copies: later mutation by the caller must not rewrite the record.
        self.calls.append(
            ScriptedCall(
                messages=copy.deepcopy(messages),
                schema=copy.deepcopy(json_schema),
                schema_name=schema_name,
            )
        )
        if not self._responses:
            raise LanguageModelError(
                f"ScriptedLM {self._name!r} ran out of responses after {self._total} "
                f"call(s); script one more response (the repair loop asks again after "
                "an invalid answer)."
            )
        response = self._responses.popleft()
        if isinstance(response, BaseException):
            raise response
        if callable(response):
            response = response(copy.deepcopy(messages), copy.deepcopy(json_schema))
        if isinstance(response, dict):
            return json.dumps(response, ensure_ascii=False)
        if isinstance(response, str):
            return response
        raise ConfigError(f"ScriptedLM response must be a dict or str, got {type(response).__name__}.")
