"""The seed example end to end on the memory store: semantics of every flag."""

from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import kag
from kag.errors import EmbeddingError, InvalidInputError, SchemaError, StoreFormatError
from kag.examples.seed import CAPITALS, OTHER_CITIES, City, Country, IsCapitalOf, IsCityOf

SEED = [City, Country]


class Planet(kag.Entity):
    label: Literal["Planet"] = "Planet"
    name: str


def names(hits: kag.TripletResults) -> list[tuple[str, str | None, str | None]]:
    return [
        (h.subject.name, h.relation.label if h.relation else None, h.object.name if h.object else None)  # type: ignore[attr-defined]
        for h in hits
    ]


async def test_capital_of_france(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        kag.TripletSearch(
            subject_label="City",
            relation_label="IsCapitalOf",
            object_label="Country",
            object_similarity_search="France",
        ),
        k=10,
        threshold=0.7,
    )
    assert names(hits) == [("Paris", "IsCapitalOf", "France")]
    assert hits[0].score == pytest.approx(1.0)
    assert hits[0].subject.population == 2_103_000  # type: ignore[attr-defined]
    assert isinstance(hits[0].relation, IsCapitalOf) and hits[0].relation.obj.name == "France"
    # "France" names one country exactly: the query is anchored on its id, a parameter
    assert "WHERE n1.id IN $l1_0_ids" in hits.query.text  # type: ignore[union-attr]
    assert hits.query.params["l1_0"] == {Country(name="France").id: 1.0}  # type: ignore[union-attr]


async def test_upsert_is_idempotent_and_merges(kb: kag.KnowledgeBase) -> None:
    before = await kb.counts()
    await kb.upsert(IsCityOf(subj=City(name="Paris"), obj=Country(name="France")))
    assert await kb.counts() == before
    # an endpoint without population does not erase the stored one
    paris = await kb.get(City(name="Paris"))
    assert paris is not None and paris.population == 2_103_000  # type: ignore[attr-defined]
    await kb.upsert(City(name="Paris", population=5))
    assert (await kb.get(City(name="Paris"))).population == 5  # type: ignore[union-attr]
    n_cities = len(CAPITALS) + sum(len(v) for v in OTHER_CITIES.values())
    assert before["City"] == n_cities and before["Country"] == len(CAPITALS)
    assert before["IsCapitalOf"] == len(CAPITALS) and before["IsCityOf"] == n_cities


async def test_get_and_delete(kb: kag.KnowledgeBase) -> None:
    rel = IsCapitalOf(subj=City(name="Rome"), obj=Country(name="Italy"))
    got = await kb.get(rel.id)
    assert got == IsCapitalOf(subj=City(name="Rome", population=2_873_000), obj=Country(name="Italy"))
    assert await kb.get("e_missing") is None
    assert await kb.delete(Country(name="Italy")) == 1
    assert await kb.get(rel.id) is None  # relations of a deleted entity are gone too
    hits = await kb.triplet_search(
        {"relation_label": "*", "object_label": "Country", "object_similarity_search": "Italy"}
    )
    assert list(hits) == []
    assert await kb.delete(["e_missing"]) == 0


async def test_negation(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search({"subject_label": "City", "relation_label": "IsCapitalOf", "negated": True}, k=100)
    capitals = {c for c, _ in CAPITALS.values()}
    got = {h.subject.name for h in hits}  # type: ignore[attr-defined]
    assert got == {c for v in OTHER_CITIES.values() for c in v}
    assert not got & capitals
    assert all(h.relation is None and h.score == 1.0 for h in hits)
    # negation with an object constraint: cities that are not the capital of France
    hits = await kb.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "France",
            "negated": True,
        },
        k=100,
    )
    got = {h.subject.name for h in hits}  # type: ignore[attr-defined]
    assert "Paris" not in got and "Berlin" in got


async def test_bidirectional(kb: kag.KnowledgeBase) -> None:
    with pytest.raises(SchemaError, match="set bidirectional"):  # IsCityOf points City -> Country
        await kb.triplet_search(
            {
                "subject_label": "Country",
                "subject_similarity_search": "Spain",
                "relation_label": "IsCityOf",
                "bidirectional": False,
            },
            k=50,
        )
    both = await kb.triplet_search(
        {
            "subject_label": "Country",
            "subject_similarity_search": "Spain",
            "relation_label": "IsCityOf",
            "bidirectional": True,
        },
        k=50,
    )
    assert sorted(h.object.name for h in both) == ["Barcelona", "Madrid"]  # type: ignore[union-attr]
    for h in both:
        assert h.subject.name == "Spain"  # type: ignore[attr-defined]
        assert h.relation.subj.name == h.object.name  # the relation keeps its true direction
        assert "<-[IsCityOf]-" in h.text()


async def test_count(kb: kag.KnowledgeBase) -> None:
    res = await kb.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCityOf",
            "object_label": "Country",
            "object_similarity_search": "Germany",
            "count": True,
        },
        k=1,
    )
    assert res.count == 3 and list(res) == []  # count ignores k
    res = await kb.triplet_search({"relation_label": "IsCapitalOf", "negated": True, "count": True})
    assert res.count == sum(len(v) for v in OTHER_CITIES.values())


async def test_exact_top_k_and_tie_break(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search({"relation_label": "IsCityOf"}, k=3)
    everything = await kb.triplet_search({"relation_label": "IsCityOf"}, k=100)
    assert [h.relation.id for h in hits] == [h.relation.id for h in everything][:3]  # type: ignore[union-attr]
    # all scores tie at 1.0, so the order is by subject id, then relation id
    keys = [(h.subject.id, h.relation.id) for h in everything]  # type: ignore[union-attr]
    assert keys == sorted(keys)


async def test_misspelled_names_still_found(kb: kag.KnowledgeBase) -> None:
    for typo, right in [("Germny", "Germany"), ("Spainn", "Spain"), ("Itally", "Italy"), ("Frnace", "France")]:
        hits = await kb.similarity_search("Country", typo, k=1)
        assert hits[0].entity.name == right, typo  # type: ignore[attr-defined]
    hits = await kb.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "Germny",
        },
        threshold=0.7,
    )
    assert names(hits) == [("Berlin", "IsCapitalOf", "Germany")]


async def test_threshold_applies_per_side(kb: kag.KnowledgeBase) -> None:
    # an unrelated object text matches nothing, even though the subject side is "*" (1.0)
    hits = await kb.triplet_search(
        {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "Atlantis"},
        threshold=0.7,
    )
    assert list(hits) == []
    loose = await kb.triplet_search(
        {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "Atlantis"},
        threshold=0.0,
        k=100,
    )
    assert len(loose) == len(CAPITALS)
    assert all(0.0 <= h.score <= 1.0 for h in loose)
    assert [h.score for h in loose] == sorted((h.score for h in loose), reverse=True)


async def test_geometric_mean_score(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        {
            "subject_label": "City",
            "subject_similarity_search": "Pariss",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "France",
        },
        threshold=0.5,
    )
    subj = (await kb.similarity_search("City", "Pariss", k=1))[0]
    assert hits[0].subject.name == "Paris"  # type: ignore[attr-defined]
    assert hits[0].score == pytest.approx(np.sqrt(subj.score * 1.0), abs=1e-6)


async def test_multi_hop_chain(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        {
            "hops": [
                {
                    "subject_label": "City",
                    "subject_similarity_search": "Lyon",
                    "relation_label": "IsCityOf",
                    "object_label": "Country",
                },
                {
                    "subject_label": "Country",
                    "relation_label": "IsCapitalOf",
                    "object_label": "City",
                    "bidirectional": True,
                },
            ]
        }
    )
    assert [tuple(e.name for e in h.path) for h in hits] == [("Lyon", "France", "Paris")]  # type: ignore[attr-defined]
    assert hits[0].text() == "Lyon -[IsCityOf]-> France <-[IsCapitalOf]- Paris"


async def test_chain_relationships_are_distinct(kb: kag.KnowledgeBase) -> None:
    # City -IsCityOf-> Country <-IsCityOf- City must not reuse the same relationship
    hits = await kb.triplet_search(
        {
            "hops": [
                {"subject_label": "City", "subject_similarity_search": "Madrid", "relation_label": "IsCityOf"},
                {"relation_label": "IsCityOf", "bidirectional": True},
            ]
        },
        k=50,
    )
    assert sorted(h.path[2].name for h in hits) == ["Barcelona"]  # type: ignore[attr-defined]


async def test_bad_inputs_are_typed(kb: kag.KnowledgeBase) -> None:
    with pytest.raises(SchemaError, match="allowed"):
        await kb.triplet_search({"subject_label": "Planet"})
    with pytest.raises(SchemaError, match="cannot link"):
        await kb.triplet_search({"subject_label": "Country", "relation_label": "IsCityOf", "object_label": "City"})
    with pytest.raises(InvalidInputError):
        await kb.triplet_search({"subject_similarity_search": ""})
    with pytest.raises(InvalidInputError):
        await kb.triplet_search({}, k=10**9)
    with pytest.raises(InvalidInputError):
        await kb.similarity_search("City", "*")

    with pytest.raises(SchemaError, match="unknown entity label 'Planet'"):
        await kb.upsert(Planet(name="Mars"))


async def test_nan_embedder_is_refused_and_loses_nothing() -> None:
    calls = {"n": 0}

    def bad(texts: list[str]) -> np.ndarray:
        calls["n"] += 1
        out = np.ones((len(texts), 8))
        out[0, 0] = np.nan
        return out

    kb = kag.KnowledgeBase(entity_models=SEED, embedder=kag.CallableEmbedder(bad, dimensions=8))
    with pytest.raises(EmbeddingError, match="NaN"):
        await kb.upsert(Country(name="France"))
    assert (await kb.counts())["nodes"] == 0 and calls["n"] == 1
    wrong = kag.KnowledgeBase(
        entity_models=SEED, embedder=kag.CallableEmbedder(lambda t: np.ones((len(t), 3)), dimensions=8)
    )
    with pytest.raises(EmbeddingError, match="shape"):
        await wrong.upsert(Country(name="France"))


async def test_persistence_roundtrip(tmp_path: Path, kb: kag.KnowledgeBase) -> None:
    path = tmp_path / "kb.json"
    await kb.save(str(path))
    again = kag.KnowledgeBase(f"memory://{path}", entity_models=SEED, relation_models=[IsCapitalOf, IsCityOf])
    assert await again.counts() == await kb.counts()
    search = {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "Japan"}
    a, b = await kb.triplet_search(search), await again.triplet_search(search)
    assert names(a) == names(b) == [("Tokyo", "IsCapitalOf", "Japan")]
    assert a[0].score == b[0].score


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{not json",
        '{"format": "other"}',
        '{"format": "kag-memory-store", "version": 99}',
        '{"format": "kag-memory-store", "version": 1, "dimensions": 4, "nodes": [{"id": 1}]}',
    ],
)
def test_malformed_store_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "kb.json"
    path.write_text(content)
    with pytest.raises(StoreFormatError):
        kag.KnowledgeBase(f"memory://{path}", entity_models=SEED)
    assert path.read_text() == content  # nothing is overwritten


def test_sync_facade(kb: kag.KnowledgeBase) -> None:
    base = kag.KnowledgeBase(entity_models=SEED, relation_models=[IsCapitalOf])
    base.sync.upsert([IsCapitalOf(subj=City(name="Lima"), obj=Country(name="Peru"))])
    assert [h.subject.name for h in base.sync.triplet_search({"relation_label": "IsCapitalOf"})] == ["Lima"]  # type: ignore[attr-defined]


async def test_sync_refuses_inside_event_loop(kb: kag.KnowledgeBase) -> None:
    with pytest.raises(RuntimeError, match="await"):
        kb.sync.counts()


def test_unknown_uri() -> None:
    with pytest.raises(kag.errors.ConfigError, match="memory://"):
        kag.KnowledgeBase("postgres://x", entity_models=SEED)


async def test_schema_subset_narrows_star(kb: kag.KnowledgeBase) -> None:
    subset = kag.GraphSchema([City, Country], [IsCapitalOf])
    hits = await kb.triplet_search({"relation_label": "*"}, k=100, schema=subset)
    assert {h.relation.label for h in hits} == {"IsCapitalOf"}  # type: ignore[union-attr]
    assert len(hits) == len(CAPITALS)

    class Planet2(kag.Entity):
        label: Literal["Planet2"] = "Planet2"
        name: str

    with pytest.raises(SchemaError, match="not declared by this knowledge base"):
        await kb.triplet_search({}, schema=kag.GraphSchema([Planet2], []))


async def test_hit_to_dict_has_the_whole_path(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        {
            "hops": [
                {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"},
                {"relation_label": "IsCapitalOf", "bidirectional": True},
            ]
        }
    )
    data = hits[0].to_dict()
    assert [e["name"] for e in data["path"]] == ["Lyon", "France", "Paris"]
    assert [r["label"] for r in data["relations"]] == ["IsCityOf", "IsCapitalOf"]
    assert data["relations"][1]["subj"] == City(name="Paris").id


async def test_texts_without_words_still_embed() -> None:
    kb = kag.KnowledgeBase(entity_models=SEED)
    vectors = await kb.embed(["****", "", "----", "Paris"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert float(vectors[0] @ vectors[2]) < 0.5  # different symbols do not collide


async def test_revision_counts_writes(kb: kag.KnowledgeBase) -> None:
    before = kb.revision
    await kb.upsert(Country(name="Chile"))
    await kb.delete(Country(name="Chile"))
    assert kb.revision == before + 2
