"""kag.datasets.load_kgqa: the packaged questions, split by seed and stratified by type."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.kgqa.export_dataset import PACKAGED, packaged_rows, render
from kag.datasets import KGQA_TYPES, kgqa_records, load_kgqa
from kag.errors import ConfigError


def test_the_packaged_file_matches_the_benchmark_questions() -> None:
    assert PACKAGED.read_text(encoding="utf-8") == render(packaged_rows())
    assert len(kgqa_records()) == 722


def test_the_split_is_seeded_stratified_and_disjoint() -> None:
    (x_train, y_train, t_train), (x_test, y_test, t_test) = load_kgqa(seed=3, return_types=True)
    assert len(x_train) + len(x_test) == 722
    assert len(x_train) == len(y_train) == len(t_train)
    assert set(t_train) == set(t_test) == set(KGQA_TYPES)
    assert not {q["query"] for q in x_train} & {q["query"] for q in x_test}
    again = load_kgqa(seed=3, return_types=True)
    assert again[0][0] == x_train and again[1][1] == y_test
    assert load_kgqa(seed=4)[0][0] != x_train
    counts = Counter(t_train)
    assert counts["variant"] == 81 and counts["negation"] == 20  # half of each type


def test_labels_are_names_or_numbers() -> None:
    records = {r["question"]: r for r in kgqa_records(["count", "lookup"])}
    (x, y), _ = load_kgqa(types=["count", "lookup"], train_size=0.5, seed=0)
    for question, label in zip(x, y, strict=True):
        answer = records[question["query"]]["answer"]
        if answer["kind"] == "count":
            assert label == {"number": answer["value"]}
        else:
            assert label == {"entities": answer["names"]}


def test_a_number_of_training_questions_and_per_type() -> None:
    (x, _), (x_test, _) = load_kgqa(train_size=50, per_type=10, seed=1)
    assert len(x) == 50 and len(x_test) == 60
    (x, _), _ = load_kgqa(types="lookup", train_size=5, seed=1)
    assert len(x) == 5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"types": ["trivia"]}, "unknown KGQA question type"),
        ({"train_size": 1.0}, "fraction"),
        ({"train_size": 722}, "at least one question"),
        ({"per_type": 1}, "per_type"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match) -> None:
    with pytest.raises(ConfigError, match=match):
        load_kgqa(**kwargs)
