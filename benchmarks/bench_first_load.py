"""A large first load into an empty Neo4j: the offline importer vs neo4j-graphrag's ``Neo4jWriter``.

The GeoNames world of :mod:`benchmarks.world` at about a million relations (34,265
nodes with 384-d vectors, ~1.02M relations), the same records on every side, each side
starting from a freshly started, empty server of its own (a private directory and
Bolt port, the heap and page cache ``scripts/bench.sh`` gives the benchmark server):

1. kag's offline first load (:mod:`kag.graph.neo4j_import`): CSVs, ``neo4j-admin database
   import full`` into the stopped server, then the server starts and ``ensure_ready``
   creates kag's constraints and vector indexes and waits for the constraints. The
   figure is the time until the graph is searchable: CSVs + importer + constraints
   (the server start is reported apart, and also included in a second ratio, since the
   online paths need a server that is already running). Exact search never reads the
   vector indexes, which Neo4j populates meanwhile; the time until they are ONLINE too
   (what the opt-in ``candidates=`` search waits for) is a row of its own;
2. ``Neo4jGraphStore.bulk_upsert`` online into the empty database, whose constraints and
   vector indexes exist (as they do for a knowledge base in use);
3. neo4j-graphrag's ``Neo4jWriter`` (APOC core) online, the same way.

Every side must end with the same counts, and the imported graph must answer triplet
searches exactly as the memory store it was read from. Needs the Neo4j jars
(``deploy/neo4j/neo4j.sh install``) and, for the peer, APOC (``KAG_NEO4J_APOC=1``,
which ``scripts/bench.sh`` sets). Run: ``python -m benchmarks.bench_first_load``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kag
from benchmarks import world
from benchmarks.bench_ingest import Peer, graph_counts
from benchmarks.common import Report, Result, log
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_import import import_records
from kag.query.cypher import vector_index_name

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deploy" / "neo4j" / "neo4j.sh"
EDGES = 1_000_000
GOAL = 3.0  # the offline first load vs Neo4jWriter, time until searchable
PASSWORD = "kag-bench-first-load"
SEARCHES = (
    {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "NearTo"},
    {"subject_label": "City", "relation_label": "IsCapitalOf", "object_similarity_search": "Germany"},
    {"subject_label": "Country", "subject_similarity_search": "Japan", "relation_label": "IsInContinent"},
)


class PrivateServer:
    """A Neo4j server of its own, driven through deploy/neo4j/neo4j.sh (never the benchmark server)."""

    def __init__(self, base: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.base = base
        self.home = base / "home"
        self.lib = base / "lib"
        self.uri = f"bolt://127.0.0.1:{port}"
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = {
            **os.environ,
            "PATH": path,
            "KAG_NEO4J_DIR": str(base),
            "KAG_NEO4J_BOLT_PORT": str(port),
            "KAG_NEO4J_PASSWORD": PASSWORD,
        }

    def sh(self, command: str) -> float:
        """Run ``neo4j.sh command``; seconds it took."""
        t0 = time.perf_counter()
        done = subprocess.run(
            ["bash", str(SCRIPT), command], env=self.env, capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"neo4j.sh {command} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return time.perf_counter() - t0

    def settings(self) -> dict[str, str]:
        """Connection settings as the other benchmarks take them."""
        return {"uri": self.uri, "user": "neo4j", "password": PASSWORD, "database": "neo4j"}

    def knowledge_base(self) -> kag.KnowledgeBase:
        """The benchmark models on this server."""
        return world.knowledge_base(self.uri, user="neo4j", password=PASSWORD, database="neo4j")

    async def fresh(self) -> kag.KnowledgeBase:
        """Stop, delete the database, start; an empty knowledge base with kag's schema in place."""
        self.sh("stop")
        self.sh("reset")
        self.sh("start")
        kb = self.knowledge_base()
        await kb.ensure_ready()
        return kb


async def records(edges: int) -> tuple[list[NodeRecord], list[RelationRecord], kag.KnowledgeBase]:
    """The node and relation records of the world graph, built on the memory store (kept for checks)."""
    data = world.load()
    memory = world.knowledge_base()
    counts, seconds = await world.build(memory, data, world.near_count(data, edges))
    log(f"first load: memory build {counts['nodes']:,} nodes + {counts['relations']:,} relations in {seconds:.0f} s")
    nodes, relations = memory.store.records()  # type: ignore[attr-defined]
    return nodes, relations, memory


async def same_answers(kb: kag.KnowledgeBase, memory: kag.KnowledgeBase) -> None:
    """The loaded graph answers as the memory store it came from (rows and scores)."""
    for search in SEARCHES:
        got = [(h.text(), h.score) for h in await kb.triplet_search(search, k=10)]
        want = [(h.text(), h.score) for h in await memory.triplet_search(search, k=10)]
        if got != want or not want:
            raise AssertionError(f"the loaded graph answers {search} differently:\n{got}\nvs\n{want}")


def _row(what: str, rows: int, seconds: float, base_s: float | None, goal: float | None, note: str = "") -> Result:
    ratio = base_s / seconds if base_s else None
    return Result(
        "first load (Neo4j)",
        what,
        rows / seconds,
        "rows/s",
        rows / base_s if base_s else None,
        "Neo4jWriter" if base_s else "",
        ratio,
        f">= {goal:.0f}x" if goal else "",
        (ratio is not None and ratio >= goal) if goal else None,
        note,
    )


async def run(edges: int = EDGES, heap: str = "2g") -> Report:
    """Load the same graph three ways into fresh servers; return the report."""
    report = Report("Large first load into an empty Neo4j")
    nodes, relations, memory = await records(edges)
    rows = len(nodes) + len(relations)
    base = Path(tempfile.mkdtemp(prefix="kag-bench-first-load-"))
    server = PrivateServer(base)
    try:
        server.sh("install")
        log(f"first load: offline import of {rows:,} rows")
        imported = import_records(nodes, relations, home=server.home, lib=server.lib, heap=heap)
        t_start = server.sh("start")
        kb = server.knowledge_base()
        t0 = time.perf_counter()
        await kb.ensure_ready()  # the constraints; the vector indexes populate in the background
        t_schema = time.perf_counter() - t0
        store = kb.store
        assert isinstance(store, Neo4jGraphStore)
        await store.await_indexes([vector_index_name(label) for label in kb.schema.entity_labels], "benchmark")
        t_vectors = time.perf_counter() - t0
        counts = await graph_counts(store)
        await same_answers(kb, memory)
        await kb.aclose()
        t_offline = imported.csv_seconds + imported.import_seconds + t_schema

        log("first load: kag bulk_upsert online")
        kb = await server.fresh()
        store = kb.store
        assert isinstance(store, Neo4jGraphStore)
        t0 = time.perf_counter()
        await store.bulk_upsert(nodes, [])
        t1 = time.perf_counter()
        await store.bulk_upsert([], relations)
        kag_n, kag_r = t1 - t0, time.perf_counter() - t1
        kag_counts = await graph_counts(store)
        await kb.aclose()

        peer_n = peer_r = None
        peer_counts = counts
        try:
            peer = Peer(server.settings(), nodes, relations)
        except ImportError as exc:
            report.notes.append(f"neo4j-graphrag not installed ({exc}): no peer comparison.")
        else:
            log("first load: neo4j-graphrag Neo4jWriter online")
            kb = await server.fresh()
            try:
                peer_n, peer_r = await peer.write()
                peer_counts = await graph_counts(kb.store)  # type: ignore[arg-type]
            finally:
                peer.close()
                await kb.aclose()
    finally:
        try:
            server.sh("stop")
        finally:
            shutil.rmtree(base, ignore_errors=True)
    if not counts == kag_counts == peer_counts:
        raise AssertionError(f"the loads wrote different graphs: import {counts}, kag {kag_counts}, peer {peer_counts}")

    peer_s = (peer_n + peer_r) if peer_n is not None and peer_r is not None else None
    what = f"{len(nodes):,} nodes + {len(relations):,} rels"
    report.add(_row("offline import (neo4j_import) until searchable, rows/s", rows, t_offline, peer_s, GOAL, what))
    report.add(_row("  the same incl. starting the server after the import", rows, t_offline + t_start, peer_s, None))
    t_approx = t_offline - t_schema + t_vectors
    report.add(_row("  until the vector indexes are ONLINE too (candidates= search)", rows, t_approx, peer_s, None))
    report.add(_row("bulk_upsert online, rows/s", rows, kag_n + kag_r, peer_s, None))
    if peer_n is not None and peer_r is not None:
        report.add(_row("  nodes (with 384-d vectors), rows/s", len(nodes), kag_n, peer_n, None))
        report.add(_row("  relations, rows/s", len(relations), kag_r, peer_r, None))
    report.notes.append(
        f"{rows:,} rows ({what}, 384-d HashEmbedder vectors), each load into a freshly started empty server "
        f"(heap {os.environ.get('KAG_NEO4J_HEAP', '512m')}, "
        f"page cache {os.environ.get('KAG_NEO4J_PAGECACHE', '256m')}). "
        f"Offline: CSVs {imported.csv_seconds:.1f} s + importer {imported.import_seconds:.1f} s (JVM start "
        f"included, heap {heap}) + constraints ONLINE {t_schema:.1f} s = {t_offline:.1f} s; the vector indexes "
        f"were ONLINE {t_vectors - t_schema:.1f} s later; "
        f"the server start after the import took {t_start:.1f} s. bulk_upsert: nodes {kag_n:.1f} s, relations "
        f"{kag_r:.1f} s"
        + (f"; Neo4jWriter: nodes {peer_n:.1f} s, relations {peer_r:.1f} s" if peer_n is not None else "")
        + f". Counts identical: {counts[0]:,} nodes, {counts[1]:,} relations, {counts[2]:,} vectors; the imported "
        f"graph answers {len(SEARCHES)} triplet searches exactly as the memory store it was read from."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--edges", type=int, default=EDGES)
    args = parser.parse_args()
    print(asyncio.run(run(args.edges)).markdown())


if __name__ == "__main__":
    main()
