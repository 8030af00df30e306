"""Callbacks: checkpoints (atomic, best only, unwritable paths), early stopping, CSV logs, hooks."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kag.errors import CheckpointError, ConfigError, TrainingError
from kag.training import (
    BootstrapFewShot,
    Callback,
    CSVLogger,
    EarlyStopping,
    KNNFewShot,
    LambdaCallback,
    ProgramCheckpoint,
    RandomFewShot,
)
from tests.training.conftest import DemoCopyLM, build_program, questions


def data() -> tuple[list[Any], list[Any], tuple[list[Any], list[Any]]]:
    x, y = questions()
    return x[:16], y[:16], (x[16:], y[16:])


async def test_checkpoint_keeps_the_best_variables(capitals_kb, tmp_path: Path) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=BootstrapFewShot(max_demos=2, seed=0))
    checkpoint = ProgramCheckpoint(tmp_path / "best.json")
    await program.fit(x, y, epochs=3, batch_size=4, validation_data=val, callbacks=[checkpoint], verbose=0)
    assert checkpoint.saved == [tmp_path / "best.json"]  # epochs 2 and 3 did not beat epoch 1's 1.0
    saved = json.loads((tmp_path / "best.json").read_text())
    assert saved["variables"] == program.get_variables()


async def test_checkpoint_every_epoch_with_a_formatted_path(capitals_kb, tmp_path: Path) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    checkpoint = ProgramCheckpoint(tmp_path / "ckpt-{epoch:02d}.json", save_best_only=False, save_program=True)
    await program.fit(x, y, epochs=2, validation_data=val, callbacks=[checkpoint], verbose=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-01.json", "ckpt-02.json"]
    assert json.loads((tmp_path / "ckpt-02.json").read_text())["format"] == "kag-program"


async def test_an_interrupted_fit_leaves_the_last_checkpoint_whole(capitals_kb, tmp_path: Path) -> None:
    class Interrupt(Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if epoch == 1:
                raise KeyboardInterrupt

    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=RandomFewShot(max_demos=2, seed=1))
    path = tmp_path / "last.json"
    with pytest.raises(KeyboardInterrupt):
        await program.fit(
            x, y, epochs=3, validation_data=val, callbacks=[ProgramCheckpoint(path, save_best_only=False), Interrupt()],
            verbose=0,
        )  # fmt: skip
    fresh = build_program(capitals_kb, DemoCopyLM())
    fresh.load_variables(path)
    assert fresh.get_variables() == program.get_variables()
    assert [p.name for p in tmp_path.iterdir()] == ["last.json"]  # no temporary file left behind


async def test_a_checkpoint_path_that_cannot_be_written_is_refused_before_training(capitals_kb, tmp_path) -> None:
    x, y, val = data()
    lm = DemoCopyLM()
    program = build_program(capitals_kb, lm)
    program.compile(reward="f1")
    with pytest.raises(CheckpointError, match="not a directory"):
        await program.fit(x, y, validation_data=val, callbacks=[ProgramCheckpoint(tmp_path / "no" / "c.json")])
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores directory permissions: use a file as the parent
            blocker = tmp_path / "file"
            blocker.write_text("")
            target = blocker / "c.json"
            match = "not a directory"
        else:
            target, match = locked / "c.json", "not writable"
        with pytest.raises(CheckpointError, match=match):
            await program.fit(x, y, validation_data=val, callbacks=[ProgramCheckpoint(target)])
    finally:
        locked.chmod(0o700)
    assert lm.calls == 0  # refused before any model call


async def test_monitoring_val_reward_without_validation_data_is_refused(capitals_kb, tmp_path) -> None:
    x, y, _ = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    with pytest.raises(TrainingError, match="no validation data"):
        await program.fit(x, y, callbacks=[EarlyStopping()], verbose=0)
    with pytest.raises(TrainingError, match="no validation data"):
        await program.fit(x, y, callbacks=[ProgramCheckpoint(tmp_path / "c.json")], verbose=0)


async def test_early_stopping_ends_fit_and_restores_the_best_variables(capitals_kb) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=RandomFewShot(max_demos=2, seed=1))
    stop = EarlyStopping(patience=1, restore_best_variables=True)
    states: list[Any] = []
    history = await program.fit(
        x,
        y,
        epochs=10,
        validation_data=val,
        callbacks=[LambdaCallback(on_epoch_end=lambda epoch, logs: states.append(program.get_variables())), stop],
        verbose=0,
    )
    rewards = history.history["val_reward"]
    best = rewards.index(max(rewards))
    assert len(rewards) == best + 3 < 10  # no gain for patience + 1 epochs after the best: stop
    assert stop.stopped_epoch == best + 2
    assert program.get_variables() == states[best]
    with pytest.raises(ConfigError, match="patience"):
        EarlyStopping(patience=-1)


async def test_csv_logger_writes_one_row_per_epoch(capitals_kb, tmp_path: Path) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1), metrics=["accuracy"])
    history = await program.fit(x, y, epochs=2, validation_data=val, callbacks=[CSVLogger(tmp_path / "log.csv")])
    rows = list(csv.DictReader((tmp_path / "log.csv").open()))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert [float(r["val_reward"]) for r in rows] == history.history["val_reward"]
    assert "accuracy" in rows[0]


async def test_hooks_run_in_order_and_async_hooks_are_awaited(capitals_kb) -> None:
    seen: list[str] = []

    class Recorder(Callback):
        async def on_train_begin(self, logs: Any = None) -> None:
            seen.append("train_begin")

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            seen.append(f"epoch_begin {epoch}")

        def on_batch_end(self, batch: int, logs: Any = None) -> None:
            seen.append(f"batch_end {batch} {sorted(logs)}")

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            seen.append(f"epoch_end {epoch}")

        def on_train_end(self, logs: Any = None) -> None:
            seen.append("train_end")

    x, y, _ = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    await program.fit(x, y, batch_size=8, callbacks=[Recorder()], verbose=0)
    assert seen == [
        "train_begin",
        "epoch_begin 0",
        "batch_end 0 ['errors', 'reward']",
        "batch_end 1 ['errors', 'reward']",
        "epoch_end 0",
        "train_end",
    ]
    with pytest.raises(ConfigError, match="unknown callback hook"):
        LambdaCallback(on_step=print)
    with pytest.raises(ConfigError, match="Callback instances"):
        await program.fit(x, y, callbacks=[print], verbose=0)  # type: ignore[list-item]


async def test_the_progress_bar_shows_the_epoch_reward(capitals_kb, capsys) -> None:
    x, y, _ = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    await program.fit(x, y, batch_size=8, verbose=1)
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "reward=" in err and "2/2" in err
