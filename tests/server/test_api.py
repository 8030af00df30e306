"""The HTTP API end to end: a real server on 127.0.0.1 (in-process, port 0) and httpx."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kag.errors import BackendUnavailableError
from kag.server import HTTPServer, Service, create_app
from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply
from tests.helpers.serve import served_port

SEED = "kag.examples.seed"
NOTES = (
    "# Travel notes\n\nParis is the capital of France and its largest city. "
    "Lyon is known for its food.\n\nBerlin is the capital of Germany."
)
MAX_BODY = 16 * 1024


@dataclass
class Served:
    """A running server, its service and a client bound to it."""

    server: HTTPServer
    service: Service
    client: httpx.AsyncClient
    path: Path

    async def post(self, route: str, body: Any, **kwargs: Any) -> httpx.Response:
        return await self.client.post(route, json=body, **kwargs)


async def start(tmp_path: Path, **server_options: Any) -> tuple[HTTPServer, Service]:
    """A seeded service on memory://tmp_path/kb.json and a started server on port 0."""
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED, source_roots=[tmp_path / "docs"])
    await service.load_example("seed")
    await service.ingest(texts=[NOTES])
    server = HTTPServer(create_app(service), port=0, max_body_bytes=MAX_BODY, **server_options)
    await server.start()
    return server, service


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **server_options: Any) -> AsyncIterator[Served]:
    """A seeded server on 127.0.0.1 and a client bound to it (the fixture of the server tests)."""
    server, service = await start(tmp_path, **server_options)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            yield Served(server, service, client, tmp_path / "kb.json")
    finally:
        await server.close()
        await service.aclose()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as running:
        yield running


async def raw_exchange(port: int, payload: bytes, *, read_timeout: float = 5.0) -> bytes:
    """Send raw bytes, return everything the server answers until it closes (or the timeout)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        chunks = []
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), timeout=read_timeout)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()


def status_of(raw: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", raw)
    assert match, raw[:200]
    return int(match.group(1))


def body_of(raw: bytes) -> Any:
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


# --------------------------------------------------------------------------- routes


async def test_health_index_schema(served: Served) -> None:
    health = await served.client.get("/health")
    assert health.status_code == 200
    data = health.json()
    assert data["status"] == "ok" and data["backend"] == "memory"
    assert data["counts"]["City"] == 12 and data["counts"]["IsCapitalOf"] == 5
    assert health.headers["content-type"] == "application/json"

    index = (await served.client.get("/")).json()
    assert index["routes"]["/search"] == ["POST"] and "/mcp" in index["routes"]

    schema = (await served.client.get("/schema")).json()
    assert set(schema["entities"]) == {"Country", "City"}
    assert schema["relations"]["IsCapitalOf"] == {"subject": ["City"], "object": ["Country"]}
    assert "Country" in schema["triplet_search"]["properties"]["subject_label"]["enum"]


async def test_search_facts_passages_and_filters(served: Served) -> None:
    response = await served.post("/search", {"query": "capital of France", "k": 3})
    assert response.status_code == 200
    hits = response.json()["hits"]
    kinds = [h["kind"] for h in hits]
    assert kinds[0] == "fact" and "passage" in kinds
    assert hits[0]["text"] == "Paris -[IsCapitalOf]-> France"
    passage = next(h for h in hits if h["kind"] == "passage")
    assert "Paris is the capital of France" in passage["text"]

    none = await served.post("/search", {"query": "Lyon food", "where": {"source": "elsewhere"}})
    assert [h for h in none.json()["hits"] if h["kind"] == "passage"] == []

    entities = (await served.post("/search", {"query": "Berlin", "label": "City", "k": 2})).json()["hits"]
    assert entities[0]["kind"] == "entity" and entities[0]["entity"] == {
        "label": "City",
        "name": "Berlin",
        "population": 3645000,
    }


async def test_search_unknown_label_is_400_with_allowed_labels(served: Served) -> None:
    response = await served.post("/search", {"query": "x", "label": "Planet"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "SchemaError"
    assert "Planet" in error["message"] and "Country" in error["message"] and "City" in error["message"]


async def test_triplet_search_single_chain_and_count(served: Served) -> None:
    single = {
        "subject_label": "City",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": "France",
        "k": 3,
    }
    response = await served.post("/triplet_search", single)
    assert response.status_code == 200
    data = response.json()
    assert [f["text"] for f in data["facts"]] == ["Paris -[IsCapitalOf]-> France"]
    assert data["count"] is None and data["cypher"].startswith("MATCH")
    # "France" is linked to its entity: the params carry its id and score, not a vector
    assert list(data["params"]["l1_0"].values()) == [1.0]
    assert data["params"]["l1_0_ids"] == list(data["params"]["l1_0"])
    assert "v1_0" not in data["params"]  # a linked text is scored by its map, no query vector is needed

    chain = {
        "hops": [
            {
                "subject_label": "City",
                "subject_similarity_search": "Lyon",
                "relation_label": "IsCityOf",
                "object_label": "Country",
            },
            {"subject_label": "Country", "relation_label": "*", "object_label": "City", "bidirectional": True},
        ],
        "k": 20,
        "threshold": 0.9,
    }
    facts = (await served.post("/triplet_search", chain)).json()["facts"]
    assert facts and all(f["path"][0]["name"] == "Lyon" and f["path"][1]["name"] == "France" for f in facts)

    counted = (
        await served.post(
            "/triplet_search",
            {
                "relation_label": "IsCityOf",
                "object_label": "Country",
                "object_similarity_search": "France",
                "count": True,
                "threshold": 0.95,
            },
        )
    ).json()
    assert counted["count"] == 3 and counted["facts"] == []


async def test_triplet_search_errors(served: Served) -> None:
    unknown = await served.post("/triplet_search", {"subject_label": "Planet"})
    assert unknown.status_code == 400
    assert "Planet" in unknown.json()["error"]["message"] and "City" in unknown.json()["error"]["message"]

    both = await served.post("/triplet_search", {"subject_label": "City", "hops": [{"subject_label": "City"}]})
    assert both.status_code == 422

    bad_hop = await served.post("/triplet_search", {"hops": [{"subject_labl": "City"}]})
    assert bad_hop.status_code == 422
    assert bad_hop.json()["error"]["details"][0]["loc"][:2] == ["hops", "0"]

    wrong_end = await served.post("/triplet_search", {"subject_label": "Country", "relation_label": "IsCapitalOf"})
    assert wrong_end.status_code == 400


async def test_ask(served: Served) -> None:
    response = await served.post("/ask", {"question": "What is the capital of Germany?"})
    assert response.status_code == 200
    data = response.json()
    assert "Berlin" in data["answer"]
    assert data["cypher"].startswith("MATCH") and data["facts"][0]["text"] == "Berlin -[IsCapitalOf]-> Germany"
    assert data["model"] == "lexical" and data["mode"] == "graph"

    rag = await served.post("/ask", {"question": "What is the capital of France?", "mode": "rag", "k": 3})
    assert rag.status_code == 200
    data = rag.json()
    assert data["mode"] == "rag" and "Paris" in data["answer"]
    assert data["citations"] and data["citations"][0]["label"] == "knowledge:1"
    assert {h["kind"] for h in data["hits"]} >= {"fact", "passage"}

    assert (await served.post("/ask", {"question": "x", "mode": "magic"})).status_code == 422


async def test_ingest_entities_relations_texts_and_saves(served: Served) -> None:
    body = {
        "entities": [{"label": "City", "name": "Porto", "population": 232000}],
        "relations": [
            {"label": "IsCityOf", "subj": {"name": "Porto"}, "obj": {"name": "Portugal"}},
            {"label": "IsCapitalOf", "subj": {"label": "City", "name": "Lisbon"}, "obj": {"name": "Portugal"}},
        ],
        "texts": ["Porto sits on the Douro river in Portugal."],
    }
    response = await served.post("/ingest", body)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["upserted"]["relations"] == 2
    assert report["passages"]["documents"] == 1 and report["passages"]["mentions"] >= 1
    assert report["counts"]["Country"] == 6 and report["saved"] == str(served.path)
    assert served.path.exists() and Path(str(served.path) + ".passages.json").exists()

    hits = (await served.post("/search", {"query": "Porto Douro", "k": 3})).json()["hits"]
    assert any(h["kind"] == "passage" and "Douro" in h["text"] for h in hits)
    assert any(h["kind"] == "fact" and "Porto" in h["text"] for h in hits)


async def test_ingest_errors(served: Served, tmp_path: Path) -> None:
    unknown = await served.post("/ingest", {"entities": [{"label": "Planet", "name": "Mars"}]})
    assert unknown.status_code == 400 and "allowed" in unknown.json()["error"]["message"]

    bad_field = await served.post("/ingest", {"entities": [{"label": "City", "name": "X", "population": "many"}]})
    assert bad_field.status_code == 422 and bad_field.json()["error"]["type"] == "ValidationError"

    wrong_end = await served.post(
        "/ingest", {"relations": [{"label": "IsCityOf", "subj": {"label": "Country", "name": "X"}, "obj": {}}]}
    )
    assert wrong_end.status_code == 400

    empty = await served.post("/ingest", {})
    assert empty.status_code == 422 and "nothing to ingest" in empty.json()["error"]["message"]

    outside = await served.post("/ingest", {"sources": ["/etc/passwd"]})
    assert outside.status_code == 400 and "outside" in outside.json()["error"]["message"]

    scheme = await served.post("/ingest", {"sources": ["file:///etc/passwd"]})
    assert scheme.status_code == 400

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "madrid.md").write_text("# Madrid\n\nMadrid is the capital of Spain.\n", encoding="utf-8")
    allowed = await served.post("/ingest", {"sources": [str(docs / "madrid.md")]})
    assert allowed.status_code == 200 and allowed.json()["passages"]["documents"] == 1


async def test_ingest_extracts_with_the_nearest_labelled_passages(tmp_path: Path) -> None:
    shown: list[str] = []

    def complete(request: RecordedRequest) -> Any:
        shown.append(json.dumps(request.json()["messages"]))
        answer = {"entities": [{"label": "City", "name": "Madrid", "population": None}], "relations": []}
        message = {"role": "assistant", "content": json.dumps(answer)}
        return Reply.json({"choices": [{"message": message, "finish_reason": "stop"}]})

    def labelled(text: str, city: str, country: str) -> dict[str, Any]:
        subject, obj = {"label": "City", "name": city}, {"label": "Country", "name": country}
        relation = {"label": "IsCapitalOf", "subject": subject, "object": obj}
        return {"text": text, "extraction": {"entities": [subject, obj], "relations": [relation]}}

    examples = [
        labelled("The capital of Chile is Santiago.", "Santiago", "Chile"),
        labelled("Quito is the capital of Ecuador.", "Quito", "Ecuador"),
    ]
    with LocalHTTPServer() as model:
        model.route("POST", "/v1/chat/completions", complete)
        service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED, lm=f"openai:fake-model@{model.url}/v1")
        server = HTTPServer(create_app(service), port=0)
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
                text = "Madrid is the capital of Spain."
                body = {"texts": [text], "extract": True, "examples": examples, "nearest": 1}
                response = await client.post("/ingest", json=body)
                assert response.status_code == 200, response.text
                assert response.json()["extraction"]["entities"] == 1
                assert len(shown) == 1 and "Quito" in shown[0] and "Santiago" not in shown[0]
                # a labelled extraction its passage does not state: 400, and the text was not ingested
                wrong = [labelled("Quito is the capital of Ecuador.", "Lima", "Ecuador")]
                body = {"texts": ["Rome is the capital of Italy."], "extract": True, "examples": wrong}
                refused = await client.post("/ingest", json=body)
                assert refused.status_code == 400 and "examples[0]" in refused.json()["error"]["message"]
                counts = (await client.get("/health")).json()["counts"]
                assert counts["documents"] == 1 and len(shown) == 1
                alone = await client.post("/ingest", json={"texts": ["x"], "examples": examples})
                assert alone.status_code == 422 and "extract" in alone.json()["error"]["message"]
        finally:
            await server.close()
            await service.aclose()


# --------------------------------------------------------------------------- protocol errors


async def test_validation_and_json_errors(served: Served) -> None:
    extra = await served.post("/search", {"query": "x", "limit": 3})
    assert extra.status_code == 422
    assert extra.json()["error"]["details"][0] == {
        "loc": ["limit"],
        "msg": "Extra inputs are not permitted",
        "type": "extra_forbidden",
    }

    wrong_type = await served.post("/search", {"query": "x", "k": "5"})
    assert wrong_type.status_code == 422 and wrong_type.json()["error"]["details"][0]["loc"] == ["k"]

    out_of_range = await served.post("/search", {"query": "x", "k": 0})
    assert out_of_range.status_code == 422

    not_object = await served.post("/search", ["query"])
    assert not_object.status_code == 422

    bad_json = await served.client.post("/search", content=b'{"query": ', headers={"content-type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "InvalidJSON"

    nan = await served.client.post(
        "/search", content=b'{"query": "x", "k": NaN}', headers={"content-type": "application/json"}
    )
    assert nan.status_code == 400

    text = await served.client.post("/search", content=b"query=x", headers={"content-type": "text/plain"})
    assert text.status_code == 415


async def test_404_405_and_origin(served: Served) -> None:
    missing = await served.client.get("/nope")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFound"

    wrong = await served.client.get("/search")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert (await served.client.delete("/mcp")).status_code == 405

    foreign = await served.client.get("/health", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    rebound = await served.client.get("/health", headers={"Host": f"evil.example:{served.server.port}"})
    assert rebound.status_code == 403 and "Host" in rebound.json()["error"]["message"]
    local = await served.client.get("/health", headers={"Origin": "http://localhost:3000"})
    assert local.status_code == 200


async def test_body_limit_is_413(served: Served) -> None:
    big = {"query": "x" * (MAX_BODY + 10)}
    response = await served.post("/search", big)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "PayloadTooLarge"

    # the declared length alone is refused, before any body is read
    raw = await raw_exchange(
        served.server.port,
        b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 99999999\r\n\r\n",
    )
    assert status_of(raw) == 413 and b"Connection: close" in raw


async def test_header_limits_length_required_and_malformed(served: Served) -> None:
    port = served.server.port
    huge = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    assert status_of(await raw_exchange(port, huge)) == 431

    no_length = b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n"
    assert status_of(await raw_exchange(port, no_length)) == 411

    chunked = (
        b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    assert status_of(await raw_exchange(port, chunked)) == 411

    assert status_of(await raw_exchange(port, b"NONSENSE\r\n\r\n")) == 400
    assert status_of(await raw_exchange(port, b"GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n")) == 505
    conflicting = b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    assert status_of(await raw_exchange(port, conflicting)) == 400


async def test_keep_alive_and_pipelined_requests(served: Served) -> None:
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    raw = await raw_exchange(
        served.server.port, request + request + request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    )
    assert raw.count(b"HTTP/1.1 200 OK") == 3
    assert raw.rstrip().endswith(b"}")  # the server closed after the last one


async def test_expect_continue_and_http10(served: Served) -> None:
    body = json.dumps({"query": "Madrid", "label": "City", "k": 1}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", served.server.port)
    try:
        head = (
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        writer.write(head)
        await writer.drain()
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
        assert interim.startswith(b"HTTP/1.1 100 Continue")
        writer.write(body)
        await writer.drain()
        final = await asyncio.wait_for(reader.read(), timeout=5)
    finally:
        writer.close()
    assert status_of(final) == 200 and body_of(final)["hits"][0]["entity"]["name"] == "Madrid"

    old = await raw_exchange(served.server.port, b"GET /health HTTP/1.0\r\n\r\n")  # closes by default
    assert status_of(old) == 200 and b"Connection: close" in old


async def test_request_timeout_is_408(tmp_path: Path) -> None:
    server, service = await start(tmp_path, request_timeout=0.3)
    try:
        raw = await raw_exchange(
            server.port, b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{"
        )
        assert status_of(raw) == 408
        raw = await raw_exchange(server.port, b"GET /health HTTP/1.1\r\n")  # headers never finish
        assert status_of(raw) == 408
    finally:
        await server.close()
        await service.aclose()


async def test_backend_unavailable_is_503_and_internals_never_leak(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailableError("cannot reach Neo4j at neo4j://db:7687")

    monkeypatch.setattr(served.service.kb.store, "counts", down)
    health = await served.client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "degraded"
    assert health.headers["retry-after"] == "1" and "cannot reach Neo4j" in health.json()["reason"]
    monkeypatch.setattr(served.service.kb.store, "execute", down)
    response = await served.post("/triplet_search", {"subject_label": "City"})
    assert response.status_code == 503 and response.json()["error"]["type"] == "BackendUnavailableError"
    assert response.headers["retry-after"] == "1"

    async def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret password hunter2 at /srv/app.py line 3")

    monkeypatch.setattr(served.service, "search", crash)
    response = await served.post("/search", {"query": "x"})
    assert response.status_code == 500
    assert response.json() == {"error": {"type": "InternalServerError", "message": "internal server error"}}
    assert "hunter2" not in response.text


# --------------------------------------------------------------------------- as a subprocess


def test_serve_subprocess_prints_port_and_shuts_down(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("KAG_KB", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kag.cli",
            "serve",
            "--port",
            "0",
            "--kb",
            f"memory://{tmp_path / 'kb.json'}",
            "--schema",
            SEED,
            "--example",
            "seed",
            "--max-body",
            "2048",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        port = served_port(proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.get("/health").json()["counts"]["Country"] == 5
            hits = client.post("/search", json={"query": "Rome", "label": "City", "k": 1}).json()["hits"]
            assert hits[0]["entity"]["name"] == "Rome"
            assert client.post("/search", json={"query": "x" * 3000}).status_code == 413
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if shutdown hangs
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
