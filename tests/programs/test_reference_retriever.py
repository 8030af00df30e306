"""The reference KnowledgeRetriever module and its example program, with the package name changed.

The models and the program are the reference's own; the language model is kag's
offline ``LexicalLM`` (or a ``ScriptedLM`` where the test needs exact answers).
The example program runs on the embedded store and on the real Neo4j server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import kag
from kag.errors import ConfigError, GenerationError
from kag.lm import LexicalLM, ScriptedLM
from tests.reference.models import Answer, City, Country, IsCapitalOf, IsCityOf, Query

FACTS: list[kag.Relation] = [
    IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France")),
    IsCityOf(subj=City(name="Paris"), obj=Country(name="France")),
    IsCityOf(subj=City(name="Lyon"), obj=Country(name="France")),
    IsCapitalOf(subj=City(name="Berlin"), obj=Country(name="Germany")),
    IsCityOf(subj=City(name="Berlin"), obj=Country(name="Germany")),
]


def capital_search(country: str = "France", **overrides: Any) -> dict[str, Any]:
    return {
        "subject_label": "City",
        "subject_similarity_search": "*",
        "relation_label": "IsCapitalOf",
        "object_label": "Country",
        "object_similarity_search": country,
        "negated": False,
        "bidirectional": False,
        "count": False,
        **overrides,
    }


@pytest.fixture(params=["memory", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def neo4j_make(request: pytest.FixtureRequest) -> Any:
    """``neo4j_kb_factory`` on the Neo4j run (resolved outside the event loop), else ``None``."""
    if request.param != "neo4j":
        return None
    request.getfixturevalue("neo4j_config")
    return request.getfixturevalue("neo4j_kb_factory")  # cleared before, closed after


@pytest.fixture
async def knowledge_base(neo4j_make: Any) -> AsyncIterator[kag.KnowledgeBase]:
    models: dict[str, Any] = {"entity_models": [Country, City], "relation_models": [IsCapitalOf, IsCityOf]}
    if neo4j_make is not None:
        kb: kag.KnowledgeBase = await neo4j_make(**models)
    else:
        kb = kag.KnowledgeBase("memory://", **models)
    await kb.upsert(FACTS)
    yield kb
    if neo4j_make is None:
        await kb.aclose()


async def test_reference_example_program_runs(knowledge_base: kag.KnowledgeBase) -> None:
    language_model = LexicalLM(knowledge_base=knowledge_base)

    # the reference main(), package name changed
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
    assert isinstance(answer, Answer) and "Paris" in answer.query
    retriever = program.nodes[0].module
    assert isinstance(retriever, kag.KnowledgeRetriever)
    retrieved = await retriever(Query(query="What is the capital of Germany?"))
    assert retrieved.query == "What is the capital of Germany?"  # return_inputs=True
    assert retrieved.search["relation_label"] == "IsCapitalOf" and "MATCH" in retrieved.cypher  # return_query=True
    assert [f.text for f in retrieved.facts] == ["Berlin -[IsCapitalOf]-> Germany"]


def test_reference_constructor_steps() -> None:
    """What the reference ``__init__`` does by hand: the search schema, then dynamic enums on it."""
    schema = kag.TripletSearch.get_schema()
    node_labels = [model.get_schema().get("title") for model in (Country, City)]
    node_labels.append("*")
    relation_labels = [model.get_schema().get("title") for model in (IsCapitalOf, IsCityOf)]
    relation_labels.append("*")
    assert node_labels == ["Country", "City", "*"] and relation_labels == ["IsCapitalOf", "IsCityOf", "*"]
    for prop, labels, what in (
        ("subject_label", node_labels, "subject"),
        ("relation_label", relation_labels, "relation"),
        ("object_label", node_labels, "object"),
    ):
        schema = kag.dynamic_enum(
            schema=schema,
            prop_to_update=prop,
            labels=labels,
            description=f"The {what} label (use `*` to match them all)",
        )
    props = schema["properties"]
    assert props["subject_label"] == {
        "type": "string",
        "enum": ["Country", "City", "*"],
        "description": "The subject label (use `*` to match them all)",
    }
    assert props["relation_label"]["enum"] == ["IsCapitalOf", "IsCityOf", "*"]  # "*" given once, kept once
    assert kag.TripletSearch.get_schema()["properties"]["subject_label"].get("enum") is None  # copies, not edits


async def test_generator_with_a_dynamic_enum_schema() -> None:
    schema = kag.TripletSearch.get_schema()
    schema = kag.dynamic_enum(schema=schema, prop_to_update="subject_label", labels=["City", "*"], description="who")
    lm = ScriptedLM([capital_search(subject_label="Town"), capital_search()])
    generator = kag.Generator(
        schema=schema,
        language_model=lm,
        instructions=["Fill in a triplet search.", "Use only the declared labels."],
        examples=[(Query(query="capital of Peru?"), capital_search("Peru"))],
        use_inputs_schema=True,
        use_outputs_schema=True,
        return_inputs=False,
        name="query_generator",
    )
    out = await generator(Query(query="What is the capital of France?"))
    assert out is not None and out.subject_label == "City" and out.object_similarity_search == "France"
    assert len(lm.calls) == 2  # "Town" is outside the enum: sent back and repaired
    assert lm.calls[0]["schema"]["properties"]["subject_label"]["enum"] == ["City", "*"]
    system, ex_user, ex_assistant, user = lm.calls[0]["messages"]
    assert system["content"].startswith("Fill in a triplet search.\nUse only the declared labels.")
    assert '"title": "Query"' in system["content"].split("Input schema:")[1]
    assert '"enum": ["City", "*"]' in system["content"].split("Output schema:")[1]
    assert (ex_user["content"], user["content"]) == ("query: capital of Peru?", "query: What is the capital of France?")
    assert '"Peru"' in ex_assistant["content"]
    assert await generator(None) is None and len(lm.calls) == 2
    rebuilt = kag.Generator.from_config(generator.get_config(), language_model=lm)
    assert rebuilt.schema == generator.schema and rebuilt.instructions == generator.instructions
    with pytest.raises(ConfigError, match=r"data_model= .* or a schema="):
        kag.Generator(language_model=lm)


async def test_retriever_reference_arguments(knowledge_base: kag.KnowledgeBase) -> None:
    lm = ScriptedLM([capital_search("France")])
    retriever = kag.KnowledgeRetriever(
        knowledge_base,  # positional, in the reference order
        lm,
        [Country, City],
        [IsCityOf, IsCapitalOf],
        5,
        0.7,
        "Question: {{ query }}",
        [(Query(query="capital of Germany?"), capital_search("Germany"))],
        ["Turn the question into a graph search.", "Prefer IsCapitalOf for capitals."],
        True,
        True,
        False,
        False,
        "reference_retriever",
        "the reference arguments",
        True,
    )
    assert await retriever(None) is None and await retriever([]) is None and lm.calls == []
    out = await retriever(Query(query="What is the capital of France?"))
    assert out is not None and set(type(out).model_fields) == {"facts", "count", "passages"}
    assert [f.text for f in out.facts] == ["Paris -[IsCapitalOf]-> France"]
    system, ex_user, ex_assistant, user = lm.calls[0]["messages"]
    assert system["content"].startswith("Turn the question into a graph search.\nPrefer IsCapitalOf for capitals.")
    assert "Input schema:" in system["content"] and "Output schema:" in system["content"]
    assert ex_user["content"] == "Question: capital of Germany?"
    assert user["content"] == "Question: What is the capital of France?"
    assert '"Germany"' in ex_assistant["content"]

    config = retriever.get_config()
    assert config["instructions"] == ["Turn the question into a graph search.", "Prefer IsCapitalOf for capitals."]
    rebuilt = kag.KnowledgeRetriever.from_config(config, knowledge_base=knowledge_base, language_model=lm)
    assert rebuilt.messages(Query(query="q")) == retriever.messages(Query(query="q"))

    with pytest.raises(ConfigError, match="string or a list of strings"):
        kag.KnowledgeRetriever(knowledge_base=knowledge_base, language_model=lm, instructions=[1, 2])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="examples\\[0\\]"):
        kag.KnowledgeRetriever(
            knowledge_base=knowledge_base,
            language_model=lm,
            examples=[(Query(query="q"), capital_search(relation_label="Borders"))],
        )


async def test_retriever_over_a_managed_knowledge_and_repair() -> None:
    knowledge = kag.create_knowledge(
        "memory", entity_models=[Country, City], relation_models=[IsCapitalOf, IsCityOf], name="geo"
    )
    await knowledge.upsert(FACTS)
    lm = ScriptedLM([capital_search(relation_label="Borders")] * 3)
    retriever = kag.KnowledgeRetriever(
        knowledge_base=knowledge, language_model=lm, instructions="One string works too."
    )
    assert retriever.knowledge_base is knowledge.kb
    with pytest.raises(GenerationError):
        await retriever(Query(query="capital of France"))
    assert retriever.messages(Query(query="q"))[0]["content"].startswith("One string works too.")
