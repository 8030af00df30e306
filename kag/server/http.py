"""A small HTTP/1.1 server on ``asyncio.start_server`` (no dependencies).

It does the framing and the limits; what a request means is up to the handler
(:class:`kag.server.app.App`):

* request line + headers must fit in ``max_header_bytes`` (else **431**), at most
  ``max_headers`` header lines (else **431**);
* a body needs ``Content-Length`` (``POST``/``PUT``/``PATCH`` without it: **411**;
  ``Transfer-Encoding``: **411**, chunked bodies are not accepted); a body over
  ``max_body_bytes`` is refused with **413** before it is read;
* a request must arrive completely within ``request_timeout`` seconds of its first
  byte (else **408**: the slow-client timeout); an idle keep-alive connection is
  closed after ``keep_alive_timeout`` seconds;
* malformed request lines or headers: **400**; HTTP versions other than 1.0/1.1: **505**;
* at most ``max_connections`` connections at once (default 1024). When a new client
  arrives at the limit, the server first closes a connection that is not being served:
  the longest idle keep-alive connection, else the slowest client still sending its
  request (idle for at least ``EVICT_GRACE`` seconds). When every connection is busy,
  the new client is answered **503** with ``Retry-After`` (a response, never a dropped
  connection);
* ``Expect: 100-continue`` is honoured; keep-alive is the HTTP/1.1 default.

A handler that raises gets a **500** with a generic body; the exception is logged,
never sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from kag.errors import RequestRejected

__all__ = ["HTTPServer", "Handler", "Request", "Response"]

logger = logging.getLogger("kag.server")

DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_HEADER = 16 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_KEEP_ALIVE_TIMEOUT = 15.0
DEFAULT_REQUEST_TIMEOUT = 30.0
EVICT_GRACE = 1.0
"""Seconds a connection must have waited (idle, or stalled mid-request) before a new client may evict it."""
RETRY_AFTER = 1
"""The ``Retry-After`` seconds of a **503** sent because every connection is busy."""
MIN_SHED_ROOM = 256
"""How many 503 answers may be in progress at once, at least (else ``max_connections``); beyond, a reset."""
_IDLE, _READING, _BUSY = "idle", "reading", "busy"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@dataclass
class Request:
    """One parsed HTTP request (header names lower-cased; the last duplicate wins, except
    ``Content-Length`` whose duplicates must agree)."""

    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    version: str = "HTTP/1.1"
    client: str = ""

    def header(self, name: str, default: str = "") -> str:
        """The value of header ``name`` (case-insensitive), else ``default``."""
        return self.headers.get(name.lower(), default)


@dataclass
class Response:
    """A response: status, body bytes and headers (``Content-Length`` is added on write)."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, data: Any, headers: Mapping[str, str] | None = None) -> Response:
        """A JSON response (``application/json``, UTF-8)."""
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return cls(status, body, {"Content-Type": "application/json", **(headers or {})})

    @classmethod
    def error(cls, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> Response:
        """``{"error": {"type": kind, "message": message}}`` with ``status``."""
        return cls.json(status, {"error": {"type": kind, "message": message}}, headers)


Handler = Callable[[Request], Awaitable[Response]]
Refused = Callable[[str, int, float], None]
"""``(client, status, seconds)`` of a request the server refused before any handler saw it."""


@dataclass(eq=False)
class _Connection:
    """One client connection: what it is doing and since when (loop time)."""

    writer: asyncio.StreamWriter
    state: str = _IDLE
    since: float = 0.0
    served: int = 0
    evicted: bool = False

    def enter(self, state: str) -> None:
        self.state = state
        self.since = asyncio.get_running_loop().time()


class HTTPServer:
    """Serve ``handler`` over HTTP/1.1 on ``host:port`` (``port=0``: an ephemeral port).

    >>> server = HTTPServer(app, port=0)
    >>> await server.start(); print(server.port)
    >>> await server.serve_forever()   # or: async with server: ...
    """

    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        max_header_bytes: int = DEFAULT_MAX_HEADER,
        max_headers: int = 100,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        server_name: str = "kag",
        on_refused: Refused | None = None,
    ) -> None:
        """``on_refused(client, status, seconds)`` is told of every request the server answers itself,
        before any handler (400/408/413/414/431/505 and 503 when shedding); default: the
        handler's ``refused`` method when it has one, so an ``App`` logs and counts them too."""
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_header_bytes", max_header_bytes),
            ("max_headers", max_headers),
            ("max_connections", max_connections),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if request_timeout <= 0 or keep_alive_timeout <= 0:
            raise ValueError("request_timeout and keep_alive_timeout must be > 0 seconds.")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {port!r}.")
        self.handler = handler
        self.on_refused: Refused | None = on_refused if on_refused is not None else getattr(handler, "refused", None)
        self.host = host
        self.requested_port = port
        self.max_body_bytes = max_body_bytes
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self.request_timeout = float(request_timeout)
        self.keep_alive_timeout = float(keep_alive_timeout)
        self.max_connections = max_connections
        self.server_name = server_name
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.StreamWriter, _Connection] = {}
        self._shedding: set[asyncio.StreamWriter] = set()  # being answered 503 (not in _connections)
        self._tasks: set[asyncio.Task[Any]] = set()  # every connection's handler task, until it ends
        self._closing = False
        self.evicted = 0
        """How many idle or slow connections were closed to make room (since start)."""
        self.shed = 0
        """How many clients were answered 503 because every connection was busy (since start)."""

    # -- lifecycle ------------------------------------------------------------
    async def start(self) -> None:
        """Bind and start accepting connections."""
        if self._server is not None:
            return
        # a backlog as deep as the connection limit (the kernel caps it at somaxconn): a burst
        # of clients waits in the accept queue instead of timing out on SYN retries
        self._server = await asyncio.start_server(
            self._on_connection,
            self.host,
            self.requested_port,
            limit=self.max_header_bytes,
            backlog=max(128, self.max_connections),
        )

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not started.")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``http://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until cancelled or :meth:`close` is called."""
        await self.start()
        assert self._server is not None
        with contextlib.suppress(asyncio.CancelledError):
            await self._server.serve_forever()

    async def close(self, grace: float = 5.0) -> None:
        """Stop accepting, close idle connections, and give in-flight requests ``grace`` seconds."""
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in list(self._connections.values()):
            if conn.state != _BUSY:
                conn.writer.close()
        deadline = asyncio.get_running_loop().time() + grace
        while self._busy() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for writer in [*self._connections, *self._shedding]:
            writer.close()
        # let every connection task finish (they see EOF now), so none is cancelled mid-close
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), timeout=grace)

    def _busy(self) -> bool:
        return any(conn.state == _BUSY for conn in self._connections.values())

    @property
    def connections(self) -> int:
        """How many client connections are open now (503s in progress excluded)."""
        return len(self._connections)

    async def __aenter__(self) -> HTTPServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connections ----------------------------------------------------------
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else ""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._closing:
            self._tell_refused(client, 503, asyncio.get_running_loop().time())
            await self._shed(reader, writer, "the server is shutting down")
            return
        if len(self._connections) >= self.max_connections and not self._evict_one():
            self._tell_refused(client, 503, asyncio.get_running_loop().time())
            await self._shed(reader, writer, "the server is busy; retry shortly")
            return
        conn = _Connection(writer)
        conn.enter(_IDLE)
        self._connections[writer] = conn
        try:
            while not self._closing and not conn.evicted:
                conn.enter(_IDLE)
                try:
                    request = await self._read_request(reader, writer, client, conn)
                except RequestRejected as rej:
                    if conn.evicted:
                        break
                    self._tell_refused(client, rej.status, conn.since)
                    error = Response.error(rej.status, _kind(rej.status), rej.message, rej.headers)
                    await self._send(writer, error, keep_alive=False)
                    if rej.status == 413:  # read what the client is still sending, so it sees the 413
                        await _discard(reader, 8 * self.max_body_bytes, timeout=2.0)
                    break
                if request is None or conn.evicted:
                    break
                conn.enter(_BUSY)
                response = await self._dispatch(request)
                keep_alive = _wants_keep_alive(request) and not self._closing
                await self._send(writer, response, keep_alive, head=request.method == "HEAD")
                conn.served += 1
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the loop is shutting down
            pass
        finally:
            self._connections.pop(writer, None)
            await _close(writer)

    def _tell_refused(self, client: str, status: int, since: float) -> None:
        if self.on_refused is None:
            return
        try:
            self.on_refused(client, status, max(0.0, asyncio.get_running_loop().time() - since))
        except Exception:  # a logging hook never breaks serving
            logger.exception("on_refused hook failed")

    def _evict_one(self) -> bool:
        """Close the connection that is cheapest to lose, to make room; False if none may go.

        Idle keep-alive connections go first (longest idle first), then clients that
        stalled mid-request or never sent one (longest stalled first); a connection
        younger than ``EVICT_GRACE`` in its state, or one being served, is never evicted.
        """
        now = asyncio.get_running_loop().time()
        best: _Connection | None = None
        best_key: tuple[int, float] | None = None
        for conn in self._connections.values():
            if conn.state == _BUSY or conn.evicted or now - conn.since < EVICT_GRACE:
                continue
            # served idle connections are plain keep-alives: cheaper to close than a stalled request
            key = (0 if conn.state == _IDLE and conn.served else 1, conn.since)
            if best_key is None or key < best_key:
                best, best_key = conn, key
        if best is None:
            return False
        best.evicted = True
        self._connections.pop(best.writer, None)
        self.evicted += 1
        if best.state == _READING:
            # the client is mid-request: tell it why before closing
            best.writer.write(_head_bytes(408, "closed to serve other clients", self.server_name))
        best.writer.close()
        return True

    async def _shed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: str) -> None:
        """Answer 503 + ``Retry-After`` and close without a reset (the request is read and dropped)."""
        self.shed += 1
        if len(self._shedding) >= max(self.max_connections, MIN_SHED_ROOM):  # a flood: no room even to answer
            writer.transport.abort()
            return
        self._shedding.add(writer)
        try:
            response = Response.error(503, _kind(503), message, {"Retry-After": str(RETRY_AFTER)})
            await self._send(writer, response, keep_alive=False)
            with contextlib.suppress(Exception):
                if writer.can_write_eof():
                    writer.write_eof()
            # drain what the client sends until it closes: closing with unread data would reset
            # the connection and could destroy the 503 before the client reads it
            await _discard(reader, 4 * self.max_header_bytes + self.max_body_bytes, timeout=2.0)
        finally:
            self._shedding.discard(writer)
            await _close(writer)

    async def _dispatch(self, request: Request) -> Response:
        try:
            return await self.handler(request)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("unhandled error in %s %s", request.method, request.path)
            return Response.error(500, "InternalServerError", "internal server error")

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str, conn: _Connection
    ) -> Request | None:
        loop = asyncio.get_running_loop()
        try:
            first = await asyncio.wait_for(reader.read(1), timeout=self.keep_alive_timeout)
        except TimeoutError:
            return None  # idle keep-alive connection: close quietly
        if not first or conn.evicted:
            return None
        conn.enter(_READING)
        deadline = loop.time() + self.request_timeout
        try:
            rest = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=self.request_timeout)
        except TimeoutError:
            raise RequestRejected(408, "the request headers did not arrive in time") from None
        except asyncio.LimitOverrunError:
            raise RequestRejected(431, f"request headers exceed {self.max_header_bytes} bytes") from None
        except asyncio.IncompleteReadError as exc:
            if exc.partial and len(first) + len(exc.partial) > self.max_header_bytes:
                raise RequestRejected(431, f"request headers exceed {self.max_header_bytes} bytes") from None
            return None  # the peer went away mid-request
        head = first + rest
        if len(head) > self.max_header_bytes:
            raise RequestRejected(431, f"request headers exceed {self.max_header_bytes} bytes")
        request = self._parse_head(head, client)
        length = self._content_length(request)
        if length > self.max_body_bytes:
            raise RequestRejected(
                413, f"the request body ({length} bytes) exceeds the limit of {self.max_body_bytes} bytes"
            )
        if length and request.header("expect").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        if length:
            try:
                request.body = await asyncio.wait_for(
                    reader.readexactly(length), timeout=max(0.0, deadline - loop.time())
                )
            except TimeoutError:
                raise RequestRejected(408, "the request body did not arrive in time") from None
        return request

    def _parse_head(self, head: bytes, client: str) -> Request:
        try:
            text = head.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            raise RequestRejected(400, "undecodable request head") from None
        lines = text[:-4].split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0] or not set(parts[0]) <= _TOKEN_CHARS:
            raise RequestRejected(400, "malformed request line")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            if version.startswith("HTTP/"):
                raise RequestRejected(505, f"{version} is not supported; use HTTP/1.1")
            raise RequestRejected(400, "malformed request line")
        if target.startswith(("http://", "https://")):
            split = urlsplit(target)
            path, query = split.path or "/", split.query
        elif target.startswith("/"):
            path, _, query = target.partition("?")
            path = path.split("#", 1)[0]
        elif target == "*" and method == "OPTIONS":
            path, query = "*", ""
        else:
            raise RequestRejected(400, "malformed request target")
        if len(lines) - 1 > self.max_headers:
            raise RequestRejected(431, f"more than {self.max_headers} header fields")
        headers: dict[str, str] = {}
        lengths: set[str] = set()
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or not set(name) <= _TOKEN_CHARS:
                raise RequestRejected(400, "malformed header field")
            key, value = name.lower(), value.strip(" \t")
            if key == "content-length":
                lengths.update(v.strip() for v in value.split(","))
            headers[key] = value
        if len(lengths) > 1:
            raise RequestRejected(400, "conflicting Content-Length headers")
        if version == "HTTP/1.1" and "host" not in headers:
            raise RequestRejected(400, "an HTTP/1.1 request needs a Host header")
        return Request(method=method, path=path, query=query, headers=headers, version=version, client=client)

    def _content_length(self, request: Request) -> int:
        if "transfer-encoding" in request.headers:
            raise RequestRejected(411, "Transfer-Encoding is not supported: send the body with a Content-Length")
        raw = request.headers.get("content-length")
        if raw is None:
            if request.method in _BODY_METHODS:
                raise RequestRejected(411, f"{request.method} needs a Content-Length header")
            return 0
        # ASCII digits only: str.isdigit() also accepts '²' and other digits int() refuses
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
            raise RequestRejected(400, "invalid Content-Length")
        return int(raw)

    async def _send(
        self, writer: asyncio.StreamWriter, response: Response, keep_alive: bool, head: bool = False
    ) -> None:
        if writer.is_closing():
            return
        status = response.status
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        headers = {
            "Server": self.server_name,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            **response.headers,
        }
        if status not in (204, 304) and not 100 <= status < 200:
            headers["Content-Length"] = str(len(response.body))
        headers["Connection"] = "keep-alive" if keep_alive else "close"
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not head and status not in (204, 304):
            payload += response.body
        try:
            writer.write(payload)
            await writer.drain()
        except ConnectionError:
            pass


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


_KINDS = {
    400: "BadRequest",
    408: "RequestTimeout",
    411: "LengthRequired",
    413: "PayloadTooLarge",
    431: "RequestHeaderFieldsTooLarge",
    503: "Unavailable",
    505: "HTTPVersionNotSupported",
}


def _head_bytes(status: int, message: str, server_name: str) -> bytes:
    body = json.dumps({"error": {"type": _kind(status), "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {_reason(status)}\r\nServer: {server_name}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _kind(status: int) -> str:
    return _KINDS.get(status) or _reason(status).replace(" ", "").replace("-", "")


async def _discard(reader: asyncio.StreamReader, limit: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = 0
    with contextlib.suppress(Exception):
        while seen < limit:
            wait = min(0.25, deadline - loop.time())  # stop once the client pauses
            if wait <= 0:
                break
            chunk = await asyncio.wait_for(reader.read(65536), timeout=wait)
            if not chunk:
                break
            seen += len(chunk)


def _wants_keep_alive(request: Request) -> bool:
    tokens = {t.strip().lower() for t in request.header("connection").split(",")}
    if request.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), timeout=1.0)
