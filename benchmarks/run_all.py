"""Run every benchmark, print each table, write ``benchmarks/results.md``.

``make bench`` (``scripts/bench.sh``) starts a private Neo4j and runs this with
``NEO4J_URI`` set; without it the Neo4j benchmarks are skipped and say so.
Options pass sizes through (see ``--help``); ``--only`` picks benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

from benchmarks import (
    bench_bm25,
    bench_embedders,
    bench_first_load,
    bench_ingest,
    bench_integrations,
    bench_local_lm,
    bench_memory,
    bench_memory_scale,
    bench_passages_ann,
    bench_rag_index,
    bench_scale,
    bench_training,
    bench_triplet,
    bench_vector,
)
from benchmarks.common import (
    Report,
    Result,
    fmt,
    format_table,
    log,
    machine,
    neo4j_server_version,
    neo4j_settings,
)

RESULTS = Path(__file__).resolve().parent / "results.md"
NAMES = (
    "bm25",
    "vector",
    "memory",
    "memory_scale",
    "rag_index",
    "triplet",
    "scale",
    "ingest",
    "first_load",
    "passages",
    "embedders",
    "local_lm",
    "training",
    "integrations",
)


def load() -> str:
    """The 1/5/15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=NAMES, default=list(NAMES))
    parser.add_argument("--memory-edges", type=int, default=100_000)
    parser.add_argument("--neo4j-edges", type=int, default=1_000_000)
    parser.add_argument("--build-budget", type=float, default=900.0, help="seconds allowed for the Neo4j build")
    parser.add_argument("--ingest-step", type=int, default=17, help="ingest every N-th city (default 17)")
    parser.add_argument(
        "--first-load-edges", type=int, default=bench_first_load.EDGES, help="relations of the first-load graph"
    )
    parser.add_argument(
        "--scale-sizes", type=int, nargs="*", default=list(bench_scale.SIZES), help="edge counts of the scale curve"
    )
    parser.add_argument(
        "--training-local", type=int, default=30, metavar="N", help="questions for the packaged model's fit (0: none)"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    settings = neo4j_settings()
    facts = machine()
    server = asyncio.run(neo4j_server_version(settings)) if settings else "not used (no NEO4J_URI)"
    loads = [load()]
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    reports: list[Report] = []
    t0 = time.perf_counter()
    failed: list[str] = []
    for name in args.only:
        log(f"=== {name} (load average {load()})")
        try:
            report = run_one(name, args, settings)
        except Exception as exc:  # one broken benchmark must not lose the other figures
            log(f"{name} failed: {exc!r}")
            failed.append(name)
            report = Report(f"{name} (failed)", notes=[f"the benchmark raised {type(exc).__name__}: {exc}"])
        reports.append(report)
        loads.append(load())
        print(report.markdown(), flush=True)
    elapsed = time.perf_counter() - t0

    results = [r for rep in reports for r in rep.results]
    goals = [r for r in results if r.met is not None]
    met = sum(1 for r in goals if r.met)
    lines = [
        "# kag benchmark results",
        "",
        f"Last run: {started}, {elapsed / 60:.1f} min, by `make bench` (`scripts/bench.sh`). "
        f"Goals met: {met} of {len(goals)}.",
        "",
        "Machine: " + "; ".join(f"{k}: `{v}`" for k, v in facts.items()) + f"; Neo4j server: {server}.",
        "",
        "Load average (1/5/15 min) before each benchmark and at the end: "
        + " → ".join(loads)
        + ". The machine is shared, so absolute times are noisy; ratios are measured side by side "
        "(alternating calls where a benchmark allows it).",
        "",
        "## Summary",
        "",
        format_table(results),
        "",
        "## Details",
        "",
        *[rep.markdown() for rep in reports],
    ]
    args.output.write_text("\n".join(lines), encoding="utf-8")
    print(goal_summary(results), flush=True)
    log(f"wrote {args.output} ({met} of {len(goals)} goals met)")
    if failed:
        raise SystemExit(f"benchmarks that failed (their sections in {args.output} say why): {', '.join(failed)}")


def run_one(name: str, args: argparse.Namespace, settings: Any) -> Report:
    """Run the benchmark ``name`` with the command line's sizes."""
    if name == "bm25":
        return bench_bm25.run()
    elif name == "vector":
        return asyncio.run(bench_vector.run())
    elif name == "memory":
        return asyncio.run(bench_memory.run(args.memory_edges))
    elif name == "memory_scale":
        return asyncio.run(bench_memory_scale.run())
    elif name == "rag_index":
        return asyncio.run(bench_rag_index.run())
    elif name == "embedders":
        return asyncio.run(bench_embedders.run())
    elif name == "local_lm":
        return asyncio.run(bench_local_lm.run())
    elif name == "integrations":
        return bench_integrations.run()
    elif name == "training":
        return asyncio.run(bench_training.run(local_questions=args.training_local))
    elif name == "triplet":
        return asyncio.run(bench_triplet.run(settings, args.memory_edges, args.neo4j_edges, args.build_budget))
    elif name == "scale":
        return asyncio.run(bench_scale.run(settings, tuple(args.scale_sizes), budget_s=2 * args.build_budget))
    elif name == "passages":
        if settings is None:
            return Report("Passage vector search on Neo4j at scale", notes=["skipped: no NEO4J_URI"])
        else:
            return asyncio.run(bench_passages_ann.run(settings=settings))
    elif name == "first_load":
        if settings is None:  # it starts servers of its own, but only where the Neo4j benchmarks run
            return Report("Large first load into an empty Neo4j", notes=["skipped: no NEO4J_URI"])
        return asyncio.run(bench_first_load.run(args.first_load_edges))
    else:
        if settings is None:
            return Report("Bulk ingest into Neo4j", notes=["skipped: no NEO4J_URI"])
        else:
            return asyncio.run(bench_ingest.run(settings, args.ingest_step))


def goal_summary(results: list[Result]) -> str:
    """Every figure that has a goal, one line each: the figure, its baseline, the goal, met or not."""
    lines = ["## Goals", ""]
    for r in results:
        if r.met is None:
            continue
        base = f" vs {fmt(r.baseline, r.unit)} ({r.baseline_name})" if r.baseline is not None else ""
        ratio = f" = {r.ratio:.2f}x" if r.ratio is not None else ""
        verdict = "MET" if r.met else "NOT MET"
        lines.append(f"- {verdict}: {r.bench}, {r.metric}: {fmt(r.kag, r.unit)}{base}{ratio}; goal {r.goal}")
    met = sum(1 for r in results if r.met)
    lines.append(f"\n{met} of {sum(1 for r in results if r.met is not None)} goals met.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
