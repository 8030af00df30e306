"""Knowledge bases, the Knowledge facade over facts and passages, tools and answers."""

from kag.knowledge.answer import Citation, RAGAnswer
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.factory import create_knowledge
from kag.knowledge.hits import EntityHit, SearchHit, TripletHit, TripletResults
from kag.knowledge.indexing import IndexReport
from kag.knowledge.knowledge import Knowledge
from kag.knowledge.tool import KnowledgeTool

__all__ = [
    "Citation",
    "EntityHit",
    "IndexReport",
    "Knowledge",
    "KnowledgeBase",
    "KnowledgeTool",
    "RAGAnswer",
    "SearchHit",
    "TripletHit",
    "TripletResults",
    "create_knowledge",
]
