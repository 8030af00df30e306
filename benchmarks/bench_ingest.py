"""Bulk ingest into Neo4j: kag's batched writes vs one MERGE transaction per row and vs neo4j-graphrag.

Same data (a GeoNames sample: cities, countries, continents, IsCityOf /
IsCapitalOf / IsInContinent and two NearTo edges per city) and the same
embeddings on every side:

1. ``KnowledgeBase.upsert`` (validation, embedding, ``UNWIND ... MERGE`` batches
   in managed write transactions; above ``atomic_rows``, ``bulk_upsert``'s batch
   order), best of ``rounds``; the node and relation records it hands to the store
   are recorded on the way the first time;
2. the baseline replays exactly those records one row at a time, each row its
   own managed write transaction (``driver.execute_query``), sequentially — the
   embeddings are given to it for free (not timed), which favours the baseline;
3. ``Neo4jGraphStore.bulk_upsert`` (node batches of ``BATCH`` side by side, relation
   batches of ``REL_BATCH`` one after another, each batch one transaction) and
   neo4j-graphrag's ``Neo4jWriter`` (APOC core on the server) on the same records,
   alternating, best of ``rounds``; nodes and relations timed apart, since nodes
   carry a 384-d vector and every label has a vector index (the same indexes for
   both: the writer's nodes carry kag's labels and ``embedding`` property);
4. embeddings alone: the same nodes re-upserted with new vectors (each vector
   replaced in the property and in the vector index);
5. the offline first load (``kag.graph.neo4j_import``: CSVs + ``neo4j-admin database
   import full`` into a fresh database directory, no server involved), when Neo4j
   jars are found (``KAG_NEO4J_LIB``, else ``.neo4j/lib``).

The graph is emptied before each phase; the phases must end with identical counts.
Run: ``python -m benchmarks.bench_ingest`` with ``NEO4J_URI`` / ``NEO4J_PASSWORD``
pointing at a server you may clear (with APOC: ``KAG_NEO4J_APOC=1 deploy/neo4j/neo4j.sh start``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import world
from benchmarks.common import NOT_STAMP, Report, Result, empty_neo4j, log, neo4j_settings
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import ENTITY, RELATION_BATCH, Neo4jGraphStore
from kag.graph.neo4j_import import import_records
from kag.query.cypher import quote, quote_name, vector_index_name

GOAL = 50.0  # x per-row MERGE transactions
PEER_GOAL = 3.0  # x neo4j-graphrag's Neo4jWriter
BATCH = 1000  # node rows per transaction (measured: 250-2500, 1-3 at a time, within noise on 2 cores)
CONCURRENCY = 2  # node batches side by side
REL_BATCH = RELATION_BATCH  # relation rows per transaction (measured: 1000 18.5k, 5000 22k rows/s)
ROOT = Path(__file__).resolve().parents[1]


class Recorder:
    """Wraps a store's ``upsert`` to keep the records kag writes."""

    def __init__(self, store: Neo4jGraphStore) -> None:
        self.store = store
        self.nodes: list[NodeRecord] = []
        self.relations: list[RelationRecord] = []
        self._upsert = store.upsert

    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        """Record, then write through the real store."""
        self.nodes.extend(nodes)
        self.relations.extend(relations)
        await self._upsert(nodes, relations)


async def per_row(
    store: Neo4jGraphStore, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]
) -> tuple[float, float]:
    """The baseline: one MERGE statement in its own managed transaction per row; (node s, relation s)."""
    t0 = time.perf_counter()
    driver = store.driver
    db = store.database
    for n in nodes:
        await driver.execute_query(
            f"MERGE (n:{quote(ENTITY)} {{id: $id}}) SET n:{quote(n.label)}, n += $props, n.embedding = $embedding",
            parameters_={"id": n.id, "props": n.properties, "embedding": [float(x) for x in n.embedding]},
            database_=db,
        )
    t1 = time.perf_counter()
    for r in relations:
        await driver.execute_query(
            f"MATCH (a:{quote(ENTITY)} {{id: $start}}) MATCH (b:{quote(ENTITY)} {{id: $end}}) "
            f"MERGE (a)-[r:{quote(r.label)} {{id: $id}}]->(b) SET r += $props",
            parameters_={"id": r.id, "start": r.start, "end": r.end, "props": r.properties},
            database_=db,
        )
    return t1 - t0, time.perf_counter() - t1


async def graph_counts(store: Neo4jGraphStore) -> tuple[int, int, int]:
    """Nodes, relationships and nodes with an embedding, whoever wrote them."""
    res = await store.run(
        f"CALL () {{ MATCH (n) WHERE {NOT_STAMP} RETURN count(n) AS nodes, "
        "count(n.embedding) AS vectors } CALL () { MATCH ()-[r]->() RETURN count(r) AS rels } "
        "RETURN nodes, rels, vectors",
        None,
        write=False,
        what="counting",
    )
    rec = res.records[0]
    return int(rec["nodes"]), int(rec["rels"]), int(rec["vectors"])


class Peer:
    """neo4j-graphrag's ``Neo4jWriter`` on the same records (its own sync driver, as its users run it)."""

    def __init__(self, settings: dict[str, str], nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]):
        import neo4j
        from neo4j_graphrag.components.kg_writer import Neo4jWriter
        from neo4j_graphrag.components.types import Neo4jGraph, Neo4jNode, Neo4jRelationship

        self._writer = Neo4jWriter
        self._driver = neo4j.GraphDatabase.driver(settings["uri"], auth=(settings["user"], settings["password"]))
        self._database = settings["database"]
        self.nodes = Neo4jGraph(
            nodes=[
                Neo4jNode(
                    id=n.id,
                    label=n.label,
                    properties={**n.properties, "id": n.id},
                    embedding_properties={"embedding": [float(x) for x in n.embedding]},
                )
                for n in nodes
            ]
        )
        self.relations = Neo4jGraph(
            relationships=[
                Neo4jRelationship(
                    start_node_id=r.start, end_node_id=r.end, type=r.label, properties={**r.properties, "id": r.id}
                )
                for r in relations
            ]
        )

    async def write(self) -> tuple[float, float]:
        """Nodes, then relations (which clean the writer's temporary ids); (node s, relation s)."""
        t0 = time.perf_counter()
        done = await self._writer(self._driver, neo4j_database=self._database, clean_db=False).run(self.nodes)
        t1 = time.perf_counter()
        done2 = await self._writer(self._driver, neo4j_database=self._database, clean_db=True).run(self.relations)
        t2 = time.perf_counter()
        if done.status != "SUCCESS" or done2.status != "SUCCESS":
            raise RuntimeError(f"Neo4jWriter failed: {done.metadata} / {done2.metadata}")
        return t1 - t0, t2 - t1

    def close(self) -> None:
        """Close the writer's driver."""
        self._driver.close()


def server_pid() -> int | None:
    """The benchmark server's process id when it runs on this machine (``KAG_NEO4J_DIR``'s pid file)."""
    pid_file = Path(os.environ.get("KAG_NEO4J_DIR", ROOT / ".neo4j")) / "home" / "run" / "neo4j.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds the process has used so far (0.0 when it is not on this machine)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settle(pid: int | None, *, idle: float = 0.1, window: float = 0.25, limit: float = 15.0) -> None:
    """Wait (at most ``limit`` s) until the local server uses under ``idle`` cores over ``window`` s: the
    previous phase's deletes leave index merges running that would otherwise be billed to the next one."""
    if pid is None:
        return
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        c0 = cpu_seconds(pid)
        await asyncio.sleep(window)
        if (cpu_seconds(pid) - c0) / window < idle:
            return


async def emptied(store: Neo4jGraphStore, pid: int | None) -> None:
    """An empty graph and a quiet server before a timed phase."""
    await empty_neo4j(store)
    await settle(pid)


async def timed(pid: int | None, write: Any) -> tuple[float, float]:
    """(wall seconds, server CPU seconds) of awaiting ``write()``."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await write()
    return time.perf_counter() - t0, cpu_seconds(pid) - c0


async def one_call(store: Neo4jGraphStore, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> float:
    """Seconds of one ``bulk_upsert`` of the nodes and relations together (as users call it)."""
    t0 = time.perf_counter()
    await store.bulk_upsert(nodes, relations, batch_size=BATCH, concurrency=CONCURRENCY, relation_batch_size=REL_BATCH)
    return time.perf_counter() - t0


async def set_vector_indexes(store: Neo4jGraphStore, labels: Sequence[str], dims: int, *, drop: bool) -> None:
    """Drop the entity labels' vector indexes, or create them again as ``ensure_schema`` does."""
    for label in labels:
        store.forget_index(vector_index_name(label))
        name = quote_name(vector_index_name(label))
        stmt = (
            f"DROP INDEX {name} IF EXISTS"
            if drop
            else f"CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (n:{quote(label)}) ON n.embedding OPTIONS "
            f"{{indexConfig: {{`vector.dimensions`: {int(dims)}, `vector.similarity_function`: 'cosine'}}}}"
        )
        await store.run(stmt, None, write=True, what="changing the vector indexes")
    if not drop:
        await store.await_indexes([vector_index_name(label) for label in labels], "waiting for the vector indexes")


def neo4j_lib() -> Path | None:
    """A directory of Neo4j jars for the offline importer, if one is installed."""
    for candidate in (os.environ.get("KAG_NEO4J_LIB"), str(ROOT / ".neo4j" / "lib")):
        if candidate and any(Path(candidate).glob("neo4j-*.jar")):
            return Path(candidate)
    return None


def offline_import(nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord], lib: Path) -> float:
    """Seconds of an offline first load (CSVs + ``neo4j-admin database import full``) into a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="kag-bench-import-") as tmp:
        home = Path(tmp)
        (home / "conf").mkdir()
        (home / "conf" / "neo4j.conf").write_text(
            f"server.directories.data={home / 'data'}\nserver.directories.logs={home / 'logs'}\n", encoding="utf-8"
        )
        result = import_records(nodes, relations, home=home, lib=lib, heap="1g")
        if (result.nodes, result.relations) != (len(nodes), len(relations)):
            raise AssertionError(f"the importer wrote {result}")
        return result.csv_seconds + result.import_seconds


def _ratio_row(what: str, n: int, kag_s: float, base_s: float, base_name: str, goal: float | None) -> Result:
    ratio = base_s / kag_s
    return Result(
        "ingest (Neo4j)",
        what,
        n / kag_s,
        "rows/s",
        n / base_s,
        base_name,
        ratio,
        f">= {goal:.0f}x" if goal else "",
        (ratio >= goal) if goal else None,
    )


async def run(settings: dict[str, str], step: int = 17, rounds: int = 3) -> Report:
    """Run every phase and return the report."""
    data = world.subset(world.load(), step)
    items: list[Any] = [*data.continents.values(), *data.countries.values(), *data.cities]
    items += world.base_relations(data)
    for part in world.near_relations(data, 2):
        items += part
    opts = {"user": settings["user"], "password": settings["password"], "database": settings["database"]}
    report = Report("Bulk ingest into Neo4j")

    kb = world.knowledge_base(settings["uri"], **opts)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    await kb.ensure_ready()
    # the server's CPU seconds per phase (a local server only): what bounds a ratio on this machine's cores
    pid = server_pid()
    await empty_neo4j(store)
    # untimed warm-up (JVM JIT, page cache, index structures) so the first timed phase
    # is not the only one paying for a cold server; every phase then starts from an empty graph
    log("ingest: warm-up")
    warm = Recorder(store)
    store.upsert = warm.upsert  # type: ignore[method-assign]
    await kb.upsert(items[: len(items) // 4])
    store.upsert = warm._upsert  # type: ignore[method-assign]
    await empty_neo4j(store)
    await per_row(store, warm.nodes[:100], warm.relations[:300])
    await emptied(store, pid)
    recorder = Recorder(store)
    store.upsert = recorder.upsert  # type: ignore[method-assign]
    log(f"ingest: kag KnowledgeBase.upsert of {len(items)} items")
    t0 = time.perf_counter()
    await kb.upsert(items)
    t_kag = time.perf_counter() - t0
    store.upsert = recorder._upsert  # type: ignore[method-assign]
    counts = await graph_counts(store)
    nodes, relations = recorder.nodes, recorder.relations
    n_nodes, n_rels = len(nodes), len(relations)
    rows = n_nodes + n_rels

    await emptied(store, pid)
    log(f"ingest: baseline, {rows} rows one transaction each")
    base_nodes, base_rels = await per_row(store, nodes, relations)
    t_base = base_nodes + base_rels
    checks = {"per-row": await graph_counts(store)}

    peer: Peer | None = None
    try:
        peer = Peer(settings, nodes, relations)
    except ImportError as exc:
        report.notes.append(f"neo4j-graphrag not installed ({exc}): no peer comparison (scripts/bench.sh installs it).")
    kag_times: list[tuple[float, float]] = []
    peer_times: list[tuple[float, float]] = []
    rng = np.random.default_rng(3)
    changed = [
        replace(n, embedding=np.asarray(rng.standard_normal(n.embedding.shape), dtype=np.float32)) for n in nodes
    ]
    vec_times: list[float] = []
    one_times: list[float] = []
    upsert_times = [t_kag]
    kag_cpu: list[tuple[float, float, float]] = []  # (wall, node CPU, relation CPU) per round
    peer_cpu: list[tuple[float, float]] = []  # (wall, CPU) per round
    for r in range(rounds):
        if r:  # KnowledgeBase.upsert again (its first timing above recorded the rows)
            await emptied(store, pid)
            log(f"ingest: round {r + 1}: kag KnowledgeBase.upsert")
            t0 = time.perf_counter()
            await kb.upsert(items)
            upsert_times.append(time.perf_counter() - t0)
            checks[f"upsert {r}"] = await graph_counts(store)
        await emptied(store, pid)
        log(f"ingest: round {r + 1}: kag bulk_upsert")
        node_s, node_cpu = await timed(
            pid, lambda: store.bulk_upsert(nodes, [], batch_size=BATCH, concurrency=CONCURRENCY)
        )
        rel_s, rel_cpu = await timed(pid, lambda: store.bulk_upsert([], relations, relation_batch_size=REL_BATCH))
        kag_times.append((node_s, rel_s))
        kag_cpu.append((node_s + rel_s, node_cpu, rel_cpu))
        checks[f"kag {r}"] = await graph_counts(store)
        t0 = time.perf_counter()
        await store.bulk_upsert(changed, [], batch_size=BATCH, concurrency=CONCURRENCY)
        vec_times.append(time.perf_counter() - t0)
        await emptied(store, pid)
        log(f"ingest: round {r + 1}: kag bulk_upsert, nodes and relations in one call")
        one_times.append(await one_call(store, nodes, relations))
        checks[f"one call {r}"] = await graph_counts(store)
        if peer is not None:
            await emptied(store, pid)
            log(f"ingest: round {r + 1}: neo4j-graphrag Neo4jWriter")
            c0 = cpu_seconds(pid)
            peer_times.append(await peer.write())
            peer_cpu.append((sum(peer_times[-1]), cpu_seconds(pid) - c0))
            checks[f"peer {r}"] = await graph_counts(store)
    bare: list[tuple[float, float]] = []  # (kag one call, Neo4jWriter) without the entity vector indexes
    if peer is not None:
        labels, dims = sorted({n.label for n in nodes}), len(nodes[0].embedding)
        await set_vector_indexes(store, labels, dims, drop=True)
        try:
            for r in range(rounds):
                log(f"ingest: round {r + 1}: both sides without the entity vector indexes")
                await emptied(store, pid)
                kag_bare = await one_call(store, nodes, relations)
                checks[f"bare kag {r}"] = await graph_counts(store)
                await emptied(store, pid)
                bare.append((kag_bare, sum(await peer.write())))
                checks[f"bare peer {r}"] = await graph_counts(store)
        finally:
            await set_vector_indexes(store, labels, dims, drop=False)
        peer.close()
    await empty_neo4j(store)
    await kb.aclose()
    if any(c != counts for c in checks.values()):
        raise AssertionError(f"phases wrote different graphs: kag {counts}, {checks}")

    t_kag = min(upsert_times)
    kag_n, kag_r = min(t for t, _ in kag_times), min(t for _, t in kag_times)
    t_bulk = min(one_times)
    what = f"{n_nodes:,} nodes + {n_rels:,} rels"
    report.add(
        replace(_ratio_row("KnowledgeBase.upsert, rows/s", rows, t_kag, t_base, "per-row MERGE tx", GOAL), note=what)
    )
    report.add(
        replace(
            _ratio_row("bulk_upsert, rows/s", rows, t_bulk, t_base, "per-row MERGE tx", GOAL),
            note="nodes and relations in one call",
        )
    )
    report.add(
        _ratio_row(
            "bulk_upsert, nodes (with 384-d vectors), rows/s", n_nodes, kag_n, base_nodes, "per-row MERGE tx", None
        )
    )
    report.add(_ratio_row("bulk_upsert, relations, rows/s", n_rels, kag_r, base_rels, "per-row MERGE tx", None))
    if peer_times:
        peer_n, peer_r = min(t for t, _ in peer_times), min(t for _, t in peer_times)
        report.add(
            _ratio_row("bulk_upsert vs neo4j-graphrag, rows/s", rows, t_bulk, peer_n + peer_r, "Neo4jWriter", PEER_GOAL)
        )
        report.add(_ratio_row("  nodes (with 384-d vectors), rows/s", n_nodes, kag_n, peer_n, "Neo4jWriter", None))
        report.add(_ratio_row("  relations, rows/s", n_rels, kag_r, peer_r, "Neo4jWriter", None))
        if bare:
            bare_kag, bare_peer = min(k for k, _ in bare), min(p for _, p in bare)
            report.add(
                replace(
                    _ratio_row(
                        "  both without the vector indexes, rows/s", rows, bare_kag, bare_peer, "Neo4jWriter", None
                    ),
                    note="entity vector indexes dropped on both sides",
                )
            )
            vector_kag = t_bulk - bare_kag
            report.notes.append(
                "What the vector indexes cost: the same one-call load took "
                f"{t_bulk:.2f} s with the entity vector indexes and {bare_kag:.2f} s without them (Neo4jWriter: "
                f"{peer_n + peer_r:.2f} s and {bare_peer:.2f} s). Neo4j inserts each vector into its HNSW index "
                "when the transaction commits, the same work for both sides. For 3x the writer, kag's load must "
                f"take at most {(peer_n + peer_r) / PEER_GOAL:.2f} s, of which the vector insertion alone takes "
                f"about {vector_kag:.2f} s."
            )
        if pid is not None and peer_cpu:
            cores = os.cpu_count() or 1
            _, k_nodes, k_rels = min(kag_cpu)  # the fastest round of each side
            _, p_cpu = min(peer_cpu)
            floor = (k_nodes + k_rels) / cores
            ceiling = (peer_n + peer_r) / floor
            report.notes.append(
                "Server CPU seconds in each side's fastest round (background work during the phase included): "
                f"kag nodes {k_nodes:.2f} + relations {k_rels:.2f}, Neo4jWriter {p_cpu:.2f} in all. Even with "
                f"the server's {cores} cores fully busy, kag's writes cannot take less than {floor:.2f} s, so "
                f"with this server work the ratio to Neo4jWriter is at most {ceiling:.2f}x on this machine."
            )
    vec_s = min(vec_times)
    report.add(Result("ingest (Neo4j)", "embeddings: vectors replaced, rows/s", n_nodes / vec_s, "rows/s"))
    report.notes.append(
        "bulk_upsert keeps the vector indexes in place: dropping them for the load and waiting for the rebuilt "
        "index to come ONLINE was measured slower (index population ~4k vectors/s, insertion at commit ~7k/s)."
    )
    lib = neo4j_lib()
    if lib is not None:
        log("ingest: offline import (neo4j-admin database import full)")
        t_import = offline_import(nodes, relations, lib)
        report.add(
            _ratio_row("offline first load (neo4j_import), rows/s", rows, t_import, t_base, "per-row MERGE tx", None)
        )
        report.notes.append(
            f"offline first load: {t_import:.1f} s for {rows:,} rows incl. writing the CSVs and the importer's JVM "
            "start; it needs a stopped server (or one not started yet) and an empty database."
        )
    report.notes.append(
        f"{rows:,} rows ({what}, 384-d HashEmbedder vectors); KnowledgeBase.upsert best of {rounds} "
        f"{t_kag:.2f} s incl. validation + embedding; bulk_upsert best of {rounds} {t_bulk:.2f} s (node batches "
        f"of {BATCH}, {CONCURRENCY} at a time, relation batches of {REL_BATCH}); baseline {t_base:.1f} s "
        "(embeddings precomputed, not timed)"
        + (
            f"; Neo4jWriter best of {rounds} {sum(min(p) for p in zip(*peer_times, strict=True)):.2f} s"
            if peer_times
            else ""
        )
        + f". Counts identical after each phase: {counts[0]:,} nodes, {counts[1]:,} relations, {counts[2]:,} vectors."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--step", type=int, default=17, help="use every N-th GeoNames city (default 17)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating kag/peer rounds, best kept (default 3)")
    args = parser.parse_args()
    settings = neo4j_settings()
    if settings is None:
        raise SystemExit("set NEO4J_URI (and NEO4J_PASSWORD) to a Neo4j server that may be cleared")
    report = asyncio.run(run(settings, args.step, args.rounds))
    print(report.markdown())


if __name__ == "__main__":
    main()
