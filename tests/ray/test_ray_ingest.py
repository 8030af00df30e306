"""``kag ingest --extract --engine ray`` against the single process, on a local Ray with 2 CPUs.

The model is deterministic (rules behind a local OpenAI-compatible endpoint, see
``tests/helpers/extraction_server.py``), so the graph a Ray job writes must be the one the
single process writes, byte for byte once saved; one case runs the packaged SmolLM2 model.
"""

from __future__ import annotations

import io
import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from kag.cli import main
from kag.engines.ray import RayIngest
from kag.server.service import Service
from tests.helpers.extraction_server import extraction_server, write_corpus
from tests.helpers.http_server import LocalHTTPServer
from tests.ray.models import KillsItsActorOnce

SCHEMA = ["--schema", "kag.examples.seed", "--chunk-size", "200"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _as_set(value: Any) -> Any:
    """JSON with every list of records sorted by id, and provenance lists sorted: the single process
    writes its chunks' facts in the order their answers arrive, so only the order may differ."""
    if isinstance(value, dict):
        return {k: sorted(v) if k == "kag_sources" else _as_set(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_as_set(v) for v in value]
        if items and all(isinstance(v, dict) and "id" in v for v in items):
            return sorted(items, key=lambda v: str(v["id"]))
        return items
    return value


def saved(path: Path) -> tuple[Any, Any]:
    """A saved memory:// knowledge base: its graph and its passages, as JSON (records as sets)."""
    graph = json.loads(path.read_text("utf-8"))
    passages = json.loads(Path(f"{path}.passages.json").read_text("utf-8"))
    return _as_set(graph), _as_set(passages)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHTTPServer]:
    with extraction_server() as started:
        yield started


@pytest.fixture(scope="module")
def lm(server: LocalHTTPServer) -> str:
    return f"openai:rules@{server.url}/v1"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_corpus(tmp_path_factory.mktemp("ray") / "corpus", 8, garbled=True)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")  # malformed: reported, the rest ingested
    return folder


@pytest.fixture(scope="module")
def single(corpus: Path, lm: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The single process's graph of the corpus (saved) and its report."""
    path = tmp_path_factory.mktemp("single") / "kb.json"
    code, out, err = run("ingest", str(corpus), "--extract", "--lm", lm, *SCHEMA, "--kb", f"memory://{path}", "--json")
    assert code == 1 and "broken.pdf" in err  # one source failed to load
    return path, json.loads(out)


def test_the_ray_job_builds_the_single_process_graph_and_twice_changes_nothing(
    ray_cluster: Any, corpus: Path, lm: str, single: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    reference, expected = single
    path = tmp_path / "kb.json"
    argv = ["ingest", str(corpus), "--extract", "--lm", lm, *SCHEMA, "--kb", f"memory://{path}", "--engine", "ray"]
    code, out, err = run(*argv, "--json")
    assert code == 1 and "could not load" in err and "broken.pdf" in err
    report = json.loads(out)
    assert saved(path) == saved(reference)  # same nodes, relations, provenance, documents, chunks
    assert report["counts"] == expected["counts"] and report["counts"]["relations"] > 10

    engine = report["engine"]
    assert engine["documents"] == 8 and engine["written"] == 8 and engine["finished_before"] == 0
    assert [Path(f["source"]).name for f in engine["failed_sources"]] == ["broken.pdf"]
    assert "malformed PDF" in engine["failed_sources"][0]["error"]
    failed = report["extraction"]["failed_chunks"]
    assert failed == expected["extraction"]["failed_chunks"] and len(failed) == 1
    assert "invalid output 3 time(s)" in next(iter(failed.values()))  # the garbled paragraph, with the reason
    assert report["extraction"]["relations"] == expected["extraction"]["relations"]
    assert set(engine["stages"]) >= {"index", "read", "wait", "write", "total"}

    code, out, _ = run(*argv)  # the same corpus again: nothing left to do, nothing changes
    assert code == 1
    assert "8 finished before, 0 written" in out and "failed source" in out and "broken.pdf" in out
    assert saved(path) == saved(reference)


async def test_a_job_stopped_midway_does_only_what_is_left_despite_a_killed_actor(
    ray_cluster: Any,
    corpus: Path,
    lm: str,
    single: tuple[Path, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference, _ = single
    path = tmp_path / "kb.json"
    writes = 0
    write = RayIngest._write

    async def dies_on_the_second_batch(self: RayIngest, *args: Any) -> Any:
        nonlocal writes
        writes += 1
        if writes == 2:
            raise RuntimeError("the driver died")
        return await write(self, *args)

    service = Service.open(f"memory://{path}", "kag.examples.seed", chunk_size=200)
    with monkeypatch.context() as patch:
        patch.setattr(RayIngest, "_write", dies_on_the_second_batch)
        job = RayIngest(service.knowledge, lm, write_batch=4, checkpoint_seconds=0, progress=False)
        with pytest.raises(RuntimeError, match="the driver died"):
            await job.run([corpus])
    await service.aclose()

    flag = tmp_path / "killed"
    service = Service.open(f"memory://{path}", "kag.examples.seed", chunk_size=200)  # as a new process would
    try:
        job = RayIngest(service.knowledge, KillsItsActorOnce(lm, str(flag)), write_batch=4, checkpoint_seconds=0)
        summary = await job.run([corpus])
    finally:
        await service.aclose()
    assert flag.exists()  # an actor was killed with ray.kill mid-batch, restarted and asked again
    assert 0 < summary.finished_before < 8 and summary.written == 8 - summary.finished_before
    assert saved(path) == saved(reference)  # nothing written twice, nothing lost


@pytest.mark.neo4j
@pytest.mark.timeout(600)  # three ingests on Neo4j; on a loaded 2-core machine each may take minutes
def test_on_neo4j_the_ray_job_writes_the_single_process_graph(
    ray_cluster: Any, corpus: Path, lm: str, neo4j_config: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from neo4j import GraphDatabase

    monkeypatch.setenv("NEO4J_USERNAME", neo4j_config["user"])
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_config["password"])
    monkeypatch.setenv("NEO4J_DATABASE", neo4j_config["database"])
    one, two = f"single{uuid.uuid4().hex[:8]}", f"ray{uuid.uuid4().hex[:8]}"
    base = ["ingest", str(corpus), "--extract", "--lm", lm, *SCHEMA, "--kb", neo4j_config["uri"]]
    driver = GraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"]))

    def graph(namespace: str) -> tuple[list[Any], list[Any]]:
        def clean(props: dict[str, Any]) -> str:
            kept = {k: sorted(v) if k == "kag_sources" else v for k, v in props.items()}
            return json.dumps({k: v for k, v in kept.items() if k not in ("kag_ns", "embedding")}, sort_keys=True)

        nodes, _, _ = driver.execute_query(
            "MATCH (n {kag_ns: $ns}) WHERE NOT n:KagIngestManifest RETURN labels(n) AS l, properties(n) AS p",
            ns=namespace,
            database_=neo4j_config["database"],
        )
        edges, _, _ = driver.execute_query(
            "MATCH (a {kag_ns: $ns})-[r]->(b) RETURN a.id AS a, type(r) AS t, b.id AS b, properties(r) AS p",
            ns=namespace,
            database_=neo4j_config["database"],
        )
        return (
            sorted((sorted(r["l"]), clean(r["p"])) for r in nodes),
            sorted((r["a"], r["t"], r["b"], clean(r["p"])) for r in edges),
        )

    try:
        code, _, err = run(*base, "--namespace", one)
        assert code == 1 and "broken.pdf" in err
        code, out, err = run(*base, "--namespace", two, "--engine", "ray", "--workers", "2", "--json")
        assert code == 1 and "broken.pdf" in err
        report = json.loads(out)
        assert report["engine"]["manifest"].startswith("Neo4j :KagIngestManifest")
        nodes, edges = graph(two)
        assert (nodes, edges) == graph(one)
        assert sum(1 for labels, _ in nodes if "City" in labels) > 10 and len(edges) > 40

        code, out, _ = run(*base, "--namespace", two, "--engine", "ray")  # again: nothing to do
        assert "8 finished before, 0 written" in out and graph(two) == (nodes, edges)
    finally:
        for namespace in (one, two):
            driver.execute_query(
                "MATCH (n {kag_ns: $ns}) DETACH DELETE n", ns=namespace, database_=neo4j_config["database"]
            )
        driver.close()


@pytest.mark.timeout(600)
def test_the_packaged_model_on_ray_writes_what_it_writes_in_one_process(ray_cluster: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "france.md").write_text("Paris is the capital of France.\n\nLyon is a city in France.\n", "utf-8")
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    base = ["ingest", str(corpus), "--extract", "--lm", "local", "--schema", "kag.examples.seed", "--chunk-size", "50"]
    code, out, err = run(*base, "--kb", f"memory://{one}", "--json")
    assert code == 0, err
    code, out, err = run(*base, "--kb", f"memory://{two}", "--engine", "ray", "--workers", "1", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["engine"]["written"] == 1 and report["extraction"]["chunks"] == 2
    assert report["extraction"]["model"] == "local"
    assert saved(two) == saved(one)


def test_without_ray_the_engine_says_what_to_install(
    corpus: Path, lm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as if it were not installed
    code, _, err = run("ingest", str(corpus), "--extract", "--lm", lm, *SCHEMA, "--engine", "ray")
    assert code == 1 and "pip install 'graph-kag[ray]'" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "2"], "--address and --workers are for --engine ray"),
        (["--engine", "ray"], "--engine ray extracts facts from files"),  # no --extract
    ],
)
def test_engine_options_are_checked(corpus: Path, argv: list[str], message: str) -> None:
    code, _, err = run("ingest", str(corpus), *argv)
    assert code == 2 and message in err
