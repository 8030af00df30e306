"""Blocking facades over async objects: ``kb.sync.triplet_search(...)`` for scripts and REPLs.

A facade runs each call on its own private event loop (one ``asyncio.Runner`` per
facade, so connections opened by one call are reused by the next) and refuses to run
inside a running loop, where blocking would deadlock. Facade classes declare each
method with :func:`blocking`, so type checkers see the blocking signatures.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from kag.errors import SyncInEventLoopError

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class SyncFacade(Generic[T]):
    """The blocking twin of ``target``; subclasses list its methods with :func:`blocking`."""

    def __init__(self, target: T) -> None:
        self._target = target
        self._runner: asyncio.Runner | None = None
        self._lock = threading.Lock()

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise SyncInEventLoopError(
                f"{type(self._target).__name__}.sync cannot be used inside a running event loop "
                "(Jupyter, FastAPI, ...): use `await obj.method(...)` there instead."
            )
        with self._lock:
            if self._runner is None:
                self._runner = asyncio.Runner()
            return self._runner.run(coro)

    def close(self) -> None:
        """Close the target (its ``aclose``, if any), then the private event loop."""
        aclose: Callable[[], Any] | None = getattr(self._target, "aclose", None)
        if aclose is not None and self._runner is not None:
            self._run(aclose())
        if self._runner is not None:
            self._runner.close()
            self._runner = None


def blocking(
    method: Callable[Concatenate[T, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SyncFacade[T], P], R]:
    """Declare a facade method: the blocking form of the coroutine method ``method``."""
    name = method.__name__

    def run(self: SyncFacade[T], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(getattr(self._target, name)(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    # cleandoc: the coroutine's docstring keeps its indentation otherwise, which breaks its rendering
    run.__doc__ = f"Blocking form of ``{name}``.\n\n{inspect.cleandoc(method.__doc__ or '')}"
    return run
