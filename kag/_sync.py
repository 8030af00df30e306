"""A blocking facade over async objects: ``obj.sync.method(...)``.

The facade owns one private event loop (``asyncio.Runner``) so that resources
bound to a loop, such as the Neo4j async driver, keep working across calls.
It refuses to run inside a running event loop, where blocking would deadlock
or stall the caller's loop: there, ``await`` the async method instead.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from kag.errors import KagError


class SyncInEventLoopError(KagError, RuntimeError):
    """``.sync`` was used from inside a running event loop."""


class SyncFacade:
    """Wraps every coroutine method of ``target`` as a blocking call."""

    def __init__(self, target: object) -> None:
        self._target = target
        self._runner: asyncio.Runner | None = None
        self._lock = threading.Lock()

    def _run(self, coro: Any) -> Any:
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

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):

            @functools.wraps(attr)
            def blocking(*args: Any, **kwargs: Any) -> Any:
                return self._run(attr(*args, **kwargs))

            return blocking
        return attr

    def close(self) -> None:
        """Close the private event loop (after closing the target, if it has aclose)."""
        aclose: Callable[[], Any] | None = getattr(self._target, "aclose", None)
        if aclose is not None and self._runner is not None:
            self._run(aclose())
        if self._runner is not None:
            self._runner.close()
            self._runner = None
