"""``kag ingest --extract --engine ray`` against the single process, and the writer alone on Neo4j.

1. The packaged model (SmolLM2-135M through llama.cpp) on the same passages: the single process
   (``Service.ingest``, the model on every core) against a Ray job of 2 one-thread workers.
2. A latency-bound HTTP model (the rules model of ``tests/helpers/extraction_server.py`` behind a
   local OpenAI-compatible server, ``--latency`` seconds per call): Ray with 1 worker against 2
   (4 requests in flight per worker).
3. The writer alone against Neo4j: ``KnowledgeBase.upsert`` of relations with provenance in
   batches (what every extracted fact goes through), and the Ray job's writer (validation, entity
   resolution and upserts of recorded answers) over a corpus.

Run: ``python -m benchmarks.run_all --only ray --merge`` (``NEO4J_URI`` etc. for part 3).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Report, Result, log

TITLE = "Ingest on Ray (kag ingest --extract --engine ray)"


def _ray() -> Any:
    import ray

    if not ray.is_initialized():
        root = str(Path(__file__).resolve().parents[1])
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": root}},
        )
    return ray


async def _ray_job(corpus: Path, lm: str, workers: int, folder: Path, **options: Any) -> tuple[float, Any]:
    from kag.engines.ray import RayIngest
    from kag.server.service import Service

    service = Service.open(
        f"memory://{folder / f'ray-{workers}-{time.time_ns()}.json'}", "kag.examples.seed", chunk_size=200
    )
    try:
        started = time.perf_counter()
        summary = await RayIngest(service.knowledge, lm, workers=workers, progress=False, **options).run([corpus])
        return time.perf_counter() - started, summary
    finally:
        await service.aclose()


async def _single(corpus: Path, lm: str, folder: Path) -> tuple[float, dict[str, Any]]:
    from kag.server.service import Service

    service = Service.open(
        f"memory://{folder / f'single-{time.time_ns()}.json'}", "kag.examples.seed", chunk_size=200, lm=lm
    )
    try:
        started = time.perf_counter()
        report = await service.ingest(sources=[corpus], extract=True)
        return time.perf_counter() - started, report
    finally:
        await service.aclose()


async def packaged(report: Report, folder: Path, documents: int) -> None:
    from tests.helpers.extraction_server import write_corpus

    corpus = write_corpus(folder / "packaged", documents, paragraphs=2, seed=11)
    _ray()
    await _ray_job(corpus, "local", 2, folder)  # warm: the model file in the page cache, Ray's workers started
    single_s, single = await _single(corpus, "local", folder)
    ray_s, summary = await _ray_job(corpus, "local", 2, folder, threads=1)
    chunks = single["extraction"]["chunks"]
    log(f"packaged model: single {single_s:.1f}s, ray {ray_s:.1f}s, {chunks} chunks")
    report.add(
        Result(
            "ray ingest",
            f"packaged SmolLM2-135M, {chunks} passages: Ray 2 one-thread workers vs one process "
            "(2 threads), passages/s",
            chunks / ray_s,
            "passages/s",
            baseline=chunks / single_s,
            baseline_name="one process",
            ratio=single_s / ray_s,
            goal=">= 0.9x",
            met=single_s / ray_s >= 0.9,
            note=f"wall {ray_s:.1f} s vs {single_s:.1f} s, Ray actors' start included",
        )
    )
    report.add(
        Result(
            "ray ingest",
            "packaged model: same graph as the one process (relations)",
            float(len(summary.relation_ids)),
            "relations",
            baseline=float(single["extraction"]["relations"]),
            baseline_name="one process",
        )
    )


async def latency_bound(report: Report, folder: Path, documents: int, latency: float) -> None:
    from tests.helpers.extraction_server import extraction_server, write_corpus

    corpus = write_corpus(folder / "http", documents, paragraphs=3, seed=5)
    _ray()
    with extraction_server(latency) as server:
        lm = f"openai:rules@{server.url}/v1"
        await _ray_job(corpus, lm, 2, folder)  # warm-up
        runs = {w: await _ray_job(corpus, lm, w, folder) for w in (1, 2)}
    rates = {}
    for workers, (wall, summary) in runs.items():
        steady = summary.stages.get("extract (workers' span)", wall)
        rates[workers] = (summary.chunks / wall, summary.chunks / steady, wall, steady, summary.chunks)
        log(f"http model, {workers} worker(s): {summary.chunks} chunks in {wall:.1f}s (workers' span {steady:.1f}s)")
    one, two = rates[1], rates[2]
    report.add(
        Result(
            "ray ingest",
            f"HTTP model, {latency * 1000:.0f} ms a call, 4 in flight per worker: 2 workers vs 1, passages/s "
            f"({two[4]} passages, whole job)",
            two[0],
            "passages/s",
            baseline=one[0],
            baseline_name="1 worker",
            ratio=two[0] / one[0],
            goal=">= 1.8x",
            met=two[0] / one[0] >= 1.8,
            note=f"wall {two[2]:.1f} s vs {one[2]:.1f} s, actor start included",
        )
    )
    report.add(
        Result(
            "ray ingest",
            "HTTP model: 2 workers vs 1, passages/s over the workers' span (first chunk asked to last answered)",
            two[1],
            "passages/s",
            baseline=one[1],
            baseline_name="1 worker",
            ratio=two[1] / one[1],
            goal=">= 1.8x",
            met=two[1] / one[1] >= 1.8,
        )
    )
    report.notes.append(
        f"HTTP model: {latency * 1000:.0f} ms per call means one worker with 4 requests in flight can answer at most "
        f"{4 / latency:.0f} passages/s; 1 worker reached {one[1]:.1f}/s and 2 workers {two[1]:.1f}/s once started."
    )


async def writer(report: Report, settings: dict[str, str], relations: int, documents: int) -> None:
    import kag
    from kag.datamodels.documents import Chunk
    from kag.engines.pipeline import ReplayLM, passage_key
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf
    from kag.programs.extractor import KnowledgeExtractor
    from tests.helpers.extraction_server import answer_passage, write_corpus

    namespace = f"benchray{time.time_ns() % 10**8}"
    kb = kag.KnowledgeBase(
        settings["uri"],
        username=settings["user"],
        password=settings["password"],
        database=settings["database"],
        entity_models=ENTITY_MODELS,
        relation_models=RELATION_MODELS,
        namespace=namespace,
    )
    try:
        await kb.ensure_ready()
        countries = [Country(name=f"Country {i}") for i in range(200)]
        facts = [IsCityOf(subj=City(name=f"City {i}"), obj=countries[i % len(countries)]) for i in range(relations)]
        batch = 2000
        started = time.perf_counter()
        for start in range(0, len(facts), batch):
            part = facts[start : start + batch]
            sources = {x.id: [f"chk_{start + k}"] for k, f in enumerate(part) for x in (f, f.subj, f.obj)}
            await kb.upsert(part, sources=sources)
        seconds = time.perf_counter() - started
        log(f"writer alone: {relations} relations in {seconds:.1f}s")
        report.add(
            Result(
                "ray ingest",
                f"Neo4j: KnowledgeBase.upsert of relations with provenance, batches of {batch} (new endpoints too)",
                relations / seconds,
                "relations/s",
                goal=">= 20,000/s",
                met=relations / seconds >= 20_000,
                note=f"{relations:,} relations in {seconds:.1f} s",
            )
        )
        await kb.store.clear()  # type: ignore[attr-defined]
        started = time.perf_counter()
        for start in range(0, len(facts), batch):
            await kb.upsert(facts[start : start + batch])
        plain = time.perf_counter() - started
        log(f"writer alone, no provenance: {relations} relations in {plain:.1f}s")
        report.add(
            Result(
                "ray ingest",
                f"Neo4j: KnowledgeBase.upsert of the same relations without provenance, batches of {batch}",
                relations / plain,
                "relations/s",
                note=f"{relations:,} relations in {plain:.1f} s",
            )
        )
        await kb.store.clear()  # type: ignore[attr-defined]

        corpus = write_corpus(Path(tempfile.mkdtemp()) / "writer", documents, paragraphs=3, seed=3)
        from kag.rag.loaders import AutoLoader
        from kag.rag.splitter import RecursiveCharacterSplitter

        loaded = await AutoLoader().load_with_report([corpus])
        chunks: list[Chunk] = RecursiveCharacterSplitter(200, 40).split_documents(loaded.documents)
        replay = ReplayLM("rules")
        extractor = KnowledgeExtractor(kb, replay, concurrency=1, progress=False)
        for chunk in chunks:
            key = passage_key(extractor.messages(chunk, []))
            answer = answer_passage(chunk.text)
            replay.answers[key] = {"answer": answer} if isinstance(answer, dict) else {"error": "garbled"}
        started = time.perf_counter()
        written = await extractor.ingest(chunks)
        seconds = time.perf_counter() - started
        log(f"the Ray job's writer: {len(chunks)} chunks, {written.relations} relations in {seconds:.1f}s")
        report.add(
            Result(
                "ray ingest",
                "Neo4j: the Ray job's writer (validate, resolve, upsert recorded answers), passages/s",
                len(chunks) / seconds,
                "passages/s",
                note=f"{len(chunks)} passages, {written.entities} entities, {written.relations} relations "
                f"in {seconds:.1f} s",
            )
        )
        report.notes.append(
            "The writer's cap is resolution, not the upsert: each new entity is looked up by similarity in the store "
            f"(one read per entity); at {len(chunks) / seconds:.0f} passages/s it caps a job at about "
            f"{3600 * len(chunks) / seconds:,.0f} passages an hour on this machine."
        )
        await kb.store.clear()  # type: ignore[attr-defined]
    finally:
        await kb.aclose()


def server_ceiling(report: Report, settings: dict[str, str], rows: int = 20_000) -> None:
    """What the Neo4j server takes with no kag in the way: ``UNWIND ... MERGE`` sent by the driver alone,
    the statements kag writes with (entity nodes with and without a 384-d embedding, relations between
    nodes that exist), in a namespace of their own that is deleted after."""
    import random

    from neo4j import GraphDatabase

    ns = f"benchceil{time.time_ns() % 10**8}"
    rng = random.Random(0)
    merge_nodes = "UNWIND $rows AS row MERGE (n:KagEntity {id: row.id, kag_ns: $ns}) SET n:City, n += row.props"
    merge_rels = (
        "UNWIND $rows AS row MATCH (a:KagEntity {id: row.start, kag_ns: $ns}) "
        "MATCH (b:KagEntity {id: row.end, kag_ns: $ns}) "
        "MERGE (a)-[r:IsCityOf {id: row.id, kag_ns: $ns}]->(b) SET r += row.props"
    )
    auth = (settings["user"], settings["password"])
    with GraphDatabase.driver(settings["uri"], auth=auth) as driver, driver.session(database=settings["database"]) as s:

        def timed(query: str, items: list[dict[str, Any]], batch: int) -> float:
            started = time.perf_counter()
            for start in range(0, len(items), batch):
                s.run(query, rows=items[start : start + batch], ns=ns).consume()
            return len(items) / (time.perf_counter() - started)

        try:
            nodes = [{"id": f"c{i}", "props": {"name": f"City {i}"}} for i in range(rows)]
            plain = timed(merge_nodes, nodes, 5_000)
            sample = 2_000  # a vector index entry each: the slow part, measured on fewer nodes
            embedded = [
                {"id": f"v{i}", "props": {"name": f"Town {i}", "embedding": [rng.random() for _ in range(384)]}}
                for i in range(sample)
            ]
            with_vectors = timed(merge_nodes, embedded, 2_000)
            per_batch = {}
            for batch in (2_000, 10_000):
                rels = [
                    {"id": f"r{batch}_{i}", "start": f"c{i}", "end": f"c{(i * 7919) % rows}", "props": {}}
                    for i in range(rows)
                ]
                per_batch[batch] = timed(merge_rels, rels, batch)
        finally:
            s.run("MATCH (n:KagEntity {kag_ns: $ns}) DETACH DELETE n", ns=ns).consume()
    log(f"server ceiling: nodes {plain:,.0f}/s, with vectors {with_vectors:,.0f}/s, relations {per_batch}")
    for batch, rate in per_batch.items():
        report.add(
            Result(
                "ray ingest",
                f"Neo4j alone (the driver, no kag): MERGE of relations between existing nodes, batches of {batch:,}",
                rate,
                "relations/s",
                goal=">= 20,000/s",
                met=rate >= 20_000,
                note=f"{rows:,} relations",
            )
        )
    report.add(
        Result(
            "ray ingest",
            "Neo4j alone: MERGE of entity nodes, batches of 5,000 (no embedding)",
            plain,
            "nodes/s",
            note=f"{rows:,} nodes",
        )
    )
    report.add(
        Result(
            "ray ingest",
            "Neo4j alone: MERGE of entity nodes with a 384-d embedding (a vector index entry each), batches of 2,000",
            with_vectors,
            "nodes/s",
            note=f"{sample:,} nodes",
        )
    )


async def run(
    settings: dict[str, str] | None,
    *,
    documents: int = 40,
    latency: float = 1.0,
    packaged_docs: int = 4,
    relations: int = 6_000,
) -> Report:
    """All three parts; part 3 only with a Neo4j server (``settings``)."""
    report = Report(TITLE)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        await latency_bound(report, folder, documents, latency)
        if os.environ.get("KAG_BENCH_SKIP_PACKAGED") != "1":
            await packaged(report, folder, packaged_docs)
    if settings is not None:
        await writer(report, settings, relations, 40)
        server_ceiling(report, settings)
    else:
        report.notes.append("Neo4j writer: skipped (no NEO4J_URI).")
    report.notes.append(
        "Each Ray job here includes starting its actors (each imports kag and builds its model); the local Ray "
        "(2 CPUs) is started once before the first job. The machine is shared: see the load averages above."
    )
    return report


async def writer_only(settings: dict[str, str], relations: int = 6_000) -> Report:
    """The Neo4j parts alone (``--writer-only``): kag's writer, then the server without kag."""
    report = Report(TITLE)
    await writer(report, settings, relations, 40)
    server_ceiling(report, settings)
    return report


if __name__ == "__main__":
    import sys

    from benchmarks.common import neo4j_settings

    found = neo4j_settings()
    if "--writer-only" in sys.argv:
        if found is None:
            raise SystemExit("--writer-only needs a Neo4j server: set NEO4J_URI (and NEO4J_PASSWORD).")
        print(asyncio.run(writer_only(found)).markdown())
    else:
        print(asyncio.run(run(found)).markdown())
