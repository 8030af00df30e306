"""kag: graph-native Knowledge-Augmented Generation.

Declare ``Entity`` and ``Relation`` models, store them in an embedded networkx
graph or in Neo4j, and let a language model fill typed triplet searches that
compile to parameterized Cypher. The root exports what a user writes; the query IR
lives in :mod:`kag.query`, the RAG building blocks in :mod:`kag.rag`, typed errors in
:mod:`kag.errors`.
"""

from kag import datasets, errors, training
from kag.agents import Agent, AgentCard, Task
from kag.datamodels import (
    ANY,
    Chunk,
    DataModel,
    Document,
    Entity,
    Field,
    GraphSchema,
    Relation,
    dynamic_enum,
    strict_schema,
)
from kag.knowledge import (
    Citation,
    EntityHit,
    IndexReport,
    Knowledge,
    KnowledgeBase,
    KnowledgeTool,
    RAGAnswer,
    SearchHit,
    TripletHit,
    TripletResults,
    create_knowledge,
)
from kag.knowledge.factory import BACKENDS
from kag.knowledge.rerank import EmbeddingReranker, LexicalReranker, Reranker
from kag.knowledge.retrievers import CallableRetriever, Retriever
from kag.lm import BaseLanguageModel, LanguageModel, LexicalLM, LlamaCppLM, OllamaLM, OpenAICompatibleLM, ScriptedLM
from kag.programs import (
    ExtractionReport,
    Generator,
    Input,
    KnowledgeExtractor,
    KnowledgeRetriever,
    Module,
    Program,
    SymbolicDataModel,
)
from kag.query import TripletChain, TripletSearch, triplet_chain_schema, triplet_search_schema
from kag.rag.embedders import CallableEmbedder, DocumentQueryEmbedder, Embedder, HashEmbedder
from kag.rag.openai_embedder import OpenAIEmbedder
from kag.training import plot_history, plot_program
from kag.version import __version__

__all__ = [
    "ANY",
    "BACKENDS",
    "Agent",
    "AgentCard",
    "BaseLanguageModel",
    "CallableEmbedder",
    "CallableRetriever",
    "Chunk",
    "Citation",
    "DataModel",
    "Document",
    "DocumentQueryEmbedder",
    "Embedder",
    "EmbeddingReranker",
    "Entity",
    "EntityHit",
    "ExtractionReport",
    "Field",
    "Generator",
    "GraphSchema",
    "HashEmbedder",
    "IndexReport",
    "Input",
    "Knowledge",
    "KnowledgeBase",
    "KnowledgeExtractor",
    "KnowledgeRetriever",
    "KnowledgeTool",
    "LanguageModel",
    "LexicalLM",
    "LexicalReranker",
    "LlamaCppLM",
    "Module",
    "OllamaLM",
    "OpenAICompatibleLM",
    "OpenAIEmbedder",
    "Program",
    "RAGAnswer",
    "Relation",
    "Reranker",
    "Retriever",
    "ScriptedLM",
    "SearchHit",
    "SymbolicDataModel",
    "Task",
    "TripletChain",
    "TripletHit",
    "TripletResults",
    "TripletSearch",
    "__version__",
    "create_knowledge",
    "datasets",
    "dynamic_enum",
    "errors",
    "plot_history",
    "plot_program",
    "strict_schema",
    "training",
    "triplet_chain_schema",
    "triplet_search_schema",
]
