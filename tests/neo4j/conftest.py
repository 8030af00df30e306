"""Fixtures of the Neo4j passage-store tests: stores in a fresh namespace of the shared server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_anchor import AnchorScorer, LabelMatrix
from kag.graph.passages_neo4j import Neo4jPassageStore

DIMS = 384  # the chunk index of the shared test server is built for the default embedder


def fresh_namespace() -> str:
    """A namespace no other test uses: a test's data never meets another's, nor a benchmark's."""
    return f"t-{uuid.uuid4().hex[:12]}"


def passage_store(config: dict[str, str], namespace: str) -> Neo4jPassageStore:
    """A passage store of ``namespace`` with a driver of its own (another writer)."""
    graph = Neo4jGraphStore(
        config["uri"],
        username=config["user"],
        password=config["password"],
        database=config["database"],
        namespace=namespace,
    )
    return Neo4jPassageStore(graph)


@pytest.fixture
async def stores(neo4j_config: dict[str, str]) -> AsyncIterator[tuple[Neo4jPassageStore, Neo4jPassageStore]]:
    """Two passage stores of one fresh namespace, each with its own driver (two writers)."""
    ns = fresh_namespace()
    one, two = passage_store(neo4j_config, ns), passage_store(neo4j_config, ns)
    await one.ensure_schema(DIMS)
    await two.ensure_schema(DIMS)
    await one.clear()
    try:
        yield one, two
    finally:
        await one.clear()
        await one.graph_store.aclose()
        await two.graph_store.aclose()


def count_loads(scorer: AnchorScorer) -> list[str]:
    """The labels ``scorer`` loads whole from now on, in order (a refresh is not a load)."""
    loads: list[str] = []
    full_load = scorer._load

    async def counted(label: str, *args: object) -> LabelMatrix:
        loads.append(label)
        return await full_load(label, *args)  # type: ignore[arg-type]

    scorer._load = counted  # type: ignore[method-assign]
    return loads
