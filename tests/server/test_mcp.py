"""MCP over Streamable HTTP (POST /mcp) and over stdio, including the official SDK client when installed."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kag.server import MCPServer
from kag.server.mcp import LATEST_PROTOCOL_VERSION
from tests.server.test_api import SEED, Served, serving

INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as running:
        yield running


async def rpc(served: Served, message: Any, **headers: str) -> httpx.Response:
    return await served.client.post("/mcp", json=message, headers={**HEADERS, **headers})


async def test_initialize_list_and_call_round_trip(served: Served) -> None:
    init = await rpc(served, INIT)
    assert init.status_code == 200 and init.headers["content-type"] == "application/json"
    result = init.json()["result"]
    assert init.json()["id"] == 1
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "kag"

    note = await rpc(
        served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **{"MCP-Protocol-Version": "2025-06-18"}
    )
    assert note.status_code == 202 and note.content == b""

    listed = (await rpc(served, {"jsonrpc": "2.0", "id": "two", "method": "tools/list"})).json()
    assert listed["id"] == "two"
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert set(tools) == {"search_knowledge", "triplet_search"}
    search_schema = tools["search_knowledge"]["inputSchema"]
    assert search_schema["required"] == ["query"] and set(search_schema["properties"]) == {"query", "k", "where"}
    triplet_schema = tools["triplet_search"]["inputSchema"]
    assert triplet_schema["properties"]["relation_label"]["enum"] == ["IsCapitalOf", "IsCityOf", "*"]
    assert triplet_schema["additionalProperties"] is False

    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "search_knowledge", "arguments": {"query": "capital of France", "k": 2}},
    }
    searched = (await rpc(served, call)).json()["result"]
    assert searched["isError"] is False
    text = searched["content"][0]["text"]
    assert "[knowledge:1] fact" in text and "Paris -[IsCapitalOf]-> France" in text and "BEGIN DATA" in text

    call = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {
            "name": "triplet_search",
            "arguments": {
                "relation_label": "IsCapitalOf",
                "object_label": "Country",
                "object_similarity_search": "Japan",
            },
        },
    }
    found = (await rpc(served, call)).json()["result"]
    assert found["isError"] is False
    assert found["structuredContent"]["facts"][0]["text"] == "Tokyo -[IsCapitalOf]-> Japan"
    assert "Tokyo -[IsCapitalOf]-> Japan" in found["content"][0]["text"] and "MATCH" in found["content"][0]["text"]
    assert "params" not in found["structuredContent"]


async def test_protocol_version_negotiation_and_header(served: Served) -> None:
    future = {**INIT, "params": {**INIT["params"], "protocolVersion": "2099-01-01"}}
    assert (await rpc(served, future)).json()["result"]["protocolVersion"] == LATEST_PROTOCOL_VERSION
    old = {**INIT, "params": {**INIT["params"], "protocolVersion": "2024-11-05"}}
    assert (await rpc(served, old)).json()["result"]["protocolVersion"] == "2024-11-05"

    bad = await rpc(served, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **{"MCP-Protocol-Version": "1999-01-01"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32600


async def test_jsonrpc_errors_and_tool_errors(served: Served) -> None:
    ping = (await rpc(served, {"jsonrpc": "2.0", "id": 7, "method": "ping"})).json()
    assert ping == {"jsonrpc": "2.0", "id": 7, "result": {}}

    missing = (await rpc(served, {"jsonrpc": "2.0", "id": 8, "method": "resources/list"})).json()
    assert missing["error"]["code"] == -32601

    unknown_tool = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "rm_rf", "arguments": {}}}
    assert (await rpc(served, unknown_tool)).json()["error"]["code"] == -32602

    bad_label = {
        "jsonrpc": "2.0",
        "id": 10,
        "method": "tools/call",
        "params": {"name": "triplet_search", "arguments": {"subject_label": "Planet"}},
    }
    result = (await rpc(served, bad_label)).json()["result"]
    assert result["isError"] is True and "Planet" in result["content"][0]["text"]

    bad_k = {
        "jsonrpc": "2.0",
        "id": 11,
        "method": "tools/call",
        "params": {"name": "search_knowledge", "arguments": {"query": "x", "k": "lots"}},
    }
    assert (await rpc(served, bad_k)).json()["result"]["isError"] is True

    not_rpc = (await rpc(served, {"id": 12, "method": "ping"})).json()
    assert not_rpc["error"]["code"] == -32600

    batch = await rpc(
        served,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ],
    )
    assert [r["id"] for r in batch.json()] == [1, 2]

    parse = await served.client.post("/mcp", content=b"{not json", headers={"content-type": "application/json"})
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700

    assert (await served.client.get("/mcp")).status_code == 405  # no server-initiated SSE stream


async def test_stdio_in_process(served: Served) -> None:
    lines = [
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "",
        "{broken",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "search_knowledge", "arguments": {"query": "Berlin", "k": 1}},
            }
        ),
    ]
    stdin = io.BytesIO(("\n".join(lines) + "\n").encode())
    stdout = io.BytesIO()
    await MCPServer(served.service).serve_stdio(stdin, stdout)
    replies = [json.loads(line) for line in stdout.getvalue().decode().splitlines()]
    assert [r.get("id") for r in replies] == [1, None, 2]
    assert replies[1]["error"]["code"] == -32700
    assert "Berlin" in replies[2]["result"]["content"][0]["text"]


def test_stdio_subprocess_round_trip(tmp_path: Path) -> None:
    messages = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "search_geo", "arguments": {"query": "capital of Italy", "k": 1}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {
                "name": "triplet_search",
                "arguments": {
                    "relation_label": "IsCityOf",
                    "object_label": "Country",
                    "object_similarity_search": "Spain",
                    "count": True,
                },
            },
        },
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    env = {**os.environ}
    env.pop("KAG_KB", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kag.cli",
            "serve",
            "--mcp-stdio",
            "--kb",
            f"memory://{tmp_path / 'kb.json'}",
            "--schema",
            SEED,
            "--example",
            "seed",
            "--name",
            "geo",
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout holds JSON-RPC only
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    assert {t["name"] for t in replies[1]["result"]["tools"]} == {"search_geo", "triplet_search"}
    assert "Rome -[IsCapitalOf]-> Italy" in replies[2]["result"]["content"][0]["text"]
    assert replies[3]["result"]["structuredContent"]["count"] == 2


def test_stdio_subprocess_stops_on_sigterm_with_stdin_open(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag.cli", "serve", "--mcp-stdio", "--kb", "memory://", "--schema", SEED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:  # pragma: no cover - only if shutdown hangs
            proc.kill()
            proc.wait()


async def test_official_sdk_client_interop(served: Served) -> None:
    """The official SDK's client (``pip install mcp``) against POST /mcp."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client import streamable_http

    names = ("streamable_http_client", "streamablehttp_client")  # mcp 2.x, 1.x
    connect: Any = next(getattr(streamable_http, n) for n in names if hasattr(streamable_http, n))
    url = f"{served.server.url}/mcp"
    async with connect(url) as streams, ClientSession(streams[0], streams[1]) as session:
        init = await session.initialize()
        assert init.serverInfo.name == "kag" if hasattr(init, "serverInfo") else init.server_info.name == "kag"
        tools = await session.list_tools()
        assert {t.name for t in tools.tools} == {"search_knowledge", "triplet_search"}
        searched = await session.call_tool("search_knowledge", {"query": "capital of Spain", "k": 1})
        assert not _is_error(searched) and "Madrid" in getattr(searched.content[0], "text", "")
        found = await session.call_tool(
            "triplet_search",
            {"subject_similarity_search": "Osaka", "subject_label": "City", "relation_label": "IsCityOf"},
        )
        structured: Any = getattr(found, "structured_content", None) or getattr(found, "structuredContent", None)
        assert not _is_error(found) and structured["facts"][0]["object"]["name"] == "Japan"


def _is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))
