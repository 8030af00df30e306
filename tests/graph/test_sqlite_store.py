"""The sqlite backend: durable round trips, namespaces, crash safety, bad files, parity with memory."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kag.errors import ConfigError, StoreFormatError
from kag.examples.seed import City, Country, IsCapitalOf, IsCityOf
from kag.graph.base import NodeRecord
from kag.graph.factory import open_store, passage_store_for
from kag.graph.sqlite import SQLiteGraphStore, parse_sqlite_uri, sqlite_uri
from kag.knowledge.base import KnowledgeBase
from kag.knowledge.factory import create_knowledge
from kag.knowledge.knowledge import Knowledge

TEXTS = {
    "paris.md": "Paris is the capital of France. The Seine runs through Paris.",
    "rome.md": "Rome is the capital of Italy, built on seven hills.",
    "berlin.md": "Berlin is the capital of Germany and its largest city.",
}


def _facts() -> list[Any]:
    france, italy = Country(name="France"), Country(name="Italy")
    paris, lyon, rome = City(name="Paris", population=2100000), City(name="Lyon"), City(name="Rome")
    return [
        IsCapitalOf(subj=paris, obj=france),
        IsCityOf(subj=lyon, obj=france),
        IsCapitalOf(subj=rome, obj=italy),
    ]


def _knowledge(backend: str, **options: Any) -> Knowledge:
    return create_knowledge(
        backend,
        entity_models=[Country, City],
        relation_models=[IsCapitalOf, IsCityOf],
        **options,
    )


async def _fill(knowledge: Knowledge) -> None:
    for source, text in TEXTS.items():
        await knowledge.add_text(text, source=source, metadata={"lang": "en", "name": source})
    await knowledge.kb.upsert(_facts())


async def _snapshot(knowledge: Knowledge) -> dict[str, Any]:
    """Everything a user can observe: searches (facts and passages), documents, counts."""
    kb = knowledge.kb
    passages = passage_store_for(kb.store)
    hits = await knowledge.search("capital of France", k=5)
    filtered = await knowledge.search("capital", k=5, where={"name": "rome.md"})
    facts = await kb.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "subject_similarity_search": "Paris",
        },
        k=10,
        threshold=0.0,
    )
    return {
        "hits": [(h.text, round(h.score, 9)) for h in hits],
        "filtered": [h.text for h in filtered],
        "facts": [str(f) for f in facts],
        "documents": sorted((d.id, d.source, d.chunk_count) for d in await passages.list_documents()),
        "counts": await kb.store.counts(),
        "passage_counts": await passages.counts(),
    }


def test_uri_forms(tmp_path: Path) -> None:
    uri = sqlite_uri(tmp_path / "kb 1.db", "team.a-b_1")
    assert parse_sqlite_uri(uri) == (tmp_path / "kb 1.db", "team.a-b_1")
    for bad in ("team/a b", "", "-x"):  # the one namespace rule of every backend (kag.validation)
        with pytest.raises(ConfigError, match="namespace must be 1-64 characters"):
            sqlite_uri(tmp_path / "kb.db", bad)
    with pytest.raises(ConfigError, match="namespace must be 1-64 characters"):
        parse_sqlite_uri(f"sqlite://{tmp_path}/kb.db?namespace=a%20b")
    assert parse_sqlite_uri("sqlite://kb.db") == (Path("kb.db"), "default")
    with pytest.raises(ConfigError, match="namespace"):
        parse_sqlite_uri("sqlite:///x.db?ns=a")
    store = open_store(f"sqlite://{tmp_path}/kb.db?namespace=x")
    assert isinstance(store, SQLiteGraphStore) and store.namespace == "x"
    asyncio.run(store.aclose())
    with pytest.raises(ConfigError, match="path="):
        create_knowledge("sqlite")


def test_round_trip_through_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"

    async def write() -> dict[str, Any]:
        knowledge = _knowledge("sqlite", path=path, namespace="docs")
        await _fill(knowledge)
        snap = await _snapshot(knowledge)
        vectors = await passage_store_for(knowledge.kb.store).chunk_vectors(
            [cid for cid, _ in await passage_store_for(knowledge.kb.store).chunk_texts(None, 100)]
        )
        await knowledge.aclose()
        return {**snap, "vectors": {k: v.tolist() for k, v in vectors.items()}}

    async def read(uri: str) -> dict[str, Any]:
        knowledge = Knowledge(
            KnowledgeBase(uri, entity_models=[Country, City], relation_models=[IsCapitalOf, IsCityOf])
        )
        snap = await _snapshot(knowledge)
        passages = passage_store_for(knowledge.kb.store)
        vectors = await passages.chunk_vectors([cid for cid, _ in await passages.chunk_texts(None, 100)])
        nodes = await knowledge.kb.store.get_nodes(["nonexistent"])
        assert nodes == {}
        await knowledge.aclose()
        return {**snap, "vectors": {k: v.tolist() for k, v in vectors.items()}}

    before = asyncio.run(write())
    assert before["passage_counts"]["documents"] == 3 and before["facts"]
    after = asyncio.run(read(sqlite_uri(path, "docs")))  # the URI form, through KnowledgeBase
    assert after == before

    async def delete_and_reopen() -> dict[str, Any]:
        knowledge = _knowledge("sqlite", path=path, namespace="docs")
        docs = await passage_store_for(knowledge.kb.store).list_documents(sources=["rome.md"])
        await passage_store_for(knowledge.kb.store).delete_documents([d.id for d in docs])
        assert await knowledge.kb.store.delete([City(name="Lyon").id]) == 1
        snap = await _snapshot(knowledge)
        await knowledge.aclose()
        again = _knowledge("sqlite", path=path, namespace="docs")
        reopened = await _snapshot(again)
        await again.aclose()
        assert reopened == snap
        return reopened

    final = asyncio.run(delete_and_reopen())
    assert final["passage_counts"]["documents"] == 2
    assert final["counts"]["City"] == before["counts"]["City"] - 1
    assert "Rome" not in " ".join(final["filtered"])


def test_namespaces_are_isolated(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"

    async def run() -> None:
        a = _knowledge("sqlite", path=path, namespace="a")
        b = _knowledge("sqlite", path=path, namespace="b")
        await a.add_text("Alpha talks about the capital of France.", source="a.md")
        await b.add_text("Beta talks about the hills of Rome.", source="b.md")
        await a.kb.upsert([City(name="Paris")])
        await a.aclose()
        await b.aclose()
        for ns, own, other in (("a", "Alpha", "Beta"), ("b", "Beta", "Alpha")):
            k = _knowledge("sqlite", path=path, namespace=ns)
            texts = " ".join(h.text for h in await k.search("capital France hills Rome", k=10))
            assert own in texts and other not in texts
            assert (await k.kb.store.counts()).get("City", 0) == (1 if ns == "a" else 0)
            await k.aclose()
        fresh = _knowledge("sqlite", path=path, namespace="c")
        await fresh.ready()
        assert (await passage_store_for(fresh.kb.store).counts())["chunks"] == 0
        await fresh.aclose()

    asyncio.run(run())


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    import numpy as np
    from kag.graph.base import NodeRecord
    from kag.graph.sqlite import SQLiteGraphStore

    async def main() -> None:
        store = SQLiteGraphStore(sys.argv[1], "crash")
        rng = np.random.default_rng(0)
        for batch in range(10_000):
            nodes = [
                NodeRecord(f"b{batch:05d}-{i:05d}", "Thing", {"batch": batch, "i": i}, rng.random(64, dtype=np.float32))
                for i in range(int(sys.argv[2]))
            ]
            await store.upsert(nodes, [])
            print(batch, flush=True)

    asyncio.run(main())
    """
)


def test_crash_mid_write_keeps_committed_batches_whole(tmp_path: Path) -> None:
    path, size = tmp_path / "crash.db", 4000
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(size)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None
    committed = -1
    deadline = time.monotonic() + 60
    while committed < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        committed = int(line)
    time.sleep(0.05)  # well inside the next batch's write
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert committed >= 2, "the writer did not commit three batches"
    store = SQLiteGraphStore(path, "crash")
    nodes = asyncio.run(store.counts())["nodes"]
    asyncio.run(store.aclose())
    assert nodes % size == 0, f"a partial batch survived: {nodes} nodes"
    assert nodes >= (committed + 1) * size  # every reported commit is there
    with sqlite3.connect(path) as conn:
        batches = conn.execute("SELECT count(DISTINCT json_extract(props, '$.batch')) FROM kag_nodes").fetchone()[0]
    assert batches * size == nodes


def test_bad_files_give_typed_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 200)
    with pytest.raises(StoreFormatError, match=r"not a kag sqlite store.*another path"):
        SQLiteGraphStore(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreFormatError, match="not a kag store"):
        open_store(f"sqlite://{other}")
    with pytest.raises(ConfigError, match="does not exist"):
        SQLiteGraphStore(tmp_path / "missing" / "kb.db")
    with pytest.raises(ConfigError, match="directory"):
        SQLiteGraphStore(tmp_path)


def test_failed_write_leaves_store_unchanged(tmp_path: Path) -> None:
    async def run() -> None:
        store = SQLiteGraphStore(tmp_path / "kb.db")
        vec = np.ones(4, dtype=np.float32)
        await store.upsert([NodeRecord("a", "Thing", {"n": 1}, vec)], [])
        store.conn.execute(
            "CREATE TRIGGER no_b BEFORE INSERT ON kag_nodes WHEN new.id = 'b' BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
        with pytest.raises(sqlite3.DatabaseError):
            await store.upsert([NodeRecord("a", "Thing", {"n": 2}, vec), NodeRecord("b", "Thing", {"n": 3}, vec)], [])
        assert await store.get_nodes(["a", "b"]) == {"a": {"n": 1}}  # memory reloaded from the file
        await store.aclose()

    asyncio.run(run())


def test_same_searches_same_rows_as_memory(tmp_path: Path) -> None:
    async def run(backend: str, **options: Any) -> dict[str, Any]:
        knowledge = _knowledge(backend, **options)
        await _fill(knowledge)
        snap = await _snapshot(knowledge)
        await knowledge.aclose()
        return snap

    memory = asyncio.run(run("memory"))
    sqlite = asyncio.run(run("sqlite", path=tmp_path / "kb.db"))
    assert sqlite == memory
    assert memory["hits"] and memory["facts"]


def test_cli_kb_uri(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.cli import main

    monkeypatch.delenv("KAG_KB", raising=False)
    kb = ["--kb", f"sqlite://{tmp_path}/kb.db?namespace=cli", "--schema", "kag.examples.seed"]
    assert main(["ingest", "--text", "Madrid has the Prado museum.", *kb, "--json"]) == 0
    capsys.readouterr()
    assert main(["stats", *kb, "--json"]) == 0  # a new process would see the same: the file was reopened
    stats = json.loads(capsys.readouterr().out)
    assert stats["backend"] == "sqlite" and stats["counts"]["chunks"] == 1


def test_an_empty_namespace_is_refused_not_replaced(tmp_path: Path) -> None:
    from kag import create_knowledge
    from kag.errors import ConfigError

    with pytest.raises(ConfigError, match="namespace"):
        create_knowledge("sqlite", path=tmp_path / "kb.db", namespace="")
    with pytest.raises(ConfigError, match="namespace"):
        create_knowledge(f"sqlite://{tmp_path / 'kb.db'}?namespace=")
