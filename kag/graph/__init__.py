"""Graph stores: the embedded networkx store and the Neo4j store."""

from __future__ import annotations

from typing import Any

from kag.errors import ConfigError
from kag.graph.base import GraphStore, NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.graph.memory import MemoryGraphStore

NEO4J_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")


def open_store(uri: str, **options: Any) -> GraphStore:
    """Open the store a URI names: ``memory://[path]`` or ``neo4j://host:port`` / ``bolt://...``."""
    if not isinstance(uri, str):
        raise ConfigError(f"store URI must be a string, got {type(uri).__name__}.")
    if uri.startswith("memory://"):
        path = uri[len("memory://") :]
        if options:
            raise ConfigError(f"memory:// takes no options, got {sorted(options)}.")
        return MemoryGraphStore(path or None)
    if uri.startswith(NEO4J_SCHEMES):
        from kag.graph.neo4j import Neo4jGraphStore  # imported lazily: the driver is heavier

        return Neo4jGraphStore(uri, **options)
    raise ConfigError(
        f"unsupported store URI {uri!r}: use 'memory://', 'memory://path/to/kb.json' or 'neo4j://host:7687'."
    )


__all__ = ["GraphStore", "MemoryGraphStore", "NodeRecord", "PlanResult", "PlanRow", "RelationRecord", "open_store"]
