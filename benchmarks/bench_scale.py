"""How triplet search, ingest and memory grow with the graph: 10k, 100k and 1M edges.

At each size the GeoNames world of :mod:`benchmarks.world` is built (the 10k graph from
every 7th city, the larger ones from all 34k cities plus NearTo edges) on the memory
store and on Neo4j, and measured:

* triplet search p50 / p95 end to end (``KnowledgeBase.triplet_search``, the queries of
  :mod:`benchmarks.bench_triplet`, exact mode, after a warm-up pass);
* ingest rate: nodes plus relations written per second by the build (entities through
  ``kb.upsert``, embeddings included; NearTo edges through the store's batched upsert);
* memory: the resident set size the memory store adds (each size built in a fresh
  process, so freed memory of an earlier size does not hide the growth), and for Neo4j
  the server's RSS after the build plus the label matrices kag keeps beside the driver.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
from pathlib import Path
from typing import Any

from benchmarks import world
from benchmarks.bench_memory import rss
from benchmarks.bench_triplet import MEMORY_GOAL_MS, NEO4J_GOAL_MS, latency
from benchmarks.common import Report, Result, add_latency, log, neo4j_settings
from kag.graph.neo4j import Neo4jGraphStore

SIZES = (10_000, 100_000, 1_000_000)
SMALL_STEP = 7  # the 10k graph: every 7th city (its base relations alone stay under 10k)


def data_for(edges: int) -> world.WorldData:
    """The cities a graph of ``edges`` relations is built from."""
    full = world.load()
    return world.subset(full, SMALL_STEP) if edges <= 20_000 else full


def label(edges: int) -> str:
    """``10k``, ``100k``, ``1M``."""
    return f"{edges // 1_000_000}M" if edges >= 1_000_000 else f"{edges // 1000}k"


async def _memory_point(edges: int, per_template: int) -> dict[str, Any]:
    data = data_for(edges)
    gc.collect()
    before = rss()
    kb = world.knowledge_base()
    counts, seconds = await world.build(kb, data, world.near_count(data, edges))
    await kb.triplet_search({"relation_label": "NearTo"}, k=1)  # builds the search index
    gc.collect()
    grown = rss() - before
    samples = await latency(kb, data, per_template)
    return {"counts": counts, "seconds": seconds, "rss": grown, "samples": samples["all"]}


def memory_point(edges: int, per_template: int) -> dict[str, Any]:
    """One size on the memory store (run in a fresh process)."""
    return asyncio.run(_memory_point(edges, per_template))


def neo4j_rss() -> int | None:
    """Resident set size of the benchmark's Neo4j server (from ``$KAG_NEO4J_DIR``), if it can be read."""
    base = os.environ.get("KAG_NEO4J_DIR")
    if not base:
        return None
    try:
        pid = (Path(base) / "home" / "run" / "neo4j.pid").read_text().strip()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


async def neo4j_point(settings: dict[str, str], edges: int, per_template: int, budget_s: float) -> dict[str, Any]:
    """One size on Neo4j (the graph is cleared first and after)."""
    data = data_for(edges)
    opts = {"user": settings["user"], "password": settings["password"], "database": settings["database"]}
    kb = world.knowledge_base(settings["uri"], **opts)
    await kb.ensure_ready()
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    await store.clear()
    counts, seconds = await world.build(kb, data, world.near_count(data, edges), budget_s=budget_s)
    samples = await latency(kb, data, per_template)
    mats = await store.anchor_scorer.matrices(kb.schema.entity_labels)
    beside = sum(m.matrix.nbytes + m.norms.nbytes for m in mats.values())
    server = neo4j_rss()
    await store.clear()
    await kb.aclose()
    return {"counts": counts, "seconds": seconds, "rss": server, "beside": beside, "samples": samples["all"]}


def add_point(report: Report, backend: str, edges: int, point: dict[str, Any], goal_ms: float | None) -> None:
    """The rows of one size: p50 (with its goal when there is one), p95, ingest rate, memory."""
    counts = point["counts"]
    size = f"{counts['nodes']:,} nodes, {counts['relations']:,} edges"
    bench = f"scale (triplet, {backend})"
    add_latency(report, bench, f"at {label(edges)} edges", point["samples"], goal_ms, size, names=("p50 {}", "p95 {}"))
    rows = counts["nodes"] + counts["relations"]
    report.add(
        Result(bench, f"ingest at {label(edges)} edges", rows / point["seconds"], "rows/s", note="nodes + relations")
    )
    if point.get("rss") is not None:
        what = "RSS added by the store" if backend == "memory" else "server RSS after the build"
        report.add(Result(bench, f"{what} at {label(edges)} edges", point["rss"] / 2**20, "MiB"))
    if point.get("beside") is not None:
        report.add(
            Result(bench, f"label matrices beside the driver at {label(edges)} edges", point["beside"] / 2**20, "MiB")
        )


async def run(
    settings: dict[str, str] | None,
    sizes: tuple[int, ...] = SIZES,
    per_template: int = 25,
    budget_s: float = 600.0,
) -> Report:
    """Measure every size on both backends, return the report."""
    report = Report("Scale curve: triplet search, ingest and memory by graph size")
    ctx = multiprocessing.get_context("spawn")
    for edges in sizes:
        log(f"scale: memory store at {label(edges)} edges (fresh process)")
        with ctx.Pool(1) as pool:
            point = pool.apply(memory_point, (edges, per_template))
        add_point(report, "memory", edges, point, MEMORY_GOAL_MS if edges <= 100_000 else None)
    if settings is None:
        report.notes.append("Neo4j: skipped (no NEO4J_URI).")
        return report
    for edges in sizes:
        log(f"scale: Neo4j at {label(edges)} edges")
        point = await neo4j_point(settings, edges, per_template, budget_s)
        add_point(report, "Neo4j", edges, point, NEO4J_GOAL_MS if edges >= 1_000_000 else None)
        if point["counts"]["relations"] < edges:
            report.notes.append(
                f"Neo4j at {label(edges)}: the {budget_s:.0f} s build budget stopped at "
                f"{point['counts']['relations']:,} edges."
            )
    report.notes.append(
        "Goals: the memory store's 2 ms up to 100k edges and Neo4j's 15 ms at 1M edges (as in the triplet "
        f"benchmark); the other rows show the growth. {per_template} timed queries per template, "
        "4 templates; ingest includes embedding the entities."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), help="edge counts")
    parser.add_argument("--queries", type=int, default=25, help="timed queries per template")
    parser.add_argument("--build-budget", type=float, default=600.0, help="seconds per Neo4j build")
    args = parser.parse_args()
    report = asyncio.run(run(neo4j_settings(), tuple(args.sizes), args.queries, args.build_budget))
    print(report.markdown())


if __name__ == "__main__":
    main()
