"""A real TCP proxy on 127.0.0.1 for outage tests: cut it to make a server vanish, restore it to bring it back.

Usage::

    with TCPProxy(7687) as proxy:        # forwards 127.0.0.1:proxy.port -> 127.0.0.1:7687
        uri = f"bolt://127.0.0.1:{proxy.port}"
        proxy.cut()                       # every connection reset, new ones refused (a crash, to a client)
        proxy.restore()                   # listening again on the same port

Use ``bolt://`` through it: with ``neo4j://`` the driver reads the server's advertised address
from its routing table and connects there directly, around the proxy. :class:`SilentServer`
accepts connections and never answers (a hung server, or the wrong service on the port).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["SilentServer", "TCPProxy"]


class TCPProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target_port`` from a daemon thread's event loop."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TCPProxy:
        self._thread.start()
        self.restore()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cut()

        async def settle() -> None:  # the pipes of the reset connections end on their own
            current = asyncio.current_task()
            for task in [t for t in asyncio.all_tasks() if t is not current]:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

        self._call(settle())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)  # type: ignore[arg-type]

    def restore(self) -> None:
        """Listen (again, on the same port once it has one)."""

        async def listen() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)
            self.port = self._server.sockets[0].getsockname()[1]

        self._call(listen())

    def cut(self) -> None:
        """Stop listening and reset every open connection, both ways."""

        async def close() -> None:
            if self._server is not None:
                self._server.close()
                self._server = None
            for writer in list(self._writers):
                writer.transport.abort()  # RST: the client sees the connection die, as with a killed server
            self._writers.clear()

        self._call(close())

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.discard(writer)
        self._writers.discard(up_writer)


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port = self._socket.getsockname()[1]
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._socket.accept()
                self._held.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._socket.close()
        for conn in self._held:
            conn.close()
