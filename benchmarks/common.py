"""Shared helpers of the benchmarks: timing, result rows, tables, machine facts, Neo4j settings."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kag.graph.neo4j_anchor import STAMP

if TYPE_CHECKING:
    from kag.graph.neo4j import Neo4jGraphStore

# kag's write stamps (kag.graph.neo4j_anchor) are bookkeeping, not graph: kept, and not counted
NOT_STAMP = f"NOT any(label IN labels(n) WHERE label STARTS WITH '{STAMP}')"


@dataclass
class Result:
    """One measured line of a benchmark table.

    ``kag`` and ``baseline`` are in ``unit``; ``ratio`` is the comparison the goal
    is stated in — a speed-up (``baseline / kag`` time) or a slowdown (``kag /
    baseline`` time); ``goal`` says which and what was aimed for, ``met`` whether
    the measurement reached it (``None`` when there is no goal).
    """

    bench: str
    metric: str
    kag: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    note: str = ""


@dataclass
class Report:
    """All results of one benchmark plus free-form notes."""

    title: str
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, result: Result) -> Result:
        """Append ``result`` and return it."""
        self.results.append(result)
        return result

    def table(self) -> str:
        """The results as a Markdown table."""
        return format_table(self.results)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data (a benchmark run in another environment hands it back so)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The report :meth:`to_dict` gave."""
        results = [Result(**r) for r in data.get("results", [])]
        return cls(str(data["title"]), results, [str(n) for n in data.get("notes", [])])

    def markdown(self) -> str:
        """Title, table and notes as Markdown."""
        parts = [f"### {self.title}", "", self.table()]
        if self.notes:
            parts += ["", *[f"- {n}" for n in self.notes]]
        return "\n".join(parts) + "\n"


def fmt(value: float | None, unit: str = "") -> str:
    """A compact human number (3 significant digits)."""
    if value is None:
        return "–"
    if value == 0:
        text = "0"
    elif abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def format_table(results: Sequence[Result]) -> str:
    """Markdown table: metric, kag, baseline, ratio, goal, met."""
    lines = [
        "| benchmark | metric | kag | baseline | ratio | goal | met |",
        "| --- | --- | ---: | ---: | ---: | --- | :---: |",
    ]
    for r in results:
        base = f"{fmt(r.baseline, r.unit)} ({r.baseline_name})" if r.baseline is not None else "–"
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "–"
        met = "–" if r.met is None else ("yes" if r.met else "**no**")
        metric = r.metric + (f" ({r.note})" if r.note else "")
        lines.append(f"| {r.bench} | {metric} | {fmt(r.kag, r.unit)} | {base} | {ratio} | {r.goal or '–'} | {met} |")
    return "\n".join(lines)


def percentiles(samples_s: Sequence[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    arr = np.asarray(samples_s, dtype=np.float64) * 1000.0
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def add_latency(
    report: Report,
    bench: str,
    metric: str,
    samples: Sequence[float],
    goal_ms: float | None,
    note: str,
    *,
    names: tuple[str, str] = ("{} p50", "{} p95"),
) -> None:
    """Two rows from ``samples`` (seconds): p50, against the goal when there is one, and p95.

    ``names`` format ``metric`` into the two rows' metric names.
    """
    p50, p95 = percentiles(samples)
    report.add(
        Result(
            bench,
            names[0].format(metric),
            p50,
            "ms",
            goal=f"<= {goal_ms:g} ms" if goal_ms else "",
            met=(p50 <= goal_ms) if goal_ms else None,
            note=note,
        )
    )
    report.add(Result(bench, names[1].format(metric), p95, "ms"))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds one call of ``fn`` took, and its value."""
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def machine() -> dict[str, str]:
    """Facts about this machine (cores, memory, versions) for the results file."""
    import neo4j

    info = {
        "nproc": str(os.cpu_count()),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "neo4j driver": neo4j.__version__ + (" + neo4j-rust-ext" if _rust_packstream() else " (pure Python)"),
        "platform": platform.platform(),
    }
    try:
        info["nproc"] = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
        free = subprocess.run(["free", "-g"], capture_output=True, text=True, check=True).stdout.splitlines()
        header = free[0].split()
        mem = next((line.split()[1:] for line in free if line.startswith("Mem:")), [])
        info["free -g"] = ", ".join(f"{k} {v}" for k, v in zip(header, mem, strict=False)) + " (GiB)"
    except (OSError, subprocess.CalledProcessError):
        pass
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo", encoding="utf-8") as fh:
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    return info


def _rust_packstream() -> bool:
    """Whether the driver found the optional Rust packstream extension (``neo4j-rust-ext``)."""
    try:
        from neo4j._codec.packstream import v1
    except ImportError:
        return False
    return getattr(v1, "_rust_pack", None) is not None


def neo4j_settings() -> dict[str, str] | None:
    """The benchmark Neo4j server from ``NEO4J_*`` variables (``scripts/bench.sh`` sets them)."""
    uri = os.environ.get("NEO4J_URI")
    if not uri:
        return None
    return {
        "uri": uri,
        "user": os.environ.get("NEO4J_USER", "neo4j"),
        "password": os.environ.get("NEO4J_PASSWORD", "kag-test-password"),
        "database": os.environ.get("NEO4J_DATABASE", "neo4j"),
    }


async def neo4j_server_version(settings: dict[str, str]) -> str:
    """``Neo4j 5.26.x`` as the server reports it."""
    from neo4j import AsyncGraphDatabase

    driver = AsyncGraphDatabase.driver(settings["uri"], auth=(settings["user"], settings["password"]))
    try:
        records, _, _ = await driver.execute_query(
            "CALL dbms.components() YIELD name, versions RETURN name, versions[0] AS v",
            database_=settings["database"],
        )
        return ", ".join(f"{r['name']} {r['v']}" for r in records)
    finally:
        await driver.close()


def log(message: str) -> None:
    """Progress line on stderr (tables go to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def empty_neo4j(store: Neo4jGraphStore) -> None:
    """Delete every node of the benchmark server (kag's and a peer's, any namespace), keeping
    constraints, indexes and kag's write stamps (so cached label versions stay monotonic)."""
    query = f"MATCH (n) WHERE {NOT_STAMP} CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"

    async def call() -> None:
        async with store.session() as session:
            await (await session.run(query)).consume()

    await store.retry("emptying the benchmark graph", call)
