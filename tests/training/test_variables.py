"""Trainable state: variables on modules, save / load (alone and with the program), k-nearest demos."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kag
from kag.errors import CheckpointError, ConfigError
from kag.training import BootstrapFewShot, Demo, KNNFewShot, Variable
from tests.training.conftest import DemoCopyLM, Query, build_program, questions


async def trained(kb: kag.KnowledgeBase, optimizer: Any = None) -> kag.Program:
    x, y = questions()
    program = build_program(kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=optimizer or BootstrapFewShot(max_demos=2, seed=0))
    await program.fit(x[:16], y[:16], epochs=2, batch_size=4, validation_data=(x[16:], y[16:]), verbose=0)
    return program


def test_modules_hold_variables_and_programs_list_them(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM(), instructions="Find the capital.")
    assert list(program.trainable_modules()) == ["retriever", "answerer"]
    assert [v.instructions for v in program.trainable_variables] == ["Find the capital.", None]
    retriever = program.modules["retriever"]
    assert retriever.trainable and retriever.instructions == "Find the capital."
    retriever.trainable = False
    assert len(program.trainable_variables) == 1  # frozen modules are left out
    assert "retriever" in program.get_variables()  # but their state is still saved


def test_the_module_examples_are_the_variable_demos(capitals_kb) -> None:
    search = {
        "subject_label": "City",
        "subject_similarity_search": "*",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": "Elandor",
    }
    program = build_program(
        capitals_kb, DemoCopyLM(), examples=[({"query": "What is the capital of Elandor?"}, search)]
    )
    retriever = program.modules["retriever"]
    assert retriever.variable.demos == [Demo({"query": "What is the capital of Elandor?"}, search, None)]
    messages = retriever.messages(Query(query="What is the capital of Tovania?"))
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]


async def test_save_variables_and_load_them_into_a_fresh_program(capitals_kb, tmp_path: Path) -> None:
    program = await trained(capitals_kb)
    path = program.save_variables(tmp_path / "variables.json")
    document = json.loads(path.read_text())
    assert document["format"] == "kag-variables" and document["version"] == 1
    assert document["variables"]["retriever"]["demos"]
    fresh = build_program(capitals_kb, DemoCopyLM())
    x, _ = questions()
    before = [o.model_dump() for o in await fresh.predict(x)]
    fresh.load_variables(path)
    assert fresh.get_variables() == program.get_variables()
    answers = [o.model_dump() for o in await fresh.predict(x)]
    assert answers == [o.model_dump() for o in await program.predict(x)]
    assert answers != before


async def test_program_save_keeps_the_variables(capitals_kb, tmp_path: Path) -> None:
    program = await trained(capitals_kb, KNNFewShot(k=1))
    program.save(tmp_path / "program.json")
    lm = DemoCopyLM()
    loaded = kag.Program.load(
        tmp_path / "program.json",
        knowledge_base=capitals_kb,
        language_model={"retriever": lm, "answerer": kag.LexicalLM(knowledge_base=capitals_kb)},
    )
    assert loaded.get_variables() == program.get_variables()
    assert loaded.modules["retriever"].variable.nearest == 1
    x, _ = questions()
    assert [o.model_dump() for o in await loaded.predict(x)] == [o.model_dump() for o in await program.predict(x)]


async def test_variables_of_another_program_are_refused(capitals_kb, tmp_path: Path) -> None:
    program = await trained(capitals_kb)
    path = program.save_variables(tmp_path / "variables.json")
    inputs = kag.Input(data_model=Query)
    other = kag.Program(
        inputs,
        kag.KnowledgeRetriever(knowledge_base=capitals_kb, language_model=DemoCopyLM(), name="finder")(inputs),
    )
    with pytest.raises(ConfigError, match=r"does not fit this program.*unknown.*missing"):
        other.load_variables(path)


async def test_a_demo_search_that_cannot_run_is_refused(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    bad = {"subject_label": "Planet", "subject_similarity_search": "*", "relation_label": "IsCapitalOf",
           "object_label": "Country", "object_similarity_search": "x"}  # fmt: skip
    with pytest.raises(ConfigError, match="demo 0 of 'retriever'"):
        program.set_variables({"retriever": {"demos": [{"input": {"query": "q"}, "output": bad}]}})
    with pytest.raises(ConfigError, match="demo 0 of 'answerer'"):
        program.set_variables({"answerer": {"demos": [{"input": {"query": "q"}, "output": {"entities": 3}}]}})
    with pytest.raises(ConfigError, match="no trainable module named"):
        program.set_variables({"nobody": {"demos": []}})


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        ("{not json", CheckpointError, "cannot read variables"),
        ('{"format": "kag-program"}', ConfigError, "not a kag variables file"),
        ('{"format": "kag-variables", "version": 9, "variables": {}}', ConfigError, "version 9"),
    ],
)
def test_malformed_variables_files_are_refused(capitals_kb, tmp_path: Path, content: str, error: Any, match: str):
    path = tmp_path / "v.json"
    path.write_text(content)
    program = build_program(capitals_kb, DemoCopyLM())
    with pytest.raises(error, match=match):
        program.load_variables(path)
    with pytest.raises(CheckpointError, match="cannot read"):
        program.load_variables(tmp_path / "missing.json")


def test_variable_configs_round_trip_and_are_checked() -> None:
    variable = Variable(instructions=["a", "b"], demos=[Demo({"q": 1}, {"a": 2}, 0.5)], nearest=3, trainable=False)
    assert Variable.from_config(json.loads(json.dumps(variable.get_config()))) == variable
    with pytest.raises(ConfigError, match="reward"):
        Variable.from_config({"demos": [{"input": {}, "output": {}, "reward": 2}]})
    with pytest.raises(ConfigError, match="unknown key"):
        Variable.from_config({"demo": []})
    with pytest.raises(ConfigError, match="nearest"):
        Variable(nearest=0)


async def test_nearest_demos_are_the_most_similar_inputs() -> None:
    demos = [
        Demo({"query": "What is the capital of Elandor?"}, {"n": 1}),
        Demo({"query": "Which country has the capital Brask?"}, {"n": 2}),
        Demo({"query": "How many cities does Tovania have?"}, {"n": 3}),
    ]
    variable = Variable(demos=demos, nearest=1)
    embedder = kag.HashEmbedder(dimensions=256)
    shown = await variable.demos_for(json.dumps({"query": "Which country has the capital Ulmo?"}), embedder)
    assert [d.output["n"] for d in shown] == [2]
    variable.nearest = 2
    shown = await variable.demos_for(json.dumps({"query": "How many cities does Caradh have?"}), embedder)
    assert [d.output["n"] for d in shown][-1] == 3 and len(shown) == 2
    with pytest.raises(ConfigError, match="embedder"):
        await variable.demos_for("x", None)
