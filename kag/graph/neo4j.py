"""The Neo4j store: the same plans, compiled to parameterized Cypher, over the async driver.

* one driver per store (per KnowledgeBase), created lazily on first use;
* constraints (``REQUIRE n.id IS UNIQUE``) and one vector index per entity label,
  created idempotently, then ``db.awaitIndexes``;
* writes are batched ``UNWIND ... MERGE`` in managed write transactions;
* every compiled read query is first run through ``EXPLAIN`` and refused unless
  Neo4j reports it read-only, then executed in a read transaction;
* driver errors become typed ``kag.errors`` that say what to do; transient
  failures are retried with bounded exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, RoutingControl
from neo4j import exceptions as nx

from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConfigError,
    EmbeddingError,
    QueryError,
    StoreError,
    UnsafeQueryError,
)
from kag.graph.base import NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.query.cypher import compile_plan, quote, quote_name, vector_index_name
from kag.query.plan import QueryPlan

T = TypeVar("T")
log = logging.getLogger(__name__)
READ_ONLY_CACHE_SIZE = 512  # query texts remembered as read-only
SLOW_QUERY_SECONDS = 1.0  # statements at least this slow are logged at WARNING
ENTITY = "KagEntity"  # shared label of entity nodes: one id index for lookups and endpoints
_RETRYABLE = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, OSError)


class Neo4jGraphStore:
    """Graph store on a Neo4j 5 server (``neo4j://`` or ``bolt://``)."""

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
    ) -> None:
        """Settings not given here come from ``NEO4J_USERNAME`` (or the older ``NEO4J_USER``),
        ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE``. ``driver`` is a caller's own sync or async
        driver: it is used as is (its auth and routing) and never closed by kag. ``user`` is the
        older name of ``username``."""
        if batch_size < 1 or max_retries < 0:
            raise ConfigError("batch_size must be >= 1 and max_retries >= 0.")
        if username is not None and user is not None and username != user:
            raise ConfigError("give username= or user= (its older name), not both.")
        self.uri = uri
        self.user = username or user or os.environ.get("NEO4J_USERNAME") or os.environ.get("NEO4J_USER") or "neo4j"
        self._password = password if password is not None else os.environ.get("NEO4J_PASSWORD")
        self.database = database or os.environ.get("NEO4J_DATABASE") or None
        self._owns_driver = driver is None
        if isinstance(driver, neo4j.Driver):
            driver = _SyncDriver(driver)  # type: ignore[assignment]  # same calls, run in threads
        elif driver is not None and not isinstance(driver, AsyncDriver):
            raise ConfigError(f"driver must be a neo4j Driver or AsyncDriver, got {type(driver).__name__}.")
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff = backoff
        self._connection_timeout = connection_timeout
        self._max_transaction_retry_time = max_transaction_retry_time
        # an AsyncDriver, or a caller's sync driver behind _SyncDriver (the same calls, awaited)
        self._driver: Any = driver
        self._entity_labels: tuple[str, ...] = ()
        self._relation_labels: tuple[str, ...] = ()
        # query texts EXPLAIN has proven read-only, least recently used first (bounded: texts vary)
        self._read_only: OrderedDict[str, None] = OrderedDict()

    # -- connection -----------------------------------------------------------
    @property
    def driver(self) -> AsyncDriver:
        if self._driver is None:
            auth = (self.user, self._password) if self._password is not None else None
            self._driver = AsyncGraphDatabase.driver(
                self.uri,
                auth=auth,
                connection_timeout=self._connection_timeout,
                max_transaction_retry_time=self._max_transaction_retry_time,
            )
        return self._driver

    async def aclose(self) -> None:
        """Close the driver kag opened (a caller's own driver is left open)."""
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

    async def retry(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` with bounded, jittered retries on transient errors; translate driver errors.

        ``what`` completes the sentence "... while <what>" in error messages and logs.
        """
        attempt = 0
        while True:
            try:
                return await fn()
            except (nx.AuthError, nx.ConfigurationError) as exc:
                raise self._translate(exc, what) from exc
            except _RETRYABLE as exc:
                if attempt >= self.max_retries:
                    raise self._translate(exc, what) from exc
                # bounded exponential backoff with jitter
                delay = self.backoff * (2**attempt) * (0.5 + random.random() / 2)
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

    async def run(self, query: str, params: dict[str, Any] | None, *, write: bool, what: str) -> neo4j.EagerResult:
        """Run one parameterized statement (routed to a writer when ``write``), with retries.

        Statements slower than ``SLOW_QUERY_SECONDS`` are logged at WARNING with their
        purpose and duration (never their parameters, which may hold user data).
        """
        routing = RoutingControl.WRITE if write else RoutingControl.READ

        async def call() -> neo4j.EagerResult:
            return await self.driver.execute_query(
                query, parameters_=params or {}, routing_=routing, database_=self.database
            )

        started = time.perf_counter()
        result = await self.retry(what, call)
        elapsed = time.perf_counter() - started
        if elapsed >= SLOW_QUERY_SECONDS:
            log.warning("slow Neo4j query while %s: %.3fs", what, elapsed)
        else:
            log.debug("Neo4j query while %s: %.3fs", what, elapsed)
        return result

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        self._entity_labels = tuple(entity_labels)
        self._relation_labels = tuple(relation_labels)
        dims = int(dimensions)
        try:  # fail fast on a server that is down or refuses us, before any retrying query
            await self.driver.verify_connectivity()
        except (*_RETRYABLE, nx.DriverError, nx.Neo4jError) as exc:
            raise self._translate(exc, "connecting") from exc
        statements = [f"CREATE CONSTRAINT kag_entity_id IF NOT EXISTS FOR (n:{quote(ENTITY)}) REQUIRE n.id IS UNIQUE"]
        for label in entity_labels:
            statements.append(
                f"CREATE CONSTRAINT {quote_name('kag_' + label + '_id')} IF NOT EXISTS "
                f"FOR (n:{quote(label)}) REQUIRE n.id IS UNIQUE"
            )
            statements.append(
                f"CREATE VECTOR INDEX {quote_name(vector_index_name(label))} IF NOT EXISTS "
                f"FOR (n:{quote(label)}) ON n.embedding OPTIONS {{indexConfig: "
                f"{{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine'}}}}"
            )
        for label in relation_labels:
            statements.append(
                f"CREATE CONSTRAINT {quote_name('kag_' + label + '_id')} IF NOT EXISTS "
                f"FOR ()-[r:{quote(label)}]-() REQUIRE r.id IS UNIQUE"
            )
        for stmt in statements:
            await self.run(stmt, None, write=True, what="creating constraints and indexes")
        await self.run("CALL db.awaitIndexes(300)", None, write=False, what="waiting for indexes")
        await self._check_dimensions(entity_labels, dims)

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
    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for n in nodes:
            by_label[n.label].append({"id": n.id, "props": n.properties, "embedding": n.embedding.tolist()})
        for label, rows in by_label.items():
            query = (
                "UNWIND $rows AS row\n"
                f"MERGE (n:{quote(ENTITY)} {{id: row.id}})\n"
                f"SET n:{quote(label)}, n += row.props, n.embedding = row.embedding"
            )
            for start in range(0, len(rows), self.batch_size):
                await self.run(
                    query, {"rows": rows[start : start + self.batch_size]}, write=True, what=f"writing {label} nodes"
                )
        rels: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in relations:
            rels[r.label].append({"id": r.id, "start": r.start, "end": r.end, "props": r.properties})
        for label, rows in rels.items():
            query = (
                "UNWIND $rows AS row\n"
                f"MATCH (a:{quote(ENTITY)} {{id: row.start}})\n"
                f"MATCH (b:{quote(ENTITY)} {{id: row.end}})\n"
                f"MERGE (a)-[r:{quote(label)} {{id: row.id}}]->(b)\n"
                "SET r += row.props"
            )
            for start in range(0, len(rows), self.batch_size):
                await self.run(
                    query,
                    {"rows": rows[start : start + self.batch_size]},
                    write=True,
                    what=f"writing {label} relations",
                )

    async def delete(self, ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(ids))
        found = 0
        if self._relation_labels:
            types = "|".join(quote(t) for t in self._relation_labels)
            res = await self.run(
                f"MATCH ()-[r:{types}]->() WHERE r.id IN $ids WITH r, r.id AS id DELETE r RETURN count(id) AS n",
                {"ids": ids},
                write=True,
                what="deleting relations",
            )
            found += int(res.records[0]["n"])
        res = await self.run(
            f"UNWIND $ids AS id MATCH (n:{quote(ENTITY)} {{id: id}}) DETACH DELETE n RETURN count(*) AS n",
            {"ids": ids},
            write=True,
            what="deleting nodes",
        )
        return found + int(res.records[0]["n"])

    # -- reads ----------------------------------------------------------------
    async def read(self, query: str, params: dict[str, Any], what: str) -> neo4j.EagerResult:
        """Run a query that ``EXPLAIN`` proves read-only (see :meth:`assert_read_only`)."""
        await self.assert_read_only(query, params)
        return await self.run(query, params, write=False, what=what)

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
        compiled = compile_plan(plan)
        res = await self.read(compiled.text, compiled.params, "running a triplet search")
        if plan.count:
            return PlanResult(rows=[], count=int(res.records[0]["count"]), query=compiled)
        n_nodes = 1 if plan.negated else len(plan.nodes)
        n_rels = 0 if plan.negated else len(plan.hops)
        rows = []
        for rec in res.records:
            rows.append(
                PlanRow(
                    node_ids=tuple(rec[f"n{i}_id"] for i in range(n_nodes)),
                    node_props=tuple(_clean(rec[f"n{i}_props"]) for i in range(n_nodes)),
                    rel_ids=tuple(rec[f"r{i + 1}_id"] for i in range(n_rels)),
                    rel_props=tuple(_clean(rec[f"r{i + 1}_props"]) for i in range(n_rels)),
                    rel_forward=tuple(bool(rec[f"r{i + 1}_forward"]) for i in range(n_rels)),
                    score=float(rec["score"]),
                )
            )
        return PlanResult(rows=rows, query=compiled)

    async def get_nodes(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        res = await self.read(
            f"UNWIND $ids AS id MATCH (n:{quote(ENTITY)} {{id: id}}) "
            "RETURN n.id AS id, n {.*, embedding: null} AS props",
            {"ids": list(ids)},
            "reading nodes",
        )
        return {r["id"]: _clean(r["props"]) for r in res.records}

    async def get_relations(self, ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        if not self._relation_labels:
            return {}
        types = "|".join(quote(t) for t in self._relation_labels)
        res = await self.read(
            f"MATCH (a)-[r:{types}]->(b) WHERE r.id IN $ids "
            "RETURN r.id AS id, a.id AS start, b.id AS end, r {.*} AS props",
            {"ids": list(ids)},
            "reading relations",
        )
        return {r["id"]: (r["start"], r["end"], _clean(r["props"])) for r in res.records}

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {"nodes": 0, "relations": 0}
        for label in self._entity_labels:
            res = await self.read(f"MATCH (n:{quote(label)}) RETURN count(n) AS n", {}, "counting nodes")
            out[label] = int(res.records[0]["n"])
        res = await self.read(f"MATCH (n:{quote(ENTITY)}) RETURN count(n) AS n", {}, "counting nodes")
        out["nodes"] = int(res.records[0]["n"])
        for label in self._relation_labels:
            res = await self.read(f"MATCH ()-[r:{quote(label)}]->() RETURN count(r) AS n", {}, "counting relations")
            out[label] = int(res.records[0]["n"])
            out["relations"] += out[label]
        return {k: v for k, v in out.items() if v or k in ("nodes", "relations")}

    async def neighborhood(
        self, ids: Sequence[str], depth: int = 1, limit: int = 200
    ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
        """Nodes (id -> properties) and edges (start, end, type) within ``depth`` hops of ``ids``."""
        node = quote(ENTITY)
        res = await self.read(
            f"MATCH (n:{node}) WHERE n.id IN $ids RETURN n.id AS id, n {{.*, embedding: null}} AS props",
            {"ids": list(ids)},
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
                {"ids": frontier, "seen": list(nodes), "limit": limit - len(nodes)},
                "reading a neighborhood",
            )
            frontier = [r["id"] for r in res.records]
            nodes.update({r["id"]: _clean(r["props"]) for r in res.records})
        res = await self.read(
            f"MATCH (a:{node})-[r]->(b:{node}) WHERE a.id IN $ids AND b.id IN $ids "
            "RETURN a.id AS start, b.id AS end, type(r) AS type",
            {"ids": list(nodes)},
            "reading a neighborhood",
        )
        edges = sorted((r["start"], r["end"], r["type"]) for r in res.records)
        return dict(sorted(nodes.items())), edges

    async def clear(self) -> None:
        """Delete every kag entity and its relations (tests and re-ingests)."""
        query = f"MATCH (n:{quote(ENTITY)}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"

        async def call() -> None:
            # CALL ... IN TRANSACTIONS needs an auto-commit transaction
            async with self.driver.session(database=self.database) as session:
                await (await session.run(query)).consume()

        await self.retry("clearing the graph", call)


def _clean(props: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (props or {}).items() if k not in ("embedding",) and v is not None}


class _SyncDriver:
    """A caller's blocking ``neo4j.Driver`` behind the async calls the store makes (in worker threads)."""

    def __init__(self, driver: neo4j.Driver) -> None:
        self._driver = driver

    async def execute_query(self, query: str, **kwargs: Any) -> neo4j.EagerResult:
        result: neo4j.EagerResult = await asyncio.to_thread(
            lambda: self._driver.execute_query(query, **kwargs)
        )
        return result

    async def verify_connectivity(self) -> None:
        await asyncio.to_thread(self._driver.verify_connectivity)

    def session(self, **kwargs: Any) -> _SyncSession:
        return _SyncSession(self._driver.session(**kwargs))

    async def close(self) -> None:  # pragma: no cover - never called: the caller owns the driver
        await asyncio.to_thread(self._driver.close)


class _SyncSession:
    def __init__(self, session: neo4j.Session) -> None:
        self._session = session

    async def __aenter__(self) -> _SyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._session.close)

    async def run(self, query: str, **kwargs: Any) -> _SyncResult:
        return _SyncResult(await asyncio.to_thread(self._session.run, query, **kwargs))


class _SyncResult:
    def __init__(self, result: neo4j.Result) -> None:
        self._result = result

    async def consume(self) -> neo4j.ResultSummary:
        return await asyncio.to_thread(self._result.consume)
