"""The connection of a Neo4j store to its server: driver, retries, outages, the read-only guard.

:class:`Neo4jConnection` is what :class:`~kag.graph.neo4j.Neo4jGraphStore` talks to the server
through; it knows nothing of entities, relations or plans.

* one driver per store (per KnowledgeBase), created lazily on first use, again in each new event
  loop; or a caller's own sync or async driver, used as is and never closed (a sync one behind
  :class:`~kag.graph.neo4j_blocking_driver.BlockingDriverAdapter`);
* driver errors become typed ``kag.errors`` that say what to do; transient failures are retried
  with bounded exponential backoff;
* an outage fails fast: a call that cannot reach the server checks at once whether it answers at
  all (``RETURN 1`` within ``connection_timeout``). When it does not, the connection records the
  outage (:attr:`Neo4jConnection.outage`) and every call raises
  :class:`~kag.errors.BackendUnavailableError` at once, without retrying, while one call every
  ``PROBE_INTERVAL`` seconds checks again; the first answer ends the outage. A write transaction
  has a deadline, ``write_timeout`` (retries included), after which it raises
  :class:`~kag.errors.WriteTimeoutError`: it may or may not have committed, and since every write
  is idempotent (``MERGE`` by id) re-running it is safe;
* every read query is first run through ``EXPLAIN`` and refused unless Neo4j reports it
  read-only, then executed in a read transaction; large results are read by a blocking driver in
  a worker thread (:meth:`Neo4jConnection.read_rows`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, RoutingControl
from neo4j import exceptions as nx

from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConfigError,
    QueryError,
    StoreError,
    UnsafeQueryError,
    WriteTimeoutError,
)
from kag.graph.neo4j_blocking_driver import BlockingDriverAdapter
from kag.validation import check_int, check_number

T = TypeVar("T")
# the Neo4j store's logger (docs/development.md names it for retries and slow statements)
log = logging.getLogger("kag.graph.neo4j")
READ_ONLY_CACHE_SIZE = 512  # query texts remembered as read-only
SLOW_QUERY_SECONDS = 1.0  # statements at least this slow are logged at WARNING
_RETRYABLE = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, OSError)
# failures that may mean the server is gone (not busy): a probe decides between a blip and an outage
_UNREACHABLE = (nx.ServiceUnavailable, nx.SessionExpired, OSError)
PROBE_INTERVAL = 0.5  # during an outage, one call this often checks whether the server answers again
WRITE_TIMEOUT = 30.0  # default deadline of one write transaction, retries included (KAG_NEO4J_WRITE_TIMEOUT)
RETRY_AFTER = 1  # seconds a client is told to wait during an outage (HTTP Retry-After)
INDEX_WAIT_SECONDS = 300  # how long a search or ensure_schema waits for an index Neo4j is populating


def write_timeout_setting(value: float | None = None) -> float | None:
    """``value``, else ``$KAG_NEO4J_WRITE_TIMEOUT`` (seconds; ``0`` or ``none``: no deadline), else 30 s."""
    raw: object = value
    if value is None:
        env = os.environ.get("KAG_NEO4J_WRITE_TIMEOUT", "").strip()
        if not env:
            return WRITE_TIMEOUT
        if env.lower() in ("0", "none", "off"):
            return None
        raw = env
    try:
        seconds = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(
            f"write_timeout must be a number of seconds > 0, got {raw!r} "
            "(from $KAG_NEO4J_WRITE_TIMEOUT when not passed; 'none' there turns the deadline off)."
        )
    return seconds


class Outage:
    """What one store (and the stores sharing its driver) knows about the server being unreachable.

    ``since`` is the monotonic time the outage was noticed (``None``: the server answered last);
    ``reason`` the error that showed it. Loop-free: plain values, set between awaits.
    """

    def __init__(self) -> None:
        self.since: float | None = None
        self.reason = ""
        self.last_probe = -math.inf
        self.probing = False

    @property
    def down(self) -> bool:
        """Whether the last check found the server unreachable."""
        return self.since is not None

    def seconds(self) -> float:
        """How long the outage has lasted (0 when there is none)."""
        return 0.0 if self.since is None else time.monotonic() - self.since

    def mark_down(self, reason: str) -> None:
        """Record that the server did not answer (the first time: when, and a warning)."""
        if self.since is None:
            self.since = time.monotonic()
            log.warning("Neo4j unreachable (%s): failing calls fast until it answers", reason)
        self.reason = reason

    def mark_up(self) -> None:
        """Record that the server answered (ending an outage, with a warning that says how long it was)."""
        if self.since is not None:
            log.warning("Neo4j answers again after %.1f s", self.seconds())
        self.since, self.reason = None, ""


class Neo4jConnection:
    """A Neo4j 5 server (``neo4j://`` or ``bolt://``) as a store talks to it (see the module docstring)."""

    def __init__(
        self,
        uri: str,
        *,
        username: str | None = None,
        password: str | None = None,
        database: str | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        connection_timeout: float = 5.0,
        max_transaction_retry_time: float = 5.0,
        driver: AsyncDriver | neo4j.Driver | None = None,
        user: str | None = None,
        write_timeout: float | None = None,
    ) -> None:
        """See :class:`~kag.graph.neo4j.Neo4jGraphStore` for the settings."""
        self.max_retries = check_int(max_retries, name="max_retries", minimum=0)
        if username is not None and user is not None and username != user:
            raise ConfigError("give username= or user= (its older name), not both.")
        self.uri = uri
        self.user = username or user or os.environ.get("NEO4J_USERNAME") or os.environ.get("NEO4J_USER") or "neo4j"
        self._password = password if password is not None else os.environ.get("NEO4J_PASSWORD")
        self.database = database or os.environ.get("NEO4J_DATABASE") or None
        self._owns_driver = driver is None
        if isinstance(driver, neo4j.Driver):
            driver = BlockingDriverAdapter(driver)  # type: ignore[assignment]  # same calls, run in threads
        elif driver is not None and not isinstance(driver, AsyncDriver):
            raise ConfigError(f"driver must be a neo4j Driver or AsyncDriver, got {type(driver).__name__}.")
        self.backoff = backoff
        self._connection_timeout = check_number(
            connection_timeout, name="connection_timeout", minimum=0, exclusive_minimum=True
        )
        self._max_transaction_retry_time = max_transaction_retry_time
        self.write_timeout = write_timeout_setting(write_timeout)
        # shared with the stores of other namespaces made by in_namespace (one server)
        self.outage = Outage()
        # an AsyncDriver, or a caller's sync driver behind BlockingDriverAdapter (the same calls, awaited)
        self._driver: Any = driver
        self._driver_loop: asyncio.AbstractEventLoop | None = None  # the loop kag's own driver was opened in
        # query texts EXPLAIN has proven read-only, least recently used first (bounded: texts vary)
        self._read_only: OrderedDict[str, None] = OrderedDict()
        # names of indexes seen ONLINE (an index stays ONLINE until dropped); shared with in_namespace stores
        self._online: set[str] = set()
        # a blocking driver for large reads (see read_rows), opened on first use; stores of other
        # namespaces made by in_namespace use their parent's
        self._blocking: neo4j.Driver | None = None
        self._parent: Neo4jConnection | None = None

    # -- the driver -----------------------------------------------------------
    @property
    def driver(self) -> AsyncDriver:
        """The async driver. One kag opened is opened again in a new event loop: an async driver's
        connections belong to the loop that opened them (one ``asyncio.run`` after another)."""
        if self._parent is not None and not self._owns_driver:
            self._driver = self._parent.driver  # a store of another namespace follows its parent's
            return self._driver
        if self._owns_driver:
            loop = _running_loop()
            if self._driver is not None and loop is not None and self._driver_loop not in (None, loop):
                # opened in a loop that has ended (or runs elsewhere): its sockets go with that loop
                self._driver = None
            if self._driver is None:
                self._driver = AsyncGraphDatabase.driver(self.uri, **self._driver_options())
                self._driver_loop = loop
        return self._driver

    def _driver_options(self) -> dict[str, Any]:
        """Settings of the drivers kag opens itself (a caller's own driver keeps its own)."""
        return {
            "auth": (self.user, self._password) if self._password is not None else None,
            "connection_timeout": self._connection_timeout,
            # a port that accepts TCP and never answers: the handshake and login are bounded by this
            # (the driver's default, 60 s, would hold every call that long)
            "connection_acquisition_timeout": self._connection_timeout,
            "max_transaction_retry_time": self._max_transaction_retry_time,
            # kag's statements are generated: the server's notifications about them (a property
            # not in an empty database yet, ...) say nothing to a user, yet the driver logs them
            "notifications_min_severity": "OFF",
        }

    def _follow(self, parent: Neo4jConnection) -> None:
        """Talk through ``parent``'s driver (which ``parent`` keeps owning), sharing what it knows of
        the server: its outage, its ONLINE indexes, its blocking driver."""
        self.write_timeout = parent.write_timeout
        self.outage = parent.outage
        self._driver = parent.driver  # shared as is (a caller's sync driver is already wrapped)
        self._owns_driver = False
        self._parent = parent
        self._online = parent._online

    def _blocking_driver(self) -> neo4j.Driver | None:
        """The blocking driver of :meth:`read_rows`, or ``None`` behind a caller's async driver."""
        if self._parent is not None:
            return self._parent._blocking_driver()
        if isinstance(self._driver, BlockingDriverAdapter):
            return self._driver.blocking
        if not self._owns_driver:
            return None
        if self._blocking is None:
            self._blocking = neo4j.GraphDatabase.driver(self.uri, **self._driver_options())
        return self._blocking

    async def aclose(self) -> None:
        """Close the drivers kag opened (a caller's own driver is left open)."""
        if self._blocking is not None:
            blocking, self._blocking = self._blocking, None
            await asyncio.to_thread(blocking.close)
        if self._driver is not None and self._owns_driver:
            await self._driver.close()
        if self._owns_driver:
            self._driver = None

    async def connect(self) -> None:
        """Fail fast on a server that is down or refuses us, before any retrying query."""
        await self.check_outage("connecting")
        try:
            async with asyncio.timeout(self._connection_timeout * 2):  # the routing table, then the server
                await self.driver.verify_connectivity()
        except TimeoutError as exc:
            self.outage.mark_down(f"no answer within connection_timeout={self._connection_timeout:g} s")
            raise BackendUnavailableError(
                f"Neo4j at {self.uri} accepted a connection but did not answer within connection_timeout="
                f"{self._connection_timeout:g} s while connecting. Is something else listening on that port, "
                "or is the server still starting? Check the address (the URI given, else KAG_KB, else NEO4J_URI)."
            ) from exc
        except (*_RETRYABLE, nx.DriverError, nx.Neo4jError) as exc:
            if isinstance(exc, _UNREACHABLE):
                self.outage.mark_down(f"{type(exc).__name__}: {exc}")
            raise self._translate(exc, "connecting") from exc

    # -- errors, retries and outages ------------------------------------------
    def _translate(self, exc: BaseException, what: str) -> StoreError | QueryError:
        if isinstance(exc, nx.AuthError):
            if self._password is None and self._owns_driver:
                return BackendAuthError(
                    f"Neo4j at {self.uri} requires a password and none was given while {what}: "
                    "set NEO4J_PASSWORD (or pass password=)."
                )
            return BackendAuthError(
                f"Neo4j at {self.uri} refused the credentials of user {self.user!r} while {what}: "
                "check NEO4J_USERNAME / NEO4J_PASSWORD (or the username=/password= arguments)."
            )
        if isinstance(exc, (*_RETRYABLE, nx.DriverError)) and not isinstance(exc, nx.Neo4jError):
            return BackendUnavailableError(
                f"cannot reach Neo4j at {self.uri} while {what} ({type(exc).__name__}: {exc}). "
                "Is the server running, and is this the right address (the URI given, else KAG_KB, "
                "else NEO4J_URI)? `make neo4j-start` starts a local one. "
                "Writes are idempotent: an interrupted ingest can simply be re-run once it is back."
            )
        if isinstance(exc, nx.TransientError):
            return BackendUnavailableError(f"Neo4j stayed busy while {what}: {exc}. Retry later.")
        return QueryError(f"Neo4j rejected a query while {what}: {exc}")

    async def retry(self, what: str, fn: Callable[[], Awaitable[T]], *, write: bool = False) -> T:
        """Run ``fn`` with bounded, jittered retries on transient errors; translate driver errors.

        ``what`` completes the sentence "... while <what>" in error messages and logs. During an
        outage (see the module docstring) it raises :class:`~kag.errors.BackendUnavailableError`
        at once. With ``write``, the whole call, retries included, has ``write_timeout`` seconds.
        """
        if not write or self.write_timeout is None:
            return await self._retry(what, fn)
        deadline = asyncio.timeout(self.write_timeout)
        try:
            async with deadline:
                return await self._retry(what, fn)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise WriteTimeoutError(
                f"Neo4j at {self.uri} did not finish {what} within write_timeout={self.write_timeout:g} s "
                f"(retries included). The write may or may not have happened: a transaction that reached the "
                "server before the deadline can still commit. kag's writes are idempotent (MERGE by id): the "
                "same call can simply be re-run, safely. Raise write_timeout (or $KAG_NEO4J_WRITE_TIMEOUT, "
                "kag serve --write-timeout) for writes that are just slow."
            ) from exc

    async def _retry(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        await self.check_outage(what)
        attempt = 0
        while True:
            try:
                result = await fn()
                self.outage.mark_up()
                return result
            except (nx.AuthError, nx.ConfigurationError) as exc:
                raise self._translate(exc, what) from exc
            except _RETRYABLE as exc:
                lost = isinstance(exc, _UNREACHABLE)
                # a lost connection is retried only if the server still answers: an outage fails fast
                if attempt >= self.max_retries or (lost and not await self.answers()):
                    raise self._translate(exc, what) from exc
                # bounded exponential backoff with jitter; none after a stale connection to a server
                # that just answered (the pool's connections from before a restart fail one by one)
                delay = 0.0 if lost else self.backoff * (2**attempt) * (0.5 + random.random() / 2)
                log.warning(
                    "Neo4j %s failed while %s (%s); retry %d in %.2fs",
                    self.uri,
                    what,
                    type(exc).__name__,
                    attempt + 1,
                    delay,
                )
                await asyncio.sleep(delay)
                attempt += 1
            except nx.Neo4jError as exc:
                raise self._translate(exc, what) from exc
            except nx.DriverError as exc:  # e.g. no connection within connection_acquisition_timeout
                await self.answers()  # records an outage when the server is gone
                raise self._translate(exc, what) from exc

    async def answers(self) -> bool:
        """Whether the server answers ``RETURN 1`` within ``connection_timeout``; records an outage or its end."""
        outage = self.outage
        outage.last_probe = time.monotonic()
        try:
            async with asyncio.timeout(self._connection_timeout):
                async with self.driver.session(database=self.database, default_access_mode=neo4j.READ_ACCESS) as s:
                    await (await s.run("RETURN 1")).consume()
        except (*_RETRYABLE, nx.DriverError, nx.Neo4jError, TimeoutError) as exc:
            if isinstance(exc, nx.AuthError):
                outage.mark_up()  # it answers: the credentials are the problem, reported as such
                return True
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(exc, TimeoutError):
                reason = f"no answer within connection_timeout={self._connection_timeout:g} s"
            outage.mark_down(reason)
            return False
        outage.mark_up()
        return True

    async def check_outage(self, what: str) -> None:
        """Raise :class:`~kag.errors.BackendUnavailableError` at once during an outage, except for the
        one call every ``PROBE_INTERVAL`` seconds that checks whether the server answers again."""
        outage = self.outage
        if not outage.down:
            return
        if not outage.probing and time.monotonic() - outage.last_probe >= PROBE_INTERVAL:
            outage.probing = True  # set before the await: one check at a time, the others fail fast
            try:
                if await self.answers():
                    return
            finally:
                outage.probing = False
        error = BackendUnavailableError(
            f"Neo4j at {self.uri} has not answered for {outage.seconds():.1f} s ({outage.reason}), so kag did "
            f"not try {what}. It checks again every {PROBE_INTERVAL:g} s and serves as soon as the server "
            f"answers: retry in about {RETRY_AFTER} s. Writes are idempotent: an interrupted write or ingest "
            "can simply be re-run."
        )
        error.retry_after = RETRY_AFTER  # type: ignore[attr-defined]  # read by the HTTP server
        raise error

    async def ping(self) -> None:
        """Raise :class:`~kag.errors.BackendUnavailableError` unless the server answers ``RETURN 1``
        (during a known outage: at once, unless this is the call that checks again)."""
        if self.outage.down:
            await self.check_outage("checking health")  # returns only when its check found the server back
            return
        if not await self.answers():
            raise BackendUnavailableError(
                f"Neo4j at {self.uri} does not answer ({self.outage.reason}). Is the server running? "
                f"kag checks again every {PROBE_INTERVAL:g} s and serves as soon as it answers."
            )

    # -- statements and transactions ------------------------------------------
    def session(self) -> Any:
        """A session for an explicit transaction, on the bookmark manager ``execute_query`` uses.

        Sharing it keeps causal consistency on a cluster: a read after this transaction's
        commit waits for a member that has seen it.
        """
        return self.driver.session(database=self.database, bookmark_manager=self.driver.execute_query_bookmark_manager)

    async def run(self, query: str, params: dict[str, Any] | None, *, write: bool, what: str) -> neo4j.EagerResult:
        """Run one parameterized statement (routed to a writer when ``write``), with retries.

        Statements slower than ``SLOW_QUERY_SECONDS`` are logged at WARNING with their
        purpose and duration (never their parameters, which may hold user data).
        """
        routing = RoutingControl.WRITE if write else RoutingControl.READ
        driver = self.driver

        async def call() -> neo4j.EagerResult:
            if not write and isinstance(driver, AsyncDriver):
                return await self._auto_commit_read(driver, query, params or {})
            return await driver.execute_query(
                query, parameters_=params or {}, routing_=routing, database_=self.database
            )

        started = time.perf_counter()
        # no write deadline here: run() writes only schema (constraints, indexes), once, before any data
        result = await self.retry(what, call)
        elapsed = time.perf_counter() - started
        if elapsed >= SLOW_QUERY_SECONDS:
            log.warning("slow Neo4j query while %s: %.3fs", what, elapsed)
        else:
            log.debug("Neo4j query while %s: %.3fs", what, elapsed)
        return result

    async def _auto_commit_read(self, driver: AsyncDriver, query: str, params: dict[str, Any]) -> neo4j.EagerResult:
        """A read as one auto-commit query: one round trip, where ``execute_query``'s managed transaction
        takes a second for its COMMIT (about 1 ms a search on a local server). It reads after the same
        bookmarks ``execute_query`` would (its bookmark manager), on a reader of a cluster; transient
        failures are retried by :meth:`retry` as before."""
        async with driver.session(
            database=self.database,
            default_access_mode=neo4j.READ_ACCESS,
            bookmark_manager=driver.execute_query_bookmark_manager,
        ) as session:
            result = await session.run(query, params)
            records = [record async for record in result]
            summary = await result.consume()
            return neo4j.EagerResult(records, summary, list(result.keys()))

    async def write_transaction(
        self, statements: Sequence[tuple[str, dict[str, Any]]], what: str
    ) -> list[list[dict[str, Any]]]:
        """Run ``statements`` in ONE managed write transaction (all or nothing); return each one's records.

        A transient failure replays the whole transaction (bounded retries, see :meth:`retry`).
        """

        async def work(tx: Any) -> list[list[dict[str, Any]]]:
            out = []
            for query, params in statements:
                result = await tx.run(query, params)
                out.append([record.data() for record in await result.fetch(2**31 - 1)])
            return out

        async def call() -> list[list[dict[str, Any]]]:
            async with self.session() as session:
                done: list[list[dict[str, Any]]] = await session.execute_write(work)
                return done

        started = time.perf_counter()
        result = await self.retry(what, call, write=True)
        elapsed = time.perf_counter() - started
        if elapsed >= SLOW_QUERY_SECONDS:
            log.warning("slow Neo4j transaction while %s: %.3fs", what, elapsed)
        return result

    # -- indexes --------------------------------------------------------------
    async def await_indexes(
        self, names: Sequence[str], what: str = "waiting for indexes", timeout: float = INDEX_WAIT_SECONDS
    ) -> None:
        """Wait until Neo4j has populated the indexes ``names`` (a constraint's index has its name).

        Each index is awaited once per store: after a large load, for example, call it with the
        vector index names (``kag_<Label>_embedding``) to have approximate search ready before the
        first query instead of at it. ``what`` completes the sentence "... while <what>" in errors.

        Raises:
            StoreError: an index is still populating after ``timeout`` seconds, or Neo4j failed to
                populate it (the message holds Neo4j's reason).
        """
        for name in names:
            if name in self._online:
                continue
            try:
                await self.run(
                    "CALL db.awaitIndex($name, $timeout)",
                    {"name": name, "timeout": max(1, round(timeout))},
                    write=False,
                    what=what,
                )
            except QueryError as exc:
                raise StoreError(
                    f"Neo4j index {name} is not ONLINE after {timeout:.0f} s ({exc}). A large load is still "
                    "being indexed: search exactly (without candidates=) meanwhile, or retry later; "
                    f"SHOW INDEXES YIELD name, state, populationPercent WHERE name = '{name}' shows its progress."
                ) from exc
            self._online.add(name)

    def forget_index(self, name: str) -> None:
        """Forget that ``name`` was ONLINE (it was dropped and is being re-created)."""
        self._online.discard(name)

    # -- reads ----------------------------------------------------------------
    async def read(self, query: str, params: dict[str, Any], what: str) -> neo4j.EagerResult:
        """Run a query that ``EXPLAIN`` proves read-only (see :meth:`assert_read_only`)."""
        await self.assert_read_only(query, params)
        return await self.run(query, params, write=False, what=what)

    async def read_rows(
        self,
        query: str,
        params: dict[str, Any],
        what: str,
        convert: Callable[[list[Any]], Any] | None = None,
    ) -> list[Any]:
        """The rows (value lists) of a large read-only result, read by a blocking driver in a worker thread;
        with ``convert``, what it makes of each row, called as the row arrives (so a large row's
        Python objects are dropped before the next one is decoded).

        The async driver awaits every Bolt chunk of a result on its own, which made reading a
        label's 34k 384-d embeddings about three times slower than the blocking driver (and
        held the event loop meanwhile). The blocking driver is opened on first use with this
        store's settings and closed by :meth:`aclose`; a caller's own blocking driver is used
        as is; behind a caller's async driver this is :meth:`read`. The read starts after the
        store's bookmarks, so a cluster member serving it has every write this store's
        driver made.
        """
        await self.assert_read_only(query, params)
        blocking = self._blocking_driver()
        if blocking is None:  # proven read-only above
            res = await self.run(query, params, write=False, what=what)
            values = (list(record.values()) for record in res.records)
            return [convert(v) for v in values] if convert is not None else list(values)
        raw: Any = self.driver.execute_query_bookmark_manager.get_bookmarks()
        if inspect.isawaitable(raw):  # an async driver's manager (a caller's blocking one answers directly)
            raw = await raw
        bookmarks = neo4j.Bookmarks.from_raw_values(raw)

        def work() -> list[Any]:
            with blocking.session(
                database=self.database, default_access_mode=neo4j.READ_ACCESS, bookmarks=bookmarks
            ) as session:
                values = (record.values() for record in session.run(query, params))
                return [convert(v) for v in values] if convert is not None else list(values)

        async def call() -> list[Any]:
            return await asyncio.to_thread(work)

        started = time.perf_counter()
        rows = await self.retry(what, call)
        log.debug("Neo4j bulk read while %s: %d rows in %.3fs", what, len(rows), time.perf_counter() - started)
        return rows

    async def assert_read_only(self, query: str, params: dict[str, Any]) -> None:
        """Refuse ``query`` unless ``EXPLAIN`` reports it read-only (cached per text)."""
        if query in self._read_only:
            self._read_only.move_to_end(query)
            return
        res = await self.run("EXPLAIN " + query, params, write=False, what="checking a query plan")
        if res.summary.query_type != "r":
            raise UnsafeQueryError(
                f"refused to run a query Neo4j classifies as {res.summary.query_type!r}, not read-only: {query[:200]}"
            )
        self._read_only[query] = None
        while len(self._read_only) > READ_ONLY_CACHE_SIZE:
            self._read_only.popitem(last=False)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
