"""Triplet searches, the backend-neutral query plan, and its Cypher compiler."""

from kag.query.cypher import CompiledQuery, compile_plan
from kag.query.plan import HopSpec, NodeSpec, QueryPlan, plan_similarity_search, plan_triplet_search
from kag.query.triplet import TripletChain, TripletSearch, triplet_chain_schema, triplet_search_schema

__all__ = [
    "CompiledQuery",
    "HopSpec",
    "NodeSpec",
    "QueryPlan",
    "TripletChain",
    "TripletSearch",
    "compile_plan",
    "plan_similarity_search",
    "plan_triplet_search",
    "triplet_chain_schema",
    "triplet_search_schema",
]
