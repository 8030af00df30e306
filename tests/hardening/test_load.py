"""The HTTP server under load: many clients are served, idle/slow ones make room, busy means 503.

Real servers on 127.0.0.1 and raw sockets. The machine is small and shared, so every
client wait is generous and the assertions count failures, never time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kag.server import HTTPServer, Request, Response, Service, create_app
from kag.server.http import EVICT_GRACE, RETRY_AFTER
from tests.helpers.serve import served_port

SEED = "kag.examples.seed"
CLIENT_TIMEOUT = 120.0  # generous: 2 shared cores, other processes running


def _request(path: str = "/health", *, close: bool = True) -> bytes:
    connection = "close" if close else "keep-alive"
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: {connection}\r\n\r\n".encode()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=CLIENT_TIMEOUT)
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.1 (\d{3}) ", lines[0])
    assert match, head[:200]
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), CLIENT_TIMEOUT)
    return int(match.group(1)), headers, body


async def _get(port: int, path: str = "/health") -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection (``Connection: close``)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), CLIENT_TIMEOUT)
    try:
        writer.write(_request(path))
        await writer.drain()
        return await _read_response(reader)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _idle_socket(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), CLIENT_TIMEOUT)


@contextlib.asynccontextmanager
async def _served(tmp_path: Path, **options: object) -> AsyncIterator[HTTPServer]:
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED)
    await service.load_example("seed")
    server = HTTPServer(create_app(service), port=0, **options)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()
        await service.aclose()


async def test_500_concurrent_clients_three_rounds_without_a_failure(tmp_path: Path) -> None:
    async with _served(tmp_path) as server:
        assert server.max_connections == 1024  # the default
        for _ in range(3):
            results = await asyncio.gather(*(_get(server.port) for _ in range(500)), return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException) or r[0] != 200]
            assert failures == [], failures[:5]
        assert server.shed == 0 and server.evicted == 0


async def test_health_answers_while_100_idle_sockets_are_open(tmp_path: Path) -> None:
    async with _served(tmp_path) as server:
        idle = [await _idle_socket(server.port) for _ in range(100)]
        try:
            status, _, body = await _get(server.port)
            assert status == 200 and b'"status":"ok"' in body
            assert server.evicted == 0  # room for all of them
        finally:
            for _, writer in idle:
                writer.close()


async def test_at_the_limit_idle_connections_make_room(tmp_path: Path) -> None:
    async with _served(tmp_path, max_connections=20) as server:
        idle = [await _idle_socket(server.port) for _ in range(100)]
        try:
            await asyncio.sleep(EVICT_GRACE + 0.2)  # the held sockets are now old enough to evict
            for _ in range(5):
                status, _, _ = await _get(server.port)
                assert status == 200
            assert server.evicted >= 1  # one made room; each served client then left its slot
            assert server.connections <= 20
        finally:
            for _, writer in idle:
                writer.close()


async def test_a_keep_alive_connection_is_evicted_before_a_stalled_request(tmp_path: Path) -> None:
    async with _served(tmp_path, max_connections=2) as server:
        slow_reader, slow_writer = await _idle_socket(server.port)
        slow_writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
        await slow_writer.drain()
        kept_reader, kept_writer = await _idle_socket(server.port)
        kept_writer.write(_request(close=False))
        await kept_writer.drain()
        status, headers, _ = await _read_response(kept_reader)
        assert status == 200 and headers["connection"] == "keep-alive"
        await asyncio.sleep(EVICT_GRACE + 0.2)
        assert (await _get(server.port))[0] == 200  # evicts the idle keep-alive connection
        assert await asyncio.wait_for(kept_reader.read(), CLIENT_TIMEOUT) == b""
        _, fresh_writer = await _idle_socket(server.port)  # never sends: stalled, but younger than the slow one
        await asyncio.sleep(EVICT_GRACE + 0.2)
        assert (await _get(server.port))[0] == 200  # the longest stalled client goes, with a 408
        status, headers, body = await _read_response(slow_reader)
        assert status == 408 and headers["connection"] == "close" and b"other clients" in body
        for writer in (slow_writer, kept_writer, fresh_writer):
            writer.close()
        assert server.evicted == 2


async def test_every_connection_busy_means_503_with_retry_after(tmp_path: Path) -> None:
    release = asyncio.Event()
    entered = 0

    async def handler(request: Request) -> Response:
        nonlocal entered
        entered += 1
        await release.wait()
        return Response.json(200, {"path": request.path})

    server = HTTPServer(handler, port=0, max_connections=3)
    await server.start()
    try:
        busy = [asyncio.create_task(_get(server.port, f"/slow{i}")) for i in range(3)]
        while entered < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(EVICT_GRACE + 0.2)  # busy connections are never evicted, however old
        shed = await asyncio.gather(*(_get(server.port) for _ in range(20)))
        for status, headers, body in shed:
            assert status == 503
            assert headers["retry-after"] == str(RETRY_AFTER)
            assert headers["connection"] == "close"
            assert b"Unavailable" in body
        assert server.shed == 20 and server.evicted == 0
        release.set()
        assert [r[0] for r in await asyncio.gather(*busy)] == [200, 200, 200]
        assert (await _get(server.port))[0] == 200  # room again
    finally:
        await server.close()


async def test_idle_keep_alive_connection_times_out(tmp_path: Path) -> None:
    async with _served(tmp_path, keep_alive_timeout=0.3) as server:
        reader, writer = await _idle_socket(server.port)
        writer.write(_request(close=False))
        await writer.drain()
        assert (await _read_response(reader))[0] == 200
        assert await asyncio.wait_for(reader.read(), CLIENT_TIMEOUT) == b""  # closed by the server
        writer.close()
        assert server.connections == 0


@pytest.mark.parametrize("option", ["--max-connections", "--idle-timeout"])
def test_serve_rejects_bad_limits(option: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kag.cli", "serve", option, "0", "--port", "0", "--kb", "memory://"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and option in proc.stderr


def test_serve_max_connections_and_idle_timeout(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("KAG_KB", None)
    args = ["serve", "--port", "0", "--kb", f"memory://{tmp_path / 'kb.json'}", "--schema", SEED]
    args += ["--max-connections", "3", "--idle-timeout", "60"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        port = served_port(proc)

        async def scenario(port: int) -> list[int]:
            idle = [await _idle_socket(port) for _ in range(3)]
            try:
                at_once = await _get(port)  # all three are too young to evict: 503
                await asyncio.sleep(EVICT_GRACE + 0.2)
                later = await _get(port)  # an idle one (60 s idle timeout: still open) makes room
                closed = await asyncio.wait_for(idle[0][0].read(), CLIENT_TIMEOUT)
                return [at_once[0], later[0], len(closed)]
            finally:
                for _, writer in idle:
                    writer.close()

        assert asyncio.run(scenario(port)) == [503, 200, 0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if shutdown hangs
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
