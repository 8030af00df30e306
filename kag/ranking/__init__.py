"""Ranking shared by every backend: BM25 keyword scores, hybrid fusion, MMR, thresholds."""

from kag.ranking.bm25 import BM25Index
from kag.ranking.fusion import hybrid_scores, max_normalize, min_max_normalize, mmr, score_threshold, sort_results

__all__ = [
    "BM25Index",
    "hybrid_scores",
    "max_normalize",
    "min_max_normalize",
    "mmr",
    "score_threshold",
    "sort_results",
]
