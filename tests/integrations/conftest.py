"""Fixtures of the framework adapters: the world graph with a few documents, on memory or Neo4j, offline.

Every test here runs with outbound connections refused except to loopback (the Neo4j test server), so a
framework that tried to fetch tokenizer or NLTK files at import or first use would fail the test.
``NLTK_DATA`` and ``TIKTOKEN_CACHE_DIR`` are removed, so llama-index-core uses the files it ships.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import kag
from kag.examples.world import ENTITY_MODELS, RELATION_MODELS, world_items
from tests.integrations.cases import CAPITAL_OF_FRANCE

NAMESPACE = "kag_integrations"

DOCUMENTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("paris.txt", "Paris is the capital of France and its largest city, on the Seine.", {"lang": "en", "year": 2021}),
    ("berlin.txt", "Berlin is the capital of Germany; the Spree flows through it.", {"lang": "en", "year": 2019}),
    ("tokyo.txt", "Tokio ist die Hauptstadt Japans und liegt an der Bucht von Tokio.", {"lang": "de", "year": 2022}),
)


class NetworkRefused(AssertionError):
    """A test tried to reach a host other than loopback."""


def _loopback(host: Any) -> bool:
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise NetworkRefused(f"a test tried to connect to {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(host.decode() if isinstance(host, bytes) else host):
            raise NetworkRefused(f"a test tried to resolve {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)


async def _fill(knowledge: kag.Knowledge) -> kag.Knowledge:
    await knowledge.upsert(world_items())
    for source, text, metadata in DOCUMENTS:
        await knowledge.add_text(text, source=source, metadata=metadata)
    return knowledge


@pytest.fixture
async def memory_world() -> AsyncIterator[kag.Knowledge]:
    """The world graph plus three short documents, in memory."""
    knowledge = kag.create_knowledge(
        "memory", name="world", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS
    )
    yield await _fill(knowledge)
    await knowledge.aclose()


@pytest.fixture
async def neo4j_world(neo4j_kb_factory: Callable[..., Any]) -> kag.Knowledge:
    """The same on the real Neo4j server, in a namespace of its own (emptied first)."""
    kb = await neo4j_kb_factory(
        namespace=NAMESPACE, entity_models=list(ENTITY_MODELS), relation_models=list(RELATION_MODELS)
    )
    return await _fill(kag.Knowledge(kb, name="world"))


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def world(request: pytest.FixtureRequest) -> kag.Knowledge:
    """``memory_world`` and ``neo4j_world`` in turn."""
    knowledge: kag.Knowledge = request.getfixturevalue(f"{request.param}_world")
    return knowledge


async def schema_kag_sends(kb: kag.KnowledgeBase, *, max_hops: int = 1) -> dict[str, Any]:
    """The schema kag's own ``KnowledgeRetriever`` sends its language model, as the model receives it."""
    from kag.demo import Query
    from kag.lm.scripted import ScriptedLM

    answer = CAPITAL_OF_FRANCE if max_hops == 1 else {"hops": [CAPITAL_OF_FRANCE]}
    lm = ScriptedLM([answer])
    retriever = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=max_hops)
    await retriever(Query(query="What is the capital of France?"))
    assert len(lm.calls) == 1
    schema: dict[str, Any] = lm.calls[0]["schema"]
    return schema
