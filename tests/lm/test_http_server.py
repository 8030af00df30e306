"""The reusable local HTTP test server itself."""

from __future__ import annotations

import contextlib
import time

import httpx

from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply


def test_routes_replies_and_recording() -> None:
    with LocalHTTPServer() as server:
        server.route("POST", "/echo", lambda req: {"got": req.json(), "q": req.query})
        server.route("GET", "/text", lambda req: "hello")
        server.route("GET", "/status", lambda req: 204)

        @server.route("GET", "/custom")
        def custom(req: RecordedRequest) -> Reply:
            return Reply(201, b"raw", headers={"X-Reply": "1"})

        with httpx.Client(base_url=server.url) as client:
            echo = client.post("/echo?a=1", json={"x": 2}, headers={"X-Test": "t"})
            assert echo.json() == {"got": {"x": 2}, "q": {"a": ["1"]}}
            assert client.get("/text").text == "hello"
            assert client.get("/status").status_code == 204
            custom_reply = client.get("/custom")
            assert (custom_reply.status_code, custom_reply.content) == (201, b"raw")
            assert custom_reply.headers["x-reply"] == "1"
            missing = client.get("/missing")
            assert missing.status_code == 404
        first = server.requests[0]
        assert (first.method, first.path) == ("POST", "/echo")
        assert first.headers["x-test"] == "t"
        assert len(server.requests_to("/text")) == 1
        assert server.url.startswith("http://127.0.0.1:")


def test_queue_and_handler_errors() -> None:
    with LocalHTTPServer() as server:
        server.queue("GET", "/q", [Reply(503), {"ok": True}])

        def boom(req: RecordedRequest) -> Reply:
            raise RuntimeError("handler bug")

        server.route("GET", "/boom", boom)
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/q").status_code == 503
            assert client.get("/q").json() == {"ok": True}
            assert client.get("/q").status_code == 500  # exhausted
            assert client.get("/boom").status_code == 500
        assert [type(e) for e in server.errors] == [RuntimeError]


def test_stop_interrupts_delayed_replies() -> None:
    server = LocalHTTPServer().start()
    server.route("GET", "/slow", lambda _: Reply(200, "late", delay=30))
    with (
        httpx.Client(base_url=server.url, timeout=0.2) as client,
        contextlib.suppress(httpx.TimeoutException),
    ):
        client.get("/slow")
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < 2
