"""Neo4j settings by the ecosystem's conventions: NEO4J_* variables, username=, a caller's own driver."""

from __future__ import annotations

import pytest
from neo4j import AsyncGraphDatabase, GraphDatabase

import kag
from kag.cli import main
from kag.errors import BackendAuthError, ConfigError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from kag.graph.memory import MemoryGraphStore
from kag.graph.neo4j import Neo4jGraphStore

pytestmark = pytest.mark.neo4j


def export(monkeypatch: pytest.MonkeyPatch, config: dict[str, str], **extra: str) -> None:
    monkeypatch.setenv("NEO4J_URI", config["uri"])
    monkeypatch.setenv("NEO4J_USERNAME", config["user"])
    monkeypatch.setenv("NEO4J_PASSWORD", config["password"])
    monkeypatch.setenv("NEO4J_DATABASE", config["database"])
    for key, value in extra.items():
        monkeypatch.setenv(key, value)


async def test_neo4j_uri_is_the_default_store(monkeypatch: pytest.MonkeyPatch, neo4j_config: dict[str, str]) -> None:
    export(monkeypatch, neo4j_config)
    kb = kag.KnowledgeBase(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    try:
        assert isinstance(kb.store, Neo4jGraphStore) and kb.uri == neo4j_config["uri"]
        assert kb.store.user == neo4j_config["user"] and kb.store.database == neo4j_config["database"]
        await kb.ensure_ready()  # the credentials from the environment are accepted
    finally:
        await kb.aclose()


def test_precedence_argument_then_kag_kb_then_neo4j_uri(
    monkeypatch: pytest.MonkeyPatch, neo4j_config: dict[str, str]
) -> None:
    export(monkeypatch, neo4j_config, KAG_KB="memory://")
    assert isinstance(kag.KnowledgeBase(entity_models=ENTITY_MODELS).store, MemoryGraphStore)
    monkeypatch.delenv("KAG_KB")
    assert isinstance(kag.KnowledgeBase(entity_models=ENTITY_MODELS).store, Neo4jGraphStore)
    assert isinstance(kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS).store, MemoryGraphStore)


def test_the_cli_reads_neo4j_uri(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], neo4j_config: dict[str, str]
) -> None:
    export(monkeypatch, neo4j_config)
    code = main(["stats", "--schema", "kag.examples.seed", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and '"backend": "neo4j"' in out


async def test_a_missing_password_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, neo4j_config: dict[str, str]
) -> None:
    monkeypatch.setenv("NEO4J_URI", neo4j_config["uri"])
    kb = kag.KnowledgeBase(entity_models=ENTITY_MODELS)
    try:
        with pytest.raises(BackendAuthError, match="set NEO4J_PASSWORD"):
            await kb.ensure_ready()
    finally:
        await kb.aclose()


def test_username_and_user_cannot_disagree(neo4j_config: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="username"):
        Neo4jGraphStore(neo4j_config["uri"], username="a", user="b")
    assert Neo4jGraphStore(neo4j_config["uri"], username="alice").user == "alice"
    assert Neo4jGraphStore(neo4j_config["uri"], user="bob").user == "bob"  # the older keyword


async def test_a_callers_async_driver_is_used_and_left_open(neo4j_config: dict[str, str]) -> None:
    driver = AsyncGraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    try:
        kb = kag.KnowledgeBase(
            entity_models=ENTITY_MODELS,
            relation_models=RELATION_MODELS,
            driver=driver,
            database=neo4j_config["database"],
        )
        assert isinstance(kb.store, Neo4jGraphStore)
        await kb.upsert(seed_facts())
        hits = await kb.triplet_search(
            {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "France"}
        )
        assert [h.subject.search_text() for h in hits] == ["Paris"]
        await kb.aclose()
        await driver.verify_connectivity()  # still open: it is the caller's
    finally:
        await driver.close()


async def test_a_callers_sync_driver_works_too(neo4j_config: dict[str, str]) -> None:
    driver = GraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    try:
        kb = kag.KnowledgeBase(
            entity_models=ENTITY_MODELS,
            relation_models=RELATION_MODELS,
            driver=driver,
            database=neo4j_config["database"],
        )
        await kb.upsert(seed_facts())
        hits = await kb.triplet_search(
            {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "Japan"}
        )
        assert [h.subject.search_text() for h in hits] == ["Tokyo"]
        assert isinstance(kb.store, Neo4jGraphStore)
        await kb.store.clear()
        assert (await kb.counts())["nodes"] == 0
        await kb.aclose()
        driver.verify_connectivity()
    finally:
        driver.close()


def test_a_wrong_driver_type_is_refused(neo4j_config: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="driver"):
        Neo4jGraphStore(neo4j_config["uri"], driver=object())  # type: ignore[arg-type]


async def test_server_notifications_about_generated_queries_are_not_logged(
    neo4j_config: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # a property no node has yet draws a server warning: kag's own drivers ask for none, a caller's keeps its own
    query = "MATCH (n:KagEntity) WHERE n.kag_not_a_property_yet = 1 RETURN count(n) AS n"
    store = Neo4jGraphStore(
        neo4j_config["uri"], username=neo4j_config["user"], password=neo4j_config["password"], database=None
    )
    driver = AsyncGraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))
    theirs = Neo4jGraphStore(neo4j_config["uri"], driver=driver)
    try:
        with caplog.at_level("INFO", logger="neo4j.notifications"):
            await store.read(query, {}, "a test")
            await store.read_rows(query, {}, "a test (blocking driver)")
        assert not [r for r in caplog.records if r.name == "neo4j.notifications"]
        with caplog.at_level("INFO", logger="neo4j.notifications"):
            await theirs.read(query, {}, "a test")
        assert [r for r in caplog.records if r.name == "neo4j.notifications"]  # the check can fail
    finally:
        await store.aclose()
        await driver.close()
