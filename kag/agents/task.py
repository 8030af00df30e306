"""``Task``: one request to an agent, with per-task retrieval control in its metadata.

``Task.create_infer(prompt=..., metadata={...})`` builds an inference task;
:meth:`kag.agents.Agent.handle_task` answers it. The metadata keys an agent reads:

* ``"retrieval"``: ``"auto"``, ``"always"`` or ``"required"``; it may strengthen the
  agent's configured mode (auto -> always -> required), never weaken it;
* ``"knowledge"``: one attached knowledge name or a list of them (exact names);
* ``"k"``: the most results per kind and selected source;
* ``"where"``: a metadata filter passed to every selected source;
* ``"citations"``: ``False`` for an answer without citation labels.

Any other key is kept on the task for the caller and ignored by the agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kag.errors import InvalidInputError

__all__ = ["RETRIEVAL_KEYS", "Task"]

RETRIEVAL_KEYS = ("retrieval", "knowledge", "k", "where", "citations")


@dataclass
class Task:
    """A request to an agent: ``kind`` (only ``"infer"``), the ``prompt`` and its ``metadata``."""

    prompt: str
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: Literal["infer"] = "infer"
    id: str = field(default_factory=lambda: f"task_{uuid.uuid4().hex}")

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInputError("a task needs a non-empty prompt string.")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError(f"task metadata must be a mapping, got {type(self.metadata).__name__}.")
        if self.kind != "infer":
            raise InvalidInputError(f"kag agents handle 'infer' tasks only, got {self.kind!r}.")
        self.metadata = dict(self.metadata)

    @classmethod
    def create_infer(cls, prompt: str, metadata: Mapping[str, Any] | None = None) -> Task:
        """An inference task: the agent answers ``prompt`` under the retrieval settings of ``metadata``."""
        return cls(prompt=prompt, metadata=dict(metadata or {}))

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict."""
        return {"id": self.id, "kind": self.kind, "prompt": self.prompt, "metadata": dict(self.metadata)}
