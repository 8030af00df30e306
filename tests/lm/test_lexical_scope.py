"""The offline model says "not found" when a relation's word only modifies what is asked, and does not
read a lowercase everyday word as a misspelt name when the asker capitalizes names."""

from __future__ import annotations

import pytest

import kag
from kag.datasets import Answer, Query, load_kgqa_graph
from kag.lm.lexical.schema import _schema_from_json
from kag.lm.lexical.scope import out_of_schema, unexplained
from kag.query.triplet import triplet_chain_schema

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def program() -> kag.Program:
    kb = await load_kgqa_graph()
    lm = kag.LexicalLM(knowledge_base=kb)
    question = kag.Input(data_model=Query)
    facts = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, k=50, threshold=0.7, max_hops=2)(question)
    answer = kag.Generator(data_model=Answer, language_model=lm, return_inputs=True)(facts)
    return kag.Program(inputs=question, outputs=answer)


async def test_a_relation_word_that_only_modifies_the_asked_noun_is_not_found(program) -> None:
    for question in (
        "What currency symbol does Honduras print on its coins?",  # "symbol" is no misspelt "Yambol"
        "What language school is the best in Honduras?",  # nor "school" a misspelt "Sool"
        "Which currency exchange rate does Peru have against the euro?",
    ):
        result = await program(Query(query=question))
        assert result.entities == [] and result.facts == [], (question, result.search)
        assert "not found in the knowledge graph" in result.answer.lower()
    # the relation asked directly still answers
    assert (await program(Query(query="What currency does Honduras use?"))).entities == ["Lempira"]
    assert set((await program(Query(query="Which languages are spoken in Honduras?"))).entities) == {"Spanish"}
    # a misspelt capitalized name is still found
    assert (await program(Query(query="What currency does Hondura use?"))).entities == ["Lempira"]


async def test_a_lowercase_common_noun_is_not_a_capitalized_name_of_the_graph(program) -> None:
    # New Zealand has a province named "Lake", Kenya one named "Coast"; asked in lowercase beside
    # capitalized names, the words are what the question asks for, which the schema does not hold
    for question in (
        "What is the biggest lake in New Zealand?",
        "How long is the coast of Kenya?",
        "How tall is the highest mountain in Papua New Guinea?",
    ):
        result = await program(Query(query=question))
        assert result.entities == [] and result.facts == [], (question, result.search)
        assert "not found in the knowledge graph" in result.answer.lower()
    # capitalized, the same word is the province's name
    result = await program(Query(query="Which country is the province Mountain in?"))
    assert result.entities == ["Philippines"], result.search


async def test_the_last_word_of_the_asked_noun_phrase_decides_its_scope(program) -> None:
    # "first" is a word of Province's docstring ("first-level subdivision"); "king" is the noun asked for
    result = await program(Query(query="Who was the first king of Turkey?"))
    assert result.entities == [] and result.facts == [], result.search
    # a schema noun last still answers
    assert (await program(Query(query="What is the capital city of Honduras?"))).entities == ["Tegucigalpa"]


async def test_a_noun_phrase_closed_by_a_helper_verb_asks_for_its_last_word(program) -> None:
    # "country club" runs into "did": the phrase is closed there, and "club" is nothing the schema holds
    result = await program(Query(query="Which country club did Honduras open first?"))
    assert result.entities == [] and result.facts == [], result.search
    # a schema noun last still answers ("currency" of "Which currency does ... use")
    assert (await program(Query(query="Which official currency does Honduras use?"))).entities == ["Lempira"]


async def test_a_docstring_word_that_is_another_verbs_past_form_explains_no_verb() -> None:
    # Borders' docstring says it is "found from either end": "found" (of "find") does not make
    # "founded" a relation's word, so the question asks for nothing the schema holds
    kb = await load_kgqa_graph()
    lm = kag.LexicalLM(knowledge_base=kb)
    schema = _schema_from_json(triplet_chain_schema(kb.schema, 2), kb)
    a = await lm.gate.analysis("Who founded Comoros?", schema)
    assert [a.tokens[p] for p in unexplained(a, schema)] == ["founded"]
    assert out_of_schema(a, schema)
    # a relation's own word in a verb form still explains it
    a = await lm.gate.analysis("Which countries are bordered by Kenya?", schema)
    assert unexplained(a, schema) == [] and not out_of_schema(a, schema)
