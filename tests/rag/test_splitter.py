"""RecursiveCharacterSplitter: boundaries, exact offsets, bounds (property-tested)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.datamodels.documents import Document, chunk_id
from kag.errors import InvalidInputError
from kag.rag.splitter import RecursiveCharacterSplitter


def test_prefers_paragraphs() -> None:
    para = "word " * 15  # 75 chars
    text = f"{para}\n\n{para}\n\n{para}"
    chunks = RecursiveCharacterSplitter(chunk_size=160, chunk_overlap=0).split_text(text)
    assert chunks == [f"{para}\n\n{para}".strip(), para.strip()]


def test_falls_back_to_sentences_then_words_then_characters() -> None:
    splitter = RecursiveCharacterSplitter(chunk_size=30, chunk_overlap=0)
    sentences = "One short sentence. Another short one. A third one here."
    assert splitter.split_text(sentences) == ["One short sentence.", "Another short one.", "A third one here."]
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    assert all(len(c) <= 30 and not c.startswith(" ") for c in splitter.split_text(words))
    assert " ".join(splitter.split_text(words)) == words
    blob = "x" * 75
    assert splitter.split_spans(blob) == [(0, 30), (30, 60), (60, 75)]


def test_overlap_repeats_whole_pieces() -> None:
    text = " ".join(f"w{i:02d}" for i in range(40))  # "w00 w01 ..." 4 chars per piece
    splitter = RecursiveCharacterSplitter(chunk_size=40, chunk_overlap=12)
    chunks = splitter.split_text(text)
    for prev, nxt in itertools.pairwise(chunks):
        shared = [w for w in nxt.split() if w in prev.split()]
        assert 1 <= len(shared) <= 3
    character_windows = RecursiveCharacterSplitter(chunk_size=10, chunk_overlap=4)
    assert character_windows.split_spans("y" * 22) == [(0, 10), (6, 16), (12, 22)]


def test_empty_and_whitespace() -> None:
    splitter = RecursiveCharacterSplitter(chunk_size=10, chunk_overlap=2)
    assert splitter.split_spans("") == []
    assert splitter.split_spans(" \n\n \t ") == []
    assert splitter.split_text("  short  ") == ["short"]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, 11), (10, -1), (True, 0), (5.5, 1)])
def test_invalid_sizes(size: object, overlap: object) -> None:
    with pytest.raises(InvalidInputError):
        RecursiveCharacterSplitter(chunk_size=size, chunk_overlap=overlap)  # type: ignore[arg-type]


def test_separators_must_be_strings() -> None:
    with pytest.raises(InvalidInputError):
        RecursiveCharacterSplitter(separators="\n")
    # without "" listed, the size bound still holds (character windows as a last resort)
    spans = RecursiveCharacterSplitter(10, 0, separators=("\n",)).split_spans("z" * 25)
    assert spans == [(0, 10), (10, 20), (20, 25)]


def test_split_documents_offsets_ids_metadata() -> None:
    doc = Document.from_text(
        "First paragraph here.\n\nSecond paragraph, a bit longer than the first.",
        source="notes",
        metadata={"lang": "en"},
    )
    chunks = RecursiveCharacterSplitter(chunk_size=40, chunk_overlap=5).split_documents([doc])
    assert len(chunks) >= 2
    for i, chunk in enumerate(chunks):
        assert doc.text[chunk.start : chunk.end] == chunk.text
        assert chunk.index == i and chunk.document_id == doc.id
        assert chunk.id == chunk_id(doc.id, i, chunk.text)
        assert chunk.metadata["lang"] == "en" and chunk.metadata["source"] == "notes"
        assert chunk.metadata["chunk_index"] == i
        assert (chunk.metadata["start"], chunk.metadata["end"]) == (chunk.start, chunk.end)
    again = RecursiveCharacterSplitter(chunk_size=40, chunk_overlap=5).split_documents([doc])
    assert [c.id for c in again] == [c.id for c in chunks]
    with pytest.raises(InvalidInputError):
        RecursiveCharacterSplitter().split_documents(["not a document"])  # type: ignore[list-item]


def test_real_corpus_bounds(topics: dict[str, str]) -> None:
    splitter = RecursiveCharacterSplitter(chunk_size=800, chunk_overlap=100)
    for text in list(topics.values())[:30]:
        spans = splitter.split_spans(text)
        assert all(0 < e - s <= 800 for s, e in spans)
        assert [s for s, _ in spans] == sorted(s for s, _ in spans)


# ------------------------------------------------------------------ properties

_alphabet = st.sampled_from([*list("ab cd.\n\t"), "\n\n", ". ", "é", "字", " "])
texts = st.lists(_alphabet, max_size=400).map("".join)


@st.composite
def splitters(draw: st.DrawFn) -> RecursiveCharacterSplitter:
    size = draw(st.integers(min_value=1, max_value=120))
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return RecursiveCharacterSplitter(chunk_size=size, chunk_overlap=overlap)


_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(text=texts, splitter=splitters())
def test_property_offsets_bounds_coverage(text: str, splitter: RecursiveCharacterSplitter) -> None:
    spans = splitter.split_spans(text)
    covered = [False] * len(text)
    for start, end in spans:
        chunk = text[start:end]
        assert 0 < len(chunk) <= splitter.chunk_size
        assert chunk == chunk.strip()  # trimmed, never whitespace-only
        for i in range(start, end):
            covered[i] = True
    for i, ch in enumerate(text):
        if not ch.isspace():
            assert covered[i], f"character {i} ({ch!r}) is in no chunk"
    # spans move forward and overlap by at most chunk_overlap
    assert [s for s, _ in spans] == sorted({s for s, _ in spans})
    for (_, prev_end), (next_start, _) in itertools.pairwise(spans):
        assert prev_end - next_start <= splitter.chunk_overlap
    assert splitter.split_spans(text) == spans  # deterministic


@_settings
@given(text=texts, splitter=splitters())
def test_property_documents_match_text(text: str, splitter: RecursiveCharacterSplitter) -> None:
    doc = Document.from_text(text + "!")  # never empty
    chunks = splitter.split_documents([doc])
    assert chunks
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    assert [c.id for c in splitter.split_documents([doc])] == [c.id for c in chunks]
