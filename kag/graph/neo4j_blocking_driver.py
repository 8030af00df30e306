"""A caller's blocking ``neo4j.Driver`` behind the async calls a Neo4j store makes.

``Neo4jGraphStore(driver=...)`` accepts a caller's sync driver as well as an async one. The store
only speaks the async driver's API, so :class:`BlockingDriverAdapter` offers that API over the
blocking driver: each call runs in a worker thread (``asyncio.to_thread``), and a managed write
transaction runs its async transaction function on a private event loop inside the driver's own
worker thread. The store never closes a caller's driver.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import neo4j

T = TypeVar("T")


class BlockingDriverAdapter:
    """A caller's blocking ``neo4j.Driver`` behind the async calls the store makes (in worker threads)."""

    def __init__(self, driver: neo4j.Driver) -> None:
        self._driver = driver

    @property
    def blocking(self) -> neo4j.Driver:
        """The caller's driver itself (for reads that run whole in a worker thread)."""
        return self._driver

    async def execute_query(self, query: str, **kwargs: Any) -> neo4j.EagerResult:
        """``Driver.execute_query`` in a worker thread."""
        result: neo4j.EagerResult = await asyncio.to_thread(lambda: self._driver.execute_query(query, **kwargs))
        return result

    async def verify_connectivity(self) -> None:
        """``Driver.verify_connectivity`` in a worker thread."""
        await asyncio.to_thread(self._driver.verify_connectivity)

    @property
    def execute_query_bookmark_manager(self) -> Any:
        """The caller's driver's bookmark manager (its methods answer directly, without awaiting)."""
        return self._driver.execute_query_bookmark_manager

    def session(self, **kwargs: Any) -> BlockingSession:
        """A session of the caller's driver behind async calls."""
        return BlockingSession(self._driver.session(**kwargs))

    async def close(self) -> None:  # pragma: no cover - never called: the caller owns the driver
        await asyncio.to_thread(self._driver.close)


class BlockingSession:
    """A blocking session behind async calls. A worker thread cannot be stopped: when the awaiting
    task is cancelled, the call it started runs on, so every call holds the session's lock in its
    thread and closing waits for it (a session is never closed under a transaction still writing)."""

    def __init__(self, session: neo4j.Session) -> None:
        self._session = session
        self._lock = threading.Lock()

    async def __aenter__(self) -> BlockingSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(_locked(self._lock, self._session.close))

    async def run(self, query: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> _BlockingResult:
        """``Session.run`` in a worker thread (an auto-commit transaction)."""
        result = await asyncio.to_thread(_locked(self._lock, self._session.run, query, parameters, **kwargs))
        return _BlockingResult(result, self._lock)

    async def execute_write(self, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        """The sync driver's managed transaction; ``work`` runs on a private loop in its worker thread."""

        def run_sync(tx: neo4j.ManagedTransaction) -> T:
            return asyncio.run(work(_BlockingTransaction(tx)))

        return await asyncio.to_thread(_locked(self._lock, self._session.execute_write, run_sync))


def _locked(lock: threading.Lock, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """``fn(*args, **kwargs)`` as a call for a worker thread, holding ``lock`` while it runs."""

    def call() -> T:
        with lock:
            return fn(*args, **kwargs)

    return call


class _BlockingTransaction:
    """A sync managed transaction with the async calls the store's transaction functions make."""

    def __init__(self, tx: neo4j.ManagedTransaction) -> None:
        self._tx = tx

    async def run(self, query: str, parameters: dict[str, Any] | None = None) -> _BlockingResult:
        return _BlockingResult(self._tx.run(query, parameters))


class _BlockingResult:
    def __init__(self, result: neo4j.Result, lock: threading.Lock | None = None) -> None:
        self._result = result
        self._lock = lock  # the session's, for a result of session.run (a transaction's holds it already)

    async def consume(self) -> neo4j.ResultSummary:
        consume = self._result.consume
        return await asyncio.to_thread(consume if self._lock is None else _locked(self._lock, consume))

    # single() and fetch() only run inside execute_write's worker thread (its private loop): blocking is fine
    async def single(self) -> neo4j.Record | None:
        return self._result.single()

    async def fetch(self, n: int) -> list[neo4j.Record]:
        return self._result.fetch(n)
