"""The Neo4j store: the same plans, compiled to parameterized Cypher, over the async driver.

How it talks to the server (one driver per store, retries, failing fast during an outage, write
deadlines, the ``EXPLAIN`` read-only guard) is :mod:`kag.graph.neo4j_connection`; this module is
the graph on it:

* constraints (``REQUIRE n.id IS UNIQUE``) and one vector index per entity label,
  created idempotently. ``ensure_schema`` waits for the constraints only: exact search
  never reads the vector indexes, so Neo4j populates them in the background (seconds
  per ten thousand vectors after an import) and the first approximate (``candidates=``)
  search of a label waits for its index (:meth:`Neo4jGraphStore.await_indexes`);
* writes are batched ``UNWIND ... MERGE`` statements (:mod:`kag.graph.neo4j_write_cypher`). An
  ``upsert`` of at most ``atomic_rows`` nodes + relations (default 5000), and every ``delete``,
  runs in ONE managed write transaction: all of its rows or none (a failure rolls it back; a retry
  replays it whole, MERGE is idempotent). A larger upsert is written as resumable
  batches: each batch (``batch_size`` nodes, or up to ``relation_batch_size`` relations,
  default 5000) is its own transaction, as ``bulk_upsert`` writes them (node batches two
  at a time, relation batches one after another beside them, each once every node batch
  up to the last holding one of its endpoints has committed: :mod:`kag.graph.neo4j_bulk_schedule`);
  after a failure the finished batches stay written and re-running the same upsert completes it
  (nothing is duplicated);
* provenance (the ``kag_sources`` list property) is merged inside the transaction
  under the node's or relationship's write lock, so concurrent upserts of one item
  with different sources keep every source;
* every compiled read query is first run through ``EXPLAIN`` and refused unless
  Neo4j reports it read-only, then executed in a read transaction; exact searches score their
  similarity texts beside the driver (:mod:`kag.graph.neo4j_anchor`);
* namespaces (tenants): a store reads and writes only its ``namespace``. Every node
  and relationship kag writes carries it as the ``kag_ns`` property, the uniqueness
  constraints are on ``(id, kag_ns)``, and every MATCH, MERGE and DELETE of the store
  and of the compiled plans names it (``{kag_ns: $ns}``, a parameter). Stores of many
  namespaces can share one driver (``driver=``) and one database.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import neo4j
from neo4j import AsyncDriver

from kag.errors import ConfigError, EmbeddingError, InvalidInputError, StoreFormatError
from kag.graph.base import NodeRecord, PlanResult, PlanRow, RelationRecord
from kag.graph.neo4j_anchor import FIRST_ANCHORS, GROWTH, AnchorScorer, proven, threshold_boundary
from kag.graph.neo4j_bulk_schedule import write_in_batches
from kag.graph.neo4j_connection import (
    INDEX_WAIT_SECONDS,
    PROBE_INTERVAL,
    READ_ONLY_CACHE_SIZE,
    RETRY_AFTER,
    SLOW_QUERY_SECONDS,
    WRITE_TIMEOUT,
    Neo4jConnection,
    Outage,
    write_timeout_setting,
)
from kag.graph.neo4j_write_cypher import ENTITY, missing_endpoints, retract_statements, write_statements
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
from kag.validation import DEFAULT_NAMESPACE, check_int, check_namespace

# names that moved to the modules above, still importable from here
__all__ = [
    "ENTITY",
    "INDEX_WAIT_SECONDS",
    "MATRIX_RELOADS",
    "PROBE_INTERVAL",
    "READ_ONLY_CACHE_SIZE",
    "RELATION_BATCH",
    "RETRY_AFTER",
    "SLOW_QUERY_SECONDS",
    "WRITE_TIMEOUT",
    "Neo4jGraphStore",
    "Outage",
    "plain_properties",
    "write_timeout_setting",
]

log = logging.getLogger(__name__)
MATRIX_RELOADS = ("wait", "background")  # how exact searches meet a stale label matrix
RELATION_BATCH = 5000  # rows per relation transaction in bulk_upsert (measured: 1000 -> 5000 about 20% faster)


class Neo4jGraphStore(Neo4jConnection):
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
        check_int(batch_size, name="batch_size")
        check_int(relation_batch_size, name="relation_batch_size")
        check_int(atomic_rows, name="atomic_rows", minimum=0)
        super().__init__(
            uri,
            username=username,
            password=password,
            database=database,
            max_retries=max_retries,
            backoff=backoff,
            connection_timeout=connection_timeout,
            max_transaction_retry_time=max_transaction_retry_time,
            driver=driver,
            user=user,
            write_timeout=write_timeout,
        )
        self.namespace = check_namespace(namespace)
        self.matrix_reload = matrix_reload or os.environ.get("KAG_NEO4J_MATRIX_RELOAD") or "wait"
        if self.matrix_reload not in MATRIX_RELOADS:
            raise ConfigError(
                f"matrix_reload must be one of {', '.join(MATRIX_RELOADS)}, got {self.matrix_reload!r} "
                "(from $KAG_NEO4J_MATRIX_RELOAD when not passed)."
            )
        self.batch_size = batch_size
        self.relation_batch_size = relation_batch_size
        self.atomic_rows = atomic_rows
        self._entity_labels: tuple[str, ...] = ()
        self._relation_labels: tuple[str, ...] = ()
        self._anchor: AnchorScorer | None = None

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
        other._follow(self)
        return other

    async def aclose(self) -> None:
        """Close the driver kag opened (a caller's own driver is left open)."""
        if self._anchor is not None:
            self._anchor.cancel()
        await super().aclose()

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        self._entity_labels = tuple(entity_labels)
        self._relation_labels = tuple(relation_labels)
        dims = int(dimensions)
        await self.connect()
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
        planned = write_statements(nodes, relations, batch_size=batch_size, namespace=self.namespace)
        statements, written, expected = planned.statements, planned.nodes, planned.relations
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
                        missing = await missing_endpoints(tx, expected[i], self.namespace)
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
        concurrency = check_int(concurrency, name="concurrency")
        size = max(1, batch_size or self.batch_size)
        rel_size = max(1, relation_batch_size or self.relation_batch_size)
        await write_in_batches(
            [nodes[i : i + size] for i in range(0, len(nodes), size)],
            relations,
            write_nodes=lambda part: self._write(part, [], batch_size=size, atomic_rows=size),
            write_relations=lambda ready: self._write([], ready, batch_size=rel_size, atomic_rows=rel_size),
            concurrency=concurrency,
            relation_batch_size=rel_size,
        )

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
        """:func:`kag.graph.neo4j_write_cypher.retract_statements`: the Cypher :meth:`retract` runs."""
        return retract_statements(chunks_param)

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
