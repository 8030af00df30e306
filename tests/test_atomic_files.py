"""Every file kag writes for a user survives a kill -9 mid-write: whole, the old version or the new.

A child process rewrites one file in a loop through one of kag's writers (a program, its
variables, a checkpoint, a memory store, a CSV training log, a program picture), each
version larger than a page cache flush, and is killed with SIGKILL at random moments. The
file must then hold one complete version (it parses, and is exactly what that version
wrote), never a torn or empty one. Before :mod:`kag.files` was the one writer, a program
file rewritten in place was left empty in 3 of 5 kills.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kag.errors import CheckpointError, FileWriteError, StoreError

ROOT = Path(__file__).resolve().parents[1]
PAD = 400_000  # characters of padding per version: each write takes a while, so kills land inside it

CHILD = r"""
import sys
from pathlib import Path

kind, target, pad = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf


class Query(kag.DataModel):
    query: str


class Answer(kag.DataModel):
    answer: str


def build_program():
    import asyncio

    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    lm = kag.LexicalLM(knowledge_base=kb)
    inputs = kag.Input(data_model=Query)

    async def make():
        facts = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, name="retriever")(inputs)
        out = await kag.Generator(data_model=Answer, language_model=lm, name="generator")(facts)
        return kag.Program(inputs=inputs, outputs=out, name="p")

    return asyncio.run(make())


def version(i):
    return f"v{i}:" + "x" * (pad + i % 7)


if kind in ("program", "checkpoint", "variables"):
    prog = build_program()
    from kag.training.callbacks import ProgramCheckpoint

    ckpt = ProgramCheckpoint(target, monitor="reward", save_best_only=False, save_program=kind == "checkpoint")
    ckpt.set_program(prog)
    i = 0
    while True:
        prog.description = version(i)
        prog.trainable_modules()["generator"].variable.instructions = version(i)
        if kind == "program":
            prog.save(target)
        else:
            ckpt.on_epoch_end(0, {"reward": 1.0})
        if i == 0:
            print("ready", flush=True)
        i += 1
elif kind == "store":
    import asyncio
    kb = kag.KnowledgeBase(f"memory://{target}", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)

    async def run():
        i = 0
        while True:
            await kb.upsert([Country(name=version(i)[:60] + str(j)) for j in range(3)])
            cities = [City(name=f"c{i}-{j}", population=j) for j in range(200)]
            await kb.upsert([IsCityOf(subj=city, obj=Country(name="Land")) for city in cities])
            await kb.save()
            if i == 0:
                print("ready", flush=True)
            i += 1

    asyncio.run(run())
elif kind == "csv":
    from kag.training.callbacks import CSVLogger

    log = CSVLogger(target)
    log.on_train_begin({})
    i = 0
    while True:
        log.on_epoch_end(i, {"reward": i / 1000, "note": version(i)[:2000]})
        if i == 0:
            print("ready", flush=True)
        i += 1
elif kind == "picture":
    from kag.training.plots import ProgramPicture

    i = 0
    while True:
        ProgramPicture("<svg>" + version(i) + "</svg>").save(target)
        if i == 0:
            print("ready", flush=True)
        i += 1
"""


def check_version(text: str) -> None:
    """``text`` is one whole ``version(i)`` as the child writes it."""
    head, _, body = text.partition(":")
    assert head.startswith("v"), text[:40]
    i = int(head[1:])
    assert body == "x" * (PAD + i % 7), f"version {i} is torn ({len(body)} characters)"


def check_file(kind: str, path: Path) -> None:
    data = path.read_text(encoding="utf-8")
    assert data, f"{path.name} is empty"
    if kind in ("program", "checkpoint"):
        config = json.loads(data)
        check_version(config["description"])
    elif kind == "variables":
        document = json.loads(data)
        assert document["format"] and document["variables"]
        check_version(document["variables"]["generator"]["instructions"])
    elif kind == "store":
        document = json.loads(data)
        assert document  # a whole JSON document; the store reopens it
        import kag
        from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS

        reopened = kag.KnowledgeBase(f"memory://{path}", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
        assert reopened.sync.counts()["IsCityOf"] >= 200  # every version holds its 200 relations
    elif kind == "csv":
        rows = list(csv.reader(data.splitlines()))
        assert rows[0] == ["epoch", "note", "reward"]
        for n, row in enumerate(rows[1:]):
            assert row[0] == str(n) and len(row) == 3, f"row {n} is torn: {row[:1]}"
            assert row[1] == (f"v{n}:" + "x" * (PAD + n % 7))[:2000]
    elif kind == "picture":
        assert data.startswith("<svg>") and data.endswith("</svg>"), "the picture is torn"
        check_version(data[len("<svg>") : -len("</svg>")])


def kill_during_writes(kind: str, path: Path, kills: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(kind)
    for _ in range(kills):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, kind, str(path), str(PAD)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line.strip() == "ready", f"{kind} writer did not start: {line}{child.stderr.read()[-3000:]}"  # type: ignore[union-attr]
            time.sleep(rng.uniform(0.05, 0.6))
            assert child.poll() is None, "the writer stopped by itself"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        check_file(kind, path)
    # a temporary file a kill left behind is hidden (dot-named) and removed by a later save
    assert not [p for p in path.parent.iterdir() if not p.name.startswith(".") and p != path]


@pytest.mark.parametrize("kind", ["program", "checkpoint", "variables", "store", "csv", "picture"])
def test_kill_9_mid_write_leaves_a_whole_file(kind: str, tmp_path: Path) -> None:
    name = {"store": "kb.json", "csv": "log.csv", "picture": "p.svg"}.get(kind, "ckpt.json")
    kill_during_writes(kind, tmp_path / name, kills=2)


def test_a_missing_folder_or_a_directory_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    from kag.files import atomic_write_text

    with pytest.raises(FileWriteError, match=r"gone.*does not exist"):
        atomic_write_text(tmp_path / "gone" / "f.json", "{}")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(FileWriteError, match=r"dir\.json: it is a directory"):
        atomic_write_text(tmp_path / "dir.json", "{}")
    # the error is a StoreError and an OSError (callers that catch either keep working)
    assert issubclass(FileWriteError, StoreError) and issubclass(FileWriteError, OSError)
    assert issubclass(CheckpointError, OSError) and not issubclass(CheckpointError, ValueError)
