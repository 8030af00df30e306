"""Exploration: a failed question rerun with a variant of its search becomes a demo the model adapts."""

from __future__ import annotations

import itertools
from typing import Literal

import pytest

import kag
from kag.errors import ConfigError
from kag.training import BootstrapFewShot, KNNFewShot
from kag.training.trace import forcing

pytestmark = pytest.mark.timeout(120)


class Realm(kag.Entity):
    label: Literal["Realm"] = "Realm"
    name: str = kag.Field(description="The realm's name")


class Adjoins(kag.Relation):
    """Two realms share a frontier (stored once per pair)."""

    subj: Realm
    label: Literal["Adjoins"] = "Adjoins"
    obj: Realm


class Query(kag.DataModel):
    query: str = kag.Field(description="The user's question")


class Answer(kag.DataModel):
    answer: str = kag.Field(description="The answer, from the retrieved facts only")
    entities: list[str] = kag.Field(description="The names that answer the question")


CHAIN = ["Elandor", "Marisol", "Tovania", "Caradh", "Istvar", "Velmora", "Quillan", "Borvia", "Ostara"]


def neighbours(name: str) -> list[str]:
    i = CHAIN.index(name)
    return sorted(CHAIN[j] for j in (i - 1, i + 1) if 0 <= j < len(CHAIN))


@pytest.fixture
async def program() -> kag.Program:
    kb = kag.KnowledgeBase("memory://", entity_models=[Realm], relation_models=[Adjoins])
    await kb.upsert([Adjoins(subj=Realm(name=a), obj=Realm(name=b)) for a, b in itertools.pairwise(CHAIN)])
    lm = kag.LexicalLM(knowledge_base=kb)
    question = kag.Input(data_model=Query)
    facts = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, name="retriever")(question)
    answer = kag.Generator(data_model=Answer, language_model=lm, name="answerer")(facts)
    return kag.Program(inputs=question, outputs=answer, name="realms")


def data() -> tuple[list[dict[str, str]], list[dict[str, list[str]]]]:
    x = [{"query": f"Which realms adjoin {name}?"} for name in CHAIN]
    return x, [{"entities": neighbours(name)} for name in CHAIN]


def test_output_variants_are_plannable_one_edit_searches(program: kag.Program) -> None:
    retriever = program.modules["retriever"]
    search = {
        "subject_label": "Realm",
        "subject_similarity_search": "Caradh",
        "relation_label": "Adjoins",
        "object_label": "Realm",
        "object_similarity_search": "*",
        "negated": False,
        "bidirectional": False,
        "count": False,
    }
    variants = retriever.output_variants(search)
    assert {k: v for k, v in variants[0].items() if search.get(k) != v} == {"bidirectional": True}
    swapped = variants[1]
    assert (swapped["subject_similarity_search"], swapped["object_similarity_search"]) == ("*", "Caradh")
    assert search not in variants and len(variants) == 4  # bidirectional, swapped, negated, count
    chain = retriever.output_variants({"hops": [search, {**search, "subject_similarity_search": "*"}]})
    assert all("hops" in v for v in chain)


async def test_a_forced_output_replaces_the_model_call(program: kag.Program) -> None:
    search = {
        "subject_label": "Realm",
        "subject_similarity_search": "Caradh",
        "relation_label": "Adjoins",
        "object_label": "Realm",
        "object_similarity_search": "*",
        "negated": False,
        "bidirectional": True,
        "count": False,
    }
    with forcing({"retriever": search}):
        result = await program({"query": "Which realms adjoin Borvia?"})  # the question is ignored
    assert sorted(result.entities) == ["Istvar", "Tovania"]


@pytest.mark.parametrize("optimizer", [lambda n: BootstrapFewShot(max_demos=2, explore=n, seed=0),
                                       lambda n: KNNFewShot(k=1, explore=n)], ids=["bootstrap", "knn"])  # fmt: skip
async def test_exploration_teaches_a_search_the_model_never_writes(program: kag.Program, optimizer) -> None:
    x, y = data()
    program.compile(reward="f1", optimizer=optimizer(0))
    untrained = await program.evaluate(x, y)
    await program.fit(x[:4], y[:4], validation_data=(x[4:], y[4:]), verbose=0)
    assert (await program.evaluate(x, y))["reward"] == untrained["reward"] < 1.0  # no exploration: no gain

    program.set_variables({name: {"demos": []} for name in program.get_variables()})
    program.compile(reward="f1", optimizer=optimizer(4))
    history = await program.fit(x[:4], y[:4], validation_data=(x[4:], y[4:]), verbose=0)
    assert history.history["found"][0] >= 1
    trained = (await program.evaluate(x, y))["reward"]
    assert trained >= 0.95 > untrained["reward"]
    demos = program.get_variables()["retriever"]["demos"]
    assert any(d["output"]["bidirectional"] for d in demos)  # the explored searches


def test_explore_must_be_a_count() -> None:
    with pytest.raises(ConfigError, match="explore"):
        BootstrapFewShot(explore=-1)
