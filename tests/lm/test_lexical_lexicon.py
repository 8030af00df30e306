"""LexicalLM learns the words demos use for their relations, and uses them for questions asked another way.

The graph is an invented team (people who mentor and manage each other): two relations with the same
endpoints, so only the words tell them apart, and "coach" is a word of neither relation's name nor
docstring.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

import kag
from kag.lm.lexical import LexicalLM
from kag.lm.lexical.lexicon import DEMO_WORD_WEIGHT, demo_lexicon, with_lexicon
from kag.lm.lexical.schema import _schema_from_json
from kag.programs import Generator, Input, KnowledgeRetriever, Program


class Person(kag.Entity):
    """A person on the team."""

    label: Literal["Person"] = "Person"
    name: str


class Manages(kag.Relation):
    """The subject person is the line manager of the object person."""

    label: Literal["Manages"] = "Manages"
    subj: Person
    obj: Person


class Mentors(kag.Relation):
    """The subject person mentors the object person."""

    label: Literal["Mentors"] = "Mentors"
    subj: Person
    obj: Person


MANAGES = [("Omar Haddad", "Priya Raman"), ("Omar Haddad", "Lena Voss"), ("Priya Raman", "Tomas Berg")]
MENTORS = [("Priya Raman", "Lena Voss"), ("Priya Raman", "Ines Costa"), ("Lena Voss", "Tomas Berg")]


class Query(kag.DataModel):
    query: str = kag.Field(description="The question")


class Reply(kag.DataModel):
    entities: list[str] = kag.Field(description="The names that answer the question")
    number: int | None = kag.Field(default=None, description="The count asked for, if any")


@pytest.fixture(scope="module")
def kb() -> kag.KnowledgeBase:
    base = kag.KnowledgeBase("memory://", entity_models=[Person], relation_models=[Manages, Mentors])
    people = {n: Person(name=n) for pair in MANAGES + MENTORS for n in pair}
    items: list[Any] = list(people.values())
    items += [Manages(subj=people[a], obj=people[b]) for a, b in MANAGES]
    items += [Mentors(subj=people[a], obj=people[b]) for a, b in MENTORS]
    base.sync.upsert(items)
    return base


def hop(s: str, rel: str, o: str, **flags: bool) -> dict[str, Any]:
    return {
        "subject_label": "Person",
        "subject_similarity_search": s,
        "relation_label": rel,
        "object_label": "Person",
        "object_similarity_search": o,
        "negated": False,
        "bidirectional": False,
        "count": False,
        **flags,
    }


async def ask(kb: kag.KnowledgeBase, demos: list[tuple[str, dict[str, Any]]], question: str) -> Any:
    lm = LexicalLM(knowledge_base=kb)
    inputs = Input(data_model=Query)
    examples = [({"query": q}, search) for q, search in demos]
    facts = KnowledgeRetriever(kb, lm, k=50, max_hops=2, abstain=False, examples=examples)(inputs)
    reply = Generator(data_model=Reply, language_model=lm, return_inputs=True)(facts)
    return await Program(inputs=inputs, outputs=reply)(Query(query=question))


COACH = ("Which people does Omar Haddad coach?", hop("Omar Haddad", "Mentors", "*"))


async def test_a_word_a_demo_uses_for_its_relation_answers_a_question_asked_another_way(kb: kag.KnowledgeBase) -> None:
    question = "How many people does Priya Raman coach?"  # a count: the demo is not reusable whole
    untrained = await ask(kb, [], question)
    assert untrained.search["hops"][0]["relation_label"] != "Mentors", "the rules alone already say Mentors"
    trained = await ask(kb, [COACH], question)
    first = trained.search["hops"][0]
    assert first["relation_label"] == "Mentors" and first["count"] is True
    assert trained.number == 2


async def test_what_a_demo_teaches_is_its_own_words_for_one_relation(kb: kag.KnowledgeBase) -> None:
    lm = LexicalLM(knowledge_base=kb)
    schema = _schema_from_json(KnowledgeRetriever(kb, lm, max_hops=2, abstain=False).search_schema, kb)

    async def analysed(question: str) -> Any:
        return await lm.gate.analysis(question, schema)

    coach = await analysed(COACH[0])
    lexicon = demo_lexicon([((COACH[1],), coach)], schema)
    assert lexicon == {"coach": "Mentors"}  # not the names, not "people" (the label), not stopwords

    # a word the demos of two relations share tells neither apart; a chain's words go to no relation
    supervise_m = await analysed("Whom does Lena Voss supervise?")
    supervise_n = await analysed("Whom does Omar Haddad supervise?")
    shared = demo_lexicon(
        [((hop("Lena Voss", "Mentors", "*"),), supervise_m), ((hop("Omar Haddad", "Manages", "*"),), supervise_n)],
        schema,
    )
    assert "supervis" not in " ".join(shared)
    chain = (hop("Omar Haddad", "Manages", "*"), hop("*", "Mentors", "*"))
    assert demo_lexicon([(chain, await analysed("Who is coached by the people Omar Haddad guides?"))], schema) == {}

    question = await analysed("How many people does Priya Raman coach?")
    raised = with_lexicon(question, lexicon)
    assert raised.rel_scores["Mentors"] == question.rel_scores["Mentors"] + DEMO_WORD_WEIGHT
    assert raised.rel_scores["Manages"] == question.rel_scores["Manages"]
    assert question.rel_scores is not raised.rel_scores  # the gate's cached analysis is left as it was


# -- names in another form, and verbs in another form -----------------------------------------------


@pytest.mark.parametrize(
    ("span", "name", "same"),
    [
        ("bwf", "blackwood wren films", True),  # an acronym: the initials
        ("bwf", "blackwater films", False),  # "Blackwater" is one word: its initials are "bf"
        ("theodore vance", "theo vance", True),  # a name part lengthened
        ("liz okafor", "elizabeth okafor", False),  # not a prefix: a nickname needs a learned alias
        ("theo", "theo vance", False),  # a part of a name is no form of it
        ("th vance", "theo vance", False),  # a shortened part keeps three letters
        ("theodore vantage", "theo vance", False),  # every part must agree
        ("theo vance", "theo vance", False),  # the same name is an exact link, not a form
    ],
)
def test_short_and_long_forms_of_names(span: str, name: str, same: bool) -> None:
    from kag.ranking.linking import abbreviates

    assert abbreviates(span.split(), name.split()) is same


def test_verb_bases_are_candidates_a_relation_word_can_match() -> None:
    from kag.lm.lexical.text import verb_bases

    assert "direct" in verb_bases("directed") and "produce" in verb_bases("produced")
    assert verb_bases("studied") == ("study",) and "star" in verb_bases("starring")
    assert verb_bases("red") == () and verb_bases("films") == ()


async def test_an_acronym_and_a_longer_first_name_link_where_the_asker_capitalizes(kag_team: kag.KnowledgeBase) -> None:
    untrained = await ask(kag_team, [], "Whom does Priyanka Raman manage?")  # the graph says "Priya Raman"
    assert set(untrained.entities) == {"Tomas Berg"}
    by_initials = await ask(kag_team, [], "Whom does OH manage?")  # Omar Haddad
    assert set(by_initials.entities) == {"Priya Raman", "Lena Voss"}
    lm = LexicalLM(knowledge_base=kag_team)
    schema = _schema_from_json(KnowledgeRetriever(kag_team, lm, max_hops=2, abstain=False).search_schema, kag_team)
    # where the asker writes no capitals, "oh" is a word, not initials
    assert (await lm.gate.analysis("Whom does OH manage?", schema)).mentions
    assert not (await lm.gate.analysis("whom does oh manage?", schema)).mentions


@pytest.fixture(scope="module")
def kag_team(kb: kag.KnowledgeBase) -> kag.KnowledgeBase:
    return kb
