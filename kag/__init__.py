"""kag: graph-native Knowledge-Augmented Generation.

Declare ``Entity`` and ``Relation`` models, store them in an embedded networkx
graph or in Neo4j, and let a language model fill typed triplet searches that
compile to parameterized Cypher.
"""

from kag import errors
from kag.datamodels import ANY, DataModel, Entity, Field, GraphSchema, Relation, dynamic_enum, strict_schema
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
from kag.lm.lexical import LexicalLM
from kag.programs import (
    Fact,
    Generator,
    Input,
    KnowledgeRetriever,
    Module,
    Program,
    SymbolicTensor,
    TemplateError,
    UnsafeTemplateError,
)
from kag.programs.extractor import ExtractionReport, KnowledgeExtractor
from kag.query import (
    CompiledQuery,
    QueryPlan,
    TripletChain,
    TripletSearch,
    compile_plan,
    plan_triplet_search,
    triplet_chain_schema,
    triplet_search_schema,
)
from kag.rag.embedders import CallableEmbedder, Embedder, HashEmbedder

__version__ = "0.1.0"

__all__ = [
    "ANY",
    "CallableEmbedder",
    "Citation",
    "CompiledQuery",
    "DataModel",
    "Embedder",
    "Entity",
    "EntityHit",
    "ExtractionReport",
    "Fact",
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
    "LexicalLM",
    "Module",
    "Program",
    "QueryPlan",
    "RAGAnswer",
    "Relation",
    "SearchHit",
    "SymbolicTensor",
    "TemplateError",
    "TripletChain",
    "TripletHit",
    "TripletResults",
    "TripletSearch",
    "UnsafeTemplateError",
    "compile_plan",
    "create_knowledge",
    "dynamic_enum",
    "errors",
    "plan_triplet_search",
    "strict_schema",
    "triplet_chain_schema",
    "triplet_search_schema",
]
