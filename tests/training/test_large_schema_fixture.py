"""The generated large schema (benchmarks.own_graph.large_schema) is a valid kag schema."""

from __future__ import annotations

from typing import Any

import kag
from benchmarks.own_graph.large_schema import large_schema


class Query(kag.DataModel):
    query: str = kag.Field(description="The user's question")


class Reply(kag.DataModel):
    answer: str = kag.Field(description="The answer to the question")


async def test_large_schema_builds_a_graph_schema_and_a_retriever() -> None:
    entities, relations = large_schema(n_labels=40, n_relations=80, seed=0)
    assert len(entities) == 40 and len(relations) == 80
    schema = kag.GraphSchema(entities, relations)
    assert len(schema.entities) == 40 and len(schema.relations) == 80
    assert all(model.__doc__ for model in [*entities, *relations])
    assert all(len(model.model_fields) >= 3 for model in entities)  # label, name and a property or more

    again = large_schema(n_labels=40, n_relations=80, seed=0)
    assert [m.model_json_schema() for m in again[0]] == [m.model_json_schema() for m in entities]
    assert [m.__doc__ for m in again[1]] == [m.__doc__ for m in relations]

    kb = kag.KnowledgeBase("memory://", entity_models=entities, relation_models=relations)
    first: Any = relations[0]  # built at run time: mypy cannot see its fields
    subj: Any = first.model_fields["subj"].annotation
    obj: Any = first.model_fields["obj"].annotation
    await kb.upsert([first(subj=subj(name="Alpha"), obj=obj(name="Beta"))])
    lm = kag.LexicalLM(knowledge_base=kb)
    question = kag.Input(data_model=Query)
    facts = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, max_hops=2)(question)
    program = kag.Program(inputs=question, outputs=await kag.Generator(data_model=Reply, language_model=lm)(facts))
    reply = await program(Query(query="Which records does Alpha have?"))
    assert isinstance(reply.answer, str)
