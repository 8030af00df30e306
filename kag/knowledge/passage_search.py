"""Passage ranking of managed knowledge: vector, keyword or hybrid over a ``PassageStore``, then MMR.

* ``"vector"``: exact cosine, the same on every backend;
* ``"keyword"``: BM25 on memory, Lucene fulltext on Neo4j (scores differ between backends);
* ``"hybrid"``: ``alpha * vector + (1 - alpha) * keyword / max(keyword)`` over the union of
  both top-``fetch_k`` lists, with the exact vector score of every candidate.

Hits scoring below ``score_threshold`` are dropped; with ``mmr_lambda`` the top ``fetch_k``
are re-ranked by maximal marginal relevance (1.0 = relevance only).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np

from kag.graph.passages import PassageRow, PassageStore
from kag.knowledge.hits import SearchHit
from kag.ranking.fusion import hybrid_scores, min_max_normalize, mmr

__all__ = ["PassageRanking", "passage_hit", "rank_passages"]


@dataclass(frozen=True)
class PassageRanking:
    """How passages are ranked: ``mode``, hybrid ``alpha``, candidate pool ``fetch_k``, MMR, threshold."""

    mode: str
    alpha: float
    fetch_k: int
    mmr_lambda: float | None
    score_threshold: float


def passage_hit(row: PassageRow, score: float) -> SearchHit:
    """A stored passage as a ``SearchHit`` (ids: chunk, then document)."""
    return SearchHit(
        kind="passage",
        text=row.text,
        score=float(score),
        source=row.source,
        ids=(row.chunk_id, row.document_id),
        metadata=dict(row.metadata),
        mentions=row.mentions,
        title=row.title,
    )


async def rank_passages(
    store: PassageStore,
    ranking: PassageRanking,
    query: str,
    qvec: np.ndarray | None,
    k: int,
    scope: dict[str, Any] | None,
    candidates: int | None = None,
) -> list[SearchHit]:
    """The best ``k`` passages for ``query`` (``qvec`` its embedding) within the filter ``scope``."""
    fetch = max(ranking.fetch_k, k)
    want = fetch if ranking.mmr_lambda is not None else k
    if ranking.mode == "vector":
        assert qvec is not None
        rows = await store.vector_search(qvec, want, scope, candidates=candidates)
        scored = [(r, r.score) for r in rows]
    elif ranking.mode == "keyword":
        rows = await store.keyword_search(query, want, scope)
        scored = [(r, r.score) for r in rows]
    else:
        assert qvec is not None
        # independent reads: side by side (on Neo4j each is a round trip, and a restarted server plans each slowly)
        vrows, krows = await asyncio.gather(
            store.vector_search(qvec, fetch, scope, candidates=candidates), store.keyword_search(query, fetch, scope)
        )
        by_id = {r.chunk_id: r for r in vrows}
        missing = [r.chunk_id for r in krows if r.chunk_id not in by_id]
        if missing:  # exact vector scores for keyword-only candidates
            by_id.update({r.chunk_id: r for r in await store.vector_search(qvec, len(missing), scope, missing)})
        keyword = {r.chunk_id: r.score for r in krows}
        fused = hybrid_scores({cid: row.score for cid, row in by_id.items()}, keyword, alpha=ranking.alpha)
        scored = [(by_id[cid], s) for cid, s in fused if cid in by_id]
    scored = [(r, s) for r, s in scored if s >= ranking.score_threshold]
    if ranking.mmr_lambda is not None and len(scored) > 1:
        scored = await _mmr(store, ranking.mmr_lambda, qvec, scored, k, ranking.mode)
    return [passage_hit(r, s) for r, s in scored[:k]]


async def _mmr(
    store: PassageStore,
    mmr_lambda: float,
    qvec: np.ndarray | None,
    scored: list[tuple[PassageRow, float]],
    k: int,
    mode: str,
) -> list[tuple[PassageRow, float]]:
    vectors = await store.chunk_vectors([r.chunk_id for r, _ in scored])
    scored = [(r, s) for r, s in scored if r.chunk_id in vectors]
    if not scored:
        return []
    ids = [r.chunk_id for r, _ in scored]
    matrix = np.stack([vectors[i] for i in ids])
    relevance = [s for _, s in scored]
    if mode == "keyword":  # raw keyword scores: bring them to [0, 1] like the similarities
        norm = min_max_normalize(dict(zip(ids, relevance, strict=True)))
        relevance = [norm[i] for i in ids]
    picked = mmr(qvec, matrix, relevance, k=k, mmr_lambda=mmr_lambda, ids=ids)
    return [scored[i] for i in picked]
