"""Passage vector search on Neo4j at scale: exact scan vs the HNSW index with exact rescoring (candidates=N).

    NEO4J_URI=... NEO4J_PASSWORD=... .venv/bin/python -m benchmarks.bench_passages_ann --chunks 100000

Empties the database first (never point it at data you need). Chunks are synthetic one-chunk documents
over a 2,000-word vocabulary, embedded with the default embedder; queries are other sentences from the
same vocabulary. Recall@5 is against the exact search of the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from benchmarks.common import Report, Result, log, neo4j_settings, percentiles
from kag import Document, create_knowledge

WORDS = [f"w{i:04d}" for i in range(2000)]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12))


async def run(n_chunks: int, n_queries: int, candidates: tuple[int, ...]) -> Report:
    settings = neo4j_settings()
    if settings is None:
        raise SystemExit("set NEO4J_URI / NEO4J_PASSWORD (scripts/bench.sh starts a private Neo4j)")
    knowledge = create_knowledge(
        "neo4j", uri=settings["uri"], username=settings["user"], password=settings["password"]
    )
    store = knowledge.store
    await knowledge.ready()
    await _empty(store)
    rng = random.Random(7)
    started = time.perf_counter()
    batch = 5_000
    for start in range(0, n_chunks, batch):
        docs = [
            Document(text=sentence(rng), metadata={"source": f"s{i}", "n": i})
            for i in range(start, min(n_chunks, start + batch))
        ]
        await knowledge.add(docs)
        log(f"indexed {min(n_chunks, start + batch)} chunks")
    ingest_s = time.perf_counter() - started
    queries = [sentence(rng) for _ in range(n_queries)]
    vectors = await knowledge.kb.embedder.embed(queries)
    report = Report(f"Passage vector search on Neo4j, {n_chunks:,} chunks")
    exact_times, exact_top = [], []
    for vec in vectors:
        t0 = time.perf_counter()
        rows = await store.vector_search(vec, 5)
        exact_times.append(time.perf_counter() - t0)
        exact_top.append([r.chunk_id for r in rows])
    p50, p95 = percentiles(exact_times)
    report.add(Result("passages", "exact p50 (p95)", p50, "ms", note=f"p95 {p95:.1f} ms"))
    for n in candidates:
        times, hits = [], 0
        for vec, top in zip(vectors, exact_top, strict=True):
            t0 = time.perf_counter()
            rows = await store.vector_search(vec, 5, candidates=n)
            times.append(time.perf_counter() - t0)
            hits += len({r.chunk_id for r in rows} & set(top))
        p50a, p95a = percentiles(times)
        recall = hits / (5 * len(vectors))
        report.add(
            Result(
                "passages",
                f"candidates={n} p50",
                p50a,
                "ms",
                baseline=p50,
                baseline_name="exact scan",
                ratio=p50 / p50a,
                goal="recall@5 >= 0.98, p50 <= 5 ms",
                met=recall >= 0.98 and p50a <= 5.0,
                note=f"recall@5 {recall:.3f}, p95 {p95a:.1f} ms",
            )
        )
    report.notes.append(f"ingest: {n_chunks / ingest_s:,.0f} chunks/s ({ingest_s:.1f} s); {n_queries} queries")
    await knowledge.aclose()
    return report


async def _empty(store: object) -> None:
    graph = store.graph_store  # type: ignore[attr-defined]
    while True:
        res = await graph.run(
            "MATCH (n) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS n", None, write=True, what="emptying"
        )
        if not res.records or res.records[0]["n"] == 0:
            return


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--candidates", default="100,200")
    args = parser.parse_args()
    cands = tuple(int(x) for x in args.candidates.split(","))
    print(asyncio.run(run(args.chunks, args.queries, cands)).markdown())


if __name__ == "__main__":
    main()
