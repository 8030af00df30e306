"""``AgentCard``: who an agent is (name, description, address) and what it can do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kag.errors import ConfigError

__all__ = ["AgentCapabilities", "AgentCard"]


@dataclass
class AgentCapabilities:
    """What an agent offers: ``rag`` (knowledge attached) and ``tool_calling`` (tools exposed to its model)."""

    rag: bool = False
    tool_calling: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict."""
        return {"rag": self.rag, "tool_calling": self.tool_calling}


@dataclass
class AgentCard:
    """The public description of an agent.

    ``name`` identifies it, ``description`` says what it answers, ``url`` is its
    address (``runtime://<name>`` for an in-process agent). ``capabilities`` is
    filled in by :class:`~kag.agents.Agent` when knowledge is attached.
    """

    name: str
    description: str = ""
    url: str = ""
    version: str = "1.0.0"
    capabilities: AgentCapabilities = field(default_factory=AgentCapabilities)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("AgentCard needs a non-empty name, e.g. AgentCard(name='support').")
        if not isinstance(self.description, str):
            raise ConfigError(f"AgentCard description must be a string, got {type(self.description).__name__}.")
        if not self.url:
            self.url = f"runtime://{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict."""
        return {
            "name": self.name,
            "description": self.description,
            "url": self.url,
            "version": self.version,
            "capabilities": self.capabilities.to_dict(),
        }
