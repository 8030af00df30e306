"""GET /metrics and the access log under load: a real server on 127.0.0.1, concurrent httpx clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kag.server import HTTPServer, Service, create_app
from kag.server.metrics import METRICS_MISSING, Metrics

SEED = "kag.examples.seed"
CLIENTS = 20
PER_CLIENT = 10


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, **app_options: Any) -> AsyncIterator[tuple[HTTPServer, Service]]:
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED)
    await service.load_example("seed")
    server = HTTPServer(create_app(service, **app_options), port=0)
    await server.start()
    try:
        yield server, service
    finally:
        await server.close()
        await service.aclose()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition: (name, labels) -> value."""
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def by_name(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> dict[frozenset[Any], float]:
    return {labels: value for (sample, labels), value in found.items() if sample == name}


# one client's requests: a mix of routes, methods and outcomes (200, 400, 404, 405, 422)
REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", "/health", None),
    ("POST", "/search", {"query": "capital of France", "k": 3}),
    ("POST", "/triplet_search", {"subject_label": "City", "relation_label": "IsCapitalOf", "k": 5}),
    ("GET", "/schema", None),
    ("POST", "/search", {"query": "Rome", "label": "City", "k": 1}),
    ("GET", "/no-such-route", None),
    ("GET", "/search", None),
    ("POST", "/search", b"{not json"),
    ("POST", "/search", {"query": "x", "unknown_field": 1}),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
]


async def one_client(url: str, tally: Counter[tuple[str, str, str]]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for method, path, body in REQUESTS[:PER_CLIENT]:
            if isinstance(body, bytes):
                response = await client.request(
                    method, path, content=body, headers={"Content-Type": "application/json"}
                )
            else:
                response = await client.request(method, path, json=body)
            route = path if path != "/no-such-route" else "unmatched"
            tally[(method, route, str(response.status_code))] += 1


async def test_scrape_after_a_concurrent_load_counts_what_the_clients_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(tmp_path) as (server, _service):
        tally: Counter[tuple[str, str, str]] = Counter()
        with caplog.at_level(logging.INFO, logger="kag.server.access"):
            await asyncio.wait_for(
                asyncio.gather(*(one_client(server.url, tally) for _ in range(CLIENTS))), timeout=120
            )
            async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
                scrape = await client.get("/metrics")
        assert sum(tally.values()) == CLIENTS * PER_CLIENT == 200
        assert {status for _, _, status in tally} == {"200", "400", "404", "405", "422"}  # the mix happened

        assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
        found = samples(scrape.text)
        requests = by_name(found, "kag_http_requests_total")
        expected = {frozenset({("method", m), ("route", r), ("status", s)}): float(n) for (m, r, s), n in tally.items()}
        assert requests == expected  # the scrape itself is counted once it is answered, not before
        histogram_counts = by_name(found, "kag_http_request_duration_seconds_count")
        assert histogram_counts == expected
        for labels, count in histogram_counts.items():
            inf = frozenset({*labels, ("le", "+Inf")})
            assert found[("kag_http_request_duration_seconds_bucket", inf)] == count
            assert found[("kag_http_request_duration_seconds_sum", labels)] > 0
        assert found[("kag_http_requests_in_flight", frozenset())] == 1.0  # the scrape
        # the memory store's calls were timed: every triplet search executes a plan
        executed = found[
            ("kag_store_query_duration_seconds_count", frozenset({("store", "graph"), ("operation", "execute")}))
        ]
        assert executed >= tally[("POST", "/triplet_search", "200")] == CLIENTS
        assert any(
            s == "kag_store_query_duration_seconds_count" and ("store", "passages") in labels for s, labels in found
        )

        # one access log line per request (the scrape's line is written after it was answered)
        lines = [r for r in caplog.records if r.name == "kag.server.access"]
        assert len(lines) == CLIENTS * PER_CLIENT + 1
        logged = Counter((r.method, r.route, str(r.status)) for r in lines[:-1])  # type: ignore[attr-defined]
        assert logged == tally
        assert all("capital of France" not in r.getMessage() for r in lines)


async def test_ingested_rows_are_counted(tmp_path: Path) -> None:
    async with serving(tmp_path) as (server, _service), httpx.AsyncClient(base_url=server.url) as client:
        body = {
            "entities": [{"label": "City", "name": "Nantes"}, {"label": "City", "name": "Lille"}],
            "relations": [
                {"label": "IsCapitalOf", "subj": {"name": "Lille"}, "obj": {"name": "France"}},
            ],
            "texts": ["Nantes is a city on the Loire.\n\nLille is a city in the north of France."],
        }
        report = (await client.post("/ingest", json=body)).json()
        again = (await client.post("/ingest", json={"texts": ["Brest is a port."]})).json()
        found = samples((await client.get("/metrics")).text)
    rows = {dict(labels)["kind"]: value for labels, value in by_name(found, "kag_ingest_rows_total").items()}
    assert rows == {
        "entities": report["upserted"]["entities"],
        "relations": report["upserted"]["relations"],
        "documents": report["passages"]["documents"] + again["passages"]["documents"],
        "chunks": report["passages"]["chunks"] + again["passages"]["chunks"],
    }
    assert rows["relations"] == 1 and rows["documents"] == 2
    upserts = by_name(found, "kag_store_query_duration_seconds_count")
    assert upserts[frozenset({("store", "graph"), ("operation", "upsert")})] >= 1
    assert upserts[frozenset({("store", "passages"), ("operation", "write")})] >= 2


async def test_model_tokens_of_the_local_model(tmp_path: Path) -> None:
    # the packaged SmolLM2-135M through llama.cpp counts its tokens; the scrape reports them
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED, lm="local")
    await service.load_example("seed")
    server = HTTPServer(create_app(service), port=0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            before = samples((await client.get("/metrics")).text)
            assert not by_name(before, "kag_model_tokens_total")  # no model built yet: no series
            answer = await client.post("/ask", json={"question": "What is the capital of France?"})
            assert answer.status_code == 200, answer.text
            tokens = by_name(samples((await client.get("/metrics")).text), "kag_model_tokens_total")
        usage = service.language_model.usage  # type: ignore[attr-defined]
        name = service.language_model.name
    finally:
        await server.close()
        await service.aclose()
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert tokens == {
        frozenset({("model", name), ("kind", "prompt")}): usage["prompt_tokens"],
        frozenset({("model", name), ("kind", "completion")}): usage["completion_tokens"],
    }


async def test_two_apps_on_one_service_each_count_their_own(tmp_path: Path) -> None:
    async with serving(tmp_path) as (first, service):
        second = HTTPServer(create_app(service), port=0)
        await second.start()
        try:
            async with httpx.AsyncClient() as client:
                await client.post(f"{first.url}/search", json={"query": "Paris"})
                for _ in range(3):
                    await client.post(f"{second.url}/search", json={"query": "Paris"})
                one = samples((await client.get(f"{first.url}/metrics")).text)
                two = samples((await client.get(f"{second.url}/metrics")).text)
        finally:
            await second.close()
    key = frozenset({("method", "POST"), ("route", "/search"), ("status", "200")})
    assert by_name(one, "kag_http_requests_total")[key] == 1.0
    assert by_name(two, "kag_http_requests_total")[key] == 3.0


async def test_without_prometheus_client_metrics_is_501_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # the library is not installed
    assert Metrics.create() is None
    async with serving(tmp_path) as (server, _service), httpx.AsyncClient(base_url=server.url) as client:
        with caplog.at_level(logging.INFO, logger="kag.server.access"):
            response = await client.get("/metrics")
            search = await client.post("/search", json={"query": "Paris"})
    assert response.status_code == 501
    assert response.json()["error"] == {"type": "NotImplemented", "message": METRICS_MISSING}
    assert "pip install 'graph-kag[metrics]'" in METRICS_MISSING
    assert search.status_code == 200  # everything else works, and is still logged
    assert [r.getMessage().split()[1:4] for r in caplog.records if r.name == "kag.server.access"] == [
        ["GET", "/metrics", "501"],
        ["POST", "/search", "200"],
    ]


async def test_metrics_can_be_turned_off(tmp_path: Path) -> None:
    async with serving(tmp_path, metrics=False) as (server, _service), httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get("/metrics")).status_code == 404
        assert "/metrics" not in (await client.get("/")).json()["routes"]


async def test_mcp_over_stdio_logs_one_line_per_message(caplog: pytest.LogCaptureFixture) -> None:
    import io
    import json

    from kag.server.mcp import MCPServer

    service = Service.open("memory://", SEED)
    await service.load_example("seed")
    secret = "needle-" + "7" * 12
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {"q": secret}}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search_knowledge", "arguments": {"query": secret}},
        },
    ]
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdout = io.BytesIO()
    try:
        with caplog.at_level(logging.INFO, logger="kag.server.access"):
            await asyncio.wait_for(MCPServer(service).serve_stdio(stdin, stdout), timeout=60)
    finally:
        await service.aclose()
    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3]
    records = [r for r in caplog.records if r.name == "kag.server.access"]
    assert [(r.method, r.status) for r in records] == [  # type: ignore[attr-defined]
        ("initialize", "ok"),
        ("notifications/initialized", "notification"),
        ("tools/call", "error"),
        ("tools/call", "ok"),
    ]
    assert all(secret not in r.getMessage() and r.latency_ms >= 0 for r in records)  # type: ignore[attr-defined]


async def raw_exchange(server: HTTPServer, data: bytes) -> bytes:
    """Send raw bytes (what httpx would refuse to send) and read the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


async def test_requests_the_http_server_refuses_are_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(tmp_path) as (server, _service):
        with caplog.at_level(logging.INFO, logger="kag.server.access"):
            bad_line = await raw_exchange(server, b"NOT A REQUEST\r\n\r\n")
            too_big = await raw_exchange(
                server,
                b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {server.max_body_bytes + 1}\r\n\r\n".encode(),
            )
        async with httpx.AsyncClient(base_url=server.url) as client:
            found = samples((await client.get("/metrics")).text)
    assert bad_line.startswith(b"HTTP/1.1 400") and too_big.startswith(b"HTTP/1.1 413")
    refused = {
        dict(labels)["status"]: value
        for labels, value in by_name(found, "kag_http_requests_total").items()
        if dict(labels)["route"] == "refused"
    }
    assert refused == {"400": 1.0, "413": 1.0}
    lines = [r.getMessage() for r in caplog.records if r.name == "kag.server.access"]
    assert [line.split()[1:4] for line in lines] == [["-", "refused", "400"], ["-", "refused", "413"]]
    assert all(getattr(r, "route", None) == "refused" for r in caplog.records if r.name == "kag.server.access")
