"""Rewards and metrics: values, masks, checks."""

from __future__ import annotations

import math
from typing import Any

import pytest

import kag
from kag.errors import ConfigError, RewardError
from kag.lm import ScriptedLM
from kag.training import AnswerSetF1, CosineSimilarity, ExactMatch, FunctionReward, LMAsJudge
from kag.training.rewards import check_reward_value, get_reward


async def test_exact_match_folds_names_and_compares_lists_as_sets() -> None:
    reward = ExactMatch()
    assert await reward({"entities": ["São Paulo", "Lima"]}, {"entities": ["lima", "sao  paulo"], "answer": "x"}) == 1
    assert await reward({"entities": ["Lima"]}, {"entities": ["Lima", "Quito"]}) == 0
    assert await reward({"number": 3}, {"number": 3.0}) == 1
    assert await reward({"number": 3}, None) == 0  # a failed prediction


async def test_masks_choose_the_compared_fields() -> None:
    y_true = {"answer": "Paris", "entities": ["Paris"]}
    y_pred = {"answer": "It is Paris.", "entities": ["Paris"]}
    assert await ExactMatch()(y_true, y_pred) == 0
    assert await ExactMatch(in_mask=["entities"])(y_true, y_pred) == 1
    assert await ExactMatch(out_mask=["answer"])(y_true, y_pred) == 1


async def test_answer_set_f1() -> None:
    f1 = AnswerSetF1()
    assert await f1({"entities": ["A", "B"]}, {"entities": ["A", "C"]}) == pytest.approx(0.5)
    assert await f1({"entities": ["A", "B"]}, {"entities": ["A"]}) == pytest.approx(2 / 3)
    assert await f1({"entities": []}, {"entities": []}) == 1.0
    assert await f1({"entities": ["A"]}, {"entities": []}) == 0.0
    assert await f1({"entities": ["A"], "number": 2}, {"entities": ["A"], "number": 3}) == pytest.approx(0.5)


async def test_cosine_similarity_with_an_embedder() -> None:
    reward = CosineSimilarity(kag.HashEmbedder(dimensions=256))
    same = await reward({"answer": "Paris is the capital"}, {"answer": "Paris is the capital"})
    near = await reward({"answer": "Paris is the capital"}, {"answer": "the capital is Paris"})
    far = await reward({"answer": "Paris is the capital"}, {"answer": "zebra quantum violin"})
    assert same == pytest.approx(1.0)
    assert 0.0 <= far < near < 1.0
    with pytest.raises(ConfigError, match="embedder"):
        CosineSimilarity(None)


async def test_lm_as_judge_asks_a_model_for_a_score() -> None:
    lm = ScriptedLM([{"reason": "same city", "score": 0.9}, {"reason": "bad", "score": 7}, {"reason": "x", "score": 1}])
    judge = LMAsJudge(lm)
    assert await judge({"answer": "Paris"}, {"answer": "The capital is Paris"}) == pytest.approx(0.9)
    assert "expected" in lm.calls[0]["messages"][-1]["content"]
    # a score outside [0, 1] is an invalid answer for the schema: the model is asked again
    assert await judge({"answer": "Paris"}, {"answer": "Lyon"}) == 1.0
    assert len(lm.calls) == 3


async def test_any_function_is_a_reward_and_its_value_is_checked() -> None:
    async def partial(y_true: Any, y_pred: Any) -> float:
        return 0.25

    assert await get_reward(partial)({"a": 1}, {"a": 2}) == 0.25
    assert get_reward(partial).name == "partial"
    assert await FunctionReward(lambda t, p: t == p, in_mask=["a"])({"a": 1, "b": 2}, {"a": 1, "b": 3}) == 1.0
    for bad in (math.nan, 1.01, -0.5, "1", None):
        with pytest.raises(RewardError, match="in \\[0, 1\\]"):
            await FunctionReward(lambda t, p, v=bad: v, name="bad")({"a": 1}, {"a": 1})
    assert check_reward_value(True, "b") == 1.0


def test_reward_names_and_configs() -> None:
    assert isinstance(get_reward("exact_match"), ExactMatch)
    assert get_reward("accuracy").name == "accuracy"
    assert isinstance(get_reward("f1"), AnswerSetF1)
    rebuilt = ExactMatch.from_config(ExactMatch(in_mask=["entities"], name="em").get_config())
    assert rebuilt.in_mask == ["entities"] and rebuilt.name == "em"
    with pytest.raises(ConfigError, match="unknown reward"):
        get_reward("rouge")
    with pytest.raises(ConfigError, match="must be a Reward"):
        get_reward(3)
