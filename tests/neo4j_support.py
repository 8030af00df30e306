"""Connecting tests to the real Neo4j server that `make test` starts.

Outside `make test` (no KAG_REQUIRE_NEO4J, not CI) an unreachable server skips the
Neo4j tests with a hint; under `make test` or CI=true it fails them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
# taken when the test session starts: the tests themselves run with NEO4J_* and KAG_KB removed
# from the environment (tests/conftest.py), so "no store named" means memory:// in every test
SESSION_ENV = {k: v for k, v in os.environ.items() if k.startswith("NEO4J_")}
SCRIPT = ROOT / "deploy" / "neo4j" / "neo4j.sh"


def server_dir() -> Path:
    """The directory of the server deploy/neo4j/neo4j.sh runs for this session ($KAG_NEO4J_DIR, else .neo4j)."""
    return Path(os.environ.get("KAG_NEO4J_DIR") or ROOT / ".neo4j")


def neo4j_settings() -> dict[str, str]:
    env = dict(SESSION_ENV)
    env_file = server_dir() / "env"
    if "NEO4J_URI" not in env and env_file.exists():
        for line in env_file.read_text().splitlines():
            line = line.removeprefix("export ").strip()
            if "=" in line:
                key, value = line.split("=", 1)
                env.setdefault(key, value.strip("'\""))
    return {
        "uri": env.get("NEO4J_URI", "neo4j://127.0.0.1:7687"),
        "user": env.get("NEO4J_USERNAME") or env.get("NEO4J_USER", "neo4j"),
        "password": env.get("NEO4J_PASSWORD", "kag-test-password"),
        "database": env.get("NEO4J_DATABASE", "neo4j"),
    }


def required() -> bool:
    return os.environ.get("KAG_REQUIRE_NEO4J") == "1" or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def check_reachable(settings: dict[str, str]) -> None:
    from neo4j import AsyncGraphDatabase

    async def ping() -> None:
        driver = AsyncGraphDatabase.driver(settings["uri"], auth=(settings["user"], settings["password"]))
        try:
            await driver.verify_connectivity()
        finally:
            await driver.close()

    try:
        asyncio.run(ping())
    except Exception as exc:  # any failure means "no usable server"
        message = f"Neo4j at {settings['uri']} is not usable ({type(exc).__name__}: {exc}); run `make neo4j-start`."
        if required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def sync_session() -> Iterator[Any]:
    """A blocking driver session on the test server (for module fixtures); skips or fails when unreachable."""
    from neo4j import GraphDatabase

    config = neo4j_settings()
    check_reachable(config)
    driver = GraphDatabase.driver(config["uri"], auth=(config["user"], config["password"]))
    try:
        with driver.session(database=config["database"]) as s:
            yield s
    finally:
        driver.close()


# -- killing and restarting the session's server (the outage tests) --------------------------------


def server_pid() -> int | None:
    """The pid of the running server started by deploy/neo4j/neo4j.sh (``None``: not running)."""
    pid_file = server_dir() / "home" / "run" / "neo4j.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def kill_server() -> float:
    """SIGKILL the server (a crash); returns the monotonic time of the kill."""
    pid = server_pid()
    if pid is None:
        pytest.fail(f"no server started by deploy/neo4j/neo4j.sh in {server_dir()} (make test)", pytrace=False)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    for _ in range(100):  # reaped by its parent shell's init; gone from the process table
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.05)
    return killed


def start_server(attempts: int = 3) -> str:
    """Start the session's server again with the project's script (same directory and Bolt port),
    trying ``attempts`` times: the tests after an outage test need it whatever happened."""
    port = urlsplit(neo4j_settings()["uri"]).port or 7687
    env = {**os.environ, "KAG_NEO4J_DIR": str(server_dir()), "KAG_NEO4J_BOLT_PORT": str(port)}
    output = ""
    for _ in range(attempts):
        done = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, env=env, check=False)
        output += done.stdout + done.stderr[-3000:]
        if done.returncode == 0:
            return output
    raise AssertionError(f"deploy/neo4j/neo4j.sh start failed {attempts} times:\n{output}")
