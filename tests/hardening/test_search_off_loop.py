"""A worst-case permitted filter search on a memory-backed server does not stall it.

The search (a filter of the largest allowed size, on every chunk) runs in a worker
thread, so ``/health`` keeps answering while it runs. The assertions count answers
given while the search is still running, never a latency (timing goals live in
``benchmarks/``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from kag.datamodels.documents import Document
from kag.query.filters import MAX_FILTER_CONDITIONS, MAX_LIST_VALUES, validate_filter
from kag.server import HTTPServer, Service, create_app

SEED = "kag.examples.seed"
N_DOCS = 40
TARGET = 27
TAG_BASE = 10_000


def worst_case_filter(target: int) -> dict[str, Any]:
    """``$or`` of as many branches as allowed, each scanning two 1024-value lists before it fails.

    Every chunk's ``tags`` is ``list(range(1024))`` plus its number last; ``$ne`` walks the whole
    list to find the difference, then ``$contains`` walks it again. Only the last branch's
    ``$contains`` names ``target``, so exactly one document matches.
    """
    branches = MAX_FILTER_CONDITIONS // 2  # each branch costs one branch and one condition
    almost = [*range(MAX_LIST_VALUES - 1), -1]  # differs from every chunk's tags at the end only
    out: list[dict[str, Any]] = []
    for b in range(branches):
        wanted = TAG_BASE + target if b == branches - 1 else -2
        out.append({"tags": {"$ne": almost, "$contains": wanted}})
    where = {"$or": out}
    validate_filter(where)  # permitted: the service must run it
    return where


async def test_health_answers_while_a_worst_case_filter_search_runs(tmp_path: Path) -> None:
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED)
    docs = [
        Document.from_text(
            f"Report {i:03d}\n\nThe harbour of town {i} ships grain and timber.",
            source=f"report-{i:03d}",
            metadata={"tags": [*range(MAX_LIST_VALUES - 1), TAG_BASE + i]},
        )
        for i in range(N_DOCS)
    ]
    await service.knowledge.add(docs)
    server = HTTPServer(create_app(service), port=0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
            where = worst_case_filter(TARGET)
            body = {"query": "grain harbour", "k": 5, "where": where}
            started = time.perf_counter()
            search = asyncio.create_task(client.post("/search", json=body))
            latencies: list[float] = []
            answered_during = 0
            async with httpx.AsyncClient(base_url=server.url, timeout=600) as probe:
                while not search.done():
                    t0 = time.perf_counter()
                    health = await probe.get("/health")
                    latencies.append(time.perf_counter() - t0)
                    assert health.status_code == 200 and health.json()["status"] == "ok"
                    if not search.done():
                        answered_during += 1
                    await asyncio.sleep(0.01)
            response = await search
            elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.text
        passages = [h for h in response.json()["hits"] if h["kind"] == "passage"]
        assert [h["text"].splitlines()[0] for h in passages] == [f"Report {TARGET:03d}"]
        # the loop answered again and again while the search ran (on the loop: not once)
        assert answered_during >= 3, (answered_during, elapsed)
        latencies.sort()
        print(f"search {elapsed:.2f}s; /health answered {answered_during}x during it, "
              f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")  # fmt: skip
    finally:
        await server.close()
        await service.aclose()
