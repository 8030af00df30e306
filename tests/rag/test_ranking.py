"""Hybrid fusion, MMR and thresholds: math, determinism, validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import InvalidInputError
from kag.ranking.fusion import hybrid_scores, max_normalize, min_max_normalize, mmr, score_threshold, sort_results


def test_weighted_fusion_divides_keyword_scores_by_the_best() -> None:
    vector = {"a": 0.9, "b": 0.5, "c": 0.7}
    keyword = {"b": 12.0, "c": 2.0, "d": 7.0}
    fused = dict(hybrid_scores(vector, keyword, alpha=0.5))
    assert fused["a"] == pytest.approx(0.45)  # no keyword hit: 0 there
    assert fused["b"] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    # the weakest keyword hit keeps its share (2/12): min-max scaling would zero it
    assert fused["c"] == pytest.approx(0.5 * 0.7 + 0.5 * 2.0 / 12.0)
    assert fused["d"] == pytest.approx(0.5 * 7.0 / 12.0)
    assert list(dict(hybrid_scores(vector, keyword, alpha=1.0))) == ["a", "c", "b", "d"]
    assert [i for i, _ in hybrid_scores(vector, keyword, alpha=0.0)][:1] == ["b"]


def test_max_normalize() -> None:
    assert max_normalize({"x": 4.0, "y": 1.0}) == {"x": 1.0, "y": 0.25}
    assert max_normalize({"x": 0.0}) == {"x": 0.0}
    assert max_normalize({}) == {}


def test_single_keyword_hit_normalizes_to_one() -> None:
    assert min_max_normalize({"x": 3.0}) == {"x": 1.0}
    assert min_max_normalize({"x": 0.0, "y": 0.0}) == {"x": 0.0, "y": 0.0}
    assert min_max_normalize({}) == {}


def test_rrf() -> None:
    vector = {"a": 0.9, "b": 0.8}
    keyword = {"b": 5.0, "c": 1.0}
    fused = dict(hybrid_scores(vector, keyword, method="rrf", rrf_k=60))
    assert fused["b"] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert fused["a"] == pytest.approx(0.5 / 61)
    assert fused["c"] == pytest.approx(0.5 / 62)
    assert [i for i, _ in hybrid_scores(vector, keyword, method="rrf")] == ["b", "a", "c"]


def test_ties_broken_by_id() -> None:
    result = hybrid_scores({"b": 0.5, "a": 0.5, "c": 0.5}, {})
    assert [i for i, _ in result] == ["a", "b", "c"]
    assert sort_results({"y": 1.0, "x": 1.0, "z": 2.0}) == [("z", 2.0), ("x", 1.0), ("y", 1.0)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": 1.5},
        {"alpha": -0.1},
        {"method": "max"},
        {"method": "rrf", "rrf_k": -1},
    ],
)
def test_hybrid_validation(kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        hybrid_scores({"a": 0.5}, {"a": 1.0}, **kwargs)


def test_hybrid_rejects_bad_scores() -> None:
    with pytest.raises(InvalidInputError, match=r"\[0, 1\]"):
        hybrid_scores({"a": 3.0}, {})
    with pytest.raises(InvalidInputError):
        hybrid_scores({"a": float("nan")}, {})


@settings(max_examples=150, deadline=None)
@given(
    vector=st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 1)),
    keyword=st.dictionaries(st.sampled_from("defghijk"), st.floats(-50, 50)),
    alpha=st.floats(0, 1),
)
def test_weighted_fusion_properties(vector: dict, keyword: dict, alpha: float) -> None:
    result = hybrid_scores(vector, keyword, alpha=alpha)
    assert {i for i, _ in result} == set(vector) | set(keyword)
    assert all(-1e-9 <= s <= 1 + 1e-9 for _, s in result)
    assert result == sorted(result, key=lambda item: (-item[1], item[0]))
    assert hybrid_scores(dict(reversed(vector.items())), keyword, alpha=alpha) == result


def test_score_threshold() -> None:
    results = [("a", 0.9), ("b", 0.7), ("c", 0.69)]
    assert score_threshold(results, 0.7) == [("a", 0.9), ("b", 0.7)]
    assert score_threshold(results, None) == results
    with pytest.raises(InvalidInputError):
        score_threshold(results, float("nan"))


def test_mmr_prefers_diverse_candidates() -> None:
    query = np.array([1.0, 0.0, 0.0])
    candidates = np.array(
        [
            [1.0, 0.0, 0.0],  # 0: best match
            [0.99, 0.14, 0.0],  # 1: near-duplicate of 0
            [0.7, 0.0, 0.71],  # 2: relevant and different
        ]
    )
    assert mmr(query, candidates, k=3, mmr_lambda=1.0) == [0, 1, 2]  # pure relevance
    assert mmr(query, candidates, k=2, mmr_lambda=0.3) == [0, 2]
    assert mmr(query, candidates, k=10) == mmr(query, candidates, k=3)  # k capped at n


def test_mmr_with_scores_and_id_ties() -> None:
    vecs = np.eye(4)
    scores = np.array([0.5, 0.5, 0.5, 0.9])
    assert mmr(None, vecs, scores, k=4, mmr_lambda=0.5, ids=["d", "b", "c", "a"]) == [3, 1, 2, 0]
    assert mmr(None, vecs, scores, k=2) == [3, 0]  # no ids: lower index wins ties
    assert mmr(None, np.zeros((0, 3)), np.zeros(0), k=3) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda: mmr(None, np.eye(2), None, k=1),  # nothing to rank by
        lambda: mmr(np.ones(3), np.eye(2), k=1),  # wrong query size
        lambda: mmr(None, np.eye(2), [1.0], k=1),  # wrong score count
        lambda: mmr(None, np.ones(3), [1.0], k=1),  # not 2-d
        lambda: mmr(None, np.eye(2), [1.0, 1.0], k=-1),
        lambda: mmr(None, np.eye(2), [1.0, 1.0], k=1, mmr_lambda=2.0),
        lambda: mmr(None, np.eye(2), [1.0, 1.0], k=1, ids=["a"]),
        lambda: mmr(None, np.array([[np.nan, 0.0]]), [1.0], k=1),
    ],
)
def test_mmr_validation(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError):
        call()
