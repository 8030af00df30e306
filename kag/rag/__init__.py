"""Retrieval-augmented generation building blocks: loaders, splitting, embedding, ranking, filters.

The extension protocols (``Loader``, ``Splitter``, ``Embedder``, ``VectorStore``,
``AtomicVectorStore``, ``Retriever``, ``Reranker``) are structural and runtime-checkable.
``CallableRetriever`` adapts a search function and normalizes its results into ``SearchHit`` values.
``Knowledge`` and ``create_knowledge`` live one layer up (``kag``, ``kag.knowledge``).
"""

from kag.datamodels.documents import Chunk, Document
from kag.query.filters import compile_cypher, compile_matcher, flatten_metadata, matches, validate_filter
from kag.rag.combined_embedder import CombinedEmbedder
from kag.rag.embedders import CallableEmbedder, DocumentQueryEmbedder, Embedder, HashEmbedder
from kag.rag.evaluation import recall_at_k, reciprocal_rank
from kag.rag.hits import SearchHit
from kag.rag.loaders import AutoLoader, Loader, LoadFailure, LoadResult
from kag.rag.onnx_embedder import OnnxEmbedder
from kag.rag.openai_embedder import OpenAIEmbedder
from kag.rag.protocols import Reranker, Retriever
from kag.rag.reports import IndexReport
from kag.rag.retrievers import CallableRetriever
from kag.rag.splitter import RecursiveCharacterSplitter, Splitter
from kag.rag.urlsafety import fetch_url, validate_url
from kag.rag.vector_adapters import ChromaRetriever, PineconeRetriever, QdrantRetriever
from kag.rag.vectorstores import (
    AtomicVectorStore,
    InMemoryVectorStore,
    SQLiteVectorStore,
    VectorStore,
    VectorStoreRetriever,
)
from kag.rag.wordllama_embedder import WordLlamaEmbedder
from kag.ranking.bm25 import BM25Index
from kag.ranking.fusion import hybrid_scores, mmr, score_threshold, sort_results

__all__ = [
    "AtomicVectorStore",
    "AutoLoader",
    "BM25Index",
    "CallableEmbedder",
    "CallableRetriever",
    "ChromaRetriever",
    "Chunk",
    "CombinedEmbedder",
    "Document",
    "DocumentQueryEmbedder",
    "Embedder",
    "HashEmbedder",
    "InMemoryVectorStore",
    "IndexReport",
    "LoadFailure",
    "LoadResult",
    "Loader",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "PineconeRetriever",
    "QdrantRetriever",
    "RecursiveCharacterSplitter",
    "Reranker",
    "Retriever",
    "SQLiteVectorStore",
    "SearchHit",
    "Splitter",
    "VectorStore",
    "VectorStoreRetriever",
    "WordLlamaEmbedder",
    "compile_cypher",
    "compile_matcher",
    "fetch_url",
    "flatten_metadata",
    "hybrid_scores",
    "matches",
    "mmr",
    "recall_at_k",
    "reciprocal_rank",
    "score_threshold",
    "sort_results",
    "validate_filter",
    "validate_url",
]
