"""The default embedder's throughput and the time to build a 100k-chunk RAG index (memory store).

* throughput: chunks per second of the default embedder (``HashEmbedder``, 384-d, what a
  ``KnowledgeBase`` uses when none is given) on batches of 1,000 pydoc chunks of <= 800
  chars (the best of three batches);
* index build: ``Knowledge.add`` of documents that split into >= 100,000 chunks (the pydoc
  chunks, each document made unique by a numbered first line), through the whole path:
  splitting, embedding, the passage store's writes and its BM25 index; then the first
  vector search (which builds the chunk matrix) and the p50 of later ones.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import kag
from benchmarks.bench_embedders import pydoc_chunks
from benchmarks.common import Report, Result, log, percentiles
from kag.datamodels import Document
from kag.knowledge import Knowledge
from kag.rag.splitter import RecursiveCharacterSplitter

CHUNK_SIZE, CHUNK_OVERLAP = 800, 100
PER_DOCUMENT = 10  # chunks of text per document


async def throughput(batch: int = 1000, runs: int = 3) -> tuple[str, float]:
    """(embedder name, best chunks/s over ``runs`` batches of new texts)."""
    embedder = kag.KnowledgeBase().embedder
    texts = pydoc_chunks(batch)
    best = float("inf")
    for run in range(runs):
        batch_texts = [f"{run} {t}" for t in texts]
        t0 = time.perf_counter()
        await embedder.embed(batch_texts)
        best = min(best, time.perf_counter() - t0)
    return embedder.name, batch / best


def documents(chunks: int) -> list[Document]:
    """Documents that split into at least ``chunks`` chunks (about ``PER_DOCUMENT`` pydoc chunks each)."""
    texts = pydoc_chunks(min(chunks, 5000))
    splitter = RecursiveCharacterSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    out: list[Document] = []
    total = 0
    while total < chunks:
        d = len(out)
        # every paragraph tagged with its place, so no chunk text repeats (no embedder cache hits)
        body = "\n\n".join(f"[{d}.{j}] {texts[(d * PER_DOCUMENT + j) % len(texts)]}" for j in range(PER_DOCUMENT))
        text = f"Document {d}.\n\n{body}"
        total += len(splitter.split_text(text))
        out.append(Document.from_text(text, source=f"bench:{d}", metadata={"n": d % 10}))
    return out


async def index_build(chunks: int, searches: int = 50) -> dict[str, float]:
    """Seconds to index documents of about ``chunks`` chunks, and the vector search latencies."""
    docs = documents(chunks)
    kb = kag.KnowledgeBase("memory://")
    knowledge = Knowledge(
        kb,
        name="bench",
        splitter=RecursiveCharacterSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP),
        facts=False,
    )
    await knowledge.ready()
    t0 = time.perf_counter()
    report = await knowledge.add(docs)
    built = time.perf_counter() - t0
    questions = [t[:60] for t in pydoc_chunks(searches)]
    t0 = time.perf_counter()
    await knowledge.search(questions[0], k=5, mode="vector")
    first = time.perf_counter() - t0
    samples = []
    for q in questions:
        t0 = time.perf_counter()
        await knowledge.search(q, k=5, mode="vector")
        samples.append(time.perf_counter() - t0)
    await knowledge.aclose()
    return {
        "chunks": float(report.chunks),
        "documents": float(report.documents),
        "build_s": built,
        "first_s": first,
        "p50_ms": percentiles(samples)[0],
    }


async def run(chunks: int = 100_000) -> Report:
    """Measure, return the report."""
    report = Report("RAG index at scale (default embedder, memory store)")
    log("rag index: embedder throughput")
    name, per_s = await throughput()
    report.add(Result("rag index", f"default embedder throughput ({name}, 1,000-chunk batches)", per_s, "chunks/s"))
    log(f"rag index: indexing ~{chunks:,} chunks")
    got = await index_build(chunks)
    n = int(got["chunks"])
    report.add(
        Result(
            "rag index",
            f"Knowledge.add: build a {n:,}-chunk index ({int(got['documents']):,} documents)",
            got["build_s"],
            "s",
            note=f"{n / got['build_s']:,.0f} chunks/s incl. splitting, embedding, writes, BM25",
        )
    )
    report.add(Result("rag index", f"first vector search after the build ({n:,} chunks)", got["first_s"], "s"))
    report.add(Result("rag index", f"vector search p50, k=5 ({n:,} chunks)", got["p50_ms"], "ms"))
    report.notes.append(
        f"chunks of <= {CHUNK_SIZE} chars (overlap {CHUNK_OVERLAP}) from the pydoc topics, {PER_DOCUMENT} per "
        "document; the first search builds the chunk matrix, later ones scan it exactly (float64 per row)."
    )
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    args = parser.parse_args()
    print(asyncio.run(run(args.chunks)).markdown())


if __name__ == "__main__":
    main()
