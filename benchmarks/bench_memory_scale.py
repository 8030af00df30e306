"""The embedded store at 10k, 100k and 1M edges: triplet latency, scan bandwidth, approximate mode.

For each size the GeoNames world of :mod:`benchmarks.world` is built in a fresh
``memory://`` knowledge base (10k edges: every 4th city; 100k and 1M: every city plus
NearTo edges) and measured:

* ingest: relations per second of the whole build (entities embedded and written
  too), and the process's resident set size (RSS) after it;
* ``kb.triplet_search`` p50 / p95 end to end (the queries of
  :mod:`benchmarks.bench_triplet`, linking on, as a user calls it);
* at the largest size, the exact scan: each City-anchored query is bound without
  linking (so the anchor is scored against every City embedding) and its plan
  evaluation is timed alternating with a numpy read of the same bytes (``M @ q`` over
  a contiguous copy of the City rows). GB/s = bytes of the City rows / time; the goal
  is kag within 1.3x of that numpy read (the memory-bandwidth limit of the scan);
* approximate mode at the largest size (``approximate_min_rows`` set, ``candidates=100``):
  plan evaluation p50 and recall of the exact top-10 rows.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

import numpy as np

import kag
from benchmarks import world
from benchmarks.bench_memory import rss
from benchmarks.bench_triplet import TEMPLATES, latency, queries
from benchmarks.common import Report, Result, add_latency, fmt, log, percentiles
from kag.graph.memory import MemoryGraphStore
from kag.query.plan import QueryPlan

SIZES = (10_000, 100_000, 1_000_000)
BANDWIDTH_GOAL = 1.3
CANDIDATES = 100
RUNS = 15


async def build(edges: int) -> tuple[kag.KnowledgeBase, world.WorldData, dict[str, int], float, int]:
    """A memory knowledge base of about ``edges`` relations: (kb, data, counts, seconds, RSS after)."""
    full = world.load()
    data = world.subset(full, 4) if edges < len(world.base_relations(full)) else full
    kb = world.knowledge_base()
    counts, seconds = await world.build(kb, data, world.near_count(data, edges))
    gc.collect()
    return kb, data, counts, seconds, rss()


async def unlinked_plans(
    kb: kag.KnowledgeBase, data: world.WorldData, per_template: int, candidates: int | None = None
) -> list[tuple[str, QueryPlan]]:
    """City-anchored plans bound without linking: the anchor is scored against every City."""
    out = []
    for name, search in queries(data, per_template, seed=2):
        if search.get("subject_label") == "City" and "subject_similarity_search" in search:
            plan = kb.plan(search, k=10, threshold=0.7, candidates=candidates)
            out.append((name, await kb.bind(plan, linked=False)))
    return out


def scan_bandwidth(
    store: MemoryGraphStore, plans: list[tuple[str, QueryPlan]], city_rows: np.ndarray
) -> dict[str, Any]:
    """Plan evaluation vs a numpy read of the City rows, alternating; medians and GB/s."""
    matrix = np.ascontiguousarray(store.columns.emb[city_rows])
    nbytes = matrix.nbytes
    kag_s, base_s = [], []
    for _, plan in plans:
        q = plan.nodes[0].vectors[0]
        store.evaluate(plan)  # warm
        _ = matrix @ q
        for _ in range(RUNS):
            t0 = time.perf_counter()
            store.evaluate(plan)
            t1 = time.perf_counter()
            _ = matrix @ q
            t2 = time.perf_counter()
            kag_s.append(t1 - t0)
            base_s.append(t2 - t1)
    kag_med, base_med = float(np.median(kag_s)), float(np.median(base_s))
    return {"bytes": nbytes, "kag_s": kag_med, "numpy_s": base_med, "ratio": kag_med / base_med}


async def approximate(
    kb: kag.KnowledgeBase, data: world.WorldData, per_template: int
) -> tuple[float, float, float, float]:
    """(exact p50 ms, approximate p50 ms, index build s, recall of the exact top-10) over City-anchored plans."""
    store = kb.store
    assert isinstance(store, MemoryGraphStore)
    exact = await unlinked_plans(kb, data, per_template)
    approx = await unlinked_plans(kb, data, per_template, candidates=CANDIDATES)
    store.approximate_min_rows = 10_000
    t0 = time.perf_counter()
    store.evaluate(approx[0][1])  # builds the City index
    build_s = time.perf_counter() - t0
    exact_s, approx_s = [], []
    found = total = 0
    for (_, e), (_, a) in zip(exact, approx, strict=True):
        t0 = time.perf_counter()
        want = store.evaluate(e).rows
        t1 = time.perf_counter()
        got = store.evaluate(a).rows
        t2 = time.perf_counter()
        exact_s.append(t1 - t0)
        approx_s.append(t2 - t1)
        keys = {r.rel_ids for r in want}
        found += len(keys & {r.rel_ids for r in got})
        total += len(keys)
    store.approximate_min_rows = None
    return percentiles(exact_s)[0], percentiles(approx_s)[0], build_s, (found / total if total else 1.0)


async def run(sizes: tuple[int, ...] = SIZES, per_template: int = 25) -> Report:
    """Build each size, measure, return the report."""
    report = Report("Embedded store at scale (10k / 100k / 1M edges)")
    for edges in sizes:
        gc.collect()
        before = rss()
        log(f"memory scale: building ~{edges:,} edges")
        kb, data, counts, seconds, after = await build(edges)
        size = f"{counts['nodes']:,} nodes, {counts['relations']:,} edges"
        log(f"memory scale: {size} in {seconds:.0f} s; measuring")
        report.add(
            Result(
                "memory scale",
                f"ingest, relations/s incl. entities ({size})",
                counts["relations"] / seconds,
                "rows/s",
            )
        )
        report.add(Result("memory scale", f"RSS growth of the build ({size})", (after - before) / 2**20, "MiB"))
        e2e = await latency(kb, data, per_template)
        names = (f"{{}} p50 ({size})", f"{{}} p95 ({size})")
        add_latency(report, "memory scale", "kb.triplet_search", e2e["all"], None, "", names=names)
        by_template = "; ".join(
            f"{name}: {fmt(percentiles(v)[0], 'ms')}" for name, v in e2e.items() if name in TEMPLATES
        )
        report.notes.append(f"{size}: p50 by query (linking on): {by_template}")
        if edges == max(sizes):
            store = kb.store
            assert isinstance(store, MemoryGraphStore)
            city_rows = np.asarray([store.columns.node_pos[c.id] for c in data.cities])
            scan = scan_bandwidth(store, await unlinked_plans(kb, data, max(4, per_template // 5)), city_rows)
            gbs, numpy_gbs = scan["bytes"] / scan["kag_s"] / 1e9, scan["bytes"] / scan["numpy_s"] / 1e9
            report.add(
                Result(
                    "memory scale",
                    f"exact City-anchored plan evaluation, median ({size})",
                    scan["kag_s"] * 1000,
                    "ms",
                    scan["numpy_s"] * 1000,
                    "numpy M @ q over the same City rows",
                    scan["ratio"],
                    f"<= {BANDWIDTH_GOAL}x numpy",
                    scan["ratio"] <= BANDWIDTH_GOAL,
                    note=f"{scan['bytes'] / 1e6:,.0f} MB scanned",
                )
            )
            report.add(
                Result(
                    "memory scale",
                    "scan bandwidth of that plan evaluation",
                    gbs,
                    "GB/s",
                    numpy_gbs,
                    "numpy read of the same bytes",
                )
            )
            exact_p50, approx_p50, build_s, recall = await approximate(kb, data, max(4, per_template // 5))
            report.add(
                Result(
                    "memory scale",
                    f"approximate mode (IVF, candidates={CANDIDATES}) plan evaluation p50 ({size})",
                    approx_p50,
                    "ms",
                    exact_p50,
                    "exact plan evaluation",
                    exact_p50 / approx_p50 if approx_p50 else None,
                    note=f"recall of the exact top-10 rows {recall:.3f}; index built in {build_s:.2f} s",
                )
            )
        del kb
    report.notes.append(
        "ingest = relations / seconds of the whole world build (entities embedded with the HashEmbedder and "
        "written, base relations through kb.upsert, NearTo through store.upsert in batches of 20,000); "
        "the bandwidth ratio is kag time / numpy time, medians of alternating runs (lower is better)."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--queries", type=int, default=25, help="timed queries per template")
    args = parser.parse_args()
    print(asyncio.run(run(tuple(args.sizes), args.queries)).markdown())


if __name__ == "__main__":
    main()
