"""The `make demo` job runs offline and answers its questions correctly."""

from __future__ import annotations

import json
import time
from importlib import resources

import pytest

from kag import demo


def test_demo_main_prints_correct_answers(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    assert demo.main([]) == 0
    elapsed = time.perf_counter() - started
    out = capsys.readouterr().out
    data = json.loads(resources.files("kag").joinpath("data/world.json").read_text("utf-8"))
    japan = sum(1 for c in data["cities"] if c["country"] == "JP")
    germany = [c["name"] for c in data["cities"] if c["country"] == "DE"]

    blocks = {b.split("\n", 1)[0]: b for b in out.split("\nQ: ")[1:]}
    assert set(blocks) == set(demo.QUESTIONS)

    def answer(question: str) -> str:
        return next(line for line in blocks[question].splitlines() if line.startswith("A: "))

    assert "Paris" in answer("What is the capital of France?")
    assert all(city in answer("Which cities are in Germany?") for city in germany)
    assert answer("How many cities are in Japan?").startswith(f"A: {japan} ")
    assert "Kenya" in answer("Which country is Nairobi in?")
    assert "South America" in answer("Which continent is Lima in?")
    assert "9733276" in answer("What is the population of Tokyo?")
    # the report shows the compiled Cypher and the facts
    assert "MATCH (n0:`City` {kag_ns: $ns})-[r1:`IsCapitalOf`]->(n1" in blocks["What is the capital of France?"]
    assert "Lima -[IsCityOf]-> Peru -[IsInContinent]-> South America" in out
    assert "not a language model" in out and "GeoNames" in out
    assert elapsed < 30


def test_demo_takes_questions_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["What is the capital of Peru?"]) == 0
    out = capsys.readouterr().out
    assert "Q: What is the capital of Peru?" in out and "A: Lima" in out


def test_demo_fits_first_on_labelled_questions_that_avoid_the_asked_entities(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo.main(["--fit", "1", "What is the capital of Peru?"]) == 0
    out = capsys.readouterr().out
    assert "Trained on 6 labelled questions (KNNFewShot)" in out
    assert "A: Lima" in out
    names = demo._names_in(["What is the capital of Peru?", "Which continent is New York City in?"])
    assert {"Peru", "New York City", "York"} <= set(names)


@pytest.mark.parametrize("argv", [["--lm", "gpt"], ["--fit", "-1"]])
def test_demo_refuses_bad_options(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        demo.main(argv)
    assert exc.value.code == 2
    assert "usage: python -m kag.demo" in capsys.readouterr().err
