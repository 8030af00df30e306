"""Connecting tests to the real Neo4j server that `make test` starts.

Outside `make test` (no KAG_REQUIRE_NEO4J, not CI) an unreachable server skips the
Neo4j tests with a hint; under `make test` or CI=true it fails them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# taken when the test session starts: the tests themselves run with NEO4J_* and KAG_KB removed
# from the environment (tests/conftest.py), so "no store named" means memory:// in every test
SESSION_ENV = {k: v for k, v in os.environ.items() if k.startswith("NEO4J_")}


def neo4j_settings() -> dict[str, str]:
    env = dict(SESSION_ENV)
    env_file = ROOT / ".neo4j" / "env"
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
