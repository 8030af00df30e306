"""The sqlite store at scale: write throughput (chunk rows/s) and open time.

    .venv/bin/python -m benchmarks.bench_sqlite --chunks 100000 [--batch 5000] [--dims 384]

Writes synthetic one-chunk documents (random unit vectors, 12-word texts) straight to the passage
store in batches of ``--batch`` (one committed transaction each, WAL, synchronous=FULL), then
reopens the file and times loading it (graph, chunks, vectors, BM25) and one vector search.
The same writes on the memory store are timed for comparison (the in-memory part of the cost).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from kag.graph.memory import MemoryGraphStore
from kag.graph.passages import ChunkRecord, DocumentRecord
from kag.graph.passages_memory import MemoryPassageStore
from kag.graph.sqlite import SQLiteGraphStore

WORDS = [f"w{i:04d}" for i in range(2000)]


def batches(n_chunks: int, batch: int, dims: int) -> list[tuple[list[DocumentRecord], list[ChunkRecord]]]:
    rng, nrng = random.Random(7), np.random.default_rng(7)
    out = []
    for start in range(0, n_chunks, batch):
        docs, chunks = [], []
        vecs = nrng.standard_normal((min(batch, n_chunks - start), dims)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        for j, vec in enumerate(vecs):
            i = start + j
            text = " ".join(rng.choice(WORDS) for _ in range(12))
            doc = DocumentRecord(id=f"d{i:07d}", source=f"s{i}.txt", title="", text_hash=str(i), chunk_count=1)
            docs.append(doc)
            chunks.append(ChunkRecord(f"c{i:07d}", doc.id, 0, text, 0, len(text), doc.source, "", {"n": i % 10}, vec))
        out.append((docs, chunks))
    return out


async def main(n_chunks: int, batch: int, dims: int) -> None:
    data = batches(n_chunks, batch, dims)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kb.db"
        store = SQLiteGraphStore(path, "bench")
        passages = store.passage_store()
        await passages.ensure_schema(dims)
        started = time.perf_counter()
        for docs, chunks in data:
            await passages.write(docs, chunks, [])
        write_s = time.perf_counter() - started
        await store.aclose()
        size_mb = (
            path.stat().st_size
            + (path.with_name("kb.db-wal").stat().st_size if path.with_name("kb.db-wal").exists() else 0)
        ) / 1e6

        memory = MemoryPassageStore(MemoryGraphStore())
        started = time.perf_counter()
        for docs, chunks in data:
            await memory.write(docs, chunks, [])
        memory_s = time.perf_counter() - started

        started = time.perf_counter()
        reopened = SQLiteGraphStore(path, "bench")
        loaded = reopened.passage_store()
        open_s = time.perf_counter() - started
        started = time.perf_counter()
        hits = await loaded.vector_search(data[0][1][0].embedding, 5)
        first_search_s = time.perf_counter() - started
        assert hits[0].chunk_id == data[0][1][0].id
        count = (await loaded.counts())["chunks"]
        await reopened.aclose()
    print(f"chunks            : {count} ({dims} dims, batches of {batch}, file {size_mb:.0f} MB)")
    print(f"sqlite write      : {write_s:.2f} s = {n_chunks / write_s:,.0f} chunks/s (one transaction per batch)")
    print(f"memory write      : {memory_s:.2f} s = {n_chunks / memory_s:,.0f} chunks/s (same batches, no file)")
    print(f"open (load all)   : {open_s:.2f} s")
    print(f"first search      : {first_search_s:.2f} s (builds the vector matrix)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--dims", type=int, default=384)
    args = parser.parse_args()
    asyncio.run(main(args.chunks, args.batch, args.dims))
