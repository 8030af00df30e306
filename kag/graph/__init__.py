"""Graph stores: the embedded networkx store and the Neo4j store, with their passage stores."""

from __future__ import annotations

from kag.graph.base import GraphStore, NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.graph.factory import NEO4J_SCHEMES, default_uri, open_store, passage_store_for
from kag.graph.memory import MemoryGraphStore
from kag.graph.passages import PassageStore

__all__ = [
    "NEO4J_SCHEMES",
    "GraphStore",
    "MemoryGraphStore",
    "NodeRecord",
    "PassageStore",
    "PlanResult",
    "PlanRow",
    "RelationRecord",
    "default_uri",
    "open_store",
    "passage_store_for",
]
