"""The compose deployment: invariants of docker-compose.yml and the Dockerfile, and its start-up path.

Docker does not run here. The file invariants are read from the parsed YAML (with compose's
``${VAR:-default}`` / ``${VAR:?error}`` interpolation done as compose does it); the start-up
path is the ``kag`` service's own command and environment, run as a subprocess against the
real Neo4j server, with its healthcheck command executed for real.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from kag.server import HTTPServer, Service, create_app
from kag.server.auth import hash_key
from tests.helpers.serve import served_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SEED = "kag.examples.seed"

_VARIABLE = re.compile(r"\$(?:\$|\{(?P<braced>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>.*))?", re.S)


class Refused(Exception):
    """Compose would refuse to start: a ``${VAR:?message}`` variable is unset or empty."""


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution of one string."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group("plain"):
            return env.get(match.group("plain"), "")
        braced = _BRACED.fullmatch(match.group("braced"))
        assert braced, f"bad substitution {match.group(0)!r}"
        name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
        value = env.get(name)
        missing = value is None or (op is not None and op.startswith(":") and value == "")
        if op in ("-", ":-") and missing:
            return interpolate(arg, env)
        if op in ("?", ":?") and missing:
            raise Refused(f"{name}: {arg}")
        return value or ""

    return _VARIABLE.sub(one, text)


def resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    return node


def raw_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def compose(env: Mapping[str, str]) -> dict[str, Any]:
    resolved = resolve(raw_compose(), env)
    assert isinstance(resolved, dict)
    return resolved


def required_env() -> dict[str, str]:
    return {"NEO4J_PASSWORD": "pw-" + secrets.token_hex(8), "KAG_API_KEYS": f"{secrets.token_urlsafe(24)}:read"}


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)


# --------------------------------------------------------------------------- docker-compose.yml


def test_compose_refuses_to_start_without_secrets() -> None:
    env = required_env()
    config = compose(env)
    assert config["services"]["kag"]["environment"]["NEO4J_PASSWORD"] == env["NEO4J_PASSWORD"]
    assert config["services"]["neo4j"]["environment"]["NEO4J_AUTH"] == f"neo4j/{env['NEO4J_PASSWORD']}"
    assert config["services"]["kag"]["environment"]["KAG_API_KEYS"] == env["KAG_API_KEYS"]
    for name in env:
        for value in ("", None):
            partial = {k: v for k, v in env.items() if k != name}
            if value is not None:
                partial[name] = value
            with pytest.raises(Refused, match=name):
                compose(partial)
    # no secret has a default anywhere: every reference to a password or key variable is ${VAR:?...}
    text = COMPOSE.read_text(encoding="utf-8")
    # ($${...} is the container shell's own variable, not compose's)
    references = re.findall(r"(?<!\$)\$\{([A-Z0-9_]*(?:PASSWORD|KEY|AUTH|SECRET|TOKEN)[A-Z0-9_]*)(:?[-?]?)", text)
    assert {name for name, _ in references} == {"NEO4J_PASSWORD", "KAG_API_KEYS"}
    assert all(op == ":?" for _, op in references), references
    assert "kag-test-password" not in text


def test_kag_serves_the_neo4j_graph_and_waits_for_it() -> None:
    config = compose(required_env())
    kag, neo4j = config["services"]["kag"], config["services"]["neo4j"]
    uri = kag["environment"]["NEO4J_URI"]
    assert re.fullmatch(r"(bolt|neo4j)://neo4j:7687", uri)  # the neo4j service, by its compose name
    assert "NEO4J_server_bolt_listen__address" in neo4j["environment"]
    assert kag["environment"]["NEO4J_USERNAME"] == neo4j["environment"]["NEO4J_AUTH"].split("/", 1)[0]
    assert kag["depends_on"]["neo4j"]["condition"] == "service_healthy"
    assert "KAG_KB" not in kag["environment"]  # NEO4J_URI names the store (kag.graph.factory.default_uri)
    command = kag["command"]
    assert command[:2] == ["kag", "serve"] and "--insecure-no-auth" not in command
    assert "--kb" not in command


def test_ports_are_published_on_loopback_unless_configured() -> None:
    env = required_env()
    published = {
        name: service.get("ports", []) for name, service in compose(env)["services"].items() if service.get("ports")
    }
    assert set(published) == {"kag", "neo4j"}
    for ports in published.values():
        for port in ports:
            host, _, rest = str(port).partition(":")
            assert host == "127.0.0.1" and rest.count(":") == 1, port
    assert published["kag"] == ["127.0.0.1:8000:8000"]
    moved = compose({**env, "KAG_BIND": "0.0.0.0", "KAG_PORT": "9000"})["services"]["kag"]["ports"]
    assert moved == ["0.0.0.0:9000:8000"]


def test_kag_container_is_locked_down() -> None:
    kag = compose(required_env())["services"]["kag"]
    assert kag["read_only"] is True and kag["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in kag["security_opt"]
    assert kag.get("user") in (None, "10001:10001")  # the image's non-root user (see the Dockerfile test)
    assert kag.get("privileged") is not True and kag.get("network_mode") != "host"


def healthcheck_command(port: int) -> list[str]:
    """The kag service's healthcheck, aimed at ``port`` instead of the container's 8000."""
    test = compose(required_env())["services"]["kag"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python", test
    assert "/health" in test[-1] and "127.0.0.1:8000" in test[-1]
    return [sys.executable, *test[2:-1], test[-1].replace("127.0.0.1:8000", f"127.0.0.1:{port}")]


def test_dockerfile_runs_as_a_non_root_user_and_checks_health() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ").splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    users = [line.split(None, 1)[1] for line in instructions if line.upper().startswith("USER ")]
    assert users, "the Dockerfile never switches away from root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and (not user.isdigit() or int(user) >= 1000)
    last_user = max(i for i, line in enumerate(instructions) if line.upper().startswith("USER "))
    cmd = next(i for i, line in enumerate(instructions) if line.upper().startswith("CMD "))
    assert last_user < cmd
    assert not any(line.upper().startswith("RUN ") for line in instructions[last_user:])
    install = next(line for line in instructions if line.startswith("RUN pip install"))
    assert "metrics" in shlex.split(install)[3]  # /metrics works in the image
    health = next(line for line in instructions if line.upper().startswith("HEALTHCHECK "))
    assert "/health" in health
    dockerignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert dockerignore[[line.strip() for line in dockerignore].index("*")] == "*"  # an allow-list
    assert "!.env" not in dockerignore


# --------------------------------------------------------------------------- the start-up path


def _compose_process_env(settings: Mapping[str, str], keys: str | None) -> dict[str, str]:
    """The kag container's environment from the compose file, pointed at the real Neo4j server."""
    env = {"NEO4J_PASSWORD": settings["password"], "KAG_API_KEYS": keys or "unused-for-interpolation-0:read"}
    service = compose(env)["services"]["kag"]
    container = {k: str(v) for k, v in service["environment"].items()}
    # the only change: "neo4j" is the compose network's name of the server; here it is the test server
    assert container["NEO4J_URI"] == "bolt://neo4j:7687"
    container["NEO4J_URI"] = settings["uri"]
    container["NEO4J_USERNAME"] = settings["user"]
    container["NEO4J_DATABASE"] = settings["database"]
    if keys is None:
        del container["KAG_API_KEYS"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NEO4J_", "KAG_"))}
    return {**base, **container, "PYTHONUNBUFFERED": "1"}


def _compose_command() -> list[str]:
    command = list(compose(required_env())["services"]["kag"]["command"])
    assert command[0] == "kag" and command[command.index("--port") + 1] == "8000"
    command[command.index("--port") + 1] = "0"  # any free port, printed as "port N"
    return [sys.executable, "-m", "kag.cli", *command[1:], "--schema", SEED]


@pytest.mark.neo4j
def test_compose_start_up_path_against_neo4j(neo4j_config: dict[str, str]) -> None:
    read, ingest, admin = (secrets.token_urlsafe(24) for _ in range(3))
    keys = f"{read}:read {hash_key(ingest)}:ingest {admin}:admin"
    proc = subprocess.Popen(
        _compose_command(),
        env=_compose_process_env(neo4j_config, keys),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = served_port(proc)
        # as compose does: healthy at the first passing check within its retries (a cold Neo4j JVM
        # may answer the very first count queries slowly)
        retries = compose(required_env())["services"]["kag"]["healthcheck"]["retries"]
        for _ in range(retries):
            health_check = subprocess.run(healthcheck_command(port), capture_output=True, timeout=30)
            if health_check.returncode == 0:
                break
        assert health_check.returncode == 0, health_check.stderr
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            health = http.get("/health", headers={"Authorization": f"Bearer {read}"})
            assert health.status_code == 200 and health.json()["backend"] == "neo4j"
            assert health.json()["uri"] == neo4j_config["uri"]
            assert http.get("/health").json() == {"status": "ok", "backend": "neo4j"}
            assert http.post("/search", json={"query": "Rome"}).status_code == 401
            name = "Compose-" + secrets.token_hex(4)
            entity = {"entities": [{"label": "City", "name": name}]}
            assert http.post("/ingest", json=entity, headers={"Authorization": f"Bearer {read}"}).status_code == 403
            written = http.post("/ingest", json=entity, headers={"Authorization": f"Bearer {ingest}"})
            assert written.status_code == 200 and written.json()["upserted"]["entities"] == 1
            found = http.post(
                "/search", json={"query": name, "label": "City", "k": 1}, headers={"Authorization": f"Bearer {read}"}
            )
            assert found.json()["hits"][0]["entity"]["name"] == name  # read back from Neo4j
            metrics = http.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
            assert metrics.status_code == 200
            assert 'kag_store_query_duration_seconds_count{operation="upsert",store="graph"}' in metrics.text
            assert 'kag_ingest_rows_total{kind="entities"} 1.0' in metrics.text
            assert 'kag_http_requests_total{method="POST",route="/ingest",status="403"} 1.0' in metrics.text
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if shutdown hangs
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "kag.server.access" in err and read not in err and admin not in err and neo4j_config["password"] not in err


@pytest.mark.neo4j
def test_compose_command_without_keys_refuses_to_start(neo4j_config: dict[str, str]) -> None:
    done = subprocess.run(
        _compose_command(), env=_compose_process_env(neo4j_config, None), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "refusing to serve on '0.0.0.0' without API keys" in done.stderr and "KAG_API_KEYS" in done.stderr
    assert "port " not in done.stdout  # it never bound


async def test_healthcheck_fails_while_the_backend_is_down(tmp_path: Path) -> None:
    # a real Neo4j URI where nothing listens: /health is 503 and the compose healthcheck exits non-zero
    import asyncio
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]  # closed again: nothing listens there
    service = Service.open(f"bolt://127.0.0.1:{free}", SEED)
    server = HTTPServer(create_app(service), port=0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            down = await client.get("/health")
        assert down.status_code == 503 and down.json()["status"] == "degraded"
        assert down.json()["backend"] == "neo4j" and down.json()["error"]["type"] == "BackendUnavailableError"
        check = await asyncio.create_subprocess_exec(
            *healthcheck_command(server.port), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(check.communicate(), timeout=30)
        assert check.returncode != 0 and b"503" in err
    finally:
        await server.close()
        await service.aclose()


def test_the_env_example_names_every_compose_variable_and_no_value() -> None:
    example = (ROOT / "deploy" / "compose" / "env.example").read_text(encoding="utf-8")
    names = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", example, re.M))
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text(encoding="utf-8")))
    assert used and names == used
    for line in example.splitlines():
        if line and not line.startswith("#"):
            assert line.endswith("="), f"the example must not hold a value: {line}"
