"""LexicalLM learns from demos: on an invented graph, one or two labelled questions teach it what its rules miss.

The graph (planets, moons, stars with made-up names) is built here; every question below is one the
rules alone answer wrongly (checked in each test), and the demo makes the answer right.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

import kag
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program


class Planet(kag.Entity):
    """A planet."""

    label: Literal["Planet"] = "Planet"
    name: str = kag.Field(description="The planet's name")


class Moon(kag.Entity):
    """A moon."""

    label: Literal["Moon"] = "Moon"
    name: str = kag.Field(description="The moon's name")


class Star(kag.Entity):
    """A star."""

    label: Literal["Star"] = "Star"
    name: str = kag.Field(description="The star's name")


class Orbits(kag.Relation):
    """The moon orbits the planet."""

    label: Literal["Orbits"] = "Orbits"
    subj: Moon
    obj: Planet


class Circles(kag.Relation):
    """The planet circles the star."""

    label: Literal["Circles"] = "Circles"
    subj: Planet
    obj: Star


class Eclipses(kag.Relation):
    """The moon eclipses the other moon."""

    label: Literal["Eclipses"] = "Eclipses"
    subj: Moon
    obj: Moon


class NextTo(kag.Relation):
    """The planet's orbit lies next to the other planet's orbit (stored once per pair)."""

    label: Literal["NextTo"] = "NextTo"
    subj: Planet
    obj: Planet


class Query(kag.DataModel):
    """A question."""

    query: str = kag.Field(description="The question")


class Answer(kag.DataModel):
    """An answer from the facts."""

    answer: str = kag.Field(description="The answer")
    entities: list[str] = kag.Field(description="The names that answer the question")


PLANETS = ["Zorblax", "Drel", "Quonta", "Vashti"]
MOONS = {"Kessa": "Zorblax", "Vorn": "Zorblax", "Tilp": "Zorblax", "Orrin": "Drel", "Mib": "Drel", "Yusk": "Quonta"}
STARS = {"Zorblax": "Aldemar", "Drel": "Aldemar", "Quonta": "Brisk", "Vashti": "Brisk"}
ECLIPSES = [("Kessa", "Vorn"), ("Kessa", "Tilp"), ("Orrin", "Mib"), ("Vorn", "Yusk")]
NEXT_TO = [("Drel", "Zorblax"), ("Quonta", "Zorblax"), ("Drel", "Vashti")]


@pytest.fixture(scope="module")
def kb() -> kag.KnowledgeBase:
    base = kag.KnowledgeBase(
        "memory://", entity_models=[Planet, Moon, Star], relation_models=[Orbits, Circles, Eclipses, NextTo]
    )
    planets = {n: Planet(name=n) for n in PLANETS}
    moons = {n: Moon(name=n) for n in MOONS}
    stars = {n: Star(name=n) for n in set(STARS.values())}
    items: list[Any] = [*planets.values(), *moons.values(), *stars.values()]
    items += [Orbits(subj=moons[m], obj=planets[p]) for m, p in MOONS.items()]
    items += [Circles(subj=planets[p], obj=stars[s]) for p, s in STARS.items()]
    items += [Eclipses(subj=moons[a], obj=moons[b]) for a, b in ECLIPSES]
    items += [NextTo(subj=planets[a], obj=planets[b]) for a, b in NEXT_TO]
    base.sync.upsert(items)
    return base


def hop(s: tuple[str, str], rel: str, o: tuple[str, str], **flags: bool) -> dict[str, Any]:
    return {
        "subject_label": s[0],
        "subject_similarity_search": s[1],
        "relation_label": rel,
        "object_label": o[0],
        "object_similarity_search": o[1],
        "negated": flags.get("negated", False),
        "bidirectional": flags.get("bidirectional", False),
        "count": flags.get("count", False),
    }


def program(kb: kag.KnowledgeBase, demos: list[tuple[str, dict[str, Any]]]) -> Program:
    lm = LexicalLM(knowledge_base=kb)
    inputs = Input(data_model=Query)
    facts = KnowledgeRetriever(
        knowledge_base=kb,
        language_model=lm,
        k=50,
        threshold=0.7,
        max_hops=2,
        examples=[({"query": q}, search) for q, search in demos],
    )(inputs)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True)(facts)
    return Program(inputs=inputs, outputs=answer)


async def answer(kb: kag.KnowledgeBase, demos: list[tuple[str, dict[str, Any]]], question: str) -> Any:
    return await program(kb, demos)(Query(query=question))


async def learned(kb: kag.KnowledgeBase, demos: list[tuple[str, dict[str, Any]]], question: str, want: set[str]) -> Any:
    """The answer with the demos is ``want``; without them (the rules alone) it is not."""
    untrained = await answer(kb, [], question)
    assert set(untrained.entities) != want, "the rules already answer this: it teaches nothing"
    trained = await answer(kb, demos, question)
    assert set(trained.entities) == want, (trained.answer, trained.search)
    return trained


async def test_a_demo_teaches_the_direction_of_a_relation(kb: kag.KnowledgeBase) -> None:
    # "eclipsed by X": X is the subject of Eclipses, although it follows "by"
    demo = ("Which moons are eclipsed by Orrin?", hop(("Moon", "Orrin"), "Eclipses", ("Moon", "*")))
    trained = await learned(kb, [demo], "Which moons are eclipsed by Kessa?", {"Vorn", "Tilp"})
    first = trained.search["hops"][0]
    assert (first["subject_similarity_search"], first["object_similarity_search"]) == ("Kessa", "*")


async def test_a_demo_teaches_bidirectional(kb: kag.KnowledgeBase) -> None:
    demo = (
        "Which planets are next to Vashti?",
        hop(("Planet", "*"), "NextTo", ("Planet", "Vashti"), bidirectional=True),
    )
    trained = await learned(kb, [demo], "Which planets are next to Drel?", {"Zorblax", "Vashti"})
    assert trained.search["hops"][0]["bidirectional"] is True


async def test_a_demo_teaches_a_negation_its_words_do_not_spell(kb: kag.KnowledgeBase) -> None:
    demo = ("Which moons orbit anything but Quonta?", hop(("Moon", "*"), "Orbits", ("Planet", "Quonta"), negated=True))
    want = {m for m, p in MOONS.items() if p != "Drel"}
    trained = await learned(kb, [demo], "Which moons orbit anything but Drel?", want)
    assert trained.search["hops"][0]["negated"] is True


async def test_a_demo_teaches_a_chain(kb: kag.KnowledgeBase) -> None:
    # moons that share a planet with X: X -Orbits-> planet <-Orbits- moon
    demo = (
        "Which moons share a planet with Orrin?",
        {
            "hops": [
                hop(("Moon", "Orrin"), "Orbits", ("Planet", "*")),
                hop(("Planet", "*"), "Orbits", ("Moon", "*"), bidirectional=True),
            ]
        },
    )
    trained = await learned(kb, [demo], "Which moons share a planet with Kessa?", {"Vorn", "Tilp"})
    assert len(trained.search["hops"]) == 2


async def test_the_closest_demo_wins_and_far_demos_leave_the_rules(kb: kag.KnowledgeBase) -> None:
    eclipse = ("Which moons are eclipsed by Orrin?", hop(("Moon", "Orrin"), "Eclipses", ("Moon", "*")))
    nearby = (
        "Which planets are next to Vashti?",
        hop(("Planet", "*"), "NextTo", ("Planet", "Vashti"), bidirectional=True),
    )
    both = [nearby, eclipse]
    result = await answer(kb, both, "Which moons are eclipsed by Kessa?")
    assert set(result.entities) == {"Vorn", "Tilp"}
    # no demo is close to this question: the same search as without demos
    plain = await answer(kb, [], "Which star does Quonta circle?")
    with_demos = await answer(kb, both, "Which star does Quonta circle?")
    assert with_demos.search == plain.search and set(with_demos.entities) == {"Brisk"}
    # deterministic: the same demos, the same search
    again = await answer(kb, both, "Which moons are eclipsed by Kessa?")
    assert again.search == result.search
    # a demo whose names do not fit (its side needs a moon, the question names a planet) is not used
    plain = await answer(kb, [], "Which moons are eclipsed by Zorblax?")
    unfit = await answer(kb, both, "Which moons are eclipsed by Zorblax?")
    assert unfit.search == plain.search


async def test_out_of_schema_questions_are_not_found(kb: kag.KnowledgeBase) -> None:
    for question in ("Who is the president of Zorblax?", "What currency does Drel use?"):
        result = await answer(kb, [], question)
        assert result.entities == [] and result.facts == [], (question, result.search)
        assert "not found in the knowledge graph" in result.answer.lower()
    # answerable questions still answer
    result = await answer(kb, [], "Which moons orbit Drel?")
    assert set(result.entities) == {"Orrin", "Mib"}


async def test_a_demo_teaches_abstention(kb: kag.KnowledgeBase) -> None:
    # "colder than X" is nothing the schema holds, but its words name a label and a planet:
    # the rules answer with X's moons; a labelled unanswerable question teaches the abstention search
    demo = ("Which moons are colder than Quonta?", hop(("*", "colder"), "*", ("Planet", "Quonta")))
    untrained = await answer(kb, [], "Which moons are colder than Zorblax?")
    assert untrained.entities
    trained = await answer(kb, [demo], "Which moons are colder than Zorblax?")
    assert trained.entities == [] and "not found in the knowledge graph" in trained.answer.lower()
