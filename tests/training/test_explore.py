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


class Deity(kag.Entity):
    label: Literal["Deity"] = "Deity"
    name: str = kag.Field(description="The deity's name")


class Worships(kag.Relation):
    """A realm's people worship a deity."""

    subj: Realm
    label: Literal["Worships"] = "Worships"
    obj: Deity


class Precedes(kag.Relation):
    """One realm comes right before the next on the road east."""

    subj: Realm
    label: Literal["Precedes"] = "Precedes"
    obj: Realm


DEITIES = {name: f"Deity of {name}" for name in CHAIN}


@pytest.fixture
async def chained() -> kag.Program:
    """Realms on a road, each worshipping its own deity; questions about the deity of the next realm."""
    kb = kag.KnowledgeBase("memory://", entity_models=[Realm, Deity], relation_models=[Precedes, Worships])
    await kb.upsert([Precedes(subj=Realm(name=a), obj=Realm(name=b)) for a, b in itertools.pairwise(CHAIN)])
    await kb.upsert([Worships(subj=Realm(name=r), obj=Deity(name=d)) for r, d in DEITIES.items()])
    lm = kag.LexicalLM(knowledge_base=kb)
    question = kag.Input(data_model=Query)
    facts = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=2, name="retriever")(question)
    answer = kag.Generator(data_model=Answer, language_model=lm, name="answerer")(facts)
    return kag.Program(inputs=question, outputs=answer, name="realm_deities")


def test_a_chain_may_grow_by_one_pattern_at_either_end(chained: kag.Program) -> None:
    retriever = chained.modules["retriever"]
    worships = {
        "subject_label": "Realm",
        "subject_similarity_search": "Caradh",
        "relation_label": "Worships",
        "object_label": "Deity",
        "object_similarity_search": "*",
        "negated": False,
        "bidirectional": False,
        "count": False,
    }
    longer = [v["hops"] for v in retriever.output_variants({"hops": [worships]}) if len(v.get("hops", ())) == 2]
    # the realm after Caradh first, then what it worships (Precedes is the one Realm -> Realm relation)
    lead, then = longer[0]
    assert (lead["subject_similarity_search"], lead["relation_label"], lead["object_similarity_search"]) == (
        "Caradh",
        "Precedes",
        "*",
    )
    assert then == {**worships, "subject_similarity_search": "*"}
    assert all(hops[-1]["relation_label"] == "Worships" for hops in longer)  # no relation starts at a Deity
    precedes = {**worships, "relation_label": "Precedes", "object_label": "Realm"}
    grown = [v["hops"] for v in retriever.output_variants({"hops": [precedes]}) if len(v.get("hops", ())) == 2]
    assert {"Worships", "Precedes"} <= {hops[-1]["relation_label"] for hops in grown}  # a pattern put last
    assert all(len(v["hops"]) == 2 for v in retriever.output_variants({"hops": [lead, then]}))  # max_hops: no longer


async def test_exploration_teaches_a_two_pattern_chain_from_answers_only(chained: kag.Program) -> None:
    x = [{"query": f"Which deity does the realm after {name} worship?"} for name in CHAIN[:-1]]
    y = [{"entities": [DEITIES[after]]} for after in CHAIN[1:]]
    chained.compile(reward="f1", optimizer=KNNFewShot(k=1, explore=4))
    untrained = (await chained.evaluate(x, y))["reward"]
    await chained.fit(x[:4], y[:4], validation_data=(x[4:], y[4:]), verbose=0)
    trained = (await chained.evaluate(x[4:], y[4:]))["reward"]
    assert trained >= 0.95 > untrained
    demos = chained.get_variables()["retriever"]["demos"]
    assert any(len(d["output"].get("hops", ())) == 2 for d in demos)  # the explored chain
