"""KnowledgeRetriever with a scripted model: schema, repair loop, facts, counts, chains."""

from __future__ import annotations

from typing import Any, Literal

import pytest

import kag
from kag.errors import ConfigError, GenerationError
from kag.examples.world import City, Continent, Country, IsCapitalOf, IsCityOf, IsInContinent
from kag.lm import ScriptedLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program


class Query(kag.DataModel):
    query: str


def search(**overrides: Any) -> dict[str, Any]:
    base = {
        "subject_label": "City",
        "subject_similarity_search": "*",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": "France",
        "negated": False,
        "bidirectional": False,
        "count": False,
    }
    return {**base, **overrides}


@pytest.fixture
async def kb() -> kag.KnowledgeBase:
    kb = kag.KnowledgeBase(
        "memory://",
        entity_models=[Continent, Country, City],
        relation_models=[IsCapitalOf, IsCityOf, IsInContinent],
    )
    items: list[Any] = []
    for city, country, continent in [
        ("Paris", "France", "Europe"),
        ("Berlin", "Germany", "Europe"),
        ("Lima", "Peru", "South America"),
    ]:
        items += [
            IsCapitalOf(subj=City(name=city), obj=Country(name=country)),
            IsCityOf(subj=City(name=city), obj=Country(name=country)),
            IsInContinent(subj=Country(name=country), obj=Continent(name=continent)),
        ]
    items += [IsCityOf(subj=City(name="Lyon"), obj=Country(name="France"))]
    await kb.upsert(items)
    return kb


def retriever(kb: kag.KnowledgeBase, lm: ScriptedLM, **kwargs: Any) -> KnowledgeRetriever:
    return KnowledgeRetriever(
        knowledge_base=kb,
        language_model=lm,
        entity_models=[Country, City],
        relation_models=[IsCapitalOf, IsCityOf],
        **kwargs,
    )


async def test_fills_dynamic_enum_schema_and_returns_facts(kb: kag.KnowledgeBase) -> None:
    lm = ScriptedLM([search()])
    out = await retriever(kb, lm)(Query(query="What is the capital of France?"))
    schema = lm.calls[0]["schema"]
    assert schema["properties"]["subject_label"]["enum"] == ["Country", "City", "*"]
    assert schema["properties"]["relation_label"]["enum"] == ["IsCapitalOf", "IsCityOf", "*"]
    messages = lm.calls[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "IsCapitalOf: City -> Country" in messages[0]["content"]
    assert messages[1]["content"] == "query: What is the capital of France?"
    assert out.query == "What is the capital of France?"
    # the fields the answer omitted are filled with their declared defaults
    assert out.search == kag.TripletSearch(**search()).model_dump(mode="json")
    assert "MATCH" in out.cypher and "IsCapitalOf" in out.cypher
    assert [f.text for f in out.facts] == ["Paris -[IsCapitalOf]-> France"]
    fact = out.facts[0]
    assert fact.subject["name"] == "Paris" and fact.object is not None and fact.object["name"] == "France"
    assert fact.relation == {"label": "IsCapitalOf"} and fact.score > 0.99
    assert out.count is None and out.passages == []


async def test_unknown_label_is_repaired(kb: kag.KnowledgeBase) -> None:
    lm = ScriptedLM([search(subject_label="Town"), search()])
    out = await retriever(kb, lm)(Query(query="capital of France"))
    assert [f.subject["name"] for f in out.facts] == ["Paris"]
    assert len(lm.calls) == 2
    repair = lm.calls[1]["messages"]
    assert repair[-2]["role"] == "assistant" and "Town" in repair[-2]["content"]
    assert repair[-1]["role"] == "user" and "invalid" in repair[-1]["content"]
    assert "subject_label" in repair[-1]["content"]


async def test_endpoint_mismatch_is_repaired_by_the_validate_hook(kb: kag.KnowledgeBase) -> None:
    wrong = search(subject_label="Country", object_label="City", object_similarity_search="Paris")
    lm = ScriptedLM([wrong, search()])
    out = await retriever(kb, lm)(Query(query="capital of France"))
    assert out.facts and out.facts[0].subject["name"] == "Paris"
    assert "cannot link subject 'Country' to object 'City'" in lm.calls[1]["messages"][-1]["content"]


async def test_gives_up_after_max_repairs(kb: kag.KnowledgeBase) -> None:
    wrong = search(relation_label="IsInContinent")  # declared in the kb, not offered here
    with pytest.raises(GenerationError):
        await retriever(kb, ScriptedLM([wrong] * 3))(Query(query="q"))


async def test_count_negation_and_flags(kb: kag.KnowledgeBase) -> None:
    lm = ScriptedLM(
        [
            search(relation_label="IsCityOf", count=True),
            search(object_similarity_search="*", negated=True),
        ]
    )
    r = retriever(kb, lm, return_inputs=False, return_query=False)
    counted = await r(Query(query="How many cities are in France?"))
    assert counted.count == 2 and counted.facts == []
    assert set(type(counted).model_fields) == {"facts", "count", "passages"}
    negated = await r(Query(query="Which cities are not capitals?"))
    assert [f.text for f in negated.facts] == ["Lyon (City)"]


async def test_multi_hop_chain(kb: kag.KnowledgeBase) -> None:
    chain = {
        "hops": [
            search(subject_similarity_search="Lima", relation_label="IsCityOf", object_similarity_search="*"),
            search(
                subject_label="Country",
                relation_label="IsInContinent",
                object_label="Continent",
                object_similarity_search="*",
            ),
        ]
    }
    lm = ScriptedLM([chain])
    r = KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=2)
    out = await r(Query(query="Which continent is Lima in?"))
    schema = lm.calls[0]["schema"]
    assert schema["properties"]["hops"]["maxItems"] == 2
    assert lm.calls[0]["schema_name"] == "triplet_chain"
    assert [f.text for f in out.facts] == ["Lima -[IsCityOf]-> Peru -[IsInContinent]-> South America"]
    assert "r2:`IsInContinent`" in out.cypher


async def test_chain_join_error_is_repaired(kb: kag.KnowledgeBase) -> None:
    broken = {"hops": [search(), search(subject_label="City")]}  # hop 1 ends at Country, hop 2 starts at City
    good = {"hops": [search()]}
    lm = ScriptedLM([broken, good])
    out = await KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=3)(Query(query="q"))
    assert out.facts[0].text == "Paris -[IsCapitalOf]-> France"
    assert "share an entity label" in lm.calls[1]["messages"][-1]["content"]


async def test_a_chain_that_never_joins_searches_its_first_pattern(kb: kag.KnowledgeBase) -> None:
    broken = {"hops": [search(), search(subject_label="City")]}
    lm = ScriptedLM([broken] * 3)  # the model repeats the same unjoinable chain through every repair
    out = await KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=2)(Query(query="q"))
    assert len(lm.calls) == 3
    assert out.search == {"hops": [search()]}
    assert [f.text for f in out.facts] == ["Paris -[IsCapitalOf]-> France"]
    # a first pattern that cannot run either leaves the error as it was, with the model's last output
    unknown = {"hops": [search(relation_label="Nope"), search()]}
    with pytest.raises(GenerationError) as caught:
        await KnowledgeRetriever(knowledge_base=kb, language_model=ScriptedLM([unknown] * 3), max_hops=2)(
            Query(query="q")
        )
    assert caught.value.output is not None and "Nope" in caught.value.output


async def test_in_a_program_with_a_generator(kb: kag.KnowledgeBase) -> None:
    class Answer(kag.DataModel):
        answer: str

    lm = ScriptedLM([search(), {"answer": "Paris"}])
    inputs = Input(data_model=Query)
    x = await retriever(kb, lm)(inputs)
    assert x.fields == ("query", "search", "cypher", "facts", "count", "passages")
    out = await Generator(data_model=Answer, language_model=lm)(x)
    program = Program(inputs=inputs, outputs=out)
    assert (await program(Query(query="capital of France?"))).answer == "Paris"
    user = lm.calls[1]["messages"][-1]["content"]
    assert "facts:\n- Paris -[IsCapitalOf]-> France (score 1.00" in user
    assert user.startswith("query: capital of France?\nsearch: {")


def test_configuration_errors(kb: kag.KnowledgeBase) -> None:
    class Town(kag.Entity):
        label: Literal["Town"] = "Town"
        name: str

    with pytest.raises(ConfigError, match="not declared by the knowledge base"):
        KnowledgeRetriever(knowledge_base=kb, language_model=ScriptedLM([]), entity_models=[Town])
    for bad in ({"max_hops": 0}, {"max_hops": 9}, {"k": 0}, {"threshold": 2.0}):
        with pytest.raises(ConfigError):
            KnowledgeRetriever(knowledge_base=kb, language_model=ScriptedLM([]), **bad)
    with pytest.raises(ConfigError):
        KnowledgeRetriever(knowledge_base="memory://", language_model=ScriptedLM([]))  # type: ignore[arg-type]


def test_a_schema_without_relation_models_is_refused_when_built() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Country, City], relation_models=[])
    with pytest.raises(ConfigError, match="declares no relation models: add at least one Relation model"):
        KnowledgeRetriever(knowledge_base=kb, language_model=ScriptedLM([]))
