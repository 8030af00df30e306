"""Named rules of the offline model, each on its own: what a verb relation asks for, comparisons in
time, and a demo that may not override what the question itself says.

The graph is a small invented film archive (``Film -[DirectedBy]-> Director``, ``Actor -[ActedIn]->
Film``), no geography.
"""

from __future__ import annotations

from typing import Literal

import pytest

import kag
from kag.lm.lexical.demos import overrides_question
from kag.lm.lexical.schema import _schema_from_json
from kag.query.triplet import triplet_chain_schema


class Film(kag.Entity):
    """A film in the archive."""

    label: Literal["Film"] = "Film"
    name: str
    year: int = 0
    budget: int = kag.Field(default=0, description="Production budget, millions of US dollars")


class Director(kag.Entity):
    """A person who directs films."""

    label: Literal["Director"] = "Director"
    name: str


class Actor(kag.Entity):
    """A person who acts in films."""

    label: Literal["Actor"] = "Actor"
    name: str


class DirectedBy(kag.Relation):
    """The film was directed by the person."""

    label: Literal["DirectedBy"] = "DirectedBy"
    subj: Film
    obj: Director


class ActedIn(kag.Relation):
    """The actor appears in the film."""

    label: Literal["ActedIn"] = "ActedIn"
    subj: Actor
    obj: Film


@pytest.fixture
async def archive() -> kag.KnowledgeBase:
    kb = kag.KnowledgeBase("memory://", entity_models=[Film, Director, Actor], relation_models=[DirectedBy, ActedIn])
    signal = Film(name="Signal Lost", year=1994, budget=40)
    harbour = Film(name="Glass Harbour", year=2011, budget=180)
    await kb.upsert(
        [
            DirectedBy(subj=signal, obj=Director(name="Desmond Okoro")),
            DirectedBy(subj=harbour, obj=Director(name="Hana Seo")),
            ActedIn(subj=Actor(name="Dae-jung Park"), obj=signal),
        ]
    )
    return kb


async def analysis(kb: kag.KnowledgeBase, question: str):  # type: ignore[no-untyped-def]
    lm = kag.LexicalLM(knowledge_base=kb)
    schema = _schema_from_json(triplet_chain_schema(kb.schema, 2), kb)
    return await lm.gate.analysis(question, schema), schema


async def test_a_verb_relation_asks_for_the_side_the_named_entity_is_not_on(archive: kag.KnowledgeBase) -> None:
    # "directed" is DirectedBy's word; the question names a Film (its subject), so it asks for a Director
    a, _ = await analysis(archive, "Who directed Signal Lost?")
    assert a.target == "Director"
    # a relation noun with nothing named on its subject side still asks for the subject
    a, _ = await analysis(archive, "Which films were directed by Hana Seo?")
    assert a.target == "Film"


async def test_a_relation_verb_before_a_label_noun_asks_for_its_other_side(archive: kag.KnowledgeBase) -> None:
    # "films" names Film, but "who directed" the films asks for the other side of DirectedBy
    a, _ = await analysis(archive, "Who directed the films Dae-jung Park has been in?")
    assert a.target == "Director"
    a, _ = await analysis(archive, "Who directed the film Signal Lost?")
    assert a.target == "Director"
    # a label noun right after the question word is still what is asked
    a, _ = await analysis(archive, "Which films did Hana Seo direct?")
    assert a.target == "Film"
    # and the whole question is searched as a chain through the films
    retriever = kag.KnowledgeRetriever(archive, kag.LexicalLM(knowledge_base=archive), max_hops=2)

    class Q(kag.DataModel):
        query: str

    found = await retriever(Q(query="Who directed the films Dae-jung Park has been in?"))
    assert [h["relation_label"] for h in found.search["hops"]] == ["ActedIn", "DirectedBy"]
    assert {f.path[-1]["name"] for f in found.facts} == {"Desmond Okoro"}  # who directed Signal Lost


async def test_before_and_after_compare_numbers(archive: kag.KnowledgeBase) -> None:
    lm = kag.LexicalLM(knowledge_base=archive)
    retriever = kag.KnowledgeRetriever(archive, lm, max_hops=2)

    class Q(kag.DataModel):
        query: str

    before = await retriever(Q(query="Which films came out before 2000?"))
    conditions = before.search["hops"][0]["subject_where"]
    assert conditions == [{"field": "year", "op": "<", "value": 2000}]
    assert {f.subject["name"] for f in before.facts} == {"Signal Lost"}
    after = await retriever(Q(query="Which films came out after 2000?"))
    assert after.search["hops"][0]["subject_where"] == [{"field": "year", "op": ">", "value": 2000}]


async def test_a_demo_may_not_override_the_relation_the_question_names(archive: kag.KnowledgeBase) -> None:
    acted = {
        "subject_label": "Actor",
        "subject_similarity_search": "*",
        "relation_label": "ActedIn",
        "object_label": "Film",
        "object_similarity_search": "Glass Harbour",
    }
    demo_a, _ = await analysis(archive, "Who is in Glass Harbour?")  # names no relation by its words
    question, _ = await analysis(archive, "Who directed Signal Lost?")  # names DirectedBy
    adapted = [{**acted, "object_similarity_search": "Signal Lost"}]
    assert overrides_question(demo_a, question, adapted)
    # the same demo for a question that names no other relation is fine
    plain, _ = await analysis(archive, "Who is in Signal Lost?")
    assert not overrides_question(demo_a, plain, adapted)
    # and a demo whose search uses the relation the question names is fine too
    directed = [{**acted, "subject_label": "Film", "relation_label": "DirectedBy", "object_label": "Director"}]
    assert not overrides_question(demo_a, question, directed)


async def test_a_number_scaled_by_a_word_is_compared_in_the_fields_own_unit(archive: kag.KnowledgeBase) -> None:
    retriever = kag.KnowledgeRetriever(archive, kag.LexicalLM(knowledge_base=archive), max_hops=2)

    class Q(kag.DataModel):
        query: str

    found = await retriever(Q(query="Which films cost more than 170 million dollars?"))
    # the budget is kept in millions: "170 million" is compared as 170, not 170000000
    assert found.search["hops"][0]["subject_where"] == [{"field": "budget", "op": ">", "value": 170}]
    assert {f.subject["name"] for f in found.facts} == {"Glass Harbour"}


async def test_negation_said_without_not(archive: kag.KnowledgeBase) -> None:
    for question in (
        "Which films were made outside the studio?",
        "Which films other than Signal Lost are there?",
        "Apart from Signal Lost, which films are there?",
        "All films except Signal Lost?",
    ):
        a, _ = await analysis(archive, question)
        assert a.negated and a.negation_at is not None, question
    a, _ = await analysis(archive, "Which films did Hana Seo direct?")
    assert not a.negated
