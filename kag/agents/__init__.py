"""Agents: a language model that answers with attached knowledge through ``search_<name>`` tools."""

from kag.agents.agent import Agent, AgentSync, RetrievalMode
from kag.agents.card import AgentCapabilities, AgentCard
from kag.agents.task import Task

__all__ = ["Agent", "AgentCapabilities", "AgentCard", "AgentSync", "RetrievalMode", "Task"]
