"""API keys on the HTTP API and MCP over HTTP: real servers on 127.0.0.1, real keys, real key files."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kag.cli import main
from kag.errors import APIKeysError, InsecureBindError, UsageError
from kag.server import HTTPServer, Service, create_app
from kag.server.auth import APIKeys, check_bind, hash_key, is_loopback
from tests.helpers.serve import served_port

SEED = "kag.examples.seed"
READ = "read-" + secrets.token_urlsafe(24)
INGEST = "ingest-" + secrets.token_urlsafe(24)
ADMIN = "admin-" + secrets.token_urlsafe(24)
BOTH = "both-" + secrets.token_urlsafe(24)
KEYS_TEXT = f"""
# comment line
{READ}:read
{hash_key(INGEST)}:ingest   # stored as a digest: the file holds no secret
{ADMIN}:admin {BOTH}:read,ingest
"""


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, keys: APIKeys | None) -> AsyncIterator[httpx.AsyncClient]:
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED)
    await service.load_example("seed")
    server = HTTPServer(create_app(service, api_keys=keys), port=0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            yield client
    finally:
        await server.close()
        await service.aclose()


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(tmp_path, APIKeys.parse(KEYS_TEXT)) as running:
        yield running


# --------------------------------------------------------------------------- key lists


def test_keys_parse_hash_and_scopes() -> None:
    keys = APIKeys.parse(KEYS_TEXT)
    assert len(keys) == 4
    read, ingest, admin, both = (keys.authenticate(k) for k in (READ, INGEST, ADMIN, BOTH))
    assert read is not None and read.scopes == {"read"}
    assert ingest is not None and ingest.scopes == {"ingest"}  # found from its sha256 entry
    assert admin is not None and admin.allows("read") and admin.allows("ingest") and admin.allows("admin")
    assert both is not None and both.allows("ingest") and not both.allows("admin")
    assert keys.authenticate(READ + "x") is None and keys.authenticate("") is None
    assert read.digest == hashlib.sha256(READ.encode()).digest()
    assert hash_key(READ) == "sha256:" + read.digest.hex() and read.key_id == read.digest.hex()[:8]
    # only digests are kept: no attribute of the key set holds a secret
    held = repr(vars(keys)) + "".join(repr(vars(k)) for k in keys.keys)
    for secret in (READ, ADMIN, BOTH):
        assert secret not in held


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "holds no API key"),
        ("   # only a comment\n", "holds no API key"),
        ("tooshort:read", "at least 16 characters"),
        (f"{READ}", "KEY:SCOPES"),
        (f"{READ}:", "scope"),
        (f"{READ}:write", "unknown or missing scope(s) ['write']"),
        (f"{READ}:read,superuser", "['superuser']"),
        ("sha256:abcd:read", "sha256:<64 hex digits>"),
        ("md5:" + "a" * 32 + ":read", "sha256:<64 hex digits>"),
        (f"{READ}:read {READ}:ingest", "same key twice"),
        (f"{READ}:read {hash_key(READ)}:admin", "same key twice"),
        ('p@ss"word-0123456789:read', "may only hold the characters"),
    ],
)
def test_malformed_key_lists_are_refused(text: str, expected: str) -> None:
    with pytest.raises(APIKeysError) as info:
        APIKeys.parse(text)
    assert expected in str(info.value)
    assert isinstance(info.value, UsageError)  # the CLI exits 2
    assert "p@ss" not in str(info.value)  # a rejected entry is never echoed: it may be a secret


def test_keys_from_env_and_file(tmp_path: Path) -> None:
    assert APIKeys.from_env({}) is None and APIKeys.from_env({"KAG_API_KEYS": "  "}) is None
    from_env = APIKeys.from_env({"KAG_API_KEYS": f"{READ}:read {ADMIN}:admin"})
    assert from_env is not None and from_env.authenticate(ADMIN) is not None
    path = tmp_path / "keys"
    path.write_text(KEYS_TEXT, encoding="utf-8")
    assert len(APIKeys.from_file(path)) == 4
    with pytest.raises(APIKeysError, match="cannot read the key file"):
        APIKeys.from_file(tmp_path / "missing")
    path.write_text(f"{READ}:read\nbroken-entry-without-scopes\n", encoding="utf-8")
    with pytest.raises(APIKeysError, match=r"line 2"):
        APIKeys.from_file(path)


def test_bind_rules() -> None:
    keys = APIKeys.parse(f"{READ}:read")
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert is_loopback(host) and check_bind(host, None) is None
    for host in ("0.0.0.0", "::", "", "10.0.0.5", "example.org"):
        assert not is_loopback(host)
        with pytest.raises(InsecureBindError, match="--insecure-no-auth"):
            check_bind(host, None)
        assert check_bind(host, keys) is None
        warning = check_bind(host, None, insecure_no_auth=True)
        assert warning is not None and "WITHOUT authentication" in warning
    with pytest.raises(InsecureBindError, match="contradicts"):
        check_bind("0.0.0.0", keys, insecure_no_auth=True)


# --------------------------------------------------------------------------- over HTTP


async def test_401_without_a_valid_key(client: httpx.AsyncClient) -> None:
    missing = await client.post("/search", json={"query": "Paris"})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="kag"'
    assert missing.json()["error"]["type"] == "Unauthorized"
    for header in (
        f"Bearer {READ}x",
        f"Basic {READ}",
        READ,
        "Bearer",
        f"Bearer {READ} extra",
        "Bearer ü".encode("latin-1"),
    ):
        wrong = await client.post("/search", json={"query": "Paris"}, headers={"Authorization": header})
        assert wrong.status_code == 401, header
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    # strangers learn nothing about the routes: unknown paths and wrong methods are 401 too
    assert (await client.get("/nope")).status_code == 401
    assert (await client.get("/search")).status_code == 401
    assert (await client.get("/")).status_code == 401
    assert (await client.get("/metrics")).status_code == 401


async def test_scopes_403(client: httpx.AsyncClient) -> None:
    entity = {"entities": [{"label": "City", "name": "Nantes"}]}
    assert (await client.post("/search", json={"query": "Paris"}, headers=bearer(READ))).status_code == 200
    assert (await client.get("/schema", headers=bearer(READ))).status_code == 200
    denied = await client.post("/ingest", json=entity, headers=bearer(READ))
    assert denied.status_code == 403 and denied.json()["error"]["type"] == "Forbidden"
    assert denied.headers["www-authenticate"] == 'Bearer realm="kag", error="insufficient_scope", scope="ingest"'
    assert (await client.post("/search", json={"query": "Paris"}, headers=bearer(INGEST))).status_code == 403
    written = await client.post("/ingest", json=entity, headers=bearer(INGEST))
    assert written.status_code == 200 and written.json()["upserted"]["entities"] == 1
    assert (await client.get("/metrics", headers=bearer(BOTH))).status_code == 403
    assert (await client.get("/metrics", headers=bearer(ADMIN))).status_code == 200
    for key in (ADMIN, BOTH):
        assert (await client.post("/ingest", json=entity, headers=bearer(key))).status_code == 200
        assert (await client.post("/search", json={"query": "Nantes"}, headers=bearer(key))).status_code == 200
    # a key holder sees the real 404 / 405
    assert (await client.get("/nope", headers=bearer(READ))).status_code == 404
    assert (await client.get("/search", headers=bearer(READ))).status_code == 405
    # the scheme name is case-insensitive (RFC 9110)
    assert (await client.get("/schema", headers={"Authorization": f"bearer {READ}"})).status_code == 200


async def test_health_stays_open_but_shows_details_to_read_keys(client: httpx.AsyncClient) -> None:
    anonymous = await client.get("/health")
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok", "backend": "memory"}
    wrong = await client.get("/health", headers=bearer("not-a-key-0123456789"))
    assert wrong.status_code == 200 and "counts" not in wrong.json()
    assert (await client.get("/health", headers=bearer(INGEST))).json().keys() == {"status", "backend"}
    detailed = (await client.get("/health", headers=bearer(READ))).json()
    assert detailed["counts"]["Country"] == 5 and detailed["uri"].startswith("memory://")


async def test_mcp_over_http_needs_a_read_key(client: httpx.AsyncClient) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert (await client.post("/mcp", json=message)).status_code == 401
    assert (await client.post("/mcp", json=message, headers=bearer(INGEST))).status_code == 403
    listed = await client.post("/mcp", json=message, headers=bearer(READ))
    assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} >= {"triplet_search"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "triplet_search", "arguments": {"subject_label": "City", "relation_label": "IsCapitalOf"}},
    }
    result = (await client.post("/mcp", json=call, headers=bearer(READ))).json()["result"]
    assert result["isError"] is False and result["structuredContent"]["facts"]


async def test_without_keys_loopback_works_as_before(tmp_path: Path) -> None:
    async with serving(tmp_path, None) as anonymous:
        assert (await anonymous.post("/search", json={"query": "Paris"})).status_code == 200
        assert "counts" in (await anonymous.get("/health")).json()
        # a header sent to a server without keys is ignored, not refused
        assert (await anonymous.get("/schema", headers=bearer("whatever-0123456789"))).status_code == 200


@contextlib.contextmanager
def captured(caplog: pytest.LogCaptureFixture) -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    with caplog.at_level(logging.INFO, logger="kag.server.access"):
        yield records
        records.extend(r for r in caplog.records if r.name == "kag.server.access")


async def test_access_log_names_the_key_by_id_never_the_key_or_body(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    secret_query = "needle-" + secrets.token_hex(8)
    with captured(caplog) as records:
        await client.post("/search", json={"query": secret_query}, headers=bearer(READ))
        await client.post("/ingest", json={"texts": [secret_query]}, headers=bearer(READ))
        await client.post("/search", json={"query": secret_query}, headers=bearer(READ + "zz"))
    assert len(records) == 3
    read_id = hashlib.sha256(READ.encode()).hexdigest()[:8]
    fields: list[Any] = [(r.method, r.route, r.status, r.key_id) for r in records]  # type: ignore[attr-defined]
    assert fields == [
        ("POST", "/search", 200, read_id),
        ("POST", "/ingest", 403, read_id),
        ("POST", "/search", 401, "-"),
    ]
    for record in records:
        line = record.getMessage()
        assert re.fullmatch(r"127\.0\.0\.1:\d+ POST /\w+ \d{3} \d+\.\dms ns=(default|-) key=(\w{8}|-)", line), line
        assert record.latency_ms >= 0  # type: ignore[attr-defined]
        for secret in (READ, secret_query, READ + "zz"):
            assert secret not in line and secret not in repr(vars(record))


# --------------------------------------------------------------------------- the command line


def test_cli_refuses_a_public_bind_without_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAG_API_KEYS", raising=False)
    code = main(["serve", "--host", "0.0.0.0", "--port", "0", "--kb", f"memory://{tmp_path / 'kb.json'}"])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to serve on '0.0.0.0' without API keys" in err and "--insecure-no-auth" in err
    bad = tmp_path / "keys"
    bad.write_text("short:read\n", encoding="utf-8")
    code = main(["serve", "--api-keys", str(bad), "--port", "0", "--kb", f"memory://{tmp_path / 'kb.json'}"])
    assert code == 2 and "at least 16 characters" in capsys.readouterr().err


def _serve(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag.cli", "serve", "--port", "0", "--schema", SEED, "--example", "seed", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    return proc, served_port(proc)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - only if shutdown hangs
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == 0, err
    return err


def test_cli_serves_with_a_key_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEYS_TEXT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("KAG_KB", "KAG_API_KEYS")}
    proc, port = _serve(["--api-keys", str(keys), "--kb", f"memory://{tmp_path / 'kb.json'}"], env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.get("/health").json() == {"status": "ok", "backend": "memory"}
            assert http.post("/search", json={"query": "Rome"}).status_code == 401
            assert http.post("/search", json={"query": "Rome"}, headers=bearer(READ)).status_code == 200
            assert http.post("/search", json={"query": "Rome"}, headers=bearer(INGEST)).status_code == 403
    finally:
        err = _stop(proc)
    # one access log line per request on stderr, keys never
    lines = [line for line in err.splitlines() if "kag.server.access" in line]
    assert len(lines) == 4 and [line.split()[-4] for line in lines] == ["200", "401", "200", "403"]
    assert READ not in err and INGEST not in err


def test_cli_insecure_no_auth_warns_and_serves(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KAG_KB", "KAG_API_KEYS")}
    proc, port = _serve(
        ["--host", "0.0.0.0", "--insecure-no-auth", "--no-access-log", "--kb", f"memory://{tmp_path / 'kb.json'}"],
        env,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.post("/search", json={"query": "Rome"}).status_code == 200
    finally:
        err = _stop(proc)
    assert "WITHOUT authentication (--insecure-no-auth)" in err
    assert "kag.server.access" not in err  # --no-access-log
