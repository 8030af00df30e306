"""LexicalLM: the offline matcher fills searches and extractive answers on the world data."""

from __future__ import annotations

import asyncio
import json
from typing import Any

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
from kag.lm.lexical.text import split_identifier, stem, words
from kag.programs import Program
from kag.rag import embedders

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
    assert "No matching facts" in result.answer  # type: ignore[attr-defined]


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
    assert empty["found"] is False and empty["entities"] == [] and "No matching facts" in empty["answer"]


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
