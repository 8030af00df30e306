"""Checkpoint paths are checked before the first model call; a folder removed mid-fit is a CheckpointError."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kag.errors import CheckpointError, FileWriteError
from kag.training import Callback, CSVLogger, KNNFewShot, ProgramCheckpoint
from tests.training.conftest import DemoCopyLM, build_program, questions


def data() -> tuple[list[Any], list[Any], tuple[list[Any], list[Any]]]:
    x, y = questions()
    return x[:8], y[:8], (x[8:12], y[8:12])


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("{epoch}", "it is a directory"),  # formats to an existing folder
        ("ckpt-{loss}.json", r"names \['loss'\], which fit\(\) does not log"),
        ("ckpt-{epoch:02q}.json", "cannot be formatted"),
        ("ckpt-{epoch.real.x}.json", "cannot be formatted"),
        ("ckpt-{.json", "cannot be formatted"),
    ],
)
async def test_a_bad_checkpoint_path_is_refused_before_any_model_call(
    capitals_kb: Any, tmp_path: Path, name: str, match: str
) -> None:
    (tmp_path / "1").mkdir()
    x, y, val = data()
    lm = DemoCopyLM()
    program = build_program(capitals_kb, lm)
    program.compile(reward="f1")
    checkpoint = ProgramCheckpoint(tmp_path / name, save_best_only=False)
    with pytest.raises(CheckpointError, match=match) as caught:
        await program.fit(x, y, validation_data=val, callbacks=[checkpoint], verbose=0)
    assert str(tmp_path) in str(caught.value)  # the message names the file
    assert lm.calls == 0


async def test_fields_fit_logs_are_accepted(capitals_kb: Any, tmp_path: Path) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    checkpoint = ProgramCheckpoint(
        tmp_path / "e{epoch:02d}-r{reward:.2f}-v{val_reward:.2f}-{errors}.json", save_best_only=False
    )
    await program.fit(x, y, epochs=1, validation_data=val, callbacks=[checkpoint], verbose=0)
    [saved] = checkpoint.saved
    assert saved.name.startswith("e01-r") and saved.exists()


async def test_a_folder_removed_mid_fit_is_a_checkpoint_error_and_nothing_else(
    capitals_kb: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "ckpts"
    folder.mkdir()

    class RemoveFolder(Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if epoch == 1:
                shutil.rmtree(folder)

    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    for save_program in (False, True):
        folder.mkdir(exist_ok=True)
        checkpoint = ProgramCheckpoint(folder / "c-{epoch}.json", save_best_only=False, save_program=save_program)
        with pytest.raises(CheckpointError, match=r"c-2\.json.*does not exist") as caught:
            await program.fit(x, y, epochs=2, validation_data=val, callbacks=[checkpoint, RemoveFolder()], verbose=0)
        assert isinstance(caught.value.__cause__, FileWriteError)
        assert checkpoint.saved == [folder / "c-1.json"]


async def test_csv_log_is_rewritten_whole_and_appends(capitals_kb: Any, tmp_path: Path) -> None:
    x, y, val = data()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    path = tmp_path / "log.csv"
    await program.fit(x, y, epochs=2, validation_data=val, callbacks=[CSVLogger(path)], verbose=0)
    await program.fit(x, y, epochs=1, validation_data=val, callbacks=[CSVLogger(path, append=True)], verbose=0)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("epoch,") and [line.split(",")[0] for line in lines[1:]] == ["0", "1", "0"]
    assert [p.name for p in tmp_path.iterdir()] == ["log.csv"]  # no temporary file left
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(CheckpointError, match=r"dir\.csv.*is a directory"):
        await program.fit(x, y, validation_data=val, callbacks=[CSVLogger(tmp_path / "dir.csv")], verbose=0)


def test_program_save_is_atomic_and_names_a_missing_folder(capitals_kb: Any, tmp_path: Path) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    target = program.save(tmp_path / "p.json")
    assert json.loads(target.read_text())["format"] == "kag-program"
    with pytest.raises(FileWriteError, match=r"no/p\.json.*does not exist"):
        program.save(tmp_path / "no" / "p.json")
    assert json.loads(target.read_text())["format"] == "kag-program"
