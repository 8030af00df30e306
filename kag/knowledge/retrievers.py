"""Retrievers over the knowledge layer's names: a re-export of :mod:`kag.rag.retrievers`.

``CallableRetriever``, :func:`as_hit`, :func:`as_hits` and :func:`call_retriever` live in the retrieval
layer (``from kag.rag import CallableRetriever``, as the reference documents write it); this module keeps
the older import path working.
"""

from kag.rag.protocols import Retriever
from kag.rag.retrievers import CallableRetriever, as_hit, as_hits, call_retriever

__all__ = ["CallableRetriever", "Retriever", "as_hit", "as_hits", "call_retriever"]
