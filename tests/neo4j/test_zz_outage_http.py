"""Neo4j killed under traffic through ``kag serve``: fast typed 503s, /health degraded, service resumes, no write lost.

Six readers (/search, /triplet_search), a writer (/ingest of one new entity per request) and a
/health poller run against a real ``kag serve`` process while the real server is killed with
SIGKILL and restarted by the project's script. Runs last among the Neo4j tests (it sorts after
test_zz_outage.py) and leaves the server running whatever happens.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.helpers.traffic import Traffic, summary
from tests.neo4j_support import ROOT, kill_server, server_pid, start_server

# a restart of the killed server can take minutes on a loaded machine (neo4j.sh waits while it makes progress)
pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(900)]


@pytest.fixture
def serve(neo4j_config: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A ``kag serve`` process over a fresh namespace of the test server: (its URL, the namespace)."""
    ns = f"t-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "NEO4J_USERNAME": neo4j_config["user"],
        "NEO4J_PASSWORD": neo4j_config["password"],
        "NEO4J_DATABASE": neo4j_config["database"],
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "-m", "kag.cli", "serve", "--kb", neo4j_config["uri"], "--namespace", ns]
    command += ["--example", "seed", "--port", "0", "--no-access-log", "--write-timeout", "30"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    output: list[str] = []
    try:
        assert proc.stdout is not None
        port = None
        for line in proc.stdout:
            output.append(line)
            if line.startswith("port "):
                port = int(line.split()[1])
                break
        assert port, f"kag serve did not start: {''.join(output)[-3000:]}"
        # keep reading what it logs (an outage is logged): a full pipe would stop the server
        drain = threading.Thread(target=lambda: output.extend(proc.stdout or ()), daemon=True)
        drain.start()
        yield f"http://127.0.0.1:{port}", ns
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bolt_answers_after(config: dict[str, str], since: float, stop: threading.Event) -> list[float]:
    """Poll the server with a driver of its own from a thread; the list gets the time it first answers."""
    from neo4j import GraphDatabase

    found: list[float] = []

    def poll() -> None:
        while not stop.is_set() and not found:
            try:
                with (
                    GraphDatabase.driver(
                        config["uri"],
                        auth=(config["user"], config["password"]),
                        connection_timeout=1,
                        connection_acquisition_timeout=1,
                    ) as driver,
                    driver.session(database=config["database"]) as session,
                ):
                    session.run("RETURN 1").consume()  # one try (execute_query would retry for 30 s)
                if time.monotonic() > since:
                    found.append(time.monotonic())
            except Exception:  # not up yet
                time.sleep(0.1)

    threading.Thread(target=poll, daemon=True).start()
    return found


async def test_neo4j_killed_under_http_traffic(serve: tuple[str, str], neo4j_config: dict[str, str]) -> None:
    if server_pid() is None:
        pytest.fail("this test needs the server started by deploy/neo4j/neo4j.sh (make test)", pytrace=False)
    url, ns = serve
    traffic = Traffic(url)
    search = {"query": "capital of France", "k": 3}
    triplets = {"subject_label": "City", "relation_label": "IsCapitalOf", "k": 3}
    tasks = [
        *(asyncio.create_task(traffic.loop("/search", search)) for _ in range(3)),
        *(asyncio.create_task(traffic.loop("/triplet_search", triplets)) for _ in range(3)),
        asyncio.create_task(traffic.loop("/ingest", pause=0.05)),
        asyncio.create_task(traffic.loop("/health", pause=0.1)),
    ]
    stop = threading.Event()
    killed = time.monotonic()
    answered: list[float] = []
    resumed = None
    try:
        await asyncio.sleep(2.0)
        killed = await asyncio.to_thread(kill_server)  # in a thread: the traffic keeps running while it waits
        answered = bolt_answers_after(neo4j_config, killed + 0.5, stop)
        await asyncio.to_thread(start_server)
        for _ in range(1200):  # the restart returned; wait for the first search that works again
            await asyncio.sleep(0.1)
            if answered:
                # the first search answered (200) after the server answered again, whenever it was sent
                ok = [e for e in traffic.log if e[0] == "/search" and e[2] > answered[0] and e[3] == 200]
                if ok:
                    resumed = min(e[2] for e in ok)
                    break
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        traffic.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        if server_pid() is None:  # the tests after this one need it, whatever happened
            await asyncio.to_thread(start_server)
    for task in tasks:
        task.result()  # a reader that saw anything but 200 or 503 fails the test
    assert answered, "the restarted server never answered"
    back = answered[0]
    during = traffic.during(killed + 1.0, back - 0.5)
    failed = [e for e in during if e[3] == 503]
    # typed 503s with Retry-After; a search answered from what kag holds in memory may still be a 200
    assert during and all(e[3] == 200 or (e[3] == 503 and e[4]) for e in during), {(e[0], e[3]) for e in during}
    assert len(failed) > len(during) / 2
    p50, p99, worst = summary(during)
    in_flight = [e for e in traffic.log if e[1] < killed < e[2]]
    degraded = [e[2] for e in traffic.log if e[0] == "/health" and e[1] >= killed and e[3] == 503]
    back_after = f"{resumed - back:.2f} s" if resumed is not None else "never"
    print(
        f"\nNeo4j killed: {len(during)} requests during the outage ({back - killed:.1f} s), {len(failed)} 503: "
        f"p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms; caught by the kill: "
        f"{max((e[2] - e[1] for e in in_flight), default=0):.2f} s at most; /health degraded "
        f"{min(degraded) - killed:.2f} s after the kill; resumed {back_after} after Bolt answered; "
        f"{len(traffic.acked)} writes acknowledged"
    )
    slow = [(e[0], round(e[1] - killed, 1), round(e[2] - e[1], 1), e[3]) for e in traffic.log if e[2] - e[1] > 5.0]
    print("slower than 5 s (route, sent after the kill, took, status):", slow[:20])
    # Generous bounds: on a loaded 2-core machine a restarted Neo4j takes minutes and is slow at first,
    # and a request sent while it starts waits for it (up to connection_timeout, 5 s, for a connection).
    # Goals (see docs/guides/serving.md): p99 <= 5 s, /health degraded within 1 s, back within 2 s.
    assert p99 < 5.0, (p50, p99, worst)
    assert all(e[3] != 0 for e in traffic.log)  # every request answered (none hung past the client's 120 s)
    assert all(e[2] - e[1] < 30.0 for e in in_flight)  # before: until the server was back (39-42 s)
    assert degraded and min(degraded) - killed < 5.0
    assert resumed is not None, "no search worked again after the restart"
    # no acknowledged write lost
    from neo4j import GraphDatabase

    with GraphDatabase.driver(neo4j_config["uri"], auth=(neo4j_config["user"], neo4j_config["password"])) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (n:Country {kag_ns: $ns}) RETURN n.name AS name", ns=ns, database_=neo4j_config["database"]
        )
        with driver.session(database=neo4j_config["database"]) as session:  # IN TRANSACTIONS: auto-commit
            session.run(
                "MATCH (n {kag_ns: $ns}) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS", ns=ns
            ).consume()
    stored = {r["name"] for r in records}
    lost = [name for name in traffic.acked if name not in stored]
    assert traffic.acked and not lost, f"{len(lost)} acknowledged writes lost: {lost[:5]}"
