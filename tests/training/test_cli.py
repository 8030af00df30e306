"""``kag train``: fit a saved program from the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kag
from kag.cli import main
from kag.datasets import Answer, Query, load_kgqa

pytestmark = pytest.mark.timeout(180)


def saved_program(tmp_path: Path) -> Path:
    kb = kag.datasets.kgqa.countries_knowledge_base()
    lm = kag.LexicalLM(knowledge_base=kb)
    inputs = kag.Input(data_model=Query, name="question")
    facts = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, k=50, max_hops=2, name="retriever")(inputs)
    answer = kag.Generator(data_model=Answer, language_model=lm, name="answerer")(facts)
    return kag.Program(inputs=inputs, outputs=answer, name="kgqa").save(tmp_path / "program.json")


def test_kag_train_writes_variables_the_program_loads(tmp_path: Path, capsys) -> None:
    program = saved_program(tmp_path)
    (x, y), _ = load_kgqa(types=["lookup", "inverse"], train_size=6, seed=2)
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"x": q, "y": a}) + "\n" for q, a in zip(x, y, strict=True)))
    out = tmp_path / "variables.json"
    code = main(
        [
            "train", str(program), "--data", str(data), "--out", str(out), "--kb", "memory://",
            "--example", "countries", "--epochs", "1", "--optimizer", "knn_few_shot", "--validation-split", "0.5",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert re.search(
        r"^epoch 1: reward [01]\.\d{3}, errors 0, .*candidates 2, val_reward [01]\.\d{3}", captured.out, re.M
    )
    document = json.loads(out.read_text())
    assert set(document["variables"]) == {"retriever", "answerer"}
    kb = kag.datasets.kgqa.countries_knowledge_base()
    loaded = kag.Program.load(program, knowledge_base=kb)
    loaded.load_variables(out)
    assert loaded.get_variables() == document["variables"]


@pytest.mark.parametrize(
    ("line", "match"),
    [("{not json", "questions.jsonl:2: not valid JSON"), ('{"x": "q"}', "questions.jsonl:2: expected an object")],
)
def test_kag_train_reports_a_bad_line_with_its_number(tmp_path: Path, capsys, line: str, match: str) -> None:
    program = saved_program(tmp_path)
    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"x": {"query": "q"}, "y": {"entities": []}}) + "\n" + line + "\n")
    code = main(["train", str(program), "--data", str(data), "--out", str(tmp_path / "v.json"), "--kb", "memory://"])
    assert code == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "v.json").exists()


def test_kag_train_reports_labels_that_do_not_fit(tmp_path: Path, capsys) -> None:
    program = saved_program(tmp_path)
    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"x": {"query": "q"}, "y": {"names": ["Paris"]}}) + "\n")
    code = main(
        ["train", str(program), "--data", str(data), "--out", str(tmp_path / "v.json"), "--kb", "memory://",
         "--schema", "kag.examples.countries"]
    )  # fmt: skip
    assert code == 1
    assert "field 'names'" in capsys.readouterr().err
