"""Every example of the reference "KnowledgeRetriever module" document, run against kag.

``shared/seeds/001_*.txt`` holds one example program (shown twice: in the page and in
the docstring), the parameter table, and the module's source (``__init__`` builds the
search schema with dynamic enums; ``call`` returns ``None`` for empty inputs and
concatenates inputs, query and results as ``return_inputs`` / ``return_query`` say).
One test per part, named after it. The language model is kag's ``ScriptedLM`` (exact
answers) or its offline ``LexicalLM``; the knowledge base is the embedded store and the
real Neo4j server (``knowledge_base`` is parametrized).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest

import kag
from kag.lm import LexicalLM, ScriptedLM
from tests.reference.models import Answer, City, Country, IsCapitalOf, IsCityOf, Query

FACTS: list[kag.Relation] = [
    IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France")),
    IsCityOf(subj=City(name="Lyon"), obj=Country(name="France")),
    IsCapitalOf(subj=City(name="Berlin"), obj=Country(name="Germany")),
]


def capital_search(country: str) -> dict[str, Any]:
    return {
        "subject_label": "City",
        "subject_similarity_search": "*",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": country,
        "negated": False,
        "bidirectional": False,
        "count": False,
    }


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def neo4j_make(request: pytest.FixtureRequest) -> Any:
    if request.param != "neo4j":
        return None
    request.getfixturevalue("neo4j_config")
    return request.getfixturevalue("neo4j_kb_factory")  # cleared before, closed after


@pytest.fixture
async def knowledge_base(neo4j_make: Any) -> AsyncIterator[kag.KnowledgeBase]:
    models: dict[str, Any] = {"entity_models": [Country, City], "relation_models": [IsCapitalOf, IsCityOf]}
    kb: kag.KnowledgeBase = (
        await neo4j_make(**models) if neo4j_make is not None else kag.KnowledgeBase("memory://", **models)
    )
    await kb.upsert(FACTS)
    yield kb
    if neo4j_make is None:
        await kb.aclose()


# Section: "KnowledgeRetriever" (the example program: Input -> KnowledgeRetriever -> Generator)
async def test_knowledge_retriever_example_program(knowledge_base: kag.KnowledgeBase) -> None:
    language_model = ScriptedLM([capital_search("France"), {"query": "Paris is the capital of France."}])

    inputs = kag.Input(data_model=Query)
    x = await kag.KnowledgeRetriever(
        entity_models=[Country, City],
        relation_models=[IsCityOf, IsCapitalOf],
        language_model=language_model,
        knowledge_base=knowledge_base,
    )(inputs)
    outputs = await kag.Generator(
        data_model=Answer,
        language_model=language_model,
    )(x)

    program = kag.Program(
        inputs=inputs,
        outputs=outputs,
        name="kag_program",
        description="A simple KAG program",
    )
    answer = await program(Query(query="What is the capital of France?"))
    assert isinstance(answer, Answer) and answer.query == "Paris is the capital of France."
    search_call, answer_call = language_model.calls
    assert search_call["schema"]["properties"]["relation_label"]["enum"] == ["IsCityOf", "IsCapitalOf", "*"]
    # the generator sees the inputs, the search query and the facts it found (return_inputs, return_query)
    prompt = answer_call["messages"][-1]["content"]
    assert "What is the capital of France?" in prompt and "Paris -[IsCapitalOf]-> France" in prompt
    assert "IsCapitalOf" in prompt and "MATCH" in prompt
    assert (program.name, program.description) == ("kag_program", "A simple KAG program")
    # the same program with the offline model (no script): it plans the search itself
    offline = LexicalLM(knowledge_base=knowledge_base)
    inputs = kag.Input(data_model=Query)
    x = await kag.KnowledgeRetriever(
        entity_models=[Country, City],
        relation_models=[IsCityOf, IsCapitalOf],
        language_model=offline,
        knowledge_base=knowledge_base,
    )(inputs)
    outputs = await kag.Generator(data_model=Answer, language_model=offline)(x)
    program = kag.Program(inputs=inputs, outputs=outputs, name="kag_program", description="A simple KAG program")
    assert "Berlin" in (await program(Query(query="What is the capital of Germany?"))).query


# Section: "Parameters" (the table: names, order and defaults)
def test_knowledge_retriever_parameters(knowledge_base: kag.KnowledgeBase) -> None:
    params = list(inspect.signature(kag.KnowledgeRetriever).parameters.values())
    reference = [
        ("knowledge_base", None),
        ("language_model", None),
        ("entity_models", None),
        ("relation_models", None),
        ("k", 10),
        ("threshold", 0.8),
        ("prompt_template", None),
        ("examples", None),
        ("instructions", None),
        ("use_inputs_schema", False),
        ("use_outputs_schema", False),
        ("return_inputs", True),
        ("return_query", True),
        ("name", None),
        ("description", None),
        ("trainable", True),
    ]
    assert [(p.name, p.default) for p in params[: len(reference)]] == reference
    retriever = kag.KnowledgeRetriever(knowledge_base=knowledge_base, language_model=ScriptedLM([]))
    assert (retriever.k, retriever.threshold, retriever.return_inputs, retriever.return_query) == (10, 0.8, True, True)
    assert (retriever.use_inputs_schema, retriever.use_outputs_schema, retriever.trainable) == (False, False, True)
    assert retriever.name  # a name is generated when none is given
    named = kag.KnowledgeRetriever(
        knowledge_base=knowledge_base,
        language_model=ScriptedLM([]),
        prompt_template="Q: {{ query }}",
        examples=[(Query(query="capital of Germany?"), capital_search("Germany"))],
        instructions=["Build a graph search.", "Use IsCapitalOf for capitals."],
        use_inputs_schema=True,
        use_outputs_schema=True,
        name="geo_retriever",
        description="finds capitals",
    )
    system, shot_in, shot_out, user = named.messages(Query(query="capital of France?"))
    assert system["content"].startswith("Build a graph search.\nUse IsCapitalOf for capitals.")
    assert "Input schema:" in system["content"] and "Output schema:" in system["content"]
    assert (shot_in["content"], user["content"]) == ("Q: capital of Germany?", "Q: capital of France?")
    assert '"Germany"' in shot_out["content"] and (named.name, named.description) == ("geo_retriever", "finds capitals")
    one_string = kag.KnowledgeRetriever(
        knowledge_base=knowledge_base, language_model=ScriptedLM([]), instructions="Be brief."
    )
    assert one_string.messages(Query(query="q"))[0]["content"].startswith("Be brief.")


# Section: the source of "__init__" (TripletSearch.get_schema, dynamic_enum, the query Generator)
async def test_knowledge_retriever_init_source(knowledge_base: kag.KnowledgeBase) -> None:
    schema = kag.TripletSearch.get_schema()
    entity_models, relation_models = [Country, City], [IsCityOf, IsCapitalOf]
    node_labels = [entity_model.get_schema().get("title") for entity_model in entity_models]
    node_labels.append("*")
    relation_labels = [relation_model.get_schema().get("title") for relation_model in relation_models]
    relation_labels.append("*")
    schema = kag.dynamic_enum(
        schema=schema,
        prop_to_update="subject_label",
        labels=node_labels,
        description="The subject label (use `*` to match them all)",
    )
    schema = kag.dynamic_enum(
        schema=schema,
        prop_to_update="relation_label",
        labels=relation_labels,
        description="The relation label (use `*` to match them all)",
    )
    schema = kag.dynamic_enum(
        schema=schema,
        prop_to_update="object_label",
        labels=node_labels,
        description="The object label (use `*` to match them all)",
    )
    assert schema["properties"]["subject_label"]["enum"] == ["Country", "City", "*"]
    assert schema["properties"]["relation_label"]["description"] == "The relation label (use `*` to match them all)"
    lm = ScriptedLM([capital_search("Germany")])
    query_generator = kag.Generator(
        schema=schema,
        language_model=lm,
        return_inputs=False,
        name="retriever_query_generator",
    )
    search = await query_generator(Query(query="capital of Germany?"))
    assert search is not None and search.relation_label == "IsCapitalOf"
    assert lm.calls[0]["schema"]["properties"]["object_label"]["enum"] == ["Country", "City", "*"]
    # kag's retriever builds the same enums itself (schema is what its model fills)
    retriever = kag.KnowledgeRetriever(
        knowledge_base=knowledge_base,
        language_model=lm,
        entity_models=entity_models,
        relation_models=relation_models,
    )
    for prop in ("subject_label", "relation_label", "object_label"):
        assert retriever.schema["properties"][prop]["enum"] == schema["properties"][prop]["enum"]


# Section: the source of "call" (empty inputs; return_inputs x return_query)
@pytest.mark.parametrize("return_inputs", [True, False])
@pytest.mark.parametrize("return_query", [True, False])
async def test_knowledge_retriever_call_source(
    knowledge_base: kag.KnowledgeBase, return_inputs: bool, return_query: bool
) -> None:
    lm = ScriptedLM([capital_search("France")])
    retriever = kag.KnowledgeRetriever(
        knowledge_base=knowledge_base,
        language_model=lm,
        entity_models=[Country, City],
        relation_models=[IsCityOf, IsCapitalOf],
        return_inputs=return_inputs,
        return_query=return_query,
    )
    assert await retriever(None) is None and lm.calls == []  # `if not inputs: return None`
    out = await retriever(Query(query="What is the capital of France?"))
    assert out is not None
    fields = set(type(out).model_fields)
    assert ("query" in fields) is return_inputs
    assert {"search", "cypher"} <= fields if return_query else not ({"search", "cypher"} & fields)
    assert [f.text for f in out.facts] == ["Paris -[IsCapitalOf]-> France"]  # the triplet search result
    if return_inputs:
        assert out.query == "What is the capital of France?"  # type: ignore[attr-defined]
    if return_query:
        assert out.search["object_similarity_search"] == "France"  # type: ignore[attr-defined]
