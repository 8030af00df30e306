"""Fixtures of the reference-API tests: ``make`` builds knowledge on memory and on the real Neo4j.

``make(backend_name, **options)`` calls ``kag.create_knowledge`` exactly as the document
does, except that on the Neo4j run a ``"memory"`` backend becomes ``"neo4j"`` with the
test server's settings; the Neo4j graph is cleared before and after each test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kag import Knowledge, create_knowledge
from kag.graph.neo4j import Neo4jGraphStore

Make = Callable[..., Knowledge]


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def backend(request: pytest.FixtureRequest) -> str:
    """The managed backend an example that stores data runs on."""
    return str(request.param)


@pytest.fixture
def neo4j_settings(backend: str, request: pytest.FixtureRequest) -> dict[str, str] | None:
    """``create_knowledge('neo4j', ...)`` keywords of the test server (None on the memory run)."""
    if backend != "neo4j":
        return None
    config: dict[str, str] = request.getfixturevalue("neo4j_config")
    return {
        "uri": config["uri"],
        "username": config["user"],
        "password": config["password"],
        "database": config["database"],
    }


async def _clear(settings: dict[str, str]) -> None:
    scratch = create_knowledge("neo4j", name="scratch", **settings)
    await scratch.ready()
    await scratch.store.clear()
    assert isinstance(scratch.kb.store, Neo4jGraphStore)
    await scratch.kb.store.clear()
    await scratch.aclose()


@pytest.fixture
async def make(backend: str, neo4j_settings: dict[str, str] | None) -> AsyncIterator[Make]:
    """``make("memory", **options)``: the document's call, on ``backend``."""
    made: list[Knowledge] = []
    if neo4j_settings is not None:
        await _clear(neo4j_settings)

    def build(name: str = "memory", /, **options: Any) -> Knowledge:
        assert name == "memory", "the reference examples that store data use the 'memory' backend"
        if neo4j_settings is not None:
            knowledge = create_knowledge("neo4j", **neo4j_settings, **options)
        else:
            knowledge = create_knowledge("memory", **options)
        made.append(knowledge)
        return knowledge

    yield build
    for knowledge in made:
        await knowledge.aclose()
    if neo4j_settings is not None:
        await _clear(neo4j_settings)
