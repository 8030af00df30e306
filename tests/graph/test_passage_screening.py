"""The memory passage store screens large scans in float32: results equal a full exact scan."""

from __future__ import annotations

import numpy as np

from kag.graph.memory import MemoryGraphStore
from kag.graph.passages import ChunkRecord, DocumentRecord
from kag.graph.passages_memory import MemoryPassageStore, _row_dots


async def test_screened_search_equals_the_exact_scan_with_ties() -> None:
    rng = np.random.default_rng(11)
    dims, n = 24, 5000
    vecs = rng.standard_normal((n, dims)).astype(np.float32)
    vecs[1000:1040] = vecs[7]  # exact duplicates: ties the id order must break
    vecs[2000:2040] = vecs[7] + 1e-4 * rng.standard_normal((40, dims)).astype(np.float32)  # near-ties
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs, chunks = [], []
    for i in range(n):
        doc = DocumentRecord(id=f"d{i:05d}", source=f"s{i}", title="", text_hash=str(i), chunk_count=1)
        docs.append(doc)
        chunks.append(
            ChunkRecord(f"c{(i * 7919) % n:05d}", doc.id, 0, "t", 0, 1, doc.source, "", {"n": i % 3}, vecs[i])
        )
    store = MemoryPassageStore(MemoryGraphStore())
    await store.write(docs, chunks, [])
    ids = sorted(c.id for c in chunks)
    by_id = {c.id: c.embedding for c in chunks}
    matrix = np.stack([by_id[i] for i in ids])
    meta = {c.id: c.metadata["n"] for c in chunks}
    for probe in (vecs[7], vecs[2005], rng.standard_normal(dims).astype(np.float32)):
        q = (probe / np.linalg.norm(probe)).astype(np.float64)
        for k, where in ((5, None), (60, None), (10, {"n": 1})):
            rows = np.asarray([i for i, cid in enumerate(ids) if where is None or meta[cid] == 1])
            sims = np.clip((1.0 + _row_dots(matrix, rows, q)) / 2.0, 0.0, 1.0)
            order = np.lexsort((rows, -sims))[:k]
            want = [(ids[rows[j]], float(sims[j])) for j in order]
            got = [(r.chunk_id, r.score) for r in await store.vector_search(probe, k, where)]
            assert got == want
