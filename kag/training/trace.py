"""Recording what each trainable module saw and answered during a training run.

While a program runs under :func:`tracing`, every trainable module call adds one
:class:`TraceEntry` (module name, the input it was given, the output it produced).
Optimizers turn the entries of well-rewarded runs into demos. Outside ``tracing``
recording is a no-op, so programs pay nothing for it at inference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["TraceEntry", "record", "tracing"]


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


@contextlib.contextmanager
def tracing() -> Iterator[list[TraceEntry]]:
    """Collect the trainable calls made inside the ``with`` block (in the current task and its children)."""
    entries: list[TraceEntry] = []
    token = _TRACE.set(entries)
    try:
        yield entries
    finally:
        _TRACE.reset(token)
