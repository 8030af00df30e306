"""Grounded answers: the names a Generator answering from facts may give are the names it was shown."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kag
from kag.errors import GenerationError, JSONSchemaValidationError
from kag.lm import ScriptedLM
from kag.lm.guards import grounded_schema
from kag.lm.jsonschema_check import validate_json_schema
from kag.programs.grounding import fact_names, name_fields


class Answer(kag.DataModel):
    answer: str = kag.Field(description="The answer")
    entities: list[str] = kag.Field(description="The names that answer")
    number: int | None = kag.Field(default=None, description="A count")


class Retrieved(kag.DataModel):
    query: str
    facts: list[dict[str, Any]]
    count: int | None = None


def fact(subject: str, obj: str) -> dict[str, Any]:
    return {
        "text": f"{subject} -[IsCapitalOf]-> {obj}",
        "score": 1.0,
        "subject": {"label": "City", "name": subject},
        "object": {"label": "Country", "name": obj},
        "path": [{"label": "City", "name": subject}, {"label": "Country", "name": obj}],
    }


def test_name_fields_are_the_lists_of_strings() -> None:
    assert name_fields(Answer) == ["entities"]


def test_fact_names_take_every_entity_of_the_path_and_the_count() -> None:
    chain = fact("Paris", "France")
    chain["path"].append({"label": "Continent", "name": "Europe"})
    assert fact_names([Retrieved(query="q", facts=[chain, fact("Lyon", "France")])]) == [
        "Paris",
        "France",
        "Europe",
        "Lyon",
    ]
    assert fact_names([Retrieved(query="q", facts=[], count=4)]) == ["4"]
    assert fact_names([{"query": "no facts here"}]) is None


def test_fact_names_then_take_the_values_the_facts_state() -> None:
    stated = fact("Delhi", "India")
    stated["subject"].update({"population": 11034555, "id": "c-1", "capital": True})
    # a value the fact shows may be given ("What is the population of Delhi?"); ids and flags are not values
    assert fact_names([Retrieved(query="q", facts=[stated])]) == ["Delhi", "India", "11034555"]


names = st.text(alphabet="abcdefgXYZ ", min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(allowed=st.lists(names, max_size=6), answer=st.lists(names, max_size=6))
def test_no_answer_valid_under_the_grounded_schema_names_an_unseen_entity(allowed, answer) -> None:
    schema = grounded_schema(Answer.model_json_schema(), allowed, fields=["entities"])
    candidate = {"answer": "x", "entities": answer, "number": None}
    try:
        validate_json_schema(candidate, schema)
    except JSONSchemaValidationError:
        assert any(name not in allowed for name in answer) or len(answer) > len(set(allowed))
    else:
        assert set(answer) <= set(allowed)


def generator(lm: ScriptedLM, **kwargs: Any) -> kag.Generator:
    return kag.Generator(data_model=Answer, language_model=lm, **kwargs)


async def test_a_name_outside_the_facts_is_repaired() -> None:
    lm = ScriptedLM(
        [
            {"answer": "Berlin", "entities": ["Berlin"], "number": None},
            {"answer": "Paris", "entities": ["Paris", "Paris"], "number": None},
        ]
    )
    result = await generator(lm)(Retrieved(query="What is the capital of France?", facts=[fact("Paris", "France")]))
    assert result.entities == ["Paris"]  # repaired once, the repeated name given once
    assert lm.calls[0]["schema"]["properties"]["entities"]["items"]["enum"] == ["Paris", "France"]


async def test_no_facts_means_no_names() -> None:
    lm = ScriptedLM([{"answer": "Lyon", "entities": ["Lyon"], "number": None}] * 3)
    with pytest.raises(GenerationError, match="at most 0 items"):
        await generator(lm)(Retrieved(query="Who is the president of France?", facts=[]))
    ok = ScriptedLM([{"answer": "Not found in the knowledge graph.", "entities": [], "number": None}])
    assert (await generator(ok)(Retrieved(query="Who is the president of France?", facts=[]))).entities == []


async def test_grounding_can_be_turned_off_and_applies_only_to_facts() -> None:
    free = ScriptedLM([{"answer": "Berlin", "entities": ["Berlin"], "number": None}])
    result = await generator(free, grounded=False)(Retrieved(query="q", facts=[fact("Paris", "France")]))
    assert result.entities == ["Berlin"]
    plain = ScriptedLM([{"answer": "Berlin", "entities": ["Berlin"], "number": None}])
    assert (await generator(plain)({"query": "no facts"})).entities == ["Berlin"]
    assert "enum" not in str(plain.calls[0]["schema"]["properties"]["entities"])
    config = generator(free, grounded=False).get_config()
    assert config["grounded"] is False


def asking(subject_text: str, object_text: str, **flags: Any) -> dict[str, Any]:
    return {
        "subject_label": "City",
        "subject_similarity_search": subject_text,
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": object_text,
        "negated": False,
        "bidirectional": False,
        "count": False,
    } | flags


class Searched(kag.DataModel):
    query: str
    search: dict[str, Any] | None
    facts: list[dict[str, Any]]
    count: int | None = None


def test_the_names_of_an_asking_search_are_those_of_the_side_it_asked_for() -> None:
    from kag.programs.grounding import asked_names

    facts = [fact("Paris", "France"), fact("Lyon", "France")]
    capitals = Searched(query="q", search=asking("*", "France"), facts=facts)
    assert fact_names([capitals]) == ["Paris", "Lyon"] == asked_names([capitals])
    countries = Searched(query="q", search=asking("Paris", "*"), facts=facts[:1])
    assert fact_names([countries]) == ["France"]
    # either way round: the named entity may be found on both sides, and is left out by name
    both = Searched(query="q", search=asking("paris", "*", bidirectional=True), facts=[fact("France", "Paris")])
    assert asked_names([both]) == ["France"]
    # no single asked side (both named, both "*", a negation, a chain): every name, and no asked names
    for search in (asking("Paris", "France"), asking("*", "*"), asking("*", "France", negated=True), {"hops": []}):
        unasked = Searched(query="q", search=search, facts=facts)
        assert fact_names([unasked]) == ["Paris", "France", "Lyon"]
        assert asked_names([unasked]) is None
    assert asked_names([{"query": "no facts"}]) is None


def test_a_chain_of_one_pattern_is_that_pattern_and_a_chain_that_names_its_start_asks_for_its_end() -> None:
    from kag.programs.grounding import asked_names

    facts = [fact("Paris", "France"), fact("Lyon", "France")]
    one = Searched(query="q", search={"hops": [asking("*", "France")]}, facts=facts)
    assert asked_names([one]) == ["Paris", "Lyon"]
    lima = {
        "text": "Lima -[IsCityOf]-> Peru -[IsInContinent]-> South America",
        "score": 1.0,
        "subject": {"label": "City", "name": "Lima"},
        "object": {"label": "Country", "name": "Peru"},
        "path": [
            {"label": "City", "name": "Lima"},
            {"label": "Country", "name": "Peru"},
            {"label": "Continent", "name": "South America"},
        ],
    }
    chain = {"hops": [asking("Lima", "*"), asking("*", "*")]}
    assert asked_names([Searched(query="q", search=chain, facts=[lima])]) == ["South America"]
    # a chain that names something past its start, or negates, has no single asked end
    for hops in ([asking("Lima", "*"), asking("*", "Asia")], [asking("Lima", "*"), asking("*", "*", negated=True)]):
        assert asked_names([Searched(query="q", search={"hops": hops}, facts=[lima])]) is None


def test_a_symmetric_relations_fact_stored_the_other_way_still_gives_the_asked_name() -> None:
    from kag.programs.grounding import asked_names

    # "Which countries border Argentina?": Borders is symmetric, so a fact may hold Argentina as its subject
    facts = [fact("Chile", "Argentina"), fact("Argentina", "Bolivia")]
    bordering = Searched(query="q", search={"hops": [asking("*", "Argentina")]}, facts=facts)
    assert asked_names([bordering]) == ["Chile", "Bolivia"]
    # a name on both sides equal to the named text stays (the city of Mexico, in Mexico)
    mexico = Searched(query="q", search=asking("*", "Mexico"), facts=[fact("Mexico", "Mexico")])
    assert asked_names([mexico]) == ["Mexico"]


def test_number_fields_and_the_numbers_facts_state() -> None:
    from kag.programs.grounding import fact_numbers, number_fields

    assert number_fields(Answer) == ["number"]
    stated = fact("Delhi", "India")
    stated["subject"].update({"population": 11034555, "capital": True, "area": 1484.0})
    # a number the question asks for: the count, and the values of the fields its words name
    assert fact_numbers([Retrieved(query="What is the population of Delhi?", facts=[stated], count=3)]) == [
        3,
        11034555,
    ]
    # a field the question does not name gives no number: "Which country is Delhi in?" is no population
    assert fact_numbers([Retrieved(query="Which country is Delhi in?", facts=[stated], count=None)]) == []
    assert fact_numbers([{"query": "no facts"}]) is None


def test_a_text_answer_is_the_asked_names_or_a_value_of_a_field_the_question_names() -> None:
    from kag.programs.grounding import answer_texts

    tokyo = {"label": "City", "name": "Tokyo", "population": 9733276, "area_km2": 2194}
    search = {
        "subject_label": "City",
        "subject_similarity_search": "Tokyo",
        "relation_label": "IsCityOf",
        "object_label": "Country",
        "object_similarity_search": "*",
    }
    facts = [{**fact("Tokyo", "Japan"), "subject": tokyo}]

    def asked(question: str) -> list[str]:
        return answer_texts([{"query": question, "search": search, "facts": facts}])

    # the field the question names is the answer, not the country the search reached (newcomer issue:
    # the packaged model answered "Japan" when both were offered)
    assert asked("What is the population of Tokyo?") == ["9733276"]
    assert asked("Which country is Tokyo in?") == ["Japan"]  # no field named: no value offered
    assert asked("What is the area km2 of Tokyo?") == ["2194"]
    assert answer_texts([{"query": "q", "search": search, "facts": [], "count": None}]) == []


def test_the_number_and_text_asked_are_the_named_entitys_as_a_retriever_hands_them_over() -> None:
    """A retriever's output carries its Cypher (digits, ``n0_id``) and both ends' properties: the answer
    to "What is the population of Tokyo?" is Tokyo's population, not Japan's, and the Cypher's digits
    are no number the question states (the packaged demo answered "Japan" with Japan's population)."""
    from kag.programs.grounding import answer_texts, asks_value, fact_numbers

    tokyo = {"label": "City", "name": "Tokyo", "population": 9733276}
    japan = {"label": "Country", "name": "Japan", "iso": "JP", "population": 126529100}
    search = {
        "subject_label": "City",
        "subject_similarity_search": "Tokyo",
        "relation_label": "*",
        "object_label": "Country",
        "object_similarity_search": "*",
    }
    retrieved = {
        "query": "What is the population of Tokyo?",
        "search": search,
        "cypher": "MATCH (n0:`City`) WHERE n0.id IN $l0_0_ids RETURN n0.id AS n0_id LIMIT $k",
        "facts": [{**fact("Tokyo", "Japan"), "subject": tokyo, "object": japan}],
        "count": None,
    }
    assert fact_numbers([retrieved]) == [9733276]
    assert answer_texts([retrieved]) == ["9733276"]
    # a value is asked, not a name: the generator leaves the names empty (not Japan, the asked side)
    assert asks_value([retrieved]) and not asks_value([{**retrieved, "query": "Which country is Tokyo in?"}])
    # no "<field> of <name>" in the question: every value of the named field is offered
    either = {**retrieved, "query": "Which population figures are there?"}
    assert fact_numbers([either]) == [9733276, 126529100]
