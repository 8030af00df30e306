"""LexicalLM: the offline matcher fills searches and extractive answers on the world data."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest

import kag
from kag.demo import Answer, Query, build_program
from kag.errors import ConfigError
from kag.examples.world import (
    ENTITY_MODELS,
    RELATION_MODELS,
    load_world,
    world_data,
    world_knowledge_base,
)
from kag.lm import BaseLanguageModel, LanguageModel
from kag.lm.lexical import LexicalLM
from kag.programs import Program
from kag.rag import embedders
from kag.text import split_identifier, stem, words

SCHEMA = kag.GraphSchema(list(ENTITY_MODELS), list(RELATION_MODELS))


@pytest.fixture(scope="module")
def world() -> kag.KnowledgeBase:
    kb = world_knowledge_base()
    asyncio.run(load_world(kb))
    return kb


@pytest.fixture(scope="module")
def program(world: kag.KnowledgeBase) -> Program:
    return build_program(world, LexicalLM(knowledge_base=world))


def cities_of(iso: str) -> set[str]:
    return {c["name"] for c in world_data()["cities"] if c["country"] == iso}


async def fill(lm: LexicalLM, question: str, max_hops: int = 1) -> dict[str, Any]:
    schema = kag.triplet_chain_schema(SCHEMA, max_hops) if max_hops > 1 else kag.triplet_search_schema(SCHEMA)
    return await lm.generate([{"role": "user", "content": f"query: {question}"}], schema)


def test_protocol_and_helpers() -> None:
    lm = LexicalLM()
    assert isinstance(lm, LanguageModel) and isinstance(lm, BaseLanguageModel)
    assert lm.name == "lexical"
    assert "not a language model" in (LexicalLM.__doc__ or "")
    assert split_identifier("IsCapitalOf") == ["is", "capital", "of"]
    assert split_identifier("HTTPServer_name") == ["http", "server", "name"]
    for text in ("Köln", "São Paulo", "Al Ḩudaydah", "Washington, D.C.", "ÅLAND  Islands", "Ñandú"):
        assert words(text) == embedders.words(text)  # same normalization as the embedder
    assert [stem(w) for w in ("cities", "capitals", "countries", "boxes", "is", "continent")] == [
        "city",
        "capital",
        "country",
        "box",
        "is",
        "continent",
    ]


async def test_fills_searches_from_questions(world: kag.KnowledgeBase) -> None:
    lm = LexicalLM(knowledge_base=world)
    capital = await fill(lm, "What is the capital of France?")
    assert (capital["subject_label"], capital["relation_label"], capital["object_label"]) == (
        "City",
        "IsCapitalOf",
        "Country",
    )
    assert (capital["subject_similarity_search"], capital["object_similarity_search"]) == ("*", "France")
    cities = await fill(lm, "Which cities are in Germany?")
    assert cities["relation_label"] == "IsCityOf" and cities["object_similarity_search"] == "Germany"
    count = await fill(lm, "How many cities are in Spain?")
    assert count["count"] is True and count["object_similarity_search"] == "Spain"
    negated = await fill(lm, "Which cities are not capitals?")
    assert negated["negated"] is True and negated["relation_label"] == "IsCapitalOf"
    assert negated["subject_label"] == "City" and negated["object_similarity_search"] == "*"
    typo = await fill(lm, "What is the capital of Frnace?")
    assert typo["object_similarity_search"] == "France"  # canonical name, close spelling accepted
    chain = await fill(lm, "Which continent is Lima in?", max_hops=2)
    assert [h["subject_label"] for h in chain["hops"]] == ["City", "Country"]
    assert chain["hops"][0]["subject_similarity_search"] == "Lima"
    assert chain["hops"][1]["relation_label"] == "IsInContinent"


async def test_counts_are_right(world: kag.KnowledgeBase) -> None:
    lm = LexicalLM(knowledge_base=world)
    for country, iso in (("Spain", "ES"), ("Japan", "JP")):
        search = await fill(lm, f"How many cities are in {country}?")
        result = await world.triplet_search(search, k=10, threshold=0.9)
        assert result.count == len(cities_of(iso))
    africa = await fill(lm, "How many countries are in Africa?")
    expected = sum(1 for c in world_data()["countries"] if c["continent"] == "Africa")
    assert (await world.triplet_search(africa, threshold=0.9)).count == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the capital of France?", ["Paris"]),
        ("Which country is Nairobi in?", ["Kenya"]),
        ("Which continent is Lima in?", ["South America"]),
        ("What is the capital of the United States?", ["Washington"]),
        ("Which country is Mexico City in?", ["Mexico"]),
        ("What is the population of Tokyo?", ["9733276"]),
    ],
)
async def test_program_answers(program: Program, question: str, expected: list[str]) -> None:
    result = await program(Query(query=question))
    for name in expected:
        assert name in result.answer  # type: ignore[attr-defined]
    assert "extractive" in result.answer  # type: ignore[attr-defined]


async def test_program_lists_and_counts(program: Program) -> None:
    cities = await program(Query(query="Which cities are in Germany?"))
    names = {f.subject["name"] for f in cities.facts}  # type: ignore[attr-defined]
    assert names == cities_of("DE") and "Berlin" in names
    assert all(name in cities.answer for name in names)  # type: ignore[attr-defined]
    count = await program(Query(query="How many cities are in Japan?"))
    assert count.count == len(cities_of("JP"))  # type: ignore[attr-defined]
    assert count.answer.startswith(f"{len(cities_of('JP'))} ")  # type: ignore[attr-defined]
    capitals = {c["capital"] for c in world_data()["countries"] if c["capital"]}
    not_capitals = await program(Query(query="Which cities are not capitals?"))
    listed = [f.subject["name"] for f in not_capitals.facts]  # type: ignore[attr-defined]
    assert listed and not set(listed) & capitals


async def test_unknown_names_find_nothing(program: Program) -> None:
    result = await program(Query(query="What is the capital of Atlantis?"))
    assert result.facts == []  # type: ignore[attr-defined]
    assert "Not found in the knowledge graph" in result.answer  # type: ignore[attr-defined]


async def test_names_index_without_knowledge_base() -> None:
    lm = LexicalLM(names={"Country": ["France", "Peru"], "City": ["Paris", "Lima"]})
    search = await fill(lm, "Which country is Lima in?")
    assert (search["subject_label"], search["subject_similarity_search"]) == ("City", "Lima")
    assert search["object_label"] == "Country"


async def test_capitalized_fallback_without_any_index() -> None:
    search = await fill(LexicalLM(), "What is the capital of France?")
    assert search["relation_label"] == "IsCapitalOf" and search["object_similarity_search"] == "France"


async def test_extractive_answers_fill_any_schema() -> None:
    class Rich(kag.DataModel):
        answer: str
        reasoning: str
        sources: list[str]
        entities: list[str]
        found: bool
        confidence: float
        count: int | None = None

    prompt = (
        "query: Which cities are in Peru?\n"
        "facts:\n- Lima -[IsCityOf]-> Peru (score 1.00; Lima: population 7737002)\n"
        "- Callao -[IsCityOf]-> Peru (score 0.98)\ncount: (none)"
    )
    out = await LexicalLM().generate([{"role": "user", "content": prompt}], Rich)
    assert out["entities"] == ["Lima", "Callao"] and out["found"] is True
    assert out["sources"] == ["Lima -[IsCityOf]-> Peru", "Callao -[IsCityOf]-> Peru"]
    assert out["answer"].startswith("Lima, Callao") and "extractive" in out["answer"]
    assert "not a language model" in out["reasoning"] and out["confidence"] == 1.0
    empty = await LexicalLM().generate([{"role": "user", "content": "query: Who?\nfacts: (none)"}], Rich)
    assert empty["found"] is False and empty["entities"] == [] and "Not found in the knowledge graph" in empty["answer"]


async def test_repairs_relax_the_search(world: kag.KnowledgeBase) -> None:
    calls: list[int] = []

    def reject_specific(obj: dict[str, Any]) -> None:
        calls.append(1)
        if obj["relation_label"] != "*":
            raise ValueError("relation_label must be '*' here")

    lm = LexicalLM(knowledge_base=world)
    out = await lm.generate(
        [{"role": "user", "content": "query: What is the capital of France?"}],
        kag.triplet_search_schema(SCHEMA),
        validate=reject_specific,
    )
    assert out["relation_label"] == "*" and len(calls) == 2


def test_config() -> None:
    kb = world_knowledge_base()
    lm = LexicalLM(knowledge_base=kb, max_ngram=4)
    config = lm.get_config()
    assert config == {
        "type": "lexical",
        "max_ngram": 4,
        "fuzzy_ratio": 0.8,
        "max_repairs": 2,
        "uses_knowledge_base": True,
    }
    json.dumps(config)
    with pytest.raises(ConfigError, match="knowledge_base"):
        LexicalLM.from_config(config)
    assert LexicalLM.from_config(config, knowledge_base=kb).max_ngram == 4
    for bad in ({"max_ngram": 0}, {"fuzzy_ratio": 0.1}):
        with pytest.raises(ConfigError):
            LexicalLM(**bad)  # type: ignore[arg-type]


def test_answer_model_is_the_demo_one() -> None:
    assert set(Answer.model_fields) == {"answer"}


# -- a tiny hand-made graph: several conditions, negation inside a chain, numbers ----------
# Invented names, so nothing here can lean on the countries data the KGQA benchmark uses.


class Landmass(kag.Entity):
    """A continent."""

    label: Literal["Landmass"] = "Landmass"
    name: str = kag.Field(description="The continent's name")


class Nation(kag.Entity):
    """A country."""

    label: Literal["Nation"] = "Nation"
    name: str = kag.Field(description="The country's name")
    population: int | None = kag.Field(default=None, description="Number of inhabitants")
    area: float | None = kag.Field(default=None, description="Area in square kilometres")
    aliases: list[str] = kag.Field(default=[], description="Other names")


class Town(kag.Entity):
    """A city."""

    label: Literal["Town"] = "Town"
    name: str = kag.Field(description="The city's name")
    population: int | None = kag.Field(default=None, description="Number of inhabitants")


class Money(kag.Entity):
    """A currency."""

    label: Literal["Money"] = "Money"
    name: str = kag.Field(description="The currency's name")


class LiesIn(kag.Relation):
    """The country is on the continent."""

    subj: Nation
    label: Literal["LiesIn"] = "LiesIn"
    obj: Landmass


class PaysWith(kag.Relation):
    """The country uses the currency."""

    subj: Nation
    label: Literal["PaysWith"] = "PaysWith"
    obj: Money


class SharesBorder(kag.Relation, symmetric=True):
    """The two countries share a land border."""

    subj: Nation
    label: Literal["SharesBorder"] = "SharesBorder"
    obj: Nation


class TownOf(kag.Relation):
    """The city is in the country."""

    subj: Town
    label: Literal["TownOf"] = "TownOf"
    obj: Nation


class CapitalOf(kag.Relation):
    """The city is the capital of the country."""

    subj: Town
    label: Literal["CapitalOf"] = "CapitalOf"
    obj: Nation


NATIONS = {  # name: (landmass, population, area, currency, aliases)
    "Arden": ("Westmark", 5_000_000, 40_000.0, "Crown", ["Ardenne"]),
    "Borduria": ("Westmark", 12_000_000, 90_000.0, "US Dollar", []),
    "Carpania": ("Westmark", 800_000, 20_000.0, "Crown", []),
    "Syldavia": ("Eastreach", 3_000_000, 60_000.0, "Crown", []),
    "Zembla": ("Eastreach", 9_000_000, 150_000.0, "US Dollar", []),
}
TOWNS = {  # name: (nation, population, capital)
    "Ardport": ("Arden", 1_200_000, True),
    "Millbrook": ("Arden", 300_000, False),
    "Stonehaven": ("Arden", 2_500_000, False),
    "Szohod": ("Borduria", 900_000, True),
    "Dunmere": ("Borduria", 6_000_000, False),
    "Carpa": ("Carpania", 100_000, True),
    "Saint John's": ("Carpania", 50_000, False),
    "Klow": ("Syldavia", 400_000, True),
    "Onhava": ("Zembla", 2_000_000, True),
}
BORDERS = [("Arden", "Borduria"), ("Borduria", "Carpania"), ("Borduria", "Syldavia"), ("Syldavia", "Zembla")]


class Question(kag.DataModel):
    """A user question."""

    query: str = kag.Field(description="The user's question")


class Listed(kag.DataModel):
    """An answer grounded in the retrieved facts."""

    answer: str = kag.Field(description="The answer")
    entities: list[str] = kag.Field(description="The names of the entities that answer the question")
    number: int | None = kag.Field(description="The number asked for by a 'how many' question, else null")


@pytest.fixture(scope="module")
def atlas() -> kag.KnowledgeBase:
    kb = kag.KnowledgeBase(
        "memory://",
        entity_models=[Landmass, Nation, Town, Money],
        relation_models=[LiesIn, PaysWith, SharesBorder, TownOf, CapitalOf],
    )
    nations = {
        name: Nation(name=name, population=pop, area=area, aliases=aliases)
        for name, (_, pop, area, _, aliases) in NATIONS.items()
    }
    items: list[kag.Entity | kag.Relation] = list(nations.values())
    for name, (land, _, _, money, _) in NATIONS.items():
        items += [
            LiesIn(subj=nations[name], obj=Landmass(name=land)),
            PaysWith(subj=nations[name], obj=Money(name=money)),
        ]
    for name, (nation, pop, capital) in TOWNS.items():
        town = Town(name=name, population=pop)
        items.append(TownOf(subj=town, obj=nations[nation]))
        if capital:
            items.append(CapitalOf(subj=town, obj=nations[nation]))
    items += [SharesBorder(subj=nations[a], obj=nations[b]) for a, b in BORDERS]
    asyncio.run(kb.upsert(items))
    return kb


@pytest.fixture(scope="module")
def atlas_program(atlas: kag.KnowledgeBase) -> Program:
    lm = LexicalLM(knowledge_base=atlas)
    inputs = kag.programs.Input(data_model=Question)
    facts = kag.programs.KnowledgeRetriever(knowledge_base=atlas, language_model=lm, k=100, threshold=0.7, max_hops=2)(
        inputs
    )
    answer = kag.programs.Generator(data_model=Listed, language_model=lm, return_inputs=True)(facts)
    return Program(inputs=inputs, outputs=answer)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # two conditions on one entity: a path through the answer
        ("Which countries in Westmark use the Crown?", {"Arden", "Carpania"}),
        ("Which neighbours of Borduria use the Crown?", {"Arden", "Carpania", "Syldavia"}),
        # a negated hop inside a chain
        ("Which countries in Westmark do not use the Crown?", {"Borduria"}),
        ("Which neighbours of Arden do not use the Crown?", {"Borduria"}),
        # property comparisons on declared numeric fields
        ("Which cities in Arden have more than 1 million inhabitants?", {"Ardport", "Stonehaven"}),
        ("Which countries in Westmark have an area below 50,000 square kilometres?", {"Arden", "Carpania"}),
        ("Which neighbours of Syldavia have more than 5 million people?", {"Borduria", "Zembla"}),
        # superlatives: order_by + limit 1
        ("What is the most populous city of Arden?", {"Stonehaven"}),
        ("What is the smallest country in Eastreach by area?", {"Syldavia"}),
        ("Which neighbour of Syldavia has the fewest inhabitants?", {"Zembla"}),
        # the superlative orders the node its noun names, inside a chain
        ("What is the capital of the most populous country in Westmark?", {"Szohod"}),
        # a chain whose asked label is not the named relation's endpoint
        ("What are the capitals of the countries that border Syldavia?", {"Szohod", "Onhava"}),
        # stopwords inside names
        ("Which countries use the US Dollar?", {"Borduria", "Zembla"}),
        ("In which country is Saint John's?", {"Carpania"}),
        # another name of the entity: the answer is the fact's other end, never the question's spelling
        ("On which continent is Ardenne?", {"Westmark"}),
    ],
)
async def test_answers_on_a_hand_made_graph(atlas_program: Program, question: str, expected: set[str]) -> None:
    result = await atlas_program(Question(query=question))
    assert set(result.entities) == expected, (question, result.search)  # type: ignore[attr-defined]


async def test_searches_for_the_new_capabilities(atlas: kag.KnowledgeBase) -> None:
    lm = LexicalLM(knowledge_base=atlas)
    schema = kag.GraphSchema([Landmass, Nation, Town, Money], [LiesIn, PaysWith, SharesBorder, TownOf, CapitalOf])

    async def chain(question: str) -> list[dict[str, Any]]:
        out = await lm.generate(
            [{"role": "user", "content": f"query: {question}"}], kag.triplet_chain_schema(schema, 3)
        )
        return list(out["hops"])

    both = await chain("How many countries in Westmark use the Crown?")
    assert [(h["relation_label"], h["negated"]) for h in both] == [("LiesIn", False), ("PaysWith", False)]
    assert both[0]["subject_similarity_search"] == "Westmark" and both[1]["object_similarity_search"] == "Crown"
    assert both[0]["count"] is True
    assert (await atlas.triplet_search({"hops": both})).count == 2
    negated = await chain("Which countries in Westmark do not use the Crown?")
    assert [(h["relation_label"], h["negated"]) for h in negated] == [("LiesIn", False), ("PaysWith", True)]
    compared = await chain("Which cities in Arden have more than 1.5 million inhabitants?")
    assert compared[0]["subject_where"] == [{"field": "population", "op": ">", "value": 1_500_000}]
    top = await chain("What is the most populous city of Arden?")
    assert top[0]["order_by"] == {"side": "subject", "field": "population", "direction": "desc"}
    assert top[0]["limit"] == 1
    two_hop = await chain("What are the capitals of the countries that border Syldavia?")
    assert sorted(h["relation_label"] for h in two_hop) == ["CapitalOf", "SharesBorder"]
    linked = await chain("On which continent is Ardenne?")
    assert linked[0]["subject_similarity_search"] == "Arden"  # the linked node, not the question's spelling
    # a schema without the newer fields still gets a valid search (no unknown properties)
    plain = kag.triplet_search_schema(schema)
    plain["properties"] = {k: v for k, v in plain["properties"].items() if k not in ("order_by", "limit")}
    plain["required"] = [k for k in plain["required"] if k in plain["properties"]]
    single = await lm.generate([{"role": "user", "content": "query: What is the most populous city of Arden?"}], plain)
    assert "order_by" not in single and single["object_similarity_search"] == "Arden"
