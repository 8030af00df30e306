"""The offline first-load path: ``neo4j-admin database import full`` into a fresh server directory.

Starts its own Neo4j (deploy/neo4j/neo4j.sh, a private directory and a free port), never the
session's server. Needs Java and the Neo4j jars from Maven, like `make neo4j-start`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kag
from kag.errors import ConfigError, InvalidInputError, StoreError, StoreFormatError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.neo4j_import import import_command, import_records, main, read_store_file, write_csvs

pytestmark = pytest.mark.neo4j

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "neo4j" / "neo4j.sh"
PASSWORD = "kag-import-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A private server directory driven through deploy/neo4j/neo4j.sh."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = _free_port()
        # the script's Python must have the driver: this interpreter's bin directory goes first
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = {
            **os.environ,
            "PATH": path,
            "KAG_NEO4J_DIR": str(base),
            "KAG_NEO4J_BOLT_PORT": str(self.port),
            "KAG_NEO4J_PASSWORD": PASSWORD,
            "KAG_NEO4J_HEAP": "512m",
            "KAG_NEO4J_PAGECACHE": "128m",
        }

    def sh(self, command: str) -> None:
        done = subprocess.run(
            ["bash", str(SCRIPT), command], env=self.env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"neo4j.sh {command} failed:\n{done.stdout}\n{done.stderr[-3000:]}"

    @property
    def uri(self) -> str:
        return f"neo4j://127.0.0.1:{self.port}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "neo4j")
    srv.sh("install")  # jars, conf and password; the database is created by the import, not by a start
    try:
        yield srv
    finally:
        srv.sh("stop")


async def test_import_then_read_back_through_the_store(server: Server, tmp_path: Path) -> None:
    memory = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await memory.upsert(seed_facts())
    saved = tmp_path / "kb.json"
    memory.store.save(saved)  # type: ignore[attr-defined]
    nodes, relations = read_store_file(saved)
    assert len(nodes) > 10 and len(relations) > 10

    assert main(["--store", str(saved), "--home", str(server.base / "home"), "--lib", str(server.base / "lib")]) == 0
    server.sh("start")
    kb = kag.KnowledgeBase(
        server.uri,
        username="neo4j",
        password=PASSWORD,
        entity_models=ENTITY_MODELS,
        relation_models=RELATION_MODELS,
    )
    try:
        await kb.ensure_ready()  # constraints and vector indexes over the imported nodes
        assert await kb.counts() == await memory.counts()
        node_ids = [n.id for n in nodes]
        # Neo4j nodes also hold their id as a property (online writes too): compared without it
        imported = {
            i: {k: v for k, v in p.items() if k != "id"} for i, p in (await kb.store.get_nodes(node_ids)).items()
        }
        assert imported == await memory.store.get_nodes(node_ids)
        rel_ids = [r.id for r in relations]
        rels = await kb.store.get_relations(rel_ids)
        assert {i: (a, b, {k: v for k, v in p.items() if k != "id"}) for i, (a, b, p) in rels.items()} == (
            await memory.store.get_relations(rel_ids)
        )
        # the imported double[] embeddings score exactly as the memory store's float32 vectors
        for search in (
            {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"},
            {"subject_label": "City", "relation_label": "IsCapitalOf", "object_similarity_search": "Germny"},
        ):
            got = await kb.triplet_search(search, threshold=0.5)
            want = await memory.triplet_search(search, threshold=0.5)
            assert len(want) > 0
            assert [(h.text(), h.score) for h in got] == [(h.text(), h.score) for h in want]
        # the store keeps working online after the import: an upsert merges into the imported nodes
        await kb.upsert(seed_facts()[:2])
        assert await kb.counts() == await memory.counts()
    finally:
        await kb.aclose()
    server.sh("stop")
    # a second import into the now populated database is refused unless told to overwrite
    with pytest.raises(StoreError, match="overwrite"):
        import_records(nodes, relations, home=server.base / "home", lib=server.base / "lib")
    # texts with line breaks (the importer then parses line-break aware) round-trip through an overwrite
    city = next(n for n in nodes if n.label == "City")
    text = 'two\nlines\r\nand a "quote"'
    broken = NodeRecord(city.id, city.label, {**city.properties, "name": text}, city.embedding)
    again = [broken if n is city else n for n in nodes]
    import_records(again, relations, home=server.base / "home", lib=server.base / "lib", overwrite=True)
    server.sh("start")
    kb = kag.KnowledgeBase(
        server.uri, username="neo4j", password=PASSWORD, entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS
    )
    try:
        await kb.ensure_ready()
        assert (await kb.store.get_nodes([city.id]))[city.id]["name"] == text
        assert await kb.counts() == await memory.counts()
    finally:
        await kb.aclose()


def _vec() -> np.ndarray:
    return np.ones(4, dtype=np.float32) / 2


def test_csvs_refuse_what_the_importer_cannot_load(tmp_path: Path) -> None:
    a = NodeRecord("a", "City", {"label": "City", "name": "A"}, _vec())
    with pytest.raises(InvalidInputError, match="not among the nodes"):
        write_csvs([a], [RelationRecord("r", "IsCityOf", "a", "b", {})], tmp_path)
    mixed = NodeRecord("b", "City", {"label": "City", "name": 3}, _vec())
    with pytest.raises(InvalidInputError, match="mixes"):
        write_csvs([a, mixed], [], tmp_path)
    with pytest.raises(InvalidInputError, match="twice"):
        write_csvs([a, a], [], tmp_path)
    nested = NodeRecord("c", "City", {"label": "City", "meta": {"x": 1}}, _vec())
    with pytest.raises(InvalidInputError, match="dict"):
        write_csvs([nested], [], tmp_path)


def test_csv_columns_carry_neo4j_types(tmp_path: Path) -> None:
    nodes = [
        NodeRecord("a", "City", {"label": "City", "population": 3, "kag_sources": ["x", "y"]}, _vec()),
        NodeRecord("b", "City", {"label": "City", "population": 2.5, "kag_direct": True}, _vec()),
    ]
    files = write_csvs(nodes, [RelationRecord("r", "NearTo", "a", "b", {"km": 1.5})], tmp_path)
    header = files.nodes[0].read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header == [
        "id:ID",
        ":LABEL",
        "kag_ns:string",
        "kag_direct:boolean",
        "kag_sources:string[]",
        "label:string",
        "population:double",
        "embedding:double[]",
    ]
    rel_header = files.relations[0].read_text(encoding="utf-8").splitlines()[0]
    assert rel_header == ":START_ID,:END_ID,:TYPE,id:string,kag_ns:string,km:double"
    assert files.nodes[0].read_text(encoding="utf-8").splitlines()[1].split(",")[2] == "default"
    assert (files.node_count, files.relation_count) == (2, 1)


def test_line_breaks_in_cells_switch_on_multiline_parsing(tmp_path: Path) -> None:
    a = NodeRecord("a", "City", {"label": "City", "name": "A"}, _vec())
    b = NodeRecord("b", "City", {"label": "City", "name": 'B, "the" one'}, _vec())
    plain = write_csvs([a, b], [RelationRecord("r", "NearTo", "a", "b", {"note": "x"})], tmp_path / "p")
    assert plain.multiline == []  # quotes and commas are quoted cells, not line breaks
    cmd = import_command(plain, lib=tmp_path)
    assert "--multiline-fields=false" in cmd and "--multiline-fields=true" not in cmd
    for text in ("one\ntwo", "one\rtwo"):
        rel = RelationRecord("r", "NearTo", "a", "b", {"note": text})
        files = write_csvs([a, b], [rel], tmp_path / str(len(text) + ord(text[3])))
        assert files.multiline == files.relations  # the node file has no line break
        assert "--multiline-fields=true" in import_command(files, lib=tmp_path)


def test_csv_cells_widen_and_refuse_per_column(tmp_path: Path) -> None:
    a = NodeRecord("a", "City", {"label": "City", "name": "A"}, _vec())
    b = NodeRecord("b", "City", {"label": "City", "name": "B"}, _vec())
    rels = [
        RelationRecord("r1", "NearTo", "a", "b", {"km": 3, "tags": [1, 2.5]}),
        RelationRecord("r2", "NearTo", "b", "a", {"km": 4.25}),
        RelationRecord("r3", "NearTo", "a", "a", {"tags": [7]}),
    ]
    files = write_csvs([a, b], rels, tmp_path)
    lines = files.relations[0].read_text(encoding="utf-8").splitlines()
    # ints and floats in one column (scalars or list items) widen to double; a missing value stays empty
    assert lines[0] == ":START_ID,:END_ID,:TYPE,id:string,kag_ns:string,km:double,tags:double[]"
    assert lines[1].split(",")[5:] == ["3.0", "1.0\x1f2.5"]
    assert lines[2].split(",")[5:] == ["4.25", ""]
    assert lines[3].split(",")[5:] == ["", "7.0"]
    # a column whose values are all ints stays long and keeps their digits
    files = write_csvs([a, b], [RelationRecord("r", "NearTo", "a", "b", {"km": 12345678901234})], tmp_path / "l")
    assert files.relations[0].read_text(encoding="utf-8").splitlines()[1].endswith(",12345678901234")
    mixed_list = RelationRecord("r", "NearTo", "a", "b", {"tags": ["x", 1]})
    with pytest.raises(InvalidInputError, match=r"NearTo\.tags mixes"):
        write_csvs([a, b], [mixed_list], tmp_path / "m")
    nested = RelationRecord("r", "NearTo", "a", "b", {"tags": [{"x": 1}]})
    with pytest.raises(InvalidInputError, match=r"NearTo\.tags holds a dict"):
        write_csvs([a, b], [nested], tmp_path / "n")
    delimiter = NodeRecord("c", "City", {"label": "City", "name": "C\x1fD"}, _vec())
    with pytest.raises(InvalidInputError, match=r"c\.name contains the control character"):
        write_csvs([a, delimiter], [], tmp_path / "d")
    with pytest.raises(InvalidInputError, match=r"r\.km is not a finite number"):
        write_csvs([a, b], [RelationRecord("r", "NearTo", "a", "b", {"km": float("nan")})], tmp_path / "f")


async def test_bulk_upsert_writes_what_upsert_writes(neo4j_kb_factory: Any) -> None:
    memory = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await memory.upsert(seed_facts())
    saved_nodes, saved_relations = _records(memory)
    kb = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    # small batches, side by side: many transactions, the same graph
    await store.bulk_upsert(saved_nodes, saved_relations, batch_size=3, concurrency=3)
    assert await kb.counts() == await memory.counts()
    ids = [n.id for n in saved_nodes]
    got = {i: {k: v for k, v in p.items() if k != "id"} for i, p in (await store.get_nodes(ids)).items()}
    assert got == await memory.store.get_nodes(ids)
    search = {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"}
    got_hits = await kb.triplet_search(search, threshold=0.5)
    want_hits = await memory.triplet_search(search, threshold=0.5)
    assert [(h.text(), h.score) for h in got_hits] == [(h.text(), h.score) for h in want_hits] and len(want_hits)
    dangling = RelationRecord("r_x", saved_relations[0].label, saved_nodes[0].id, "e_missing", {})
    with pytest.raises(StoreFormatError, match="e_missing"):
        await store.bulk_upsert([], [dangling])
    with pytest.raises(ConfigError):
        await store.bulk_upsert(saved_nodes, [], concurrency=0)


def _records(kb: kag.KnowledgeBase) -> tuple[list[NodeRecord], list[RelationRecord]]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kb.json"
        kb.store.save(path)  # type: ignore[attr-defined]
        return read_store_file(path)
