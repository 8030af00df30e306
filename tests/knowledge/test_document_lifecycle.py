"""Document-level lifecycle: deleting or re-indexing a document retracts what it contributed.

Extracted items carry the ids of the chunks they came from (``kag_sources``, written by
``KnowledgeBase.upsert(..., sources=...)`` exactly as ``KnowledgeExtractor`` writes them);
items upserted without sources are marked as upserted directly. Deleting a document
deletes its chunks and MENTIONS, removes its chunks from every item's provenance, and
deletes the items left with no provenance that were never upserted directly. Every
scenario runs on memory and on Neo4j, and the two end states must be identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kag.datamodels.documents import Document
from kag.examples.seed import City, Country, IsCapitalOf, IsCityOf
from kag.knowledge.knowledge import Knowledge
from tests.knowledge.conftest import KnowledgeFactory

pytestmark = pytest.mark.neo4j

PARIS = "# Paris\n\nParis is the capital of France. Lyon is a city of France. Rome is far away."
BERLIN = "# Berlin\n\nBerlin is the capital of Germany, far from Lyon in France."
ITEMS = {
    "paris": City(name="Paris"),
    "lyon": City(name="Lyon"),
    "rome": City(name="Rome"),
    "berlin": City(name="Berlin"),
    "france": Country(name="France"),
    "germany": Country(name="Germany"),
    "italy": Country(name="Italy"),
}


@pytest.fixture(params=["memory", "neo4j"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def chunks_of(knowledge: Knowledge) -> dict[str, list[str]]:
    """Document id -> its chunk ids (through the passage store's public reads)."""
    texts = await knowledge.store.chunk_texts(None, 10_000)
    rows = await knowledge.store.get_chunks([cid for cid, _ in texts])
    out: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: (r.document_id, r.index)):
        out.setdefault(row.document_id, []).append(row.chunk_id)
    return out


async def extract(knowledge: Knowledge, chunk: str, items: list[Any]) -> None:
    """Write ``items`` with provenance ``chunk``, as KnowledgeExtractor does (endpoints included)."""
    sources: dict[str, list[str]] = {item.id: [chunk] for item in items}
    for item in items:
        if isinstance(item, IsCapitalOf | IsCityOf):
            sources.setdefault(item.subj.id, [chunk])
            sources.setdefault(item.obj.id, [chunk])
    await knowledge.kb.upsert(items, sources=sources)


async def snapshot(knowledge: Knowledge) -> dict[str, Any]:
    """Every entity and relation id with its provenance, plus the counts."""
    kb = knowledge.kb
    ids = [e.id for e in ITEMS.values()]
    rels = [
        IsCapitalOf(subj=ITEMS["paris"], obj=ITEMS["france"]).id,
        IsCityOf(subj=ITEMS["lyon"], obj=ITEMS["france"]).id,
        IsCapitalOf(subj=ITEMS["berlin"], obj=ITEMS["germany"]).id,
        IsCityOf(subj=ITEMS["rome"], obj=ITEMS["italy"]).id,
    ]
    present = {i: await kb.provenance(i) for i in [*ids, *rels] if await kb.get(i) is not None}
    counts = await knowledge.counts()
    return {"items": present, "counts": {k: counts.get(k, 0) for k in ("nodes", "relations", "chunks", "mentions")}}


async def scenario(knowledge: Knowledge) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """Two documents, extracted and direct items; delete the first. Returns (chunk ids, before, after)."""
    paris_doc = Document.from_text(PARIS, source="paris.md")
    berlin_doc = Document.from_text(BERLIN, source="berlin.md")
    await knowledge.add([paris_doc, berlin_doc])
    chunks = await chunks_of(knowledge)
    a, b = chunks[paris_doc.id][0], chunks[berlin_doc.id][0]
    # Rome -> Italy was asserted directly first: it survives losing its extracted source
    await knowledge.upsert([IsCityOf(subj=ITEMS["rome"], obj=ITEMS["italy"])], link=False)
    await extract(
        knowledge,
        a,
        [
            IsCapitalOf(subj=ITEMS["paris"], obj=ITEMS["france"]),
            IsCityOf(subj=ITEMS["lyon"], obj=ITEMS["france"]),
            IsCityOf(subj=ITEMS["rome"], obj=ITEMS["italy"]),
        ],
    )
    await extract(knowledge, b, [IsCapitalOf(subj=ITEMS["berlin"], obj=ITEMS["germany"]), ITEMS["france"]])
    # Lyon is mentioned by both chunks but extracted only from the Paris one
    assert await knowledge.indexer.relink(_matcher(ITEMS["lyon"])) == 2
    before = await snapshot(knowledge)
    assert await knowledge.delete(document_ids=[paris_doc.id]) == 1
    after = await snapshot(knowledge)
    return {"a": a, "b": b}, before, after


def _matcher(entity: Any) -> Any:
    from kag.knowledge.mentions import EntityMatcher, names_of

    return EntityMatcher([(entity.id, entity.label, names_of(entity))])


async def test_deleting_a_document_removes_what_only_it_supported(knowledge_factory: KnowledgeFactory) -> None:
    knowledge = await knowledge_factory(seed=False)
    chunk, before, after = await scenario(knowledge)
    a, b = chunk["a"], chunk["b"]
    paris, lyon, france = ITEMS["paris"].id, ITEMS["lyon"].id, ITEMS["france"].id
    capital = IsCapitalOf(subj=ITEMS["paris"], obj=ITEMS["france"]).id
    rome_italy = IsCityOf(subj=ITEMS["rome"], obj=ITEMS["italy"]).id
    assert before["items"][paris] == [a] and before["items"][france] == sorted([a, b])
    assert before["counts"] == {"nodes": 7, "relations": 4, "chunks": 2, "mentions": 2}
    # extracted only from the deleted document: gone, with their relations
    for gone in (paris, lyon, capital, IsCityOf(subj=ITEMS["lyon"], obj=ITEMS["france"]).id):
        assert gone not in after["items"]
    # supported by the other document: kept, its provenance without the deleted chunk
    assert after["items"][france] == [b]
    assert after["items"][ITEMS["berlin"].id] == [b]
    # upserted directly, then also extracted from the deleted document: kept, provenance emptied
    assert after["items"][ITEMS["rome"].id] == [] and after["items"][rome_italy] == []
    assert after["items"][ITEMS["italy"].id] == []
    assert after["counts"] == {"nodes": 5, "relations": 2, "chunks": 1, "mentions": 0}


async def test_deleting_a_document_with_no_extractions_keeps_the_graph(knowledge_factory: KnowledgeFactory) -> None:
    knowledge = await knowledge_factory()  # seed facts: all upserted directly
    seeded = await knowledge.kb.counts()
    doc = Document.from_text(PARIS, source="paris.md")
    await knowledge.add([doc])
    assert (await knowledge.counts())["mentions"] >= 1  # the seed's Paris and France are mentioned
    assert await knowledge.delete(doc.id) == 1
    assert await knowledge.kb.counts() == seeded
    assert (await knowledge.counts())["mentions"] == 0


async def test_reindexing_a_changed_file_retracts_its_old_chunks(
    knowledge_factory: KnowledgeFactory, tmp_path: Path
) -> None:
    knowledge = await knowledge_factory(seed=False)
    path = tmp_path / "cities.md"
    path.write_text(PARIS, encoding="utf-8")
    await knowledge.add(path)
    (old_doc,) = await knowledge.documents()
    old_chunk = (await chunks_of(knowledge))[old_doc.id][0]
    await extract(knowledge, old_chunk, [IsCapitalOf(subj=ITEMS["paris"], obj=ITEMS["france"])])
    assert (await knowledge.kb.counts())["nodes"] == 2
    path.write_text(BERLIN, encoding="utf-8")
    report = await knowledge.refresh()
    assert report.documents == 1 and report.deleted == 1
    (new_doc,) = await knowledge.documents()
    assert new_doc.id != old_doc.id
    assert await knowledge.kb.counts() == {"nodes": 0, "relations": 0}
    # the facts search sees the retraction at once (the names cache follows kb.revision)
    assert not (await knowledge.kb.names()).exact("paris", ("City",))
    new_chunk = (await chunks_of(knowledge))[new_doc.id][0]
    await extract(knowledge, new_chunk, [IsCapitalOf(subj=ITEMS["berlin"], obj=ITEMS["germany"])])
    assert await knowledge.kb.provenance(ITEMS["berlin"]) == [new_chunk]


async def test_replacing_a_document_by_source_retracts(knowledge_factory: KnowledgeFactory) -> None:
    knowledge = await knowledge_factory(seed=False)
    first = Document.from_text(PARIS, source="notes")
    await knowledge.upsert(first)
    chunk = (await chunks_of(knowledge))[first.id][0]
    await extract(knowledge, chunk, [IsCityOf(subj=ITEMS["lyon"], obj=ITEMS["france"])])
    result = await knowledge.upsert(Document.from_text(BERLIN, source="notes"))
    assert result.deleted == 1 and result.documents == 1  # an IndexReport: the older version was replaced
    assert await knowledge.kb.get(ITEMS["lyon"]) is None and await knowledge.kb.counts() == {"nodes": 0, "relations": 0}


@pytest.mark.parametrize("backend", ["neo4j"])
async def test_memory_and_neo4j_end_in_the_same_state(knowledge_factory: KnowledgeFactory) -> None:
    from tests.knowledge.conftest import memory_knowledge

    neo4j = await knowledge_factory(seed=False)
    memory = await memory_knowledge(seed=False)
    chunk_n, before_n, after_n = await scenario(neo4j)
    chunk_m, before_m, after_m = await scenario(memory)
    assert chunk_n == chunk_m  # chunk ids hash the document and text: the same on both
    assert before_n == before_m
    assert after_n == after_m
    await memory.aclose()


async def test_knowledge_extractor_output_is_retracted_with_its_document(knowledge_factory: KnowledgeFactory) -> None:
    from kag.datamodels.documents import Chunk
    from kag.lm import ScriptedLM
    from kag.programs.extractor import KnowledgeExtractor

    knowledge = await knowledge_factory(seed=False)
    keep, drop = Document.from_text(BERLIN, source="berlin.md"), Document.from_text(PARIS, source="paris.md")
    await knowledge.add([keep, drop])
    rows = await knowledge.store.get_chunks([c for ids in (await chunks_of(knowledge)).values() for c in ids])
    chunks = [Chunk(id=r.chunk_id, document_id=r.document_id, index=r.index, text=r.text) for r in rows]
    france = {"label": "Country", "name": "France"}
    answers = {
        keep.id: {"entities": [france], "relations": []},
        drop.id: {
            "entities": [{"label": "City", "name": "Lyon", "population": 500_000}, france],
            "relations": [
                {"label": "IsCityOf", "subject": {"label": "City", "name": "Lyon"}, "object": france},
            ],
        },
    }
    by_text = {c.text: answers[c.document_id] for c in chunks}
    lm = ScriptedLM([lambda messages, schema: by_text[messages[-1]["content"].split("\n", 1)[1]]] * len(chunks))
    report = await KnowledgeExtractor(knowledge.kb, lm, concurrency=1).ingest(chunks)
    assert report.entities == 2 and report.relations == 1
    assert await knowledge.kb.counts() == {"nodes": 2, "relations": 1, "City": 1, "Country": 1, "IsCityOf": 1}
    assert await knowledge.delete(sources=["paris.md"]) == 1
    assert await knowledge.kb.counts() == {"nodes": 1, "relations": 0, "Country": 1}
    assert await knowledge.kb.provenance(ITEMS["france"]) == [c.id for c in chunks if c.document_id == keep.id]


async def test_the_direct_mark_and_provenance_survive_a_saved_memory_store(tmp_path: Path) -> None:
    from kag.knowledge.factory import create_knowledge

    path = tmp_path / "kb.json"
    options: dict[str, Any] = {"entity_models": [City, Country], "relation_models": [IsCapitalOf, IsCityOf]}
    first = create_knowledge(f"memory://{path}", **options)
    doc = Document.from_text(PARIS, source="paris.md")
    await first.add([doc])
    chunk = (await chunks_of(first))[doc.id][0]
    await first.upsert([ITEMS["rome"]], link=False)
    await extract(first, chunk, [IsCityOf(subj=ITEMS["rome"], obj=ITEMS["italy"])])
    first.save()
    again = create_knowledge(f"memory://{path}", **options)
    assert await again.kb.provenance(ITEMS["rome"]) == [chunk]
    assert await again.delete(doc.id) == 1
    # Rome was upserted directly before it was extracted: kept; Italy and the relation were only extracted
    assert await again.kb.provenance(ITEMS["rome"]) == []
    assert await again.kb.counts() == {"nodes": 1, "relations": 0, "City": 1}
