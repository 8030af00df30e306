"""Searches found from answers on the real Neo4j: the same searches, demos, aliases and trained answers as
on the memory store (the ecosystem graph and labels of ``tests/training/test_search_from_answer.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import kag
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import KNNFewShot
from kag.training.explore import SearchBudget
from tests.training.test_search_from_answer import (
    ENTITIES,
    QUESTIONS,
    RELATIONS,
    Query,
    Reply,
    fill,
    retriever,
    set_reward,
)

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(240)]

# a deadline out of reach: a cold server on a busy machine must not stop a search the memory store finishes
BUDGET = SearchBudget(deadline=600)

FAMILIES = [
    ("Which packages depend on Marrow?", {"entities": ["Quill", "Tessel"]}),  # stored one way, asked the other
    ("How many packages does Ada Byrne maintain?", {"number": 3}),  # a count
    ("Which Rust packages are not licensed under MIT?", {"entities": ["Tessel"]}),  # negated conjunction
    ("Which licenses do the packages that depend on Marrow use?", {"entities": ["MIT", "GPL"]}),  # two hops
    ("Which packages are written in Golang?", {"entities": ["Marrow", "Brindle"]}),  # an alias
]


async def _found(kb: kag.KnowledgeBase) -> list[tuple[Any, Any]]:
    module = retriever(kb)
    results = [await module.outputs_for_answer({"query": q}, label, BUDGET) for q, label in FAMILIES]
    return [(r.outputs[:1], r.learned[:1]) for r in results]


def _offline_program(kb: kag.KnowledgeBase) -> Program:
    """The offline model writes the searches: it uses the demos and aliases training keeps."""
    inp = Input(Query)
    facts = KnowledgeRetriever(kb, kag.LexicalLM(kb), max_hops=2, abstain=False, name="retriever")(inp)
    reply = Generator(data_model=Reply, language_model=kag.LexicalLM(kb), name="answer", trainable=False)(facts)
    return Program(inp, reply, name="eco")


async def _trained(kb: kag.KnowledgeBase) -> tuple[list[Any], dict[str, Any], list[dict[str, Any]]]:
    prog = _offline_program(kb)
    x = [{"query": q} for q, _ in QUESTIONS]
    y = [label for _, label in QUESTIONS]
    prog.compile(reward=kag.training.FunctionReward(set_reward), optimizer=KNNFewShot(k=1, search=BUDGET))
    await prog.fit(x, y, epochs=1, verbose=0, seed=0)
    variable = prog.modules["retriever"].variable
    answers = [o.model_dump() for o in await prog.predict(x)]
    return variable.demos, variable.aliases, answers


async def test_neo4j_finds_and_trains_what_memory_does(neo4j_kb_factory: Any) -> None:
    memory = await fill(kag.KnowledgeBase("memory://", entity_models=ENTITIES, relation_models=RELATIONS))
    neo4j = await fill(await neo4j_kb_factory(entity_models=ENTITIES, relation_models=RELATIONS))

    found = await _found(neo4j)
    assert all(outputs for outputs, _ in found), found  # every family is found on Neo4j too
    assert found == await _found(memory)  # the same simplest search, the same learned alias

    demos, aliases, answers = await _trained(neo4j)
    assert (demos, aliases, answers) == await _trained(memory)
    assert aliases == {"golang": {"label": "Language", "name": "go"}}
    assert [sorted(a["entities"]) for a in answers] == [sorted(label["entities"]) for _, label in QUESTIONS]
