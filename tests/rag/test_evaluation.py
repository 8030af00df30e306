"""Evaluation helpers."""

from __future__ import annotations

import pytest

from kag.errors import InvalidInputError
from kag.rag.evaluation import (
    format_table,
    mean,
    mean_recall_at_k,
    recall_at_k,
    reciprocal_rank,
)


def test_recall_at_k_counts_distinct_relevant_labels() -> None:
    ranked = ["a", "a", "b", "c", "d", "e"]
    assert recall_at_k(ranked, {"a", "d"}, 3) == 0.5
    assert recall_at_k(ranked, {"a", "d"}, 5) == 1.0
    assert recall_at_k(ranked, {"z"}, 5) == 0.0
    assert recall_at_k(ranked, set(), 5) == 1.0
    assert recall_at_k([], {"a"}, 5) == 0.0
    with pytest.raises(InvalidInputError):
        recall_at_k(ranked, {"a"}, 0)


def test_reciprocal_rank_and_means() -> None:
    assert reciprocal_rank(["x", "y", "z"], {"z"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x"], {"q"}) == 0.0
    assert mean([]) == 0.0
    assert mean_recall_at_k([(["a"], {"a"}), (["b"], {"a"})], 1) == 0.5


def test_format_table() -> None:
    text = format_table({"vector": {"recall@5": 0.8}, "hybrid": {"recall@5": 0.9, "mrr": 0.5}})
    lines = text.splitlines()
    assert lines[0].split() == ["mode", "recall@5", "mrr"]
    assert lines[2].split() == ["vector", "0.800", "-"]
    assert lines[3].split() == ["hybrid", "0.900", "0.500"]
    assert format_table({}) == ""
