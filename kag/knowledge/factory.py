"""``create_knowledge``: a knowledge base and a ``Knowledge`` over it in one call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kag.datamodels.base import Entity, Relation
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.knowledge import Knowledge, SearchMode
from kag.rag.embedders import Embedder
from kag.rag.loaders import AutoLoader, Source
from kag.rag.splitter import RecursiveCharacterSplitter


def create_knowledge(
    backend: str = "memory://",
    *,
    name: str = "knowledge",
    description: str = "",
    sources: Source | Iterable[Source] | None = None,
    entity_models: Sequence[type[Entity]] = (),
    relation_models: Sequence[type[Relation]] = (),
    embedder: Embedder | None = None,
    splitter: RecursiveCharacterSplitter | None = None,
    where: Mapping[str, Any] | None = None,
    context_max_chars: int = 6000,
    mode: SearchMode = "hybrid",
    alpha: float = 0.5,
    mmr_lambda: float | None = None,
    fetch_k: int = 20,
    score_threshold: float = 0.0,
    loader: AutoLoader | None = None,
    facts: bool = True,
    **kb_options: Any,
) -> Knowledge:
    """Build a :class:`KnowledgeBase` on ``backend`` and a :class:`Knowledge` over it.

    ``sources`` are indexed lazily (first ``ready()``/``search()``); ``kb_options``
    go to the store (``user``, ``password``, ``database`` for Neo4j, ...).
    """
    kb = KnowledgeBase(
        backend, entity_models=entity_models, relation_models=relation_models, embedder=embedder, **kb_options
    )
    return Knowledge(
        kb,
        name=name,
        description=description,
        sources=sources,
        splitter=splitter,
        loader=loader,
        where=where,
        context_max_chars=context_max_chars,
        mode=mode,
        alpha=alpha,
        mmr_lambda=mmr_lambda,
        fetch_k=fetch_k,
        score_threshold=score_threshold,
        facts=facts,
    )
