"""A retriever prompt bounded by the question, not by the schema, for the packaged model.

Measured with the packaged model's own tokenizer (the real GGUF, loaded once): 4 demos on a
generated schema of 40 labels and 80 relations stay within 1,500 prompt tokens, where describing the
whole schema takes about twice that; on a schema of 6 labels no demo is dropped for length. The
typed search schema says each field description once, not once per typed variant.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import kag
from benchmarks.own_graph.large_schema import large_schema
from kag.lm.llamacpp import LlamaCppLM
from kag.programs import KnowledgeRetriever
from kag.query.typed_search import typed_triplet_search_schema
from kag.training import Demo

BUDGET = 1500


class Query(kag.DataModel):
    query: str


@pytest.fixture(scope="module")
def packaged() -> LlamaCppLM:
    return LlamaCppLM("local", n_threads=1)


def _hop(subject: str, relation: str, obj: str) -> dict[str, Any]:
    return {
        "subject_label": subject,
        "subject_similarity_search": "Acme",
        "relation_label": relation,
        "object_label": obj,
        "object_similarity_search": "*",
        "negated": False,
        "bidirectional": False,
        "count": False,
    }


def _demos(relations: list[type[kag.Relation]]) -> list[Demo]:
    demos = []
    for i, model in enumerate(relations[:4]):
        subj = model.model_fields["subj"].annotation.model_fields["label"].default  # type: ignore[union-attr]
        obj = model.model_fields["obj"].annotation.model_fields["label"].default  # type: ignore[union-attr]
        label = model.model_fields["label"].default
        demos.append(
            Demo(
                {"query": f"Which {obj} does the {subj} named Acme-{i} relate to?"},
                {"hops": [_hop(subj, label, obj)]},
                1.0,
            )
        )
    return demos


def _tokens(lm: LlamaCppLM, messages: list[Any]) -> int:
    return len(lm._prompt_tokens(lm._ensure_loaded(), messages))


async def test_a_40_label_schema_prompt_with_4_demos_stays_within_budget(packaged: LlamaCppLM) -> None:
    entities, relations = large_schema(40, 80, 0)
    kb = kag.KnowledgeBase("memory://", entity_models=entities, relation_models=relations)
    retriever = KnowledgeRetriever(kb, packaged, max_hops=2)
    demos = _demos(relations)
    question = Query(query="Which assets does Acme own?")
    whole = _tokens(packaged, retriever.messages(question, demos))
    focus = retriever.focus_of(demos, {})
    assert focus is not None  # the packaged model declares a small context window
    bounded = _tokens(packaged, retriever.messages(question, demos, focus))
    assert bounded <= BUDGET < whole, (bounded, whole)
    # every label and relation is still named (the grammar allows them all), the rest in short lines
    system = retriever.messages(question, demos, focus)[0]["content"]
    for label in kb.schema.entity_labels:
        assert label in system
    for label in kb.schema.relation_labels:
        assert label in system


async def test_no_demo_is_dropped_for_length_on_a_six_label_schema(packaged: LlamaCppLM) -> None:
    from benchmarks.bench_user_graph import ENTITIES, RELATIONS

    kb = kag.KnowledgeBase("memory://", entity_models=ENTITIES, relation_models=RELATIONS)
    retriever = KnowledgeRetriever(kb, packaged, max_hops=2)
    demos = _demos(RELATIONS)
    messages = retriever.messages(Query(query="Which towns are in Norland?"), demos, retriever.focus_of(demos, {}))
    fitted = await packaged._fit_messages(messages)
    assert len(fitted) == len(messages) == 2 + 2 * len(demos)


def test_the_typed_schema_says_each_description_once() -> None:
    entities, relations = large_schema(12, 20, 1)
    schema = kag.GraphSchema(entities, relations)
    typed = json.dumps(typed_triplet_search_schema(schema))
    assert typed.count("Text to match the subject by similarity") == 1
    assert typed.count("True to return the number of matches") == 1
    assert len(typed_triplet_search_schema(schema)["anyOf"]) > 10  # many variants, one description


def test_a_model_without_a_small_context_reads_the_whole_schema() -> None:
    entities, relations = large_schema(10, 12, 2)
    kb = kag.KnowledgeBase("memory://", entity_models=entities, relation_models=relations)
    retriever = KnowledgeRetriever(kb, kag.LexicalLM(kb))
    assert retriever.focus_of([], {"X": ["x"]}) is None
