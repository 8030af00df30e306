"""Fixtures for the RAG tests: local HTTP servers (127.0.0.1 only), PDFs, a corpus."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# ------------------------------------------------------------------ a raw streaming server

StreamBehaviour = Callable[[BaseHTTPRequestHandler], None]


def _infinite_chunked(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    block = b"a" * 65536
    for _ in range(2000):  # hard cap (~128 MiB) in case a client never stops reading
        h.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
    h.wfile.write(b"0\r\n\r\n")


def _drip(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(1000):
        h.wfile.write(b"x")
        h.wfile.flush()
        time.sleep(0.05)


def _lying_length(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", str(10**12))
    h.end_headers()
    h.wfile.write(b"tiny")


_BOMB = gzip.compress(b"\0" * 20_000_000, compresslevel=9)


def _gzip_bomb(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(_BOMB)))
    h.end_headers()
    h.wfile.write(_BOMB)


STREAM_BEHAVIOURS: dict[str, StreamBehaviour] = {
    "/infinite": _infinite_chunked,
    "/drip": _drip,
    "/lying-length": _lying_length,
    "/gzip-bomb": _gzip_bomb,
}


class StreamingServer:
    """Serves the misbehaving bodies of ``STREAM_BEHAVIOURS`` on 127.0.0.1."""

    def __init__(self) -> None:
        behaviours = STREAM_BEHAVIOURS
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                hits.append(self.path)
                behaviour = behaviours.get(self.path)
                try:
                    if behaviour is None:
                        self.send_error(404)
                    else:
                        behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: expected

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def streaming_server() -> Iterator[StreamingServer]:
    srv = StreamingServer()
    try:
        yield srv
    finally:
        srv.stop()


# ------------------------------------------------------------------ PDFs


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A small valid PDF with one line of Helvetica text per page ("" = blank page)."""
    objects: list[bytes] = []
    n = len(pages)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for i, text in enumerate(pages):
        content_id = 4 + 2 * i
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {content_id} 0 R >>"
            ).encode()
        )
        stream = (f"BT /F1 12 Tf 72 720 Td ({_pdf_escape(text)}) Tj ET" if text else "").encode()
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info_id = None
    if title:
        objects.append(f"<< /Title ({_pdf_escape(title)}) >>".encode())
        info_id = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    info = f" /Info {info_id} 0 R" if info_id else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\n".encode()
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


@pytest.fixture
def pdf_bytes() -> Callable[..., bytes]:
    return make_pdf


# ------------------------------------------------------------------ corpus


@pytest.fixture(scope="session")
def topics() -> dict[str, str]:
    """The Python reference topics shipped with the stdlib (a real ~465 kB corpus)."""
    from pydoc_data.topics import topics as corpus

    return dict(corpus)
