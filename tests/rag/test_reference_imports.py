"""The import lines of the reference documents, with the package named ``kag``: each must run as written."""

from __future__ import annotations

import pytest

import kag
import kag.knowledge.retrievers
import kag.rag

# as the reference writes them (``from <package>.rag import ...``), package name changed
RAG_IMPORTS = [
    "from kag.rag import CallableEmbedder, RecursiveCharacterSplitter",
    "from kag.rag import OpenAIEmbedder",
    """from kag.rag import (
    AutoLoader,
    AtomicVectorStore,
    CallableEmbedder,
    CallableRetriever,
    Chunk,
    Embedder,
    HashEmbedder,
    InMemoryVectorStore,
    IndexReport,
    Loader,
    OpenAIEmbedder,
    RecursiveCharacterSplitter,
    Reranker,
    Retriever,
    SQLiteVectorStore,
    Splitter,
    VectorStore,
)""",
]


@pytest.mark.parametrize("line", RAG_IMPORTS)
def test_each_reference_import_line_runs(line: str) -> None:
    names: dict[str, object] = {}
    exec(line, names)  # fixed import statements written in this file
    assert all(value is getattr(kag.rag, name) for name, value in names.items() if name != "__builtins__")


def test_callable_retriever_is_one_class_under_every_import_path() -> None:
    assert kag.rag.CallableRetriever is kag.knowledge.retrievers.CallableRetriever is kag.CallableRetriever
    assert kag.rag.SearchHit is kag.SearchHit  # what it returns is importable beside it


async def test_the_retriever_from_kag_rag_normalizes_what_a_function_returns() -> None:
    def search(query: str, k: int = 5) -> list[object]:
        return [{"content": f"about {query}", "score": 0.5, "source": "a.md"}, "plain text"][:k]

    hits = await kag.rag.CallableRetriever(search).retrieve("receipts", k=1)
    assert [(h.text, h.score, h.source) for h in hits] == [("about receipts", 0.5, "a.md")]
    assert isinstance(hits[0], kag.rag.SearchHit)
