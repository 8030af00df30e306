"""HTTP traffic for outage tests: readers, a writer and a /health poller, every answer timed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

__all__ = ["Traffic", "summary"]


class Traffic:
    """Readers, a writer and a /health poller against one server, each answer timed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.log: list[tuple[str, float, float, int, str]] = []  # route, start, end, status, retry-after
        self.acked: list[str] = []
        self.errors: list[tuple[float, str, str]] = []  # start, route, the 503's message (its head)
        self.stop = asyncio.Event()

    async def loop(self, route: str, body: Any = None, pause: float = 0.02) -> None:
        """Send ``route`` until :attr:`stop`; a status other than 200 or 503 fails the loop (status 0: no answer
        within the client's 120 s)."""
        async with httpx.AsyncClient(base_url=self.url, timeout=120) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                started = time.monotonic()
                name = f"W{id(self)}-{n}"
                try:
                    if route == "/health":
                        response = await client.get(route)
                    elif route == "/ingest":
                        response = await client.post(route, json={"entities": [{"label": "Country", "name": name}]})
                    else:
                        response = await client.post(route, json=body)
                except httpx.TimeoutException:
                    self.log.append((route, started, time.monotonic(), 0, ""))
                    continue
                status = response.status_code
                if status == 503:
                    self.errors.append((started, route, response.text[:240]))
                if route == "/ingest" and status == 200:
                    self.acked.append(name)
                self.log.append((route, started, time.monotonic(), status, response.headers.get("retry-after", "")))
                if status not in (200, 503):
                    raise AssertionError(f"{route} answered {status}: {response.text[:300]}")
                await asyncio.sleep(pause if status == 200 else 0.05)

    def during(self, start: float, end: float) -> list[tuple[str, float, float, int, str]]:
        """The requests sent between ``start`` and ``end`` (monotonic seconds)."""
        return [e for e in self.log if start <= e[1] < end]


def summary(entries: list[tuple[str, float, float, int, str]]) -> tuple[float, float, float]:
    """p50, p99 and max latency of ``entries``, in seconds."""
    latencies = sorted(e[2] - e[1] for e in entries)
    return latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], latencies[-1]
