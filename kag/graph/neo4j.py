"""The Neo4j store: the same plans, compiled to parameterized Cypher, over the async driver.

* one driver per store (per KnowledgeBase), created lazily on first use;
* constraints (``REQUIRE n.id IS UNIQUE``) and one vector index per entity label,
  created idempotently. ``ensure_schema`` waits for the constraints only: exact search
  never reads the vector indexes, so Neo4j populates them in the background (seconds
  per ten thousand vectors after an import) and the first approximate (``candidates=``)
  search of a label waits for its index (:meth:`Neo4jGraphStore.await_indexes`);
* writes are batched ``UNWIND ... MERGE`` statements. An ``upsert`` of at most
  ``atomic_rows`` nodes + relations (default 5000), and every ``delete``, runs in ONE
  managed write transaction: all of its rows or none (a failure rolls it back; a retry
  replays it whole, MERGE is idempotent). A larger upsert is written as resumable
  batches: each batch (``batch_size`` nodes, or up to ``relation_batch_size`` relations,
  default 5000) is its own transaction, as ``bulk_upsert`` writes them (node batches two
  at a time, relation batches one after another beside them, each once every node batch
  up to the last holding one of its endpoints has committed); after a failure the finished batches stay
  written and re-running the same upsert completes it (nothing is duplicated);
* provenance (the ``kag_sources`` list property) is merged inside the transaction
  under the node's or relationship's write lock, so concurrent upserts of one item
  with different sources keep every source;
* every compiled read query is first run through ``EXPLAIN`` and refused unless
  Neo4j reports it read-only, then executed in a read transaction;
* driver errors become typed ``kag.errors`` that say what to do; transient
  failures are retried with bounded exponential backoff;
* an outage fails fast: a call that cannot reach the server checks at once whether it
  answers at all (``RETURN 1`` within ``connection_timeout``). When it does not, the store
  records the outage (:attr:`Neo4jGraphStore.outage`) and every call raises
  :class:`~kag.errors.BackendUnavailableError` at once, without retrying, while one call
  every ``PROBE_INTERVAL`` seconds checks again; the first answer ends the outage. A write
  transaction has a deadline, ``write_timeout`` (retries included), after which it raises
  :class:`~kag.errors.WriteTimeoutError`: it may or may not have committed, and since
  every write is idempotent (``MERGE`` by id) re-running it is safe;
* namespaces (tenants): a store reads and writes only its ``namespace``. Every node
  and relationship kag writes carries it as the ``kag_ns`` property, the uniqueness
  constraints are on ``(id, kag_ns)``, and every MATCH, MERGE and DELETE of the store
  and of the compiled plans names it (``{kag_ns: $ns}``, a parameter). Stores of many
  namespaces can share one driver (``driver=``) and one database.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import random
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, RoutingControl
from neo4j import exceptions as nx

from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConfigError,
    EmbeddingError,
    InvalidInputError,
    QueryError,
    StoreError,
    StoreFormatError,
    UnsafeQueryError,
    WriteTimeoutError,
)
from kag.graph.base import DIRECT, SOURCES, NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.graph.neo4j_anchor import FIRST_ANCHORS, GROWTH, AnchorScorer, proven, threshold_boundary, version_bump
from kag.query.cypher import (
    IN_NAMESPACE,
    NAMESPACE,
    NAMESPACE_MAP,
    CompiledQuery,
    compile_plan,
    quote,
    quote_name,
    vector_index_name,
)
from kag.query.plan import QueryPlan
from kag.validation import DEFAULT_NAMESPACE, check_namespace

T = TypeVar("T")
log = logging.getLogger(__name__)
READ_ONLY_CACHE_SIZE = 512  # query texts remembered as read-only
SLOW_QUERY_SECONDS = 1.0  # statements at least this slow are logged at WARNING
ENTITY = "KagEntity"  # shared label of entity nodes: one id index for lookups and endpoints
_RETRYABLE = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, OSError)
# failures that may mean the server is gone (not busy): a probe decides between a blip and an outage
_UNREACHABLE = (nx.ServiceUnavailable, nx.SessionExpired, OSError)
PROBE_INTERVAL = 0.5  # during an outage, one call this often checks whether the server answers again
WRITE_TIMEOUT = 30.0  # default deadline of one write transaction, retries included (KAG_NEO4J_WRITE_TIMEOUT)
RETRY_AFTER = 1  # seconds a client is told to wait during an outage (HTTP Retry-After)
MATRIX_RELOADS = ("wait", "background")  # how exact searches meet a stale label matrix
RELATION_BATCH = 5000  # rows per relation transaction in bulk_upsert (measured: 1000 -> 5000 about 20% faster)
INDEX_WAIT_SECONDS = 300  # how long a search or ensure_schema waits for an index Neo4j is populating
_LOCK = "kag_write_lock"  # set then removed in one statement: takes the write lock before provenance is read


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
        if self.since is None:
            self.since = time.monotonic()
            log.warning("Neo4j unreachable (%s): failing calls fast until it answers", reason)
        self.reason = reason

    def mark_up(self) -> None:
        if self.since is not None:
            log.warning("Neo4j answers again after %.1f s", self.seconds())
        self.since, self.reason = None, ""


class Neo4jGraphStore:
    """Graph store on a Neo4j 5 server (``neo4j://`` or ``bolt://``)."""

    # exact searches score similarity texts from per-label matrices beside the driver
    exact_anchor: bool = True
    # anchors a ranked exact search sends first (grown until the answer is proven); None: all
    anchor_first: int | None = FIRST_ANCHORS

    def __init__(
        self,
        uri: str,
        *,
        username: str | None = None,
        password: str | None = None,
        database: str | None = None,
        batch_size: int = 1000,
        max_retries: int = 3,
        backoff: float = 0.5,
        connection_timeout: float = 5.0,
        max_transaction_retry_time: float = 5.0,
        driver: AsyncDriver | neo4j.Driver | None = None,
        user: str | None = None,
        atomic_rows: int = 5000,
        namespace: str = DEFAULT_NAMESPACE,
        relation_batch_size: int = RELATION_BATCH,
        matrix_reload: str | None = None,
        write_timeout: float | None = None,
    ) -> None:
        """Settings not given here come from ``NEO4J_USERNAME`` (or the older ``NEO4J_USER``),
        ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE``. ``driver`` is a caller's own sync or async
        driver: it is used as is (its auth and routing) and never closed by kag. ``user`` is the
        older name of ``username``. An upsert of at most ``atomic_rows`` rows is one transaction
        (all or nothing); a larger one is written in resumable batches of ``batch_size`` nodes and
        ``relation_batch_size`` relations (see the module docstring).
        ``namespace`` is the tenant this store reads and writes (see the module docstring).
        ``matrix_reload`` (else ``$KAG_NEO4J_MATRIX_RELOAD``, else ``"wait"``): how an exact search
        meets a label matrix made stale by a write (see :mod:`kag.graph.neo4j_anchor`). ``"wait"``
        reloads it first, so every result is the memory store's bit for bit; ``"background"``
        reloads it in a background task and answers meanwhile from Cypher (the same rows, scores
        from Neo4j's float32 cosine), so no search waits seconds after a write.
        ``write_timeout`` (else ``$KAG_NEO4J_WRITE_TIMEOUT``, else 30 s; ``"none"`` in the variable:
        no deadline): the seconds one write transaction may take, retries included, before it raises
        :class:`~kag.errors.WriteTimeoutError` (see the module docstring). ``connection_timeout``
        bounds opening a connection, Bolt handshake and login included, and each outage check."""
        if batch_size < 1 or relation_batch_size < 1 or max_retries < 0 or atomic_rows < 0:
            raise ConfigError("batch_size and relation_batch_size must be >= 1, max_retries and atomic_rows >= 0.")
        if username is not None and user is not None and username != user:
            raise ConfigError("give username= or user= (its older name), not both.")
        self.uri = uri
        self.namespace = check_namespace(namespace)
        self.matrix_reload = matrix_reload or os.environ.get("KAG_NEO4J_MATRIX_RELOAD") or "wait"
        if self.matrix_reload not in MATRIX_RELOADS:
            raise ConfigError(
                f"matrix_reload must be one of {', '.join(MATRIX_RELOADS)}, got {self.matrix_reload!r} "
                "(from $KAG_NEO4J_MATRIX_RELOAD when not passed)."
            )
        self.user = username or user or os.environ.get("NEO4J_USERNAME") or os.environ.get("NEO4J_USER") or "neo4j"
        self._password = password if password is not None else os.environ.get("NEO4J_PASSWORD")
        self.database = database or os.environ.get("NEO4J_DATABASE") or None
        self._owns_driver = driver is None
        if isinstance(driver, neo4j.Driver):
            driver = _SyncDriver(driver)  # type: ignore[assignment]  # same calls, run in threads
        elif driver is not None and not isinstance(driver, AsyncDriver):
            raise ConfigError(f"driver must be a neo4j Driver or AsyncDriver, got {type(driver).__name__}.")
        self.batch_size = batch_size
        self.relation_batch_size = relation_batch_size
        self.atomic_rows = atomic_rows
        self.max_retries = max_retries
        self.backoff = backoff
        if not connection_timeout > 0:
            raise ConfigError(f"connection_timeout must be > 0 seconds, got {connection_timeout!r}.")
        self._connection_timeout = connection_timeout
        self._max_transaction_retry_time = max_transaction_retry_time
        self.write_timeout = write_timeout_setting(write_timeout)
        # shared with the stores of other namespaces made by in_namespace (one server)
        self.outage = Outage()
        # an AsyncDriver, or a caller's sync driver behind _SyncDriver (the same calls, awaited)
        self._driver: Any = driver
        self._driver_loop: asyncio.AbstractEventLoop | None = None  # the loop kag's own driver was opened in
        self._entity_labels: tuple[str, ...] = ()
        self._relation_labels: tuple[str, ...] = ()
        # query texts EXPLAIN has proven read-only, least recently used first (bounded: texts vary)
        self._read_only: OrderedDict[str, None] = OrderedDict()
        self._anchor: AnchorScorer | None = None
        # names of indexes seen ONLINE (an index stays ONLINE until dropped); shared with in_namespace stores
        self._online: set[str] = set()
        # a blocking driver for large reads (see read_rows), opened on first use; stores of other
        # namespaces made by in_namespace use their parent's
        self._blocking: neo4j.Driver | None = None
        self._parent: Neo4jGraphStore | None = None

    # -- connection -----------------------------------------------------------
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

    def in_namespace(self, namespace: str) -> Neo4jGraphStore:
        """A store of ``namespace`` on the same database through this store's driver (which this store
        keeps owning: close it last)."""
        other = Neo4jGraphStore(
            self.uri,
            username=self.user,
            password=self._password,
            database=self.database,
            batch_size=self.batch_size,
            max_retries=self.max_retries,
            backoff=self.backoff,
            atomic_rows=self.atomic_rows,
            namespace=namespace,
            matrix_reload=self.matrix_reload,
            connection_timeout=self._connection_timeout,
            max_transaction_retry_time=self._max_transaction_retry_time,
        )
        other.write_timeout = self.write_timeout
        other.outage = self.outage
        other._driver = self.driver  # shared as is (a caller's sync driver is already wrapped)
        other._owns_driver = False
        other._parent = self
        other._online = self._online
        return other

    async def aclose(self) -> None:
        """Close the driver kag opened (a caller's own driver is left open)."""
        if self._anchor is not None:
            self._anchor.cancel()
        if self._blocking is not None:
            blocking, self._blocking = self._blocking, None
            await asyncio.to_thread(blocking.close)
        if self._driver is not None and self._owns_driver:
            await self._driver.close()
        if self._owns_driver:
            self._driver = None

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

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        self._entity_labels = tuple(entity_labels)
        self._relation_labels = tuple(relation_labels)
        dims = int(dimensions)
        await self.check_outage("connecting")
        try:  # fail fast on a server that is down or refuses us, before any retrying query
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
        await self._adopt_unnamespaced(entity_labels, relation_labels)
        ns = quote(NAMESPACE)
        # each uniqueness constraint by name (its index has the same name, awaited below)
        constraints = {"kag_entity_ns_id": f"FOR (n:{quote(ENTITY)}) REQUIRE (n.id, n.{ns}) IS UNIQUE"}
        for label in entity_labels:
            constraints[f"kag_{label}_ns_id"] = f"FOR (n:{quote(label)}) REQUIRE (n.id, n.{ns}) IS UNIQUE"
        for label in relation_labels:
            constraints[f"kag_{label}_ns_id"] = f"FOR ()-[r:{quote(label)}]-() REQUIRE (r.id, r.{ns}) IS UNIQUE"
        statements = [
            f"CREATE CONSTRAINT {quote_name(name)} IF NOT EXISTS {body}" for name, body in constraints.items()
        ]
        # last: a CREATE CONSTRAINT returns once its index is built, a vector index populates in the
        # background, where it would slow the constraints still to come (measured after an import)
        for label in entity_labels:
            statements.append(
                f"CREATE VECTOR INDEX {quote_name(vector_index_name(label))} IF NOT EXISTS "
                f"FOR (n:{quote(label)}) ON n.embedding OPTIONS {{indexConfig: "
                f"{{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine'}}}}"
            )
        for stmt in statements:
            await self.run(stmt, None, write=True, what="creating constraints and indexes")
        # the constraints' indexes (ONLINE already unless another process is creating them); the
        # vector indexes populate in the background: only approximate searches read them
        await self.await_indexes(list(constraints), "waiting for the uniqueness constraints")
        await self._check_dimensions(entity_labels, dims)

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

    async def _adopt_unnamespaced(self, entity_labels: Sequence[str], relation_labels: Sequence[str]) -> None:
        """Upgrade a graph written before namespaces: its items join the default namespace and the
        id-only uniqueness constraints (which would stop two tenants holding one id) are dropped."""
        names = ["kag_entity_id", *(f"kag_{label}_id" for label in (*entity_labels, *relation_labels))]
        found = await self.run(
            "SHOW CONSTRAINTS YIELD name WHERE name IN $names RETURN name",
            {"names": names},
            write=False,
            what="upgrading",
        )
        if not found.records:  # written with namespaces (or empty): nothing to upgrade
            return
        log.warning("upgrading a graph written before namespaces: its items join namespace %r", DEFAULT_NAMESPACE)
        for record in found.records:
            drop = f"DROP CONSTRAINT {quote_name(record['name'])} IF EXISTS"
            await self.run(drop, None, write=True, what="upgrading")
        ns, params = quote(NAMESPACE), {"default": DEFAULT_NAMESPACE}
        steps = [f"MATCH (n:{quote(ENTITY)}) WHERE n.{ns} IS NULL"]
        if relation_labels:
            types = "|".join(quote(t) for t in relation_labels)
            steps.append(f"MATCH (:{quote(ENTITY)})-[n:{types}]->(:{quote(ENTITY)}) WHERE n.{ns} IS NULL")
        for match in steps:
            query = f"{match} CALL (n) {{ SET n.{ns} = $default }} IN TRANSACTIONS OF 5000 ROWS"

            async def call(query: str = query) -> None:
                async with self.session() as session:  # IN TRANSACTIONS needs an auto-commit transaction
                    await (await session.run(query, params)).consume()

            await self.retry("upgrading a graph written before namespaces", call)

    async def _check_dimensions(self, labels: Sequence[str], dims: int) -> None:
        res = await self.run(
            "SHOW VECTOR INDEXES YIELD name, options WHERE name STARTS WITH 'kag_' RETURN name, options",
            None,
            write=False,
            what="reading index settings",
        )
        wanted = {f"kag_{label}_embedding" for label in labels}
        for record in res.records:
            if record["name"] in wanted:
                have = (record["options"] or {}).get("indexConfig", {}).get("vector.dimensions")
                if have is not None and int(have) != dims:
                    raise EmbeddingError(
                        f"Neo4j index {record['name']} holds {have}-dimensional vectors but the embedder "
                        f"gives {dims}; use the same embedder, or drop the index and re-ingest."
                    )

    # -- writes ---------------------------------------------------------------
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

    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        """Merge ``nodes`` and ``relations``: all or none when they are at most ``atomic_rows``, else in
        resumable batches (each batch all or none; re-run the same upsert after a failure).

        Raises:
            StoreFormatError: a relation names an endpoint that is neither stored nor in ``nodes``
                (its transaction writes nothing: the whole call when atomic, as on the memory store;
                above ``atomic_rows``, a batch of :meth:`bulk_upsert`, which can stop the node
                batches early, so which of them were written depends on timing).
        """
        if len(nodes) + len(relations) <= self.atomic_rows:
            await self._write(nodes, relations, batch_size=self.batch_size, atomic_rows=self.atomic_rows)
        else:  # resumable batches anyway: the bulk path's order (measured 1.5x faster on 8.5k rows)
            await self.bulk_upsert(nodes, relations)

    async def _write(
        self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord], *, batch_size: int, atomic_rows: int
    ) -> None:
        """:meth:`upsert` with statements of ``batch_size`` rows, one transaction when at most ``atomic_rows``."""
        statements: list[tuple[str, dict[str, Any]]] = []
        written: dict[int, tuple[str, list[str]]] = {}  # node statement -> its label and node ids
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for n in nodes:
            _check_props(n.properties)
            by_label[n.label].append({"id": n.id, "props": n.properties, "embedding": n.embedding.tolist()})
        for label, rows in by_label.items():
            query = (
                "UNWIND $rows AS row\n"
                f"MERGE (n:{quote(ENTITY)} {{id: row.id, {IN_NAMESPACE}}})\n"
                + _merge_sources("n", rows)
                + f"SET n:{quote(label)}, n += row.props, n.embedding = row.embedding\n"
                + _merged_sources_tail("n", rows)
                + version_bump(label)  # the label's write counter, in the same transaction
            )
            for start in range(0, len(rows), batch_size):
                batch = _Rows(rows[start : start + batch_size])
                written[len(statements)] = (label, [row["id"] for row in batch])
                statements.append((query, {"rows": batch, "ns": self.namespace}))
        rels: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in relations:
            _check_props(r.properties)
            rels[r.label].append({"id": r.id, "start": r.start, "end": r.end, "props": r.properties})
        expected: dict[int, list[dict[str, Any]]] = {}
        for label, rows in rels.items():
            query = (
                "UNWIND $rows AS row\n"
                f"MATCH (a:{quote(ENTITY)} {{id: row.start, {IN_NAMESPACE}}})\n"
                f"MATCH (b:{quote(ENTITY)} {{id: row.end, {IN_NAMESPACE}}})\n"
                f"MERGE (a)-[r:{quote(label)} {{id: row.id, {IN_NAMESPACE}}}]->(b)\n"
                + _merge_sources("r", rows)
                + "SET r += row.props\n"
                + _merged_sources_tail("r", rows)
                + "RETURN count(*) AS n"
            )
            for start in range(0, len(rows), batch_size):
                batch = _Rows(rows[start : start + batch_size])
                expected[len(statements)] = batch
                statements.append((query, {"rows": batch, "ns": self.namespace}))
        if not statements:
            return
        what = f"writing {len(nodes)} nodes and {len(relations)} relations"
        indices = list(range(len(statements)))
        # one transaction for a bounded call; resumable batches (one transaction each) for a big one
        groups = [indices] if len(nodes) + len(relations) <= atomic_rows else [[i] for i in indices]
        for group in groups:

            async def work(tx: Any, group: list[int] = group) -> None:
                for i in group:
                    query, params = statements[i]
                    record = await (await tx.run(query, params)).single()
                    written = int(record["n"]) if record is not None else 0
                    if i in expected and written != len(expected[i]):
                        # a MATCH found no endpoint: refuse (the transaction rolls back)
                        missing = await _missing_endpoints(tx, expected[i], self.namespace)
                        raise StoreFormatError(f"relations refer to unknown nodes: {missing[:5]}")

            async def call(work: Callable[[Any], Awaitable[None]] = work) -> None:
                async with self.session() as session:
                    await session.execute_write(work)

            started = time.perf_counter()
            # counted as this store's own writes: a matrix they alone made stale reads back just their nodes
            with self.anchor_scorer.writes.writing(written[i][0] for i in group if i in written) as done:
                await self.retry(what, call, write=True)
                for i in group:
                    if i in written:  # one stamp per node statement
                        label, ids = written[i]
                        stamps, before = done.get(label, (0, []))
                        done[label] = (stamps + 1, [*before, *ids])
            elapsed = time.perf_counter() - started
            if elapsed >= SLOW_QUERY_SECONDS:
                log.warning("slow Neo4j transaction while %s: %.3fs", what, elapsed)

    async def bulk_upsert(
        self,
        nodes: Sequence[NodeRecord],
        relations: Sequence[RelationRecord],
        *,
        batch_size: int | None = None,
        concurrency: int = 2,
        relation_batch_size: int | None = None,
    ) -> None:
        """Merge a large load fast: node batches of ``batch_size`` rows (default: the store's) written
        ``concurrency`` at a time and, beside them, relation batches of up to ``relation_batch_size``
        rows (default: the store's, 5000) one after another (so up to ``concurrency + 1``
        transactions are open), each as soon as every node batch up to the last one holding an
        endpoint of its relations has committed. Every batch is one transaction, whatever
        ``atomic_rows`` says.

        Not atomic as a whole: after a failure the finished batches stay written, the others are
        cancelled, and the call raises once none is still running (a batch whose commit had reached
        the server may be written); re-running the same call completes it (MERGE is idempotent). Node batches
        run side by side because the vector index is updated when each transaction commits, which
        is most of a node's cost. Relation batches do not: relations in two transactions that share
        a node deadlock on its relationship locks (measured: retried deadlocks made it 2x slower).
        They are larger, since a relation is cheap and a transaction's fixed cost is not, and they
        only touch committed nodes, so they never wait on a node batch's locks: the relations of the
        first node batches are written while the later ones are (8.5k rows on 2 cores: best of 8
        0.65 s against 0.71 s with every node batch first, the medians equal). For a first load of an empty database,
        :mod:`kag.graph.neo4j_import` is faster still.

        Raises:
            StoreFormatError: a relation names an endpoint that is not stored (its batch writes
                nothing). A relation whose endpoints are both outside the call is written in the
                first relation batch, beside the first node batches, so such an error can stop the
                load early: which node batches were written then depends on timing.
        """
        if concurrency < 1:
            raise ConfigError("concurrency must be >= 1.")
        size = max(1, batch_size or self.batch_size)
        rel_size = max(1, relation_batch_size or self.relation_batch_size)
        parts = [nodes[i : i + size] for i in range(0, len(nodes), size)]
        plan = _RelationSchedule(parts, relations)
        gate = asyncio.Semaphore(concurrency)

        async def write(k: int) -> None:
            async with gate:
                await self._write(parts[k], [], batch_size=size, atomic_rows=size)
            plan.done(k)

        async def relate() -> None:
            while (ready := await plan.next(rel_size)) is not None:
                await self._write([], ready, batch_size=rel_size, atomic_rows=rel_size)

        await _first_failure([write(k) for k in range(len(parts))] + [relate()])

    async def delete(self, ids: Sequence[str]) -> int:
        """Delete nodes (with their relationships) and relationships by id, in one transaction."""
        ids = list(dict.fromkeys(ids))
        statements: list[tuple[str, dict[str, Any]]] = []
        if self._relation_labels:
            types = "|".join(quote(t) for t in self._relation_labels)
            statements.append(
                (
                    f"MATCH ()-[r:{types}]->() WHERE r.id IN $ids AND r.{NAMESPACE} = $ns "
                    "WITH r, r.id AS id DELETE r RETURN count(id) AS n",
                    {"ids": ids, "ns": self.namespace},
                )
            )
        statements.append(
            (
                f"UNWIND $ids AS id MATCH (n:{quote(ENTITY)} {{id: id, {IN_NAMESPACE}}}) "
                "DETACH DELETE n RETURN count(*) AS n",
                {"ids": ids, "ns": self.namespace},
            )
        )
        results = await self.write_transaction(statements, "deleting nodes and relations")
        return sum(int(records[0]["n"]) for records in results)

    @staticmethod
    def retract_statements(chunks_param: str = "chunks") -> list[tuple[str, str]]:
        """Cypher that removes the chunk ids in ``$<chunks_param>`` from every item's provenance and
        deletes the items left without any that were never upserted directly (entities with their
        relations), in the namespace ``$ns``. Run relations first, then nodes, in one write
        transaction; each returns ``n`` (items deleted) and ``edges`` (relations deleted along with
        the nodes).
        """
        src, direct = quote(SOURCES), quote(DIRECT)
        node = f"{quote(ENTITY)} {NAMESPACE_MAP}"
        chunks = "$" + chunks_param

        def step(match: str, var: str, delete: str) -> str:
            return (
                f"{match} WHERE {var}.{src} IS NOT NULL AND any(s IN {var}.{src} WHERE s IN {chunks})\n"
                f"WITH {var}, [s IN {var}.{src} WHERE NOT s IN {chunks}] AS rest\n"
                f"SET {var}.{src} = CASE WHEN size(rest) = 0 THEN null ELSE rest END\n"
                f"WITH collect(CASE WHEN size(rest) = 0 AND NOT coalesce({var}.{direct}, false) "
                f"THEN {var} END) AS doomed\n" + delete
            )

        rels = step(
            f"MATCH (:{node})-[r]->(:{node})",
            "r",
            "FOREACH (r IN doomed | DELETE r)\nRETURN size(doomed) AS n, 0 AS edges",
        )
        nodes = step(
            f"MATCH (n:{node})",
            "n",
            f"WITH doomed, COLLECT {{ UNWIND doomed AS d MATCH (d)-[x]-(:{node}) RETURN DISTINCT x }} AS xs\n"
            "FOREACH (d IN doomed | DETACH DELETE d)\nRETURN size(doomed) AS n, size(xs) AS edges",
        )
        return [("relations", rels), ("entities", nodes)]

    async def retract(self, chunk_ids: Sequence[str]) -> dict[str, int]:
        """Remove ``chunk_ids`` from every item's provenance, in one transaction; delete the items
        left without any that were never upserted directly. Returns the entities and relations deleted.
        """
        out = {"entities": 0, "relations": 0}
        if not chunk_ids:
            return out
        steps = self.retract_statements()
        params = {"chunks": list(dict.fromkeys(chunk_ids)), "ns": self.namespace}
        results = await self.write_transaction([(q, params) for _, q in steps], "retracting provenance")
        for (what, _), records in zip(steps, results, strict=True):
            out[what] += int(records[0]["n"])
            out["relations"] += int(records[0]["edges"])
        return out

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

    def _blocking_driver(self) -> neo4j.Driver | None:
        """The blocking driver of :meth:`read_rows`, or ``None`` behind a caller's async driver."""
        if self._parent is not None:
            return self._parent._blocking_driver()
        if isinstance(self._driver, _SyncDriver):
            return self._driver.blocking
        if not self._owns_driver:
            return None
        if self._blocking is None:
            self._blocking = neo4j.GraphDatabase.driver(self.uri, **self._driver_options())
        return self._blocking

    async def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a Cypher query that ``EXPLAIN`` proves read-only; return its rows as dicts.

        Nodes and relationships in the rows become their property maps (``record.data()``).
        The query is NOT restricted to this store's namespace: ``$ns`` holds it (unless ``params``
        set it), so write ``WHERE n.kag_ns = $ns`` to stay inside it. Keep this call away from tenants.

        Raises:
            UnsafeQueryError: Neo4j does not classify the query as read-only (nothing ran).
            QueryError: the query is not valid Cypher, or failed.
        """
        if not isinstance(cypher, str) or not cypher.strip():
            raise InvalidInputError("query() needs a Cypher query text.")
        if params is not None and not isinstance(params, Mapping):
            raise InvalidInputError(f"query() params must be a dict, got {type(params).__name__}.")
        res = await self.read(cypher, {"ns": self.namespace, **(params or {})}, "running a read-only Cypher query")
        return [record.data() for record in res.records]

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

    async def execute(self, plan: QueryPlan) -> PlanResult:
        """Run a bound plan. Exact searches score their similarity texts beside the driver
        (:mod:`kag.graph.neo4j_anchor`, off with ``exact_anchor = False``); approximate ones
        (``candidates``) take the anchor's candidates from its vector index."""
        # the store's namespace, never the caller's: a plan cannot reach another tenant
        plan = replace(plan, namespace=self.namespace)
        if self.exact_anchor and plan.candidates is None:
            result = await self._execute_exact(plan)
            if result is not None:
                return result
        compiled = compile_plan(plan)
        index = compiled.params.get("index")
        if index is not None:  # an approximate anchor: its vector index may still be populating
            await self.await_indexes([index], "waiting for a vector index")
        return await self._execute_compiled(plan, compiled)

    @property
    def anchor_scorer(self) -> AnchorScorer:
        """The per-label embedding matrices exact searches score with (see :mod:`kag.graph.neo4j_anchor`)."""
        if self._anchor is None:
            self._anchor = AnchorScorer(
                self.read, self.namespace, background=self.matrix_reload == "background", bulk_reader=self.read_rows
            )
        return self._anchor

    async def _execute_exact(self, plan: QueryPlan) -> PlanResult | None:
        """The plan with exact scores as parameters; a ranked one tries its best anchors first."""
        first = self.anchor_first
        if plan.count or plan.order is not None:  # a count, or rows ordered by a field, needs every anchor
            first = None
        elif first is not None:  # a similarity search has a row per anchor; a hop may have none
            first = plan.k if not plan.row_hops else max(first, plan.k)
        prepared = await self.anchor_scorer.prepare(plan)
        if prepared is None:
            return None
        while True:
            exact = prepared.cut(first)
            compiled = compile_plan(exact.plan)
            compiled.params["threshold"] = threshold_boundary(plan.threshold)
            result = await self._execute_compiled(exact.plan, compiled)
            if first is None or proven([row.score for row in result.rows], plan.k, exact, plan.sides):
                # the query shown is the plan's own (the same text as on the memory store)
                return PlanResult(rows=result.rows, count=result.count)
            first *= GROWTH

    async def _execute_compiled(self, plan: QueryPlan, compiled: CompiledQuery) -> PlanResult:
        res = await self.read(compiled.text, compiled.params, "running a triplet search")
        if plan.count:
            return PlanResult(rows=[], count=int(res.records[0]["count"]), query=compiled)
        # a row holds the first subject and each non-negated hop's relationship and object
        nodes = [f"n{i}" for i in plan.row_nodes]
        rels = [f"r{h + 1}" for h in plan.row_hops]
        rows = []
        for rec in res.records:
            rows.append(
                PlanRow(
                    node_ids=tuple(rec[f"{n}_id"] for n in nodes),
                    node_props=tuple(_clean(rec[f"{n}_props"]) for n in nodes),
                    rel_ids=tuple(rec[f"{r}_id"] for r in rels),
                    rel_props=tuple(_clean(rec[f"{r}_props"]) for r in rels),
                    rel_forward=tuple(bool(rec[f"{r}_forward"]) for r in rels),
                    score=float(rec["score"]),
                )
            )
        return PlanResult(rows=rows, query=compiled)

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        res = await self.read(
            f"UNWIND $ids AS id MATCH (n:{quote(ENTITY)} {{id: id, {IN_NAMESPACE}}}) "
            "RETURN n.id AS id, n {.*, embedding: null} AS props",
            {"ids": list(ids), "ns": self.namespace},
            "reading nodes",
        )
        return {r["id"]: _clean(r["props"]) for r in res.records}

    async def get_relations(self, ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        if not self._relation_labels:
            return {}
        types = "|".join(quote(t) for t in self._relation_labels)
        res = await self.read(
            f"MATCH (a)-[r:{types}]->(b) WHERE r.id IN $ids AND r.{NAMESPACE} = $ns "
            "RETURN r.id AS id, a.id AS start, b.id AS end, r {.*} AS props",
            {"ids": list(ids), "ns": self.namespace},
            "reading relations",
        )
        return {r["id"]: (r["start"], r["end"], _clean(r["props"])) for r in res.records}

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {"nodes": 0, "relations": 0}
        ns, params = f"{NAMESPACE_MAP}", {"ns": self.namespace}
        for label in self._entity_labels:
            res = await self.read(f"MATCH (n:{quote(label)} {ns}) RETURN count(n) AS n", params, "counting nodes")
            out[label] = int(res.records[0]["n"])
        res = await self.read(f"MATCH (n:{quote(ENTITY)} {ns}) RETURN count(n) AS n", params, "counting nodes")
        out["nodes"] = int(res.records[0]["n"])
        for label in self._relation_labels:
            res = await self.read(
                f"MATCH ()-[r:{quote(label)} {ns}]->() RETURN count(r) AS n", params, "counting relations"
            )
            out[label] = int(res.records[0]["n"])
            out["relations"] += out[label]
        return {k: v for k, v in out.items() if v or k in ("nodes", "relations")}

    async def neighborhood(
        self, ids: Sequence[str], depth: int = 1, limit: int = 200
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
        """Nodes (id -> properties) and edges (start, end, type) within ``depth`` hops of ``ids``."""
        node = f"{quote(ENTITY)} {NAMESPACE_MAP}"
        res = await self.read(
            f"MATCH (n:{node}) WHERE n.id IN $ids RETURN n.id AS id, n {{.*, embedding: null}} AS props",
            {"ids": list(ids), "ns": self.namespace},
            "reading a neighborhood",
        )
        nodes = {r["id"]: _clean(r["props"]) for r in res.records}
        frontier = list(nodes)
        for _ in range(depth):
            if not frontier or len(nodes) >= limit:
                break
            res = await self.read(
                f"MATCH (a:{node})-[r]-(b:{node}) WHERE a.id IN $ids AND NOT b.id IN $seen "
                "RETURN DISTINCT b.id AS id, b {.*, embedding: null} AS props ORDER BY id LIMIT $limit",
                {"ids": frontier, "seen": list(nodes), "limit": limit - len(nodes), "ns": self.namespace},
                "reading a neighborhood",
            )
            frontier = [r["id"] for r in res.records]
            nodes.update({r["id"]: _clean(r["props"]) for r in res.records})
        res = await self.read(
            f"MATCH (a:{node})-[r]->(b:{node}) WHERE a.id IN $ids AND b.id IN $ids "
            "RETURN a.id AS start, b.id AS end, type(r) AS type",
            {"ids": list(nodes), "ns": self.namespace},
            "reading a neighborhood",
        )
        edges = sorted((r["start"], r["end"], r["type"]) for r in res.records)
        return dict(sorted(nodes.items())), edges

    async def clear(self) -> None:
        """Delete every kag entity of this namespace and its relations (tests and re-ingests)."""
        query = f"MATCH (n:{quote(ENTITY)} {NAMESPACE_MAP}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"

        async def call() -> None:
            # CALL ... IN TRANSACTIONS needs an auto-commit transaction
            async with self.session() as session:
                await (await session.run(query, {"ns": self.namespace})).consume()

        await self.retry("clearing the graph", call)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Rows(list[dict[str, Any]]):
    """A statement's ``$rows``: packed as the plain list it is, but with a short ``repr``.

    The driver formats every RUN message's parameters for its debug log whether or not
    debug logging is on; the repr of a batch of 384-d vectors took longer than packing it.
    """

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


def _merge_sources(var: str, rows: Sequence[dict[str, Any]]) -> str:
    """Cypher that write-locks ``var`` and keeps its stored provenance as ``before`` (when rows carry any)."""
    if not any(SOURCES in row["props"] for row in rows):
        return ""
    # the SET takes the write lock, so the read below sees every committed concurrent merge
    return f"SET {var}.{quote(_LOCK)} = true\nWITH {var}, row, {var}.{quote(SOURCES)} AS before\n"


def _merged_sources_tail(var: str, rows: Sequence[dict[str, Any]]) -> str:
    """Cypher that sets ``var``'s provenance to the sorted union of ``before`` and the row's."""
    if not any(SOURCES in row["props"] for row in rows):
        return ""
    src = quote(SOURCES)
    return (
        f"SET {var}.{src} = CASE WHEN row.props.{src} IS NULL THEN before ELSE COLLECT {{ "
        f"UNWIND coalesce(before, []) + row.props.{src} AS s RETURN DISTINCT s ORDER BY s }} END\n"
        f"REMOVE {var}.{quote(_LOCK)}\n"
        f"WITH {var}\n"
    )


async def _missing_endpoints(tx: Any, rows: Sequence[dict[str, Any]], namespace: str) -> list[str]:
    ids = sorted({row["start"] for row in rows} | {row["end"] for row in rows})
    result = await tx.run(
        f"UNWIND $ids AS id OPTIONAL MATCH (n:{quote(ENTITY)} {{id: id, {IN_NAMESPACE}}}) "
        "WITH id, n WHERE n IS NULL RETURN id",
        {"ids": ids, "ns": namespace},
    )
    return [record["id"] for record in await result.fetch(2**31 - 1)]


def plain_properties(props: Mapping[str, Any], drop: Collection[str] = ()) -> dict[str, Any]:
    """Properties with Neo4j temporal values as ISO text (a graph kag did not write may hold them;
    introspected models declare them as text), without ``drop`` and null values."""
    return {
        k: v.iso_format() if hasattr(v, "iso_format") else v
        for k, v in props.items()
        if k not in drop and v is not None
    }


def _clean(props: dict[str, Any] | None) -> dict[str, Any]:
    return plain_properties(props or {}, ("embedding", NAMESPACE))


def _check_props(props: Mapping[str, Any]) -> None:
    """Refuse a record that would overwrite its namespace (``n += row.props``)."""
    if NAMESPACE in props:
        raise StoreFormatError(f"{NAMESPACE!r} is reserved for the namespace; rename that property.")


class _SyncDriver:
    """A caller's blocking ``neo4j.Driver`` behind the async calls the store makes (in worker threads)."""

    def __init__(self, driver: neo4j.Driver) -> None:
        self._driver = driver

    @property
    def blocking(self) -> neo4j.Driver:
        """The caller's driver itself (for reads that run whole in a worker thread)."""
        return self._driver

    async def execute_query(self, query: str, **kwargs: Any) -> neo4j.EagerResult:
        result: neo4j.EagerResult = await asyncio.to_thread(lambda: self._driver.execute_query(query, **kwargs))
        return result

    async def verify_connectivity(self) -> None:
        await asyncio.to_thread(self._driver.verify_connectivity)

    @property
    def execute_query_bookmark_manager(self) -> Any:
        return self._driver.execute_query_bookmark_manager

    def session(self, **kwargs: Any) -> _SyncSession:
        return _SyncSession(self._driver.session(**kwargs))

    async def close(self) -> None:  # pragma: no cover - never called: the caller owns the driver
        await asyncio.to_thread(self._driver.close)


class _SyncSession:
    """A blocking session behind async calls. A worker thread cannot be stopped: when the awaiting
    task is cancelled, the call it started runs on, so every call holds the session's lock in its
    thread and closing waits for it (a session is never closed under a transaction still writing)."""

    def __init__(self, session: neo4j.Session) -> None:
        self._session = session
        self._lock = threading.Lock()

    async def __aenter__(self) -> _SyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(_locked(self._lock, self._session.close))

    async def run(self, query: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> _SyncResult:
        result = await asyncio.to_thread(_locked(self._lock, self._session.run, query, parameters, **kwargs))
        return _SyncResult(result, self._lock)

    async def execute_write(self, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        """The sync driver's managed transaction; ``work`` runs on a private loop in its worker thread."""

        def run_sync(tx: neo4j.ManagedTransaction) -> T:
            return asyncio.run(work(_SyncTx(tx)))

        return await asyncio.to_thread(_locked(self._lock, self._session.execute_write, run_sync))


def _locked(lock: threading.Lock, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """``fn(*args, **kwargs)`` as a call for a worker thread, holding ``lock`` while it runs."""

    def call() -> T:
        with lock:
            return fn(*args, **kwargs)

    return call


class _SyncTx:
    """A sync managed transaction with the async calls the store's transaction functions make."""

    def __init__(self, tx: neo4j.ManagedTransaction) -> None:
        self._tx = tx

    async def run(self, query: str, parameters: dict[str, Any] | None = None) -> _SyncResult:
        return _SyncResult(self._tx.run(query, parameters))


class _SyncResult:
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


class _RelationSchedule:
    """Hands out relation batches as soon as the node batches holding their endpoints have committed.

    A relation's level is the last node batch of this call that holds one of its endpoints (-1 when
    neither is in the call: they are stored already). Relations are written one batch at a time, so
    relation transactions never lock each other's nodes, and a relation batch only touches nodes
    whose batches have committed, so it never waits on a node batch's locks either.
    """

    def __init__(self, parts: Sequence[Sequence[NodeRecord]], relations: Sequence[RelationRecord]) -> None:
        batch_of = {n.id: k for k, part in enumerate(parts) for n in part}
        levels: dict[int, list[RelationRecord]] = defaultdict(list)
        for r in relations:
            levels[max(batch_of.get(r.start, -1), batch_of.get(r.end, -1))].append(r)
        # grouped by type within a level: a batch holds few types, and each type is one statement
        self._levels = {k: sorted(rows, key=lambda r: r.label) for k, rows in levels.items()}
        self._order = sorted(self._levels)
        self._committed = [False] * len(parts)
        self._prefix = -1  # every node batch up to here has committed
        self._changed = asyncio.Event()
        self._pending: list[RelationRecord] = []

    def done(self, k: int) -> None:
        """Node batch ``k`` committed."""
        self._committed[k] = True
        while self._prefix + 1 < len(self._committed) and self._committed[self._prefix + 1]:
            self._prefix += 1
        self._changed.set()

    async def next(self, size: int) -> list[RelationRecord] | None:
        """Up to ``size`` relations whose endpoints are all written (waiting until some are); None
        once every relation was handed out. Whatever is ready goes at once: while that batch is
        written, later node batches commit and the next one fills up."""
        while True:
            while self._order and self._order[0] <= self._prefix:
                self._pending.extend(self._levels.pop(self._order.pop(0)))
            if self._pending:
                batch, self._pending = self._pending[:size], self._pending[size:]
                return batch
            if not self._order:
                return None
            self._changed.clear()
            await self._changed.wait()


async def _first_failure(jobs: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run ``jobs`` side by side and raise the first failure, as ``gather`` would, but cancel the
    others and wait until they have stopped first, so no batch is still writing once this returns.
    (A transaction running in a worker thread, on a blocking driver, cannot be stopped: its task
    ends when that transaction has; see ``_SyncSession``.)"""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        for finished in asyncio.as_completed(tasks):
            await finished
    finally:
        for task in tasks:
            task.cancel()
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, Exception):  # each is logged: only the first is raised
                log.debug("bulk write batch failed: %r", outcome)
