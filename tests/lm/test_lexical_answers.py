"""The offline model's answers hold only what was asked: the asked relation's facts, no number where
none was asked (newcomer issue: "Rome, Milan" for the capital of Italy; a population in a country's
``number``)."""

from __future__ import annotations

import pytest

import kag
from kag.examples.world import load_world, world_knowledge_base

pytestmark = pytest.mark.timeout(120)


class Query(kag.DataModel):
    query: str


class Reply(kag.DataModel):
    answer: str
    entities: list[str]
    number: int | None = kag.Field(default=None, description="The number asked for, if any")


@pytest.fixture
async def world() -> kag.KnowledgeBase:
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    return kb


async def test_an_answer_holds_only_the_asked_relation(world: kag.KnowledgeBase) -> None:
    knowledge = kag.Knowledge(world, name="geo")
    answer = await knowledge.ask("What is the capital of Italy?", language_model=kag.LexicalLM(knowledge_base=world))
    assert answer.text.startswith("Rome ")
    assert "Milan" not in answer.text and "Turin" not in answer.text  # IsCityOf facts were retrieved beside it
    # a question naming the other relation still gets all of its facts
    cities = await knowledge.ask("Which cities are in Italy?", language_model=kag.LexicalLM(knowledge_base=world))
    assert {"Milan", "Turin", "Rome"} <= set(cities.text.split(" (")[0].split(", "))


async def test_a_number_field_stays_empty_unless_a_number_is_asked(world: kag.KnowledgeBase) -> None:
    lm = kag.LexicalLM(knowledge_base=world)
    question = kag.Input(data_model=Query)
    facts = await kag.KnowledgeRetriever(knowledge_base=world, language_model=lm, max_hops=2)(question)
    reply = await kag.Generator(data_model=Reply, language_model=lm)(facts)
    program = kag.Program(inputs=question, outputs=reply)
    nairobi = await program(Query(query="Which country is Nairobi in?"))
    assert nairobi.entities == ["Kenya"] and nairobi.number is None
    counted = await program(Query(query="How many cities are in Kenya?"))
    assert counted.number is not None and counted.number > 0
    population = await program(Query(query="What is the population of Tokyo?"))
    assert population.number is not None and str(population.number) in population.answer
