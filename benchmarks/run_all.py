"""Run every benchmark, print each table, write ``benchmarks/results.md``.

``make bench`` (``scripts/bench.sh``) starts a private Neo4j and runs this with
``NEO4J_URI`` set; without it the Neo4j benchmarks are skipped and say so.
Options pass sizes through (see ``--help``); ``--only`` picks benchmarks, and ``--merge`` puts
their sections and summary rows in place of the same benchmarks' in the existing results file,
keeping the others (a rerun of a few benchmarks without redoing the hour-long rest). The summary's
derived row, kag against DSPy on the packaged model, is computed from whichever runs wrote the
``training`` and ``dspy`` rows (``--only --merge`` with no names only recomputes it).

The DSPy side by side (``dspy``) runs ``benchmarks.bench_dspy`` in its own environment
(``scripts/dspy_venv.sh`` makes it: DSPy's pins would change kag's), on the packaged model's split
of the ``training`` benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import (
    bench_bm25,
    bench_embedders,
    bench_extraction,
    bench_first_load,
    bench_ingest,
    bench_integrations,
    bench_local_lm,
    bench_memory,
    bench_memory_scale,
    bench_passages_ann,
    bench_rag_index,
    bench_ray,
    bench_scale,
    bench_scope,
    bench_training,
    bench_triplet,
    bench_user_graph,
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
    "dspy",
    "extraction",
    "scope",
    "user_graph",
    "integrations",
    "ray",
)
ROOT = Path(__file__).resolve().parent.parent


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
        "--training-local",
        type=int,
        default=144,
        metavar="N",
        help="one-hop KGQA questions for the packaged model (N // 3 per type; 0: none)",
    )
    parser.add_argument(
        "--training-local-train",
        type=int,
        default=99,
        metavar="N",
        help="of those, the training questions (the rest are held out)",
    )
    parser.add_argument("--dspy-python", help="the DSPy environment's python (default: scripts/dspy_venv.sh makes one)")
    parser.add_argument(
        "--dspy-json",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="use these bench_dspy --json reports (say, one per mode, run apart) instead of running it",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--merge", action="store_true", help="replace only these benchmarks' parts of --output")
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
    if args.merge and args.output.exists():
        text = side_by_side(merge(args.output.read_text(encoding="utf-8"), reports, started, elapsed))
        args.output.write_text(text, encoding="utf-8")
        print(goal_summary(results), flush=True)
        log(f"merged {', '.join(args.only)} into {args.output}")
        if failed:
            raise SystemExit(f"benchmarks that failed (their sections in {args.output} say why): {', '.join(failed)}")
        return
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
    args.output.write_text(side_by_side("\n".join(lines)), encoding="utf-8")
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
        return asyncio.run(
            bench_training.run(
                local_questions=args.training_local, local_train=args.training_local_train, local_abstain=True
            )
        )
    elif name == "dspy":
        return dspy_report(args)
    elif name == "extraction":
        # one and three labelled passages; then demos in the other phrasing than the passages, and
        # demos in both phrasings of which each passage is shown the three nearest
        plan: list[tuple[int, str, str | None, int | None]] = [
            (1, "fixed", None, None),
            (3, "fixed", None, None),
            (3, "other", None, None),
            (3, "other", "fixed", None),
            (3, "other", "both", 3),
        ]
        runs = [
            asyncio.run(bench_extraction.run(20, 0, demos, phrasing, demo_phrasing=shown, nearest=nearest))
            for demos, phrasing, shown, nearest in plan
        ]
        return Report(
            runs[0].title,
            [r for run in runs for r in run.results],
            list(dict.fromkeys(n for run in runs for n in run.notes)),
        )
    elif name == "ray":
        return asyncio.run(bench_ray.run(settings))
    elif name == "scope":
        return asyncio.run(bench_scope.run())
    elif name == "user_graph":
        return asyncio.run(bench_user_graph.run())
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


def dspy_report(args: argparse.Namespace) -> Report:
    """``bench_dspy`` on the training benchmark's local split, run by the DSPy environment's python."""
    if args.dspy_json:  # reports of runs made apart (one per mode, on a core each): one section
        parts = [Report.from_dict(json.loads(p.read_text(encoding="utf-8"))) for p in args.dspy_json]
        notes = [f"Combined from {len(parts)} runs made apart (`--dspy-json`); each reports its own times."]
        return Report(
            parts[0].title, [r for p in parts for r in p.results], notes + [n for p in parts for n in p.notes]
        )
    if not args.training_local:
        return Report("DSPy on the KGQA one-hop questions", notes=["skipped: --training-local 0"])
    python = (
        args.dspy_python
        or subprocess.run(
            ["bash", str(ROOT / "scripts" / "dspy_venv.sh")], check=True, stdout=subprocess.PIPE, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dspy.json"
        command = [python, "-m", "benchmarks.bench_dspy", "--questions", str(args.training_local), "--json", str(out)]
        if args.training_local_train:
            command += ["--train", str(args.training_local_train)]
        subprocess.run(command, check=True, cwd=ROOT, stdout=sys.stderr)  # its table is printed by run_all
        return Report.from_dict(json.loads(out.read_text(encoding="utf-8")))


_ROW = re.compile(r"^\| ([^|]+?) \|")


def merge(old: str, reports: list[Report], started: str, elapsed: float) -> str:
    """``old`` results text with ``reports`` in place of their earlier sections and summary rows.

    A section is replaced where its title was (or added at the end of the details); the new
    summary rows go together where the first row of a benchmark they rerun was (else after the
    last row). The header says what was merged when (:func:`side_by_side` recounts the goals).
    """
    head, sep, details = old.partition("\n## Details\n")
    if not sep:
        raise SystemExit("--merge: the results file has no '## Details' section; run every benchmark once")
    benches = {r.bench for rep in reports for r in rep.results}
    new_rows = [line for line in format_table([r for rep in reports for r in rep.results]).splitlines()[2:]]
    lines, placed = [], False
    for line in head.splitlines():
        match = _ROW.match(line)
        if match and match.group(1) in benches:
            if not placed:
                lines.extend(new_rows)
                placed = True
            continue
        lines.append(line)
    if not placed:  # after the summary table's last row
        last = max((i for i, line in enumerate(lines) if _ROW.match(line)), default=len(lines) - 1)
        lines[last + 1 : last + 1] = new_rows
    head = "\n".join(lines)
    names = ", ".join(rep.title for rep in reports) or "nothing (the summary's derived rows only)"
    head = head.replace(
        "\n\nMachine:", f" Rerun and merged on {started} ({elapsed / 60:.1f} min): {names}.\n\nMachine:", 1
    )
    sections = re.split(r"(?m)^(?=### )", details)
    titles = {rep.title: rep.markdown() for rep in reports}
    kept = [titles.pop(s.splitlines()[0][4:].strip(), s) if s.startswith("### ") else s for s in sections]
    body = "".join(s if s.endswith("\n") else s + "\n" for s in kept if s)
    return head + sep + body + "".join("\n" + section for section in titles.values())


SIDE_BY_SIDE = "side-by-side"


def side_by_side(text: str) -> str:
    """The results text with its derived summary row: the packaged model trained by kag against
    DSPy on the same model, split and grammar (from the ``training`` and ``dspy`` rows, whichever
    run wrote them), and the goal count recounted over the whole summary."""
    head, sep, rest = text.partition("\n## Details\n")
    lines = [line for line in head.splitlines() if not line.startswith(f"| {SIDE_BY_SIDE} |")]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if _ROW.match(line)]

    def best(bench: str, prefix: str, must: str = "", never: str = "") -> float | None:
        values = []
        for cells in rows:
            metric = cells[1] if len(cells) >= 3 and cells[0] == bench else ""
            if metric.startswith(prefix) and must in metric and not (never and never in metric):
                with contextlib.suppress(ValueError):
                    values.append(float(cells[2].split()[0]))
        return max(values) if values else None

    kag = best("training", "SmolLM2-135M exact answers", must="teacher")
    dspy = best("dspy", "constrained, ", never="untrained")
    as_it_comes = best("dspy", "as-it-comes, ", never="untrained")
    if kag is not None and dspy is not None:
        row = Result(
            SIDE_BY_SIDE,
            "packaged SmolLM2-135M, same split and grammar: kag's best trained program minus DSPy's best",
            kag - dspy,
            "share",
            goal=">= 0.20",
            met=kag - dspy >= 0.20,
            note=f"kag {kag:.2f}; DSPy under the grammar {dspy:.2f}, as it comes "
            + ("–" if as_it_comes is None else f"{as_it_comes:.2f}"),
        )
        last = max(i for i, line in enumerate(lines) if _ROW.match(line))
        lines.insert(last + 1, format_table([row]).splitlines()[2])
    cells = [line.rstrip().rsplit("|", 2)[-2].strip() for line in lines if _ROW.match(line)]
    met, goals = cells.count("yes"), cells.count("yes") + cells.count("**no**")
    head = re.sub(r"Goals met: \d+ of \d+\.", f"Goals met: {met} of {goals}.", "\n".join(lines), count=1)
    return head + sep + rest


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
