"""The Knowledge facade on the memory backend: indexing lifecycle, search, scope, writes."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

import kag
from kag.datamodels.documents import Document
from kag.errors import ConfigError, InvalidInputError, StoreFormatError
from kag.examples.seed import City, Country, IsCapitalOf
from kag.knowledge.factory import create_knowledge
from kag.knowledge.hits import SearchHit
from kag.knowledge.knowledge import Knowledge
from kag.rag.splitter import RecursiveCharacterSplitter
from tests.knowledge.conftest import CORPUS, KnowledgeFactory, corpus_documents


def passages(hits: list[SearchHit]) -> list[SearchHit]:
    return [h for h in hits if h.kind == "passage"]


def facts(hits: list[SearchHit]) -> list[SearchHit]:
    return [h for h in hits if h.kind == "fact"]


async def test_sources_are_indexed_lazily_once(corpus_dir: Path) -> None:
    k = create_knowledge(name="docs", description="d", sources=[corpus_dir])
    assert k.sources == [corpus_dir]
    assert (await k.store.counts())["documents"] == 0  # nothing indexed yet
    report = await k.ready()
    assert (report.documents, report.skipped, report.errors) == (5, 0, [])
    assert report.chunks >= 5 and k.last_report is report
    again = await k.ready()
    assert (again.documents, again.chunks) == (0, 0)
    docs = await k.documents()
    assert {Path(d.source).name for d in docs} == set(CORPUS)
    assert {d.origin for d in docs} == {str(corpus_dir.resolve())} and {d.origin_kind for d in docs} == {"path"}
    await k.aclose()


async def test_add_is_idempotent_and_reports_errors(knowledge_factory: KnowledgeFactory, tmp_path: Path) -> None:
    k = await knowledge_factory()
    first = await k.add(corpus_documents())
    assert first.documents == 5 and first.ok
    second = await k.add(corpus_documents())
    assert (second.documents, second.chunks, second.skipped) == (0, 0, 5)
    bad = await k.add([tmp_path / "missing.md", "Just some inline text about Rome."])
    assert bad.documents == 1 and len(bad.errors) == 1 and "missing.md" in bad.errors[0].source
    assert not bad.ok
    with pytest.raises(InvalidInputError):
        await k.add([object()])


async def test_add_text_and_where(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    report = await k.add_text("Lisbon trams climb steep hills.", source="notes", metadata={"lang": "pt", "year": 2024})
    assert report.documents == 1
    await k.add_text("Porto trams are old.", source="notes", metadata={"lang": "pt", "year": 2019})
    hits = passages(await k.search("trams", where={"year": {"$gte": 2020}}))
    assert [h.text for h in hits] == ["Lisbon trams climb steep hills."]
    hit = hits[0]
    assert hit.source == "notes" and hit.metadata["lang"] == "pt" and hit.metadata["chunk_index"] == 0
    assert hit.ids[0].startswith("chk_") and hit.ids[1].startswith("doc_") and hit.id == hit.ids[0]
    assert hit.to_dict()["kind"] == "passage"
    with pytest.raises(InvalidInputError):
        await k.add_text("   ")
    with pytest.raises(InvalidInputError):
        await k.search("trams", where={"year": {"$nope": 1}})


async def test_search_returns_facts_then_passages(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(name="geo")
    await k.add(corpus_documents())
    hits = await k.search("What is the capital of France?", k=3)
    kinds = [h.kind for h in hits]
    assert kinds == sorted(kinds)  # "fact" < "passage": facts first
    top_fact = facts(hits)[0]
    assert top_fact.text == "Paris -[IsCapitalOf]-> France" and top_fact.source == "graph"
    rel = IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))
    assert top_fact.ids == (City(name="Paris").id, rel.id, Country(name="France").id) and top_fact.id == rel.id
    assert top_fact.metadata["relation"]["label"] == "IsCapitalOf"
    assert len(facts(hits)) == 3 and len(passages(hits)) == 3
    assert passages(hits)[0].source == "paris.md"
    assert City(name="Paris").id in passages(hits)[0].mentions
    assert [h.score for h in facts(hits)] == sorted((h.score for h in facts(hits)), reverse=True)
    assert await k.search("capital", k=0) == []
    with pytest.raises(InvalidInputError):
        await k.search("  ")
    with pytest.raises(InvalidInputError):
        await k.search("x", k=-1)


async def test_no_facts_without_mentions_or_when_disabled(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    await k.add(corpus_documents())
    assert facts(await k.search("sourdough bread")) == []
    k2 = await knowledge_factory(facts=False)
    assert facts(await k2.search("capital of France")) == []


async def test_entity_cards_when_no_relations(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(relation_models=(), seed=False)
    await k.upsert([City(name="Paris", population=2_103_000)])
    (fact,) = facts(await k.search("population of Paris"))
    assert fact.text == "City Paris: population=2103000" and fact.ids == (City(name="Paris").id,)


async def test_scope_cannot_be_widened(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(where={"lang": "fr"})
    await k.add(corpus_documents())
    assert k.scope({"lang": "de"}) == {"$and": [{"lang": "fr"}, {"lang": "de"}]}
    assert {h.source for h in passages(await k.search("capital"))} == {"paris.md"}
    assert passages(await k.search("capital", where={"lang": "de"})) == []
    widened = await k.search("capital", where={"$or": [{"lang": "de"}, {"lang": "fr"}]})
    assert {h.source for h in passages(widened)} == {"paris.md"}
    assert passages(await k.search("capital", where={"lang": {"$exists": True}}))
    assert passages(await k.search("capital", where={"lang": {"$ne": "fr"}})) == []
    # facts too: only entities some in-scope chunk mentions
    hits = await k.search("Tokyo or Paris, which capital?")
    subjects = {h.metadata["subject"]["name"] for h in facts(hits)}
    assert "Paris" in subjects and "Tokyo" not in subjects
    assert facts(await k.search("Tokyo")) == []
    tool_text = await k.as_tool()("Berlin Wall", 5, '{"lang": "de"}')
    assert "berlin.md" not in tool_text and "No results" in tool_text


async def test_modes_and_overrides(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(mode="keyword", facts=False)
    await k.add(corpus_documents())
    for mode in ("vector", "keyword", "hybrid"):
        (top, *_) = await k.search("Colosseum amphitheatre", mode=mode)
        assert top.source == "rome.md", mode
    keyword = await k.search("sourdough", k=5)
    assert [h.source for h in keyword] == ["bread.md"]  # keyword mode: only matching chunks
    vector = await k.search("sourdough", k=5, mode="vector")
    assert len(vector) == 5 and all(0.0 <= h.score <= 1.0 for h in vector)
    with pytest.raises(InvalidInputError):
        await k.search("x", mode="fuzzy")


async def test_score_threshold(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(mode="vector", score_threshold=0.999)
    await k.add(corpus_documents())
    assert await k.search("capital of France") == []


async def test_mmr_diversifies(knowledge_factory: KnowledgeFactory) -> None:
    text = "Rome is the capital of Italy and has the Colosseum."
    docs = [Document.from_text(text, source=f"copy{i}") for i in range(3)]
    docs.append(Document.from_text("Rome has many fountains and Italian food.", source="other"))
    plain = await knowledge_factory(mode="vector", facts=False)
    await plain.add(docs)
    top2 = await plain.search("Rome capital Italy Colosseum", k=2)
    assert {h.source for h in top2} <= {"copy0", "copy1", "copy2"}
    diverse = await knowledge_factory(mode="vector", facts=False, mmr_lambda=0.3)
    await diverse.add(docs)
    top2 = await diverse.search("Rome capital Italy Colosseum", k=2)
    assert "other" in {h.source for h in top2}


async def test_upsert_links_existing_chunks(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    await k.add_text("Lisbon is the capital of Portugal.", source="pt")
    (hit,) = passages(await k.search("Lisbon"))
    assert hit.mentions == ()
    result = await k.upsert([IsCapitalOf(subj=City(name="Lisbon"), obj=Country(name="Portugal"))])
    assert result["entities"] == 2 and result["relations"] == 1 and result["mentions"] == 2
    hits = await k.search("Lisbon")
    assert facts(hits)[0].text == "Lisbon -[IsCapitalOf]-> Portugal"
    assert set(passages(hits)[0].mentions) == {City(name="Lisbon").id, Country(name="Portugal").id}
    assert (await k.upsert(City(name="Porto"), link=False)) == {"entities": 1, "relations": 0}


class Place(kag.Entity):
    label: Literal["Place"] = "Place"
    name: str
    aliases: list[str] = []


async def test_aliases_are_linked(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(entity_models=[Place], relation_models=(), seed=False)
    nyc = Place(name="New York City", aliases=["NYC", "Big Apple"])
    await k.upsert([nyc])
    await k.add_text("The Big Apple never sleeps.", source="a")
    (hit,) = passages(await k.search("sleeps"))
    assert hit.mentions == (nyc.id,)
    assert facts(await k.search("what about nyc?"))[0].ids == (nyc.id,)


async def test_delete_documents_sources_and_entities(knowledge_factory: KnowledgeFactory, corpus_dir: Path) -> None:
    k = await knowledge_factory()
    await k.add(corpus_dir)
    await k.add_text("Lisbon is sunny.", source="notes")
    counts = await k.counts()
    assert counts["documents"] == 6 and counts["City"] == 12
    docs = await k.documents()
    paris = next(d for d in docs if d.source.endswith("paris.md"))
    assert await k.delete(paris.id) == 1
    assert await k.delete(str(corpus_dir / "rome.md")) == 1  # by source path
    assert await k.delete("notes") == 1
    assert await k.delete(["doc_missing", "nothing-like-this"]) == 0
    assert await k.delete(City(name="Osaka")) == 1
    assert facts(await k.search("Osaka")) == []
    assert await k.delete(str(corpus_dir)) == 3  # by the added directory
    assert (await k.counts())["documents"] == 0
    with pytest.raises(InvalidInputError):
        await k.delete([3.5])


async def test_refresh_reindexes_changed_and_deletes_missing(
    knowledge_factory: KnowledgeFactory, corpus_dir: Path
) -> None:
    k = await knowledge_factory(splitter=RecursiveCharacterSplitter(200, 20))
    await k.add(corpus_dir)
    unchanged = await k.refresh()
    assert (unchanged.documents, unchanged.skipped, unchanged.deleted, unchanged.errors) == (0, 5, 0, [])
    (corpus_dir / "rome.md").write_text("# Rome\n\nRome now has a metro line C.", encoding="utf-8")
    (corpus_dir / "bread.md").unlink()
    (corpus_dir / "lisbon.md").write_text("# Lisbon\n\nLisbon has trams.", encoding="utf-8")
    report = await k.refresh()
    assert (report.documents, report.skipped, report.deleted) == (2, 3, 1)  # rome replaced, lisbon new
    assert [Path(e.source).name for e in report.errors] == ["bread.md"]  # kept, reported
    assert [h.text for h in passages(await k.search("metro line", mode="keyword"))] == [
        "# Rome\n\nRome now has a metro line C."
    ]
    assert passages(await k.search("Colosseum", mode="keyword")) == []  # old version gone
    assert (await k.counts())["documents"] == 6
    final = await k.refresh(delete_missing=True)
    assert (final.documents, final.deleted, final.errors) == (0, 1, [])
    assert (await k.counts())["documents"] == 5
    for file in corpus_dir.iterdir():
        file.unlink()
    corpus_dir.rmdir()
    gone = await k.refresh()
    assert len(gone.errors) == 1 and (await k.counts())["documents"] == 5
    assert (await k.refresh(delete_missing=True)).deleted == 5


def test_sync_facade(corpus_dir: Path) -> None:
    k = create_knowledge(sources=[corpus_dir], entity_models=[City, Country], relation_models=[IsCapitalOf])
    k.sync.upsert([IsCapitalOf(subj=City(name="Rome"), obj=Country(name="Italy"))])
    hits = k.sync.search("Colosseum in Rome")
    assert hits[0].kind == "fact" and any(h.source.endswith("rome.md") for h in hits)
    assert "[knowledge:1]" in k.sync.context("Colosseum")
    k.sync.close()


async def test_save_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "kb.json"
    k = create_knowledge(f"memory://{path}", entity_models=[City, Country], relation_models=[IsCapitalOf])
    await k.upsert([IsCapitalOf(subj=City(name="Rome"), obj=Country(name="Italy"))])
    await k.add(corpus_documents())
    before = await k.search("Rome Colosseum")
    assert k.save() == str(path) and (tmp_path / "kb.json.passages.json").exists()
    again = create_knowledge(f"memory://{path}", entity_models=[City, Country], relation_models=[IsCapitalOf])
    after = await again.search("Rome Colosseum")
    assert [(h.ids, h.text) for h in after] == [(h.ids, h.text) for h in before]
    assert [h.score for h in after] == pytest.approx([h.score for h in before], abs=1e-6)
    with pytest.raises(StoreFormatError):
        create_knowledge().save()  # an in-memory store without a file


@pytest.mark.parametrize(
    "options",
    [
        {"name": "has space"},
        {"name": "x" * 58},
        {"mode": "fuzzy"},
        {"alpha": 1.5},
        {"mmr_lambda": -0.1},
        {"fetch_k": 0},
        {"context_max_chars": 10},
        {"score_threshold": float("nan")},
        {"where": {"lang": {"$bad": 1}}},
    ],
)
def test_invalid_options(options: dict[str, object]) -> None:
    with pytest.raises((ConfigError, InvalidInputError)):
        create_knowledge(**options)  # type: ignore[arg-type]


def test_knowledge_needs_a_knowledge_base() -> None:
    with pytest.raises(ConfigError):
        Knowledge("memory://")  # type: ignore[arg-type]
    assert "docs" in repr(create_knowledge(name="docs"))


@pytest.mark.parametrize("backend", ["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
async def test_refresh_takes_a_desired_set_and_delete_selects_by_chunk_and_metadata(
    knowledge_factory: KnowledgeFactory, tmp_path: Path
) -> None:
    k = await knowledge_factory(seed=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in CORPUS.items():
        (docs / name).write_text(text, encoding="utf-8")
    await k.add(Document.from_text("A note kept in memory.", source="note.md", metadata={"kind": "note"}))
    first = await k.refresh([docs], metadata={"kind": "city"})
    assert (first.documents, first.skipped, first.deleted) == (5, 0, 0)
    assert first.sources == sorted(str(docs / n) for n in CORPUS)
    # a failed source blocks deletions: it must not look omitted
    blocked = await k.refresh([docs / "paris.md", tmp_path / "missing.md"], delete_missing=True)
    assert blocked.deleted == 0 and not blocked.ok and (await k.counts())["documents"] == 6
    kept = await k.refresh([docs / "paris.md", docs / "rome.md"], delete_missing=True)
    assert (kept.skipped, kept.deleted) == (2, 4)
    assert kept.deleted_sources == sorted([*(str(docs / n) for n in ("berlin.md", "tokyo.md", "bread.md")), "note.md"])
    hits = await k.search("Colosseum amphitheatre", k=1)
    assert hits[0].metadata["kind"] == "city"
    assert await k.delete(ids=[hits[0].chunk_id or ""]) == 1  # a chunk id deletes its document
    assert await k.delete(where={"kind": "city"}) == 1 and (await k.counts())["documents"] == 0


async def test_vector_store_knowledge_retries_a_failed_write_and_refuses_what_it_cannot_do() -> None:
    from kag.errors import UnsupportedKnowledgeOperationError
    from kag.rag.vectorstores import InMemoryVectorStore

    class Flaky(InMemoryVectorStore):
        failures = 1

        async def upsert(self, chunks: object, embeddings: object) -> int:
            if self.failures:
                self.failures -= 1
                raise OSError("disk full")
            return await super().upsert(chunks, embeddings)  # type: ignore[arg-type]

    store = Flaky()
    k = Knowledge(store=store, name="flaky")
    doc = Document.from_text("Rome is the capital of Italy.", source="rome.md")
    with pytest.raises(OSError, match="disk full"):
        await k.upsert(doc)
    report = await k.upsert(doc)  # not remembered as written: the retry writes it
    assert (report.documents, report.skipped) == (1, 0) and await store.list_sources() == ["rome.md"]
    assert (await k.upsert(doc)).skipped == 1
    assert (await k.counts()) == {"sources": 1} and k.managed
    with pytest.raises(UnsupportedKnowledgeOperationError, match="VectorStore"):
        _ = k.kb
    with pytest.raises(ConfigError, match="store="):
        Knowledge(kag.KnowledgeBase("memory://"), store=store)
