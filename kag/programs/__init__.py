"""Programs: modules traced into async graphs (functional API).

``Input`` starts a graph, modules called on symbolic data models record it, and
``Program`` runs it (independent branches concurrently), describes it
(``summary()``) and saves/loads it as JSON without credentials.
"""

from kag.programs.extractor import ExtractionReport, KnowledgeExtractor
from kag.programs.generator import Generator
from kag.programs.module import Input, Module, SymbolicDataModel
from kag.programs.program import Program
from kag.programs.retriever import Fact, KnowledgeRetriever

__all__ = [
    "ExtractionReport",
    "Fact",
    "Generator",
    "Input",
    "KnowledgeExtractor",
    "KnowledgeRetriever",
    "Module",
    "Program",
    "SymbolicDataModel",
]
