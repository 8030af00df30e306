"""When Neo4j goes away mid-traffic: reads never wait on a write, every request fails fast, nothing is lost.

The outage is a real TCP proxy in front of the real test server (tests/helpers/tcp_proxy.py):
cutting it resets every connection and refuses new ones, as a crashed server does to a client,
without stopping the server the other tests share. tests/neo4j/test_zz_outage_http.py kills
the server itself once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest

import kag
from kag.errors import BackendUnavailableError, WriteTimeoutError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, Country
from kag.graph.neo4j import Neo4jGraphStore
from kag.rag.embedders import HashEmbedder
from kag.server.app import create_app
from kag.server.http import HTTPServer
from kag.server.service import Service
from tests.helpers.tcp_proxy import SilentServer, TCPProxy
from tests.helpers.traffic import Traffic, summary

SEED = "kag.examples.seed"


# --------------------------------------------------------------------------- no Neo4j needed


class GatedEmbedder(HashEmbedder):
    """A real embedder that, once ``gate`` is cleared, holds every batch of more than one text (a write)
    until it is set again: a slow write, like one stuck in retries during an outage."""

    def __init__(self) -> None:
        super().__init__(dimensions=64)
        self.gate = asyncio.Event()
        self.gate.set()
        self.held = asyncio.Event()

    async def embed(self, texts: list[str]) -> np.ndarray:  # type: ignore[override]
        if len(texts) > 1 and not self.gate.is_set():
            self.held.set()
            await self.gate.wait()
        return await super().embed(texts)


async def test_reads_do_not_wait_for_a_slow_write() -> None:
    embedder = GatedEmbedder()
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, embedder=embedder)
    knowledge = kag.Knowledge(kb, sources=["Rome is the capital of Italy."])
    await knowledge.ready()
    embedder.gate.clear()
    write = asyncio.create_task(knowledge.add_text("Paris is the capital of France. Lyon is in France. " * 40))
    await asyncio.wait_for(embedder.held.wait(), 30)  # the write holds the write lock, waiting
    # before: each of these waited in ready() for the write's lock, as long as the write took
    hits = await asyncio.wait_for(knowledge.search("capital of Italy", k=2), 10)
    counts = await asyncio.wait_for(knowledge.counts(), 10)
    assert hits and "Rome" in hits[0].text and counts["documents"] == 1
    assert not write.done()
    embedder.gate.set()
    await asyncio.wait_for(write, 30)
    assert (await knowledge.counts())["documents"] == 2


# --------------------------------------------------------------------------- on the real server

neo4j = pytest.mark.neo4j


@pytest.fixture
async def proxied(neo4j_config: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TCPProxy]:
    from urllib.parse import urlsplit

    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_config["password"])
    monkeypatch.setenv("NEO4J_USERNAME", neo4j_config["user"])
    with TCPProxy(urlsplit(neo4j_config["uri"]).port or 7687) as proxy:
        yield proxy


@neo4j
async def test_silent_port_fails_within_about_connection_timeout() -> None:
    with SilentServer() as silent:
        kb = kag.KnowledgeBase(
            f"bolt://127.0.0.1:{silent.port}",
            entity_models=ENTITY_MODELS,
            relation_models=RELATION_MODELS,
            connection_timeout=1.0,
            password="x",
        )
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError, match="cannot reach Neo4j"):
            await kb.ensure_ready()
        took = time.monotonic() - started
        await kb.aclose()
    assert took < 20, took  # 60 s (the driver's connection_acquisition_timeout) before; about 1-2 s now


@neo4j
async def test_a_write_past_its_deadline_says_it_may_have_happened_and_a_rerun_converges(
    neo4j_config: dict[str, str],
) -> None:
    from neo4j import AsyncGraphDatabase

    ns = f"t-{uuid.uuid4().hex[:12]}"
    kb = kag.KnowledgeBase(
        neo4j_config["uri"],
        entity_models=ENTITY_MODELS,
        relation_models=RELATION_MODELS,
        username=neo4j_config["user"],
        password=neo4j_config["password"],
        namespace=ns,
        write_timeout=1.0,
    )
    await kb.ensure_ready()
    country = Country(name="Lockland")
    blocker = AsyncGraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    try:
        async with blocker.session(database=neo4j_config["database"]) as session:
            tx = await session.begin_transaction()  # holds the node's lock until rolled back
            await (
                await tx.run("MERGE (n:KagEntity {id: $id, kag_ns: $ns}) SET n.held = true", id=country.id, ns=ns)
            ).consume()
            started = time.monotonic()
            with pytest.raises(WriteTimeoutError, match="may or may not have happened") as caught:
                await kb.upsert([country])
            took = time.monotonic() - started
            assert "idempotent" in str(caught.value) and "re-run" in str(caught.value)
            await tx.rollback()
        assert took < 15, took  # write_timeout=1 s, retries included
        await kb.upsert([country])  # the same call again: safe
        await kb.upsert([country])
        assert (await kb.counts())["Country"] == 1
    finally:
        await kb.store.clear()  # type: ignore[attr-defined]
        await kb.aclose()
        await blocker.close()


@neo4j
async def test_write_timeout_comes_from_the_environment_and_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.errors import ConfigError

    monkeypatch.setenv("KAG_NEO4J_WRITE_TIMEOUT", "7.5")
    assert Neo4jGraphStore("bolt://127.0.0.1:1").write_timeout == 7.5
    monkeypatch.setenv("KAG_NEO4J_WRITE_TIMEOUT", "none")
    assert Neo4jGraphStore("bolt://127.0.0.1:1").write_timeout is None
    monkeypatch.setenv("KAG_NEO4J_WRITE_TIMEOUT", "-1")
    with pytest.raises(ConfigError, match="KAG_NEO4J_WRITE_TIMEOUT"):
        Neo4jGraphStore("bolt://127.0.0.1:1")
    monkeypatch.delenv("KAG_NEO4J_WRITE_TIMEOUT")
    assert Neo4jGraphStore("bolt://127.0.0.1:1", write_timeout=3).write_timeout == 3.0


@neo4j
async def test_an_outage_under_traffic_fails_fast_reports_degraded_and_resumes(
    proxied: TCPProxy, neo4j_config: dict[str, str]
) -> None:
    ns = f"t-{uuid.uuid4().hex[:12]}"
    service = Service.open(f"bolt://127.0.0.1:{proxied.port}", SEED, namespace=ns)
    await service.load_example("seed")
    await service.ingest(texts=["Rome is the capital of Italy. Paris is the capital of France."])
    server = HTTPServer(create_app(service), port=0)
    await server.start()
    traffic = Traffic(server.url)
    search = {"query": "capital of Italy", "k": 3}
    triplets = {"subject_label": "City", "relation_label": "IsCapitalOf", "k": 3}
    tasks = [
        *(asyncio.create_task(traffic.loop("/search", search)) for _ in range(3)),
        *(asyncio.create_task(traffic.loop("/triplet_search", triplets)) for _ in range(3)),
        asyncio.create_task(traffic.loop("/ingest", pause=0.1)),
        asyncio.create_task(traffic.loop("/health", pause=0.1)),
    ]
    try:
        await asyncio.sleep(2.0)
        cut = time.monotonic()
        await asyncio.to_thread(proxied.cut)
        await asyncio.sleep(6.0)
        restored = time.monotonic()
        await asyncio.to_thread(proxied.restore)
        resumed = None
        for _ in range(300):
            await asyncio.sleep(0.1)
            done = [e for e in traffic.log if e[0] == "/search" and e[1] > restored and e[3] == 200]
            if done:
                resumed = min(e[2] for e in done)
                break
        await asyncio.sleep(1.0)
    finally:
        traffic.stop.set()
        await asyncio.gather(*tasks)
        await server.close()
    during = traffic.during(cut + 1.0, restored - 0.5)  # the outage known, not over
    in_flight = [e for e in traffic.log if e[1] < cut < e[2]]
    assert during and all(e[3] == 503 and e[4] for e in during), {e[3] for e in during}  # typed, Retry-After
    p50, p99, worst = summary(during)
    # generous bounds for a loaded 2-core machine; measured: see docs/guides/serving.md
    assert p99 < 2.0 and worst < 5.0, (p50, p99, worst)
    assert all(e[2] - e[1] < 15.0 for e in in_flight)  # a request caught by the cut ends too
    degraded = [e[2] for e in traffic.log if e[0] == "/health" and e[1] >= cut and e[3] == 503]
    assert degraded and min(degraded) - cut < 3.0, "health did not report the outage"  # goal: 1 s
    assert resumed is not None and resumed - restored < 15.0, "service did not resume"  # goal: 2 s
    print(
        f"\noutage (proxy cut): {len(during)} requests, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {worst * 1000:.0f} ms; /health degraded after {min(degraded) - cut:.2f} s; "
        f"resumed {resumed - restored:.2f} s after the server answered; {len(traffic.acked)} writes acknowledged"
    )
    # every acknowledged write is there
    stored = await service.kb.store.read(  # type: ignore[attr-defined]
        "MATCH (n:Country {kag_ns: $ns}) RETURN n.name AS name", {"ns": ns}, "checking writes"
    )
    assert set(traffic.acked) <= {r["name"] for r in stored.records}
    await service.kb.store.clear()  # type: ignore[attr-defined]
    await service.aclose()
