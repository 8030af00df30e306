"""Bulk ingest into Neo4j: kag's batched writes vs one MERGE transaction per row.

Same data (a GeoNames sample: cities, countries, continents, IsCityOf /
IsCapitalOf / IsInContinent and two NearTo edges per city) and the same
embeddings on both sides:

1. ``KnowledgeBase.upsert`` (validation, embedding, ``UNWIND ... MERGE`` batches
   of 1000 in managed write transactions); the node and relation records it
   hands to the store are recorded on the way;
2. the baseline replays exactly those records one row at a time, each row its
   own managed write transaction (``driver.execute_query``), sequentially — the
   embeddings are given to it for free (not timed), which favours the baseline;
3. the store alone (``Neo4jGraphStore.upsert``) on the same records, for a
   like-for-like write-only ratio — nodes and relations timed apart (so are
   the baseline's), since nodes carry a 384-d vector and a vector index.

The graph is cleared (and constraints/indexes kept) before each phase; the
three phases must end with identical counts. Run: ``python -m benchmarks.bench_ingest``
with ``NEO4J_URI`` / ``NEO4J_PASSWORD`` pointing at a server you may clear.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import world
from benchmarks.common import Report, Result, log, neo4j_settings
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import ENTITY, Neo4jGraphStore
from kag.query.cypher import quote

GOAL = 30.0


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


async def run(settings: dict[str, str], step: int = 17) -> Report:
    """Run the three phases and return the report."""
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
    # untimed warm-up (JVM JIT, page cache, index structures) so the first timed phase
    # is not the only one paying for a cold server; every phase then starts from a cleared graph
    log("ingest: warm-up")
    warm = Recorder(store)
    store.upsert = warm.upsert  # type: ignore[method-assign]
    await kb.upsert(items[: len(items) // 4])
    store.upsert = warm._upsert  # type: ignore[method-assign]
    await store.clear()
    await per_row(store, warm.nodes[:100], warm.relations[:300])
    await store.clear()
    recorder = Recorder(store)
    store.upsert = recorder.upsert  # type: ignore[method-assign]
    log(f"ingest: kag KnowledgeBase.upsert of {len(items)} items")
    t0 = time.perf_counter()
    await kb.upsert(items)
    t_kag = time.perf_counter() - t0
    counts = await kb.counts()
    store.upsert = recorder._upsert  # type: ignore[method-assign]
    rows = len(recorder.nodes) + len(recorder.relations)

    await store.clear()
    log(f"ingest: baseline, {rows} rows one transaction each")
    base_nodes, base_rels = await per_row(store, recorder.nodes, recorder.relations)
    t_base = base_nodes + base_rels
    base_counts = await kb.counts()

    await store.clear()
    log("ingest: kag store.upsert of the same records")
    t0 = time.perf_counter()
    await store.upsert(recorder.nodes, [])
    store_nodes = time.perf_counter() - t0
    await store.upsert([], recorder.relations)
    store_rels = time.perf_counter() - t0 - store_nodes
    t_store = store_nodes + store_rels
    store_counts = await kb.counts()
    await store.clear()
    await kb.aclose()
    if not counts == base_counts == store_counts:
        raise AssertionError(f"phases wrote different graphs: {counts} / {base_counts} / {store_counts}")

    what = f"{len(recorder.nodes):,} nodes + {len(recorder.relations):,} rels"
    report.add(
        Result(
            "ingest (Neo4j)",
            "KnowledgeBase.upsert, rows/s",
            rows / t_kag,
            "rows/s",
            rows / t_base,
            "per-row MERGE tx",
            t_base / t_kag,
            f">= {GOAL:.0f}x",
            t_base / t_kag >= GOAL,
            note=what,
        )
    )
    report.add(
        Result(
            "ingest (Neo4j)",
            "store.upsert only (same records), rows/s",
            rows / t_store,
            "rows/s",
            rows / t_base,
            "per-row MERGE tx",
            t_base / t_store,
            f">= {GOAL:.0f}x",
            t_base / t_store >= GOAL,
        )
    )
    n_nodes, n_rels = len(recorder.nodes), len(recorder.relations)
    for what_rows, n, kag_s, base_s in (
        ("nodes only (384-d embeddings)", n_nodes, store_nodes, base_nodes),
        ("relations only", n_rels, store_rels, base_rels),
    ):
        report.add(
            Result(
                "ingest (Neo4j)",
                f"store.upsert, {what_rows}, rows/s",
                n / kag_s,
                "rows/s",
                n / base_s,
                "per-row MERGE tx",
                base_s / kag_s,
            )
        )
    report.notes.append(
        f"{rows:,} rows ({what}, 384-d HashEmbedder vectors); kag {t_kag:.2f} s incl. validation + "
        f"embedding, store only {t_store:.2f} s, baseline {t_base:.1f} s (embeddings precomputed, not timed). "
        f"Counts identical after each phase: {counts['nodes']:,} nodes, {counts['relations']:,} relations."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=17, help="use every N-th GeoNames city (default 17)")
    args = parser.parse_args()
    settings = neo4j_settings()
    if settings is None:
        raise SystemExit("set NEO4J_URI (and NEO4J_PASSWORD) to a Neo4j server that may be cleared")
    report = asyncio.run(run(settings, args.step))
    print(report.markdown())


if __name__ == "__main__":
    main()
