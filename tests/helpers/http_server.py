"""A real local HTTP server for tests: 127.0.0.1, an ephemeral port, a daemon thread.

Usage::

    with LocalHTTPServer() as server:
        server.route("POST", "/v1/chat/completions", lambda req: Reply.json({...}))
        server.queue("POST", "/api/chat", [Reply(status=503), Reply.json({...})])
        ... call server.url + "/v1" ...
        assert server.requests[0].json()["model"] == "m"

Handlers receive a :class:`RecordedRequest` and return a :class:`Reply`, or a
dict/list (sent as JSON 200), a str/bytes (200 text), or an ``int`` status.
``Reply(delay=...)`` sleeps before answering (interrupted when the server stops),
to provoke client timeouts. Unknown routes answer 404. A handler that raises
answers 500 and the exception is kept in :attr:`LocalHTTPServer.errors`.

For pytest, ``local_http_server`` is a ready fixture: import it into a conftest.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

__all__ = ["LocalHTTPServer", "RecordedRequest", "Reply", "local_http_server"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass
class Reply:
    """What to send back."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def json(
        cls,
        data: Any,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        """A JSON reply."""
        return cls(
            status=status,
            body=json.dumps(data),
            headers={"Content-Type": "application/json", **(headers or {})},
            delay=delay,
        )


Handler = Callable[[RecordedRequest], Any]


def _as_reply(result: Any) -> Reply:
    if isinstance(result, Reply):
        return result
    if isinstance(result, dict | list):
        return Reply.json(result)
    if isinstance(result, str | bytes):
        return Reply(body=result, headers={"Content-Type": "text/plain; charset=utf-8"})
    if isinstance(result, int) and not isinstance(result, bool):
        return Reply(status=result)
    raise TypeError(f"handler returned {type(result).__name__}; return a Reply, dict, str or int")


class LocalHTTPServer:
    """A threaded HTTP/1.1 server with per-(method, path) handlers and a request log."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], Handler] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -------------------------------------------------------------
    def route(self, method: str, path: str, handler: Handler | None = None) -> Any:
        """Register ``handler`` for ``method path``; usable as a decorator without it."""

        def register(fn: Handler) -> Handler:
            with self._lock:
                self._routes[(method.upper(), path)] = fn
            return fn

        return register if handler is None else register(handler)

    def queue(self, method: str, path: str, replies: Iterable[Any]) -> None:
        """Answer successive requests with ``replies`` in order, then 500 when exhausted."""
        pending = list(replies)
        lock = threading.Lock()

        def handler(_: RecordedRequest) -> Any:
            with lock:
                if not pending:
                    return Reply.json({"error": f"no more queued replies for {path}"}, 500)
                return pending.pop(0)

        self.route(method, path, handler)

    # -- inspection ----------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests received for ``path``."""
        return [r for r in self.requests if r.path == path]

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> LocalHTTPServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def _serve(self) -> None:
                owner._dispatch(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

        class _Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # client went away (e.g. timed out): not a test failure

        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"LocalHTTPServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close the socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LocalHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling (server threads) -----------------------------------------
    def _dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=handler.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
        )
        with self._lock:
            self._requests.append(request)
            route = self._routes.get((request.method, request.path))
        if route is None:
            reply = Reply.json({"error": f"no route for {request.method} {request.path}"}, 404)
        else:
            try:
                reply = _as_reply(route(request))
            except Exception as exc:  # report, don't kill the server thread
                with self._lock:
                    self.errors.append(exc)
                reply = Reply.json({"error": f"handler raised {exc!r}"}, 500)
        if reply.delay > 0 and self._stopping.wait(reply.delay):
            return  # server stopping: drop the reply
        payload = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if request.method != "HEAD":
                handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to deliver


@pytest.fixture
def local_http_server() -> Iterator[LocalHTTPServer]:
    """A started :class:`LocalHTTPServer`, stopped after the test."""
    with LocalHTTPServer() as server:
        yield server
