"""Hardening, second round: values no backend can store, HTTP framing, URL-like sources, saves."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Literal

import pytest

import kag
from kag.errors import InvalidInputError, LoaderError
from kag.examples.seed import City, Country, IsCapitalOf
from kag.files import STALE_TEMP_SECONDS, atomic_write_json
from kag.server.wire import host_allowed
from tests.server.test_api import Served, raw_exchange, served  # noqa: F401  (a fixture)

SEED = {"entity_models": [City, Country], "relation_models": [IsCapitalOf]}


class Region(kag.Entity):
    label: Literal["Region"] = "Region"
    name: str
    area: float | None = None
    stats: dict[str, float] = {}


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
async def test_non_finite_floats_are_refused_before_anything_is_written(value: float) -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Region])
    for bad in (Region(name="Atlantis", area=value), Region(name="Mu", stats={"rain": value})):
        with pytest.raises(InvalidInputError, match="finite"):
            await kb.upsert([Region(name="Ok", area=1.0), bad])
    assert (await kb.counts())["nodes"] == 0
    assert Region.model_validate_json('{"name": "X", "area": 1e999}').area == float("inf")  # what JSON can carry


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
async def test_integers_beyond_64_bits_are_refused(value: int) -> None:
    kb = kag.KnowledgeBase("memory://", **SEED)  # type: ignore[arg-type]
    ok = City(name="Lyon", population=2**63 - 1)
    with pytest.raises(InvalidInputError, match="64 bits"):
        await kb.upsert([ok, City(name="Paris", population=value)])
    assert (await kb.counts())["nodes"] == 0  # the valid row of the batch was not written either
    await kb.upsert([ok])
    assert (await kb.get(ok)).population == 2**63 - 1  # type: ignore[union-attr]


@pytest.mark.parametrize("length", ["\u00b2", "1\u00b2", "\u0663", "12a"])
async def test_a_content_length_of_non_ascii_digits_gets_400(served: Served, length: str) -> None:  # noqa: F811
    head = (
        "POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    answer = await raw_exchange(served.server.port, head.encode("utf-8"))
    assert answer.startswith(b"HTTP/1.1 400"), answer[:80]


@pytest.mark.parametrize(
    "host", ["evil.com@localhost", "localhost@evil.com", "localhost/x", "127.0.0.1 x", "a\\@localhost"]
)
def test_hosts_with_userinfo_or_junk_are_refused(host: str) -> None:
    assert not host_allowed(host, {"localhost", "127.0.0.1"})


def test_plain_hosts_still_pass() -> None:
    for host in ("localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000"):
        assert host_allowed(host, {"localhost", "127.0.0.1", "::1"}), host


async def test_a_url_with_a_space_is_refused_not_indexed_as_text() -> None:
    knowledge = kag.create_knowledge("memory://")
    report = await knowledge.add("http://127.0.0.1:9/secret x")
    assert report.documents == 0 and len(report.errors) == 1
    assert isinstance(report.errors[0].error, LoaderError) and "whitespace" in str(report.errors[0].error)


def test_saves_keep_the_mode_and_clean_stale_temporaries(tmp_path: Path) -> None:
    target = tmp_path / "kb.json"
    atomic_write_json(target, {"a": 1})
    os.chmod(target, 0o640)
    stale = tmp_path / f".{target.name}.killed.tmp"  # what a save killed mid-write leaves
    stale.write_text("partial")
    old = time.time() - STALE_TEMP_SECONDS - 5
    os.utime(stale, (old, old))
    fresh = tmp_path / f".{target.name}.running.tmp"  # a save still in progress elsewhere
    fresh.write_text("partial")
    atomic_write_json(target, {"a": 2})
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not stale.exists() and fresh.exists()
    assert target.read_text() == '{"a": 2}'


def test_a_save_into_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(kag.errors.StoreError, match="does not exist"):
        atomic_write_json(tmp_path / "absent" / "kb.json", {})
    assert not (tmp_path / "absent").exists()


async def test_mcp_stdio_survives_a_line_of_100k_brackets(served: Served) -> None:  # noqa: F811
    import io
    import json

    from kag.server.mcp import MCPServer

    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search_knowledge", "arguments": {"query": "Berlin", "k": 1, "where": "[" * 100_000}},
    }
    lines = ["[" * 100_000, json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}), json.dumps(call)]
    stdin = io.BytesIO(("\n".join(lines) + "\n").encode())
    stdout = io.BytesIO()
    await MCPServer(served.service, max_message_bytes=1_000_000).serve_stdio(stdin, stdout)
    replies = [json.loads(line) for line in stdout.getvalue().decode().splitlines()]
    assert replies[0]["error"]["code"] == -32700 and "nests" in replies[0]["error"]["message"]
    assert replies[1]["id"] == 3 and replies[1]["result"]["tools"]  # still serving
    assert replies[2]["id"] == 7 and replies[2]["result"]["isError"] is True  # a tool error, not a crash


async def test_the_tool_refuses_a_deep_where_string_with_a_typed_error() -> None:
    tool = kag.create_knowledge("memory://").as_tool()
    with pytest.raises(InvalidInputError, match="nests"):
        await tool.run("anything", where="[" * 100_000)
    assert (await tool("anything", where="[" * 100_000)).startswith("Error: where nests")  # what a model sees


async def test_a_filter_of_the_deepest_allowed_nesting_works_under_a_scope() -> None:
    deep: dict[str, object] = {"lang": "en"}
    for _ in range(32):  # 32 levels of $and: the most a caller may send
        deep = {"$and": [deep]}
    doc = kag.Document.from_text("Paris is the capital of France.", source="a.md", metadata={"lang": "en"})
    scoped = kag.create_knowledge("memory://", sources=[doc], where={"lang": "en"})
    hits = await scoped.search("Paris capital", where=deep)
    assert [h.kind for h in hits] == ["passage"]
    with pytest.raises(InvalidInputError, match="32"):
        await scoped.search("Paris capital", where={"$and": [deep]})  # one level more is refused


def test_huge_filters_are_refused_before_any_work() -> None:
    from kag.query.filters import MAX_FILTER_CONDITIONS, MAX_LIST_VALUES, validate_filter

    with pytest.raises(InvalidInputError, match="conditions"):
        validate_filter({"$or": [{"lang": f"x{i}"} for i in range(50_000)]})
    with pytest.raises(InvalidInputError, match=f"at most {MAX_LIST_VALUES}"):
        validate_filter({"lang": {"$in": list(range(200_000))}})
    validate_filter({"$or": [{"lang": f"x{i}"} for i in range(MAX_FILTER_CONDITIONS // 2 - 1)]})
    validate_filter({"lang": {"$in": list(range(MAX_LIST_VALUES))}})
