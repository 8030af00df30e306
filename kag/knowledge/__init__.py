"""Knowledge bases: schema + store + embedder, and their search results."""

from kag.knowledge.base import KnowledgeBase
from kag.knowledge.hits import EntityHit, TripletHit, TripletResults

__all__ = ["EntityHit", "KnowledgeBase", "TripletHit", "TripletResults"]
