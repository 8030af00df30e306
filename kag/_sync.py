"""Blocking facades over async objects: ``kb.sync.triplet_search(...)`` for scripts and REPLs.

A facade runs each call on its own private event loop (one ``asyncio.Runner`` per
facade, so connections opened by one call are reused by the next) and refuses to run
inside a running loop, where blocking would deadlock. Facade classes declare each
method with :func:`blocking`, so type checkers see the blocking signatures.

:class:`LoopLock` is the lock of objects that outlive an event loop (a knowledge base, a
program, a store): an ``asyncio.Lock`` belongs to the first loop that waits on it, so one
``asyncio.run`` after another (a notebook cell interrupted, then the next) would fail with
an untyped ``RuntimeError``. A ``LoopLock`` makes a fresh lock for each new loop instead.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from kag.errors import EventLoopError, SyncInEventLoopError

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


class LoopLock:
    """An ``asyncio.Lock`` that follows the running event loop (see the module docstring).

    Within one loop it is an ordinary lock. The first acquire from another loop gets a fresh
    lock, unless the old one is held by a loop that is still running (two loops in two threads
    at once): that raises :class:`~kag.errors.EventLoopError`, since no asyncio lock can
    exclude tasks of another loop. A lock left held by a loop that stopped (Ctrl-C) is dropped.
    """

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._switch = threading.Lock()  # the (lock, loop) pair changes under it
        self._held: dict[asyncio.Task[Any] | None, list[asyncio.Lock]] = {}

    def _current(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._switch:
            if self._loop is not loop or self._lock is None:
                old, old_loop = self._lock, self._loop
                if old is not None and old.locked() and old_loop is not None and old_loop.is_running():
                    raise EventLoopError(
                        "this object is in use by another running event loop (another thread); use it from one "
                        "loop at a time (one asyncio.run after another is fine), or give each loop its own "
                        "KnowledgeBase."
                    )
                self._lock, self._loop = asyncio.Lock(), loop
            return self._lock

    def locked(self) -> bool:
        """Whether the lock of the running loop is held (``False`` outside a loop or before any use)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._loop is loop and self._lock is not None and self._lock.locked()

    async def acquire(self) -> bool:
        """Wait for the lock of the running loop and take it."""
        lock = self._current()
        await lock.acquire()
        self._held.setdefault(asyncio.current_task(), []).append(lock)
        return True

    def release(self) -> None:
        """Release the lock this task took last."""
        task = asyncio.current_task()
        locks = self._held.get(task)
        if not locks:
            raise RuntimeError("LoopLock released by a task that does not hold it.")
        lock = locks.pop()
        if not locks:
            del self._held[task]
        lock.release()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
