"""Shared fixtures: the seed schema and a populated memory knowledge base."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import kag
import tests.neo4j_support  # noqa: F401  (takes the session's NEO4J_* settings before any test runs)
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from tests.helpers.http_server import LocalHTTPServer, local_http_server  # noqa: F401  (a fixture)


@pytest.fixture
def server(local_http_server: LocalHTTPServer) -> LocalHTTPServer:  # noqa: F811
    """A started real local HTTP server on 127.0.0.1 (route/queue replies, inspect requests)."""
    return local_http_server


@pytest.fixture(autouse=True)
def _no_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # a developer's real key must never reach the local test servers
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def _no_store_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # KAG_KB / NEO4J_URI name the default store; tests that want them set them (the Neo4j
    # fixtures read the session's settings through tests.neo4j_support.SESSION_ENV)
    for name in ("KAG_KB", "NEO4J_URI", "NEO4J_USERNAME", "NEO4J_USER", "NEO4J_PASSWORD", "NEO4J_DATABASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def schema() -> kag.GraphSchema:
    return kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)


@pytest.fixture
async def kb() -> kag.KnowledgeBase:
    base = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await base.upsert(seed_facts())
    return base


@pytest.fixture(scope="session")
def neo4j_config() -> dict[str, str]:
    """Settings of the real Neo4j server (fails under `make test`/CI when it is unreachable)."""
    from tests.neo4j_support import check_reachable, neo4j_settings

    settings = neo4j_settings()
    check_reachable(settings)
    return settings


@pytest.fixture
async def neo4j_kb_factory(neo4j_config: dict[str, str]) -> AsyncIterator[Callable[..., Any]]:
    """Build KnowledgeBases on the real server; the graph is cleared before each test."""
    from kag.graph.neo4j import Neo4jGraphStore

    made: list[kag.KnowledgeBase] = []

    async def make(**kwargs: Any) -> kag.KnowledgeBase:
        kb = kag.KnowledgeBase(
            neo4j_config["uri"],
            username=neo4j_config["user"],
            password=neo4j_config["password"],
            database=neo4j_config["database"],
            **kwargs,
        )
        await kb.ensure_ready()
        if kb.namespace not in {m.namespace for m in made}:  # each namespace starts empty
            assert isinstance(kb.store, Neo4jGraphStore)
            await kb.store.clear()
        made.append(kb)
        return kb

    yield make
    for kb in made:
        await kb.aclose()
