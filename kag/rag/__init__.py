"""Retrieval-augmented generation building blocks: loaders, splitting, embedding, ranking, filters."""

from kag.query.filters import compile_cypher, compile_matcher, flatten_metadata, matches, validate_filter
from kag.rag.combined_embedder import CombinedEmbedder
from kag.rag.embedders import CallableEmbedder, Embedder, HashEmbedder
from kag.rag.evaluation import recall_at_k, reciprocal_rank
from kag.rag.loaders import AutoLoader, LoadFailure, LoadResult
from kag.rag.onnx_embedder import OnnxEmbedder
from kag.rag.openai_embedder import OpenAIEmbedder
from kag.rag.splitter import RecursiveCharacterSplitter
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
    "ChromaRetriever",
    "CombinedEmbedder",
    "Embedder",
    "HashEmbedder",
    "InMemoryVectorStore",
    "LoadFailure",
    "LoadResult",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "PineconeRetriever",
    "QdrantRetriever",
    "RecursiveCharacterSplitter",
    "SQLiteVectorStore",
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
