"""Fixtures for Knowledge tests: corpora, and Knowledge objects on memory or on the real Neo4j.

``knowledge_factory`` builds ``Knowledge`` objects on the backend named by the
``backend`` fixture (``"memory"`` by default; parity tests parametrize it). On
Neo4j the graph is cleared of kag entities *and* of Document/Chunk nodes before
each test (the shared ``neo4j_kb_factory`` only clears entities).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import kag
from kag.datamodels.documents import Document
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from kag.graph.passages import PassageStore
from kag.knowledge.knowledge import Knowledge

KnowledgeFactory = Callable[..., Any]

CORPUS: dict[str, str] = {
    "paris.md": (
        "# Paris\n\nParis is the capital of France. The Eiffel Tower was built in 1889 for the World's Fair.\n\n"
        "Paris hosts the Louvre, the most visited museum in the world."
    ),
    "berlin.md": (
        "# Berlin\n\nBerlin is the capital of Germany. The Berlin Wall fell in 1989.\n\n"
        "Hamburg and Munich are other large German cities."
    ),
    "tokyo.md": "# Tokyo\n\nTokyo is the capital of Japan and its largest city. Osaka is known for street food.",
    "rome.md": "# Rome\n\nRome is the capital of Italy. The Colosseum is an ancient amphitheatre in Rome.",
    "bread.md": "# Bread\n\nSourdough bread is leavened with a starter of wild yeast and lactic acid bacteria.",
}
LANG = {"paris.md": "fr", "berlin.md": "de", "tokyo.md": "ja", "rome.md": "it", "bread.md": "en"}


@pytest.fixture
def backend() -> str:
    """The backend knowledge_factory builds on (parametrize to run on both)."""
    return "memory"


async def clear_passages(store: PassageStore) -> None:
    await store.clear()


@pytest.fixture
def neo4j_make(backend: str, request: pytest.FixtureRequest) -> Callable[..., Any] | None:
    """``neo4j_kb_factory`` when ``backend == "neo4j"`` (resolved outside the event loop)."""
    if backend != "neo4j":
        return None
    request.getfixturevalue("neo4j_config")  # reachability check: skips or fails without a server
    maker: Callable[..., Any] = request.getfixturevalue("neo4j_kb_factory")
    return maker


@pytest.fixture
async def knowledge_factory(backend: str, neo4j_make: Callable[..., Any] | None) -> AsyncIterator[KnowledgeFactory]:
    """``await make(**knowledge_options)`` -> Knowledge over the seed schema on ``backend``."""
    made: list[Knowledge] = []

    async def make(
        *,
        entity_models: Any = ENTITY_MODELS,
        relation_models: Any = RELATION_MODELS,
        seed: bool = True,
        embedder: Any = None,
        **options: Any,
    ) -> Knowledge:
        if neo4j_make is not None:
            kb = await neo4j_make(entity_models=entity_models, relation_models=relation_models, embedder=embedder)
        else:
            kb = kag.KnowledgeBase(
                "memory://", entity_models=entity_models, relation_models=relation_models, embedder=embedder
            )
        if seed:
            await kb.upsert(seed_facts())
        knowledge = Knowledge(kb, **options)
        if neo4j_make is not None and not made:
            await knowledge._ensure_schema()
            await clear_passages(knowledge.store)
        made.append(knowledge)
        return knowledge

    yield make
    if neo4j_make is not None and made:
        await clear_passages(made[0].store)  # leave no Document/Chunk nodes behind on a shared server
    for knowledge in made:
        if backend == "memory":
            await knowledge.aclose()  # neo4j kbs are closed by neo4j_kb_factory


@pytest.fixture
def corpus_dir(tmp_path: Any) -> Any:
    """A directory with the small Markdown corpus."""
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in CORPUS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def corpus_documents() -> list[Document]:
    """The corpus as Documents with metadata ``lang``, ``file`` and ``n``."""
    return [
        Document.from_text(text, source=name, metadata={"lang": LANG[name], "file": name, "n": i})
        for i, (name, text) in enumerate(CORPUS.items())
    ]


async def memory_knowledge(*, seed: bool = True, **options: Any) -> Knowledge:
    """A Knowledge over the seed schema on a fresh memory store."""
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    if seed:
        await kb.upsert(seed_facts())
    return Knowledge(kb, **options)


def topic_documents(limit: int | None = None) -> list[Document]:
    """Python reference topics (stdlib pydoc_data) as Documents with filterable metadata."""
    from pydoc_data.topics import topics

    keys = sorted(topics)[:limit]
    return [
        Document.from_text(
            topics[key],
            source=f"pydoc:{key}",
            metadata={"topic": key, "initial": key[0], "rank": i, "meta": {"long": len(topics[key]) > 3000}},
        )
        for i, key in enumerate(keys)
    ]
