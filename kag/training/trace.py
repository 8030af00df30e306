"""Recording what each trainable module saw and answered during a training run.

While a program runs under :func:`tracing`, every trainable module call adds one
:class:`TraceEntry` (module name, the input it was given, the output it produced).
Optimizers turn the entries of well-rewarded runs into demos. Outside ``tracing``
recording is a no-op, so programs pay nothing for it at inference.

:func:`forcing` is the other direction, for exploration: inside it, a module whose name is
given returns the given output instead of asking its model (:func:`forced_output`), so an
optimizer can try a variant of a failed call and see whether the rest of the program then
succeeds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["TraceEntry", "forced_output", "forcing", "record", "tracing", "tracing_active"]


@dataclass(frozen=True)
class TraceEntry:
    """One module call: ``module`` (its name), ``input`` and ``output`` as JSON dicts."""

    module: str
    input: dict[str, Any]
    output: dict[str, Any]


# A list per traced program run; tasks spawned by the run share it (contexts are copied, the list is not).
_TRACE: ContextVar[list[TraceEntry] | None] = ContextVar("kag_training_trace", default=None)


def record(module: str, given: dict[str, Any], produced: dict[str, Any]) -> None:
    """Add one call to the current trace (nothing happens outside :func:`tracing`)."""
    entries = _TRACE.get()
    if entries is not None:
        entries.append(TraceEntry(module, given, produced))


def tracing_active() -> bool:
    """Whether the current run is traced (a training or evaluation run of ``fit``/``evaluate``)."""
    return _TRACE.get() is not None


@contextlib.contextmanager
def tracing() -> Iterator[list[TraceEntry]]:
    """Collect the trainable calls made inside the ``with`` block (in the current task and its children)."""
    entries: list[TraceEntry] = []
    token = _TRACE.set(entries)
    try:
        yield entries
    finally:
        _TRACE.reset(token)


_FORCED: ContextVar[dict[str, dict[str, Any]] | None] = ContextVar("kag_training_forced", default=None)


def forced_output(module: str) -> dict[str, Any] | None:
    """The output ``module`` must return in the current run (``None``: ask the model as usual)."""
    outputs = _FORCED.get()
    return None if outputs is None else outputs.get(module)


@contextlib.contextmanager
def forcing(outputs: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Inside the block, each module named in ``outputs`` returns that output without a model call."""
    token = _FORCED.set(dict(outputs))
    try:
        yield
    finally:
        _FORCED.reset(token)
