"""CallbackList: one method per hook, every callback in order, plain and coroutine hooks alike."""

from __future__ import annotations

from typing import Any

import pytest

from kag.errors import ConfigError
from kag.training import Callback, CallbackList, KNNFewShot, LambdaCallback
from tests.training.conftest import DemoCopyLM, build_program, questions


class Recorder(Callback):
    """Writes every hook it receives into a shared journal, its coroutine hooks awaited."""

    def __init__(self, label: str, journal: list[tuple[Any, ...]]) -> None:
        super().__init__()
        self.label, self.journal = label, journal

    def on_train_begin(self, logs: Any = None) -> None:
        self.journal.append((self.label, "on_train_begin"))

    async def on_train_end(self, logs: Any = None) -> None:
        self.journal.append((self.label, "on_train_end"))

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.journal.append((self.label, "on_epoch_begin", epoch))

    async def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.journal.append((self.label, "on_epoch_end", epoch, sorted(logs or {})[:1]))

    def on_batch_begin(self, batch: int, logs: Any = None) -> None:
        self.journal.append((self.label, "on_batch_begin", batch))

    async def on_batch_end(self, batch: int, logs: Any = None) -> None:
        self.journal.append((self.label, "on_batch_end", batch))


async def test_each_hook_runs_on_every_callback_in_order() -> None:
    journal: list[tuple[Any, ...]] = []
    callbacks = CallbackList([Recorder("a", journal), Recorder("b", journal)])
    await callbacks.on_train_begin({})
    await callbacks.on_epoch_begin(0, {})
    await callbacks.on_batch_begin(0, {})
    await callbacks.on_batch_end(0, {"reward": 1.0})
    await callbacks.on_epoch_end(0, {"reward": 1.0})
    await callbacks.on_train_end({})
    assert journal == [
        ("a", "on_train_begin"),
        ("b", "on_train_begin"),
        ("a", "on_epoch_begin", 0),
        ("b", "on_epoch_begin", 0),
        ("a", "on_batch_begin", 0),
        ("b", "on_batch_begin", 0),
        ("a", "on_batch_end", 0),
        ("b", "on_batch_end", 0),
        ("a", "on_epoch_end", 0, ["reward"]),
        ("b", "on_epoch_end", 0, ["reward"]),
        ("a", "on_train_end"),
        ("b", "on_train_end"),
    ]


def test_hooks_are_methods_not_names() -> None:
    assert not hasattr(CallbackList, "call")  # no dispatch by a hook's name
    with pytest.raises(ConfigError, match="Callback instances"):
        CallbackList([object()])  # type: ignore[list-item]


def test_program_and_params_reach_every_callback() -> None:
    inner = Callback()
    callbacks = CallbackList([inner])
    program = object()
    callbacks.set_program(program)
    callbacks.set_params({"epochs": 2})
    assert inner.program is program and inner.params == {"epochs": 2}


async def test_fit_calls_the_hooks_in_keras_order(capitals_kb) -> None:
    x, y = questions()
    journal: list[tuple[Any, ...]] = []
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1, explore=0))
    seen: list[int] = []
    lambda_hook = LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(epoch))
    await program.fit(x[:6], y[:6], epochs=2, batch_size=4, callbacks=[Recorder("r", journal), lambda_hook], verbose=0)
    epoch = [("r", "on_batch_begin", 0), ("r", "on_batch_end", 0), ("r", "on_batch_begin", 1), ("r", "on_batch_end", 1)]
    assert journal == [
        ("r", "on_train_begin"),
        ("r", "on_epoch_begin", 0),
        *epoch,
        ("r", "on_epoch_end", 0, ["candidates"]),
        ("r", "on_epoch_begin", 1),
        *epoch,
        ("r", "on_epoch_end", 1, ["candidates"]),
        ("r", "on_train_end"),
    ]
    assert seen == [0, 1]
