"""Retrieval quality through ``Knowledge.search`` on the Python reference topics (stdlib).

The same hand-written questions as ``tests/rag/test_retrieval_quality.py`` (which
measures the primitives), run end to end: load -> split -> embed -> store ->
search, with the library defaults (HashEmbedder(384), hybrid alpha=0.5,
fetch_k=20) and the same chunking (800/100). Run with ``pytest -s`` to see the
table. ``mrr@5`` only counts the first five hits. Measured (recall@5 / mrr@5)::

    mode      memory          neo4j
    vector    0.840 / 0.795   0.840 / 0.795   exact on both backends: the same ranking
    keyword   0.875 / 0.762   0.875 / 0.717   BM25Index vs Lucene fulltext
    hybrid    0.917 / 0.785   0.917 / 0.765

The floors sit a little under the measured values.
"""

from __future__ import annotations

import time

import pytest

from kag.rag.evaluation import format_table, mean, recall_at_k, reciprocal_rank
from kag.rag.splitter import RecursiveCharacterSplitter
from tests.knowledge.conftest import KnowledgeFactory, topic_documents
from tests.rag.test_retrieval_quality import QUESTIONS

FLOORS = {
    "memory": {"vector": 0.80, "keyword": 0.84, "hybrid": 0.89},
    "neo4j": {"vector": 0.80, "keyword": 0.84, "hybrid": 0.89},
}


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_recall_at_5_through_knowledge_search(knowledge_factory: KnowledgeFactory, backend: str) -> None:
    started = time.perf_counter()
    knowledge = await knowledge_factory(
        seed=False,
        name="pydoc",
        description="The Python language reference topics",
        sources=topic_documents(),
        splitter=RecursiveCharacterSplitter(chunk_size=800, chunk_overlap=100),
        facts=False,
    )
    report = await knowledge.ready()
    assert report.ok and report.documents == len(topic_documents())
    indexed = time.perf_counter() - started
    floors = FLOORS[backend]
    recalls: dict[str, list[float]] = {mode: [] for mode in floors}
    mrr: dict[str, list[float]] = {mode: [] for mode in floors}
    for question, relevant in QUESTIONS.items():
        for mode in floors:
            hits = await knowledge.search(question, k=5, mode=mode)
            assert all(h.kind == "passage" for h in hits) and len(hits) <= 5
            labels = [h.metadata["topic"] for h in hits]
            recalls[mode].append(recall_at_k(labels, relevant, 5))
            mrr[mode].append(reciprocal_rank(labels, relevant))
    table = {mode: {"recall@5": mean(recalls[mode]), "mrr@5": mean(mrr[mode])} for mode in floors}
    print(
        f"\n[{backend}] {report.chunks} chunks from {report.documents} topics, {len(QUESTIONS)} questions, "
        f"indexed in {indexed:.2f}s\n" + format_table(table)
    )
    for mode, floor in floors.items():
        assert table[mode]["recall@5"] >= floor, (mode, table[mode])
    assert table["hybrid"]["recall@5"] >= max(table["vector"]["recall@5"], table["keyword"]["recall@5"]) - 0.02
