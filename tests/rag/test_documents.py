"""Document and Chunk models: stable ids, JSON-like metadata, span invariants."""

from __future__ import annotations

import datetime
import hashlib

import pytest

from kag.datamodels.documents import Chunk, Document, chunk_id, document_id
from kag.errors import InvalidInputError


def test_document_id_is_sha256_of_source_nul_text() -> None:
    expected = "doc_" + hashlib.sha256(b"src\x00hello").hexdigest()[:24]
    assert document_id("src", "hello") == expected
    assert Document(text="hello", source="src").id == expected
    # the NUL keeps ("ab", "c") and ("a", "bc") apart
    assert document_id("ab", "c") != document_id("a", "bc")


def test_chunk_id_is_stable_and_depends_on_all_parts() -> None:
    base = chunk_id("doc_x", 0, "text")
    assert base == "chk_" + hashlib.sha256(b"doc_x\x000\x00text").hexdigest()[:24]
    assert base == chunk_id("doc_x", 0, "text")
    assert len({base, chunk_id("doc_y", 0, "text"), chunk_id("doc_x", 1, "text"), chunk_id("doc_x", 0, "texT")}) == 4


def test_from_text_defaults() -> None:
    doc = Document.from_text("some text", metadata={"lang": "en"})
    assert doc.source == "inline"
    assert doc.metadata == {"source": "inline", "lang": "en"}
    assert doc.mime_type == "text/plain"
    assert doc.id == document_id("inline", "some text")
    assert Document.from_text("some text", metadata={"lang": "en"}).id == doc.id


def test_explicit_id_is_kept() -> None:
    assert Document(id="mine", text="t", source="s").id == "mine"


@pytest.mark.parametrize(
    "bad",
    [
        {"when": datetime.date(2024, 1, 1)},
        {"nested": {"deep": {1, 2}}},
        {"list": [object()]},
        {"nan": float("nan")},
        {"inf": [float("inf")]},
        {1: "non-str key"},
    ],
)
def test_metadata_must_be_json_like(bad: dict) -> None:
    with pytest.raises(InvalidInputError):
        Document.from_text("x", metadata=bad)
    with pytest.raises(InvalidInputError):
        Chunk(document_id="d", index=0, text="x", start=0, end=1, metadata=bad)


def test_json_like_metadata_accepted_and_tuples_become_lists() -> None:
    meta = {"a": 1, "b": 2.5, "c": None, "d": True, "e": ["x", {"f": [1, 2]}], "t": (1, 2)}
    doc = Document.from_text("x", metadata=meta)
    assert doc.metadata["t"] == [1, 2]
    assert doc.metadata["e"] == ["x", {"f": [1, 2]}]


def test_wrong_field_types_raise_invalid_input() -> None:
    with pytest.raises(InvalidInputError):
        Document(text=3, source="s")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Document(text="t", source="s", unknown=1)  # type: ignore[call-arg]


def test_chunk_span_must_match_text() -> None:
    chunk = Chunk(document_id="doc_1", index=2, text="abc", start=5, end=8)
    assert chunk.id == chunk_id("doc_1", 2, "abc")
    with pytest.raises(InvalidInputError, match="length"):
        Chunk(document_id="doc_1", index=0, text="abc", start=0, end=2)
    with pytest.raises(InvalidInputError):
        Chunk(document_id="doc_1", index=-1, text="", start=0, end=0)
    with pytest.raises(InvalidInputError):
        Chunk(document_id="doc_1", index=0, text="", start=3, end=2)


def test_round_trip_json() -> None:
    doc = Document.from_text("round trip", metadata={"k": [1, "v"]})
    again = Document.model_validate_json(doc.model_dump_json())
    assert again == doc
