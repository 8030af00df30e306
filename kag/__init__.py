"""kag: graph-native Knowledge-Augmented Generation.

Declare ``Entity`` and ``Relation`` models, store them in an embedded networkx
graph or in Neo4j, and let a language model fill typed triplet searches that
compile to parameterized Cypher. The root exports what a user writes; the query IR
lives in :mod:`kag.query`, the RAG building blocks in :mod:`kag.rag`, typed errors in
:mod:`kag.errors`.
"""

from kag import errors
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
from kag.lm import BaseLanguageModel, LanguageModel, LexicalLM, OllamaLM, OpenAICompatibleLM, ScriptedLM
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
from kag.rag.embedders import CallableEmbedder, Embedder, HashEmbedder
from kag.rag.openai_embedder import OpenAIEmbedder
from kag.version import __version__

__all__ = [
    "ANY",
    "BaseLanguageModel",
    "CallableEmbedder",
    "Chunk",
    "Citation",
    "DataModel",
    "Document",
    "Embedder",
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
    "Module",
    "OllamaLM",
    "OpenAICompatibleLM",
    "OpenAIEmbedder",
    "Program",
    "RAGAnswer",
    "Relation",
    "ScriptedLM",
    "SearchHit",
    "SymbolicDataModel",
    "TripletChain",
    "TripletHit",
    "TripletResults",
    "TripletSearch",
    "__version__",
    "create_knowledge",
    "dynamic_enum",
    "errors",
    "strict_schema",
    "triplet_chain_schema",
    "triplet_search_schema",
]
