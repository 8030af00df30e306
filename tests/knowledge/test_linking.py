"""Entity linking: exact names win, aliases count, misspellings still link, siblings do not ride along."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import kag
from kag.errors import InvalidInputError
from kag.examples.world import load_world, world_knowledge_base
from kag.ranking.linking import LinkSettings, NameIndex, _lcs, link, name_key, name_similarity, rank


@pytest.fixture(scope="module")
def world_kb() -> kag.KnowledgeBase:
    kb = world_knowledge_base()
    kb.sync.ensure_ready()
    kb.sync._run(load_world(kb))
    return kb


def capitals(kb: kag.KnowledgeBase, country: str, **options: object) -> list[str]:
    hits = kb.sync.triplet_search(
        {
            "subject_label": "City",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": country,
        },
        **options,  # type: ignore[arg-type]
    )
    return [h.subject.search_text() for h in hits]


def test_name_keys_fold_case_accents_and_punctuation() -> None:
    assert name_key("  Côte d'Ivoire ") == name_key("cote d ivoire") == "cote d ivoire"
    assert name_key("SÃO PAULO") == "sao paulo"


def test_name_similarity_is_the_indel_ratio() -> None:
    assert name_similarity("germany", "germany") == 1.0
    assert name_similarity("germny", "germany") == pytest.approx(2 * 6 / 13)
    assert _lcs("nigera", "nigeria") == 6 and _lcs("nigera", "niger") == 5
    for a, b in [("kitten", "sitting"), ("frnace", "france"), ("", "x")]:
        assert name_similarity(a, b) == pytest.approx(2 * _lcs(a, b) / (len(a) + len(b)))


def test_an_exact_name_wins_outright() -> None:
    index = NameIndex([("e1", "Country", ["Niger"]), ("e2", "Country", ["Nigeria"]), ("e3", "City", ["Niger"])])
    settings = LinkSettings()
    assert link("niger", ["Country"], {"e1": 0.9, "e2": 0.88}, index, settings) == {"e1": 1.0}
    # two entities of the asked labels with that name: both (a genuine ambiguity)
    assert link("Niger", ["Country", "City"], {}, index, settings) == {"e1": 1.0, "e3": 1.0}


def test_the_margin_keeps_siblings_out_and_ties_in() -> None:
    index = NameIndex([("a", "X", ["alpha"]), ("b", "X", ["alpha beta"]), ("c", "X", ["gamma"])])
    settings = LinkSettings(margin=0.05, fuzzy=False)
    assert link("alpah", ["X"], {"a": 0.80, "b": 0.70, "c": 0.79}, index, settings) == {
        "a": pytest.approx(0.80),
        "c": pytest.approx(0.79),
    }
    ranked = rank("alpah", ["X"], {"a": 0.80, "b": 0.70, "c": 0.79}, index, settings)
    assert [i for i, _ in ranked] == ["a", "c", "b"]  # rank() does not prune, it orders


def test_a_description_keeps_its_embedding_score() -> None:
    index = NameIndex([("p", "City", ["Paris"])])
    scores = link("the city on the Seine", ["City"], {"p": 0.83}, index, LinkSettings())
    assert scores == {"p": pytest.approx(0.83)}  # the name similarity is lower; max keeps the embedding's


def test_settings_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        LinkSettings(margin=2.0)
    with pytest.raises(InvalidInputError):
        LinkSettings(candidates=0)


def test_a_country_name_does_not_bring_its_siblings(world_kb: kag.KnowledgeBase) -> None:
    assert capitals(world_kb, "Niger") == ["Niamey"]
    assert capitals(world_kb, "Nigeria") == ["Abuja"]
    assert capitals(world_kb, "Republic of the Congo") == ["Brazzaville"]
    assert capitals(world_kb, "Democratic Republic of the Congo") == ["Kinshasa"]
    # without linking, cosine alone lets names that share words ride along
    raw = world_knowledge_base()
    raw.linking = None
    raw.sync._run(load_world(raw))
    assert len(capitals(raw, "Republic of the Congo")) > 1


@pytest.mark.parametrize(
    ("text", "capital"),
    [
        ("Germny", "Berlin"),
        ("Frnace", "Paris"),
        ("Japn", "Tokyo"),
        ("Brazl", "Brasília"),
        ("IVORY-COAST", "Yamoussoukro"),
        ("Vénézuela", "Caracas"),
    ],
)
def test_misspellings_and_accents_still_link(world_kb: kag.KnowledgeBase, text: str, capital: str) -> None:
    assert capitals(world_kb, text)[:1] == [capital]


def test_similarity_search_ranks_exact_then_fuzzy(world_kb: kag.KnowledgeBase) -> None:
    hits = world_kb.sync.similarity_search("Country", "Nigeria", k=3)
    assert hits[0].entity.search_text() == "Nigeria" and hits[0].score == 1.0
    typo = world_kb.sync.similarity_search("Country", "Naigeria", k=3)
    assert typo[0].entity.search_text() == "Nigeria" and typo[0].score < 1.0
    raw = world_kb.sync.similarity_search("Country", "Naigeria", k=3, linked=False)
    assert raw[0].score < typo[0].score  # the name similarity lifts the right entity


class Land(kag.Entity):
    label: Literal["Land"] = "Land"
    name: str
    aliases: list[str] = []
    code: str = kag.Field(default="", alias=True)


class Stadt(kag.Entity):
    label: Literal["Stadt"] = "Stadt"
    name: str


class HauptstadtVon(kag.Relation):
    subj: Stadt
    label: Literal["HauptstadtVon"] = "HauptstadtVon"
    obj: Land


async def test_aliases_link_like_the_name() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Land, Stadt], relation_models=[HauptstadtVon])
    germany = Land(name="Germany", aliases=["Deutschland", "Federal Republic of Germany"], code="DE")
    await kb.upsert(
        [
            HauptstadtVon(subj=Stadt(name="Berlin"), obj=germany),
            HauptstadtVon(subj=Stadt(name="Wien"), obj=Land(name="Austria")),
        ]
    )
    assert germany.names() == ["Germany", "Deutschland", "Federal Republic of Germany", "DE"]
    for text in ("Deutschland", "deutschland", "Federal Republic of Germany", "DE", "Deutchland"):
        hits = await kb.triplet_search(
            {
                "subject_label": "Stadt",
                "relation_label": "HauptstadtVon",
                "object_label": "Land",
                "object_similarity_search": text,
            }
        )
        assert [h.subject.search_text() for h in hits] == ["Berlin"], text


async def test_linking_can_be_switched_off() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Land], linking=False)
    assert kb.linking is None
    with pytest.raises(kag.errors.ConfigError):
        kag.KnowledgeBase("memory://", entity_models=[Land], linking="yes")  # type: ignore[arg-type]


def test_float32_rounding_decides_the_threshold_like_neo4j() -> None:
    # Neo4j reports cosines at float32 precision: 0.7 comes back as 0.699999988...
    assert float(np.float32(0.7)) < 0.7
    index = NameIndex([("a", "X", ["zzz"])])
    scores = link("q", ["X"], {"a": float(np.float32(0.7))}, index, LinkSettings(fuzzy=False))
    assert scores["a"] == float(np.float32(0.7))


@pytest.mark.parametrize(
    ("written", "plain"),
    [("Wrocław", "Wroclaw"), ("Øresund", "Oresund"), ("Đà Nẵng", "Da Nang"), ("Æbeltoft", "Aebeltoft")],
)
def test_letters_unicode_does_not_decompose_are_folded(written: str, plain: str) -> None:
    assert name_key(written) == name_key(plain)


def test_short_and_long_forms_are_found_among_names_of_their_shape_and_follow_updates() -> None:
    index = NameIndex(
        [
            ("e1", "Studio", ["Blackwood Wren Films"]),
            ("e2", "Person", ["Theo Vance"]),
            ("e3", "Studio", ["Bright Water Films", "BWF Studios"]),  # an alias is no own name
            ("e4", "Person", ["Bo"]),
        ]
    )
    assert index.abbreviated("BWF", ["Studio"]) == [
        ("e1", "Studio", "blackwood wren films"),
        ("e3", "Studio", "bright water films"),
    ]
    assert index.abbreviated("Theodore Vance", ["Person"]) == [("e2", "Person", "theo vance")]
    assert index.abbreviated("Theodore Vance", ["Studio"]) == []  # another label
    assert index.abbreviated("BO", ["Person"]) == []  # a one-word name has no initials to abbreviate
    index.remove("e1")
    assert [e for e, _, _ in index.abbreviated("BWF", ["Studio"])] == ["e3"]
    index.add("e3", "Studio", ["Copper Hill Pictures"])  # renamed: its old name no longer matches
    assert index.abbreviated("BWF", ["Studio"]) == []
    assert [e for e, _, _ in index.abbreviated("CHP", ["Studio"])] == ["e3"]
