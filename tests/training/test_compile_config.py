"""Compile settings saved with a program and restored on load; get_optimizer / get_reward forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kag
from kag.errors import ConfigError, TrainingError
from kag.training import BootstrapFewShot, ExactMatch, FunctionReward, KNNFewShot, RandomFewShot, Trainer
from kag.training.optimizers import InstructionOptimizer, get_optimizer, serialize_optimizer
from kag.training.protocols import TrainableProgram
from kag.training.rewards import AnswerSetF1, get_reward, serialize_reward
from tests.training.conftest import DemoCopyLM, build_program, questions

pytestmark = pytest.mark.timeout(120)


def half_credit(y_true: dict[str, Any], y_pred: dict[str, Any]) -> float:
    """A module-level reward: saved by its import path."""
    return 0.5


def load(path: Path, kb: kag.KnowledgeBase, **kwargs: Any) -> kag.Program:
    return kag.Program.load(
        path,
        knowledge_base=kb,
        language_model={"retriever": DemoCopyLM(), "answerer": kag.LexicalLM(knowledge_base=kb)},
        **kwargs,
    )


# -- state and protocol ------------------------------------------------------------------------


def test_each_program_has_its_own_training_state(capitals_kb) -> None:
    first, second = build_program(capitals_kb, DemoCopyLM()), build_program(capitals_kb, DemoCopyLM())
    first.compile(reward="f1", metrics=["accuracy"], concurrency=2)
    assert first.compiled and not second.compiled
    assert [m.name for m in first.metrics] == ["accuracy"] and second.metrics == []
    assert second.get_compile_config() is None
    mutable = {k for k, v in vars(Trainer).items() if isinstance(v, list | dict | set)}
    assert not mutable, f"class-level mutable state on Trainer: {mutable}"


def test_a_program_offers_what_the_trainer_needs(capitals_kb) -> None:
    assert isinstance(build_program(capitals_kb, DemoCopyLM()), TrainableProgram)


def test_a_class_without_the_program_members_cannot_inherit_the_trainer() -> None:
    class NotAProgram(Trainer):
        pass

    with pytest.raises(TypeError, match="lacks what training needs"):
        NotAProgram()


# -- save and load -----------------------------------------------------------------------------


async def test_save_and_load_keep_the_compile_settings_and_fit_runs_after_load(capitals_kb, tmp_path: Path) -> None:
    x, y = questions()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(
        reward="f1", optimizer=KNNFewShot(k=1, seed=3, explore=2), metrics=["accuracy", half_credit], concurrency=2
    )
    path = program.save(tmp_path / "program.json")
    saved = json.loads(path.read_text())["compile_config"]
    assert saved["reward"] == {"class": "AnswerSetF1", "config": {"name": "f1", "in_mask": None, "out_mask": None}}
    assert saved["optimizer"]["class"] == "KNNFewShot" and saved["optimizer"]["config"]["k"] == 1
    assert saved["metrics"][1]["config"]["function"] == f"{__name__}:half_credit"
    assert saved["concurrency"] == 2

    loaded = load(path, capitals_kb)
    assert loaded.compiled
    assert loaded.get_compile_config() == program.get_compile_config()
    assert isinstance(loaded.optimizer, KNNFewShot) and loaded.optimizer is not program.optimizer
    # no compile() on the loaded program: it trains as the original does
    history = await loaded.fit(x[:16], y[:16], epochs=1, validation_data=(x[16:], y[16:]), verbose=0)
    original = await program.fit(x[:16], y[:16], epochs=1, validation_data=(x[16:], y[16:]), verbose=0)
    assert history.history == original.history
    assert history.history["half_credit"] == [0.5]
    assert loaded.get_variables() == program.get_variables()


async def test_a_file_saved_without_compile_settings_loads_uncompiled(capitals_kb, tmp_path: Path) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    path = program.save(tmp_path / "program.json")
    assert "compile_config" not in json.loads(path.read_text())  # as files saved before compile settings were
    loaded = load(path, capitals_kb)
    assert not loaded.compiled
    x, y = questions()
    with pytest.raises(TrainingError, match=r"call program.compile\(reward=..., optimizer=...\) before fit\(\)\.$"):
        await loaded.fit(x, y, verbose=0)
    loaded.compile(reward="f1", optimizer=KNNFewShot(k=1))
    await loaded.fit(x[:4], y[:4], verbose=0)


async def test_settings_that_cannot_be_rebuilt_leave_the_loaded_program_uncompiled(
    capitals_kb, tmp_path: Path, caplog
) -> None:
    def nested(y_true: dict[str, Any], y_pred: dict[str, Any]) -> float:
        return 1.0

    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", metrics=[nested])
    path = program.save(tmp_path / "program.json")
    loaded = load(path, capitals_kb)
    assert not loaded.compiled
    assert "loaded uncompiled" in caplog.text and "custom_objects" in caplog.text
    x, y = questions()
    with pytest.raises(TrainingError, match=r"could not be restored: .*function was not saved"):
        await loaded.fit(x, y, verbose=0)
    # the function given back by its reward's name restores it
    again = load(path, capitals_kb, custom_objects={"nested": nested})
    assert again.compiled and again.metrics[0].function is nested  # type: ignore[attr-defined]


def test_load_with_compile_false_leaves_the_program_uncompiled(capitals_kb, tmp_path: Path) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    path = program.save(tmp_path / "program.json")
    assert not load(path, capitals_kb, compile=False).compiled


def test_compile_from_config_refuses_a_bad_config_and_says_what_to_pass(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    with pytest.raises(ConfigError, match="compile_config must be a dict"):
        program.compile_from_config([])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown keys \['loss'\]"):
        program.compile_from_config({"reward": "f1", "loss": "mse"})
    with pytest.raises(ConfigError, match="no 'reward'"):
        program.compile_from_config({"metrics": []})
    program.compile_from_config({"reward": "f1", "optimizer": "knn_few_shot", "concurrency": 3})
    assert isinstance(program.optimizer, KNNFewShot) and program.get_compile_config()["concurrency"] == 3


def test_a_reward_class_that_cannot_be_imported_is_saved_without_compile_settings(
    capitals_kb, tmp_path: Path, caplog
) -> None:
    class Local(ExactMatch):
        pass

    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward=Local())
    path = program.save(tmp_path / "program.json")
    assert "compile_config" not in json.loads(path.read_text())
    assert "compile settings are not saved" in caplog.text


# -- get_optimizer and get_reward ----------------------------------------------------------------


def test_get_optimizer_takes_a_name_an_instance_or_a_config() -> None:
    assert isinstance(get_optimizer("bootstrap_few_shot"), BootstrapFewShot)
    given = KNNFewShot(k=2)
    assert get_optimizer(given) is given
    built = get_optimizer({"class": "KNNFewShot", "config": {"k": 2, "explore": 0}})
    assert isinstance(built, KNNFewShot) and built.k == 2 and built.explore == 0
    assert isinstance(get_optimizer({"class": "random_few_shot"}), RandomFewShot)  # short name, no config
    path = {"class": "kag.training.optimizers:RandomFewShot", "config": {"max_demos": 1}}
    assert get_optimizer(path).max_demos == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "optimizer",
    [BootstrapFewShot(max_demos=2, seed=1, search=False), KNNFewShot(k=3, max_pool=5), RandomFewShot(min_reward=0.5)],
    ids=["bootstrap", "knn", "random"],
)
def test_an_optimizer_config_rebuilds_the_same_optimizer(optimizer: Any) -> None:
    spec = serialize_optimizer(optimizer)
    rebuilt = get_optimizer(json.loads(json.dumps(spec)))
    assert type(rebuilt) is type(optimizer) and rebuilt.get_config() == optimizer.get_config()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("adam", r"one of \['bootstrap_few_shot', 'knn_few_shot', 'random_few_shot'\], or a config dict"),
        ("instruction_optimizer", "it needs language_model=..."),
        (3, "optimizer must be a kag.training optimizer"),
        ({"k": 2}, r"optimizer config must be a dict \{'class'"),
        ({"class": "Adam"}, r"unknown class 'Adam'; use one of .*KNNFewShot"),
        ({"class": "KNNFewShot", "config": {"kk": 2}}, r"does not fit KNNFewShot .*kk.*get_config\(\)"),
        ({"class": "KNNFewShot", "config": {"k": 0}}, "optimizer config: k must be a positive integer"),
        ({"class": "KNNFewShot", "config": [1]}, "'config' must be a dict of KNNFewShot's arguments"),
        ({"class": "KNNFewShot", "settings": {}}, r"unknown keys \['settings'\]"),
        ({"class": "InstructionOptimizer"}, "needs language_model="),
        ({"class": "kag.training.rewards:ExactMatch"}, "not a subclass of Optimizer"),
        ({"class": "no.such.module:Optimizer"}, "cannot import 'no.such.module:Optimizer'.*custom_objects"),
    ],
)
def test_get_optimizer_refuses_a_bad_spec_with_a_config_error(spec: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_optimizer(spec)


def test_get_optimizer_takes_a_custom_class_from_custom_objects() -> None:
    class Mine(RandomFewShot):
        pass

    assert isinstance(get_optimizer({"class": "tests:Mine"}, custom_objects={"Mine": Mine}), Mine)
    with pytest.raises(ConfigError, match="needs language_model"):
        get_optimizer(serialize_optimizer(InstructionOptimizer(DemoCopyLM())))  # a config holds no model


def test_get_reward_takes_a_config_and_rebuilds_what_serialize_wrote() -> None:
    reward = get_reward({"class": "ExactMatch", "config": {"name": "accuracy", "in_mask": ["entities"]}})
    assert isinstance(reward, ExactMatch) and reward.name == "accuracy" and reward.in_mask == ["entities"]
    assert isinstance(get_reward(serialize_reward(AnswerSetF1())), AnswerSetF1)
    function = get_reward(serialize_reward(FunctionReward(half_credit)))
    assert isinstance(function, FunctionReward) and function.function is half_credit
    with pytest.raises(ConfigError, match=r"reward config: .*not saved.*custom_objects"):
        get_reward(serialize_reward(FunctionReward(lambda t, p: 1.0)))
    with pytest.raises(ConfigError, match="unknown class 'Rouge'"):
        get_reward({"class": "Rouge"})
