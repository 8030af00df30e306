"""Programs: modules traced into async graphs (functional API).

``Input`` starts a graph, modules called on symbolic tensors record it, and
``Program`` runs it (independent branches concurrently), describes it
(``summary()``) and saves/loads it as JSON without credentials.
"""

from kag.programs.generator import Generator
from kag.programs.module import Input, Module, SymbolicTensor
from kag.programs.program import Program
from kag.programs.prompts import TemplateError, UnsafeTemplateError
from kag.programs.retriever import Fact, KnowledgeRetriever

__all__ = [
    "Fact",
    "Generator",
    "Input",
    "KnowledgeRetriever",
    "Module",
    "Program",
    "SymbolicTensor",
    "TemplateError",
    "UnsafeTemplateError",
]
