"""Labelled world questions made from the graph's own data: the training set of the demo's ``--fit``."""

from __future__ import annotations

import pytest

from kag.examples.world import QUESTION_KINDS, load_world, world_knowledge_base, world_questions
from kag.lm.lexical import LexicalLM


def test_questions_are_seeded_and_keep_excluded_names_out() -> None:
    x, y = world_questions(3, seed=1, exclude=["France", "Tokyo"])
    assert len(x) == len(y) == 3 * len(QUESTION_KINDS)
    assert (x, y) == world_questions(3, seed=1, exclude=["France", "Tokyo"])
    assert x != world_questions(3, seed=2)[0]
    assert not any("France" in q["query"] or "Tokyo" in q["query"] for q in x)
    for question, answer in zip(x, y, strict=True):
        assert set(answer) in ({"entities"}, {"number"}), question
    tail = x[-len(QUESTION_KINDS) :]  # a validation split taken from the end holds every kind
    assert tail[0]["query"].startswith("What is the capital of") and "population" in tail[-1]["query"]


@pytest.mark.timeout(120)
async def test_the_answers_are_what_the_graph_holds() -> None:
    import kag
    from kag.datasets import Answer, Query

    kb = world_knowledge_base("memory://")
    await load_world(kb)
    lm = LexicalLM(knowledge_base=kb)
    question = kag.Input(data_model=Query, name="question")
    facts = kag.KnowledgeRetriever(
        knowledge_base=kb, language_model=lm, k=10, threshold=0.9, max_hops=2, name="retriever"
    )(question)
    answer = kag.Generator(data_model=Answer, language_model=lm, name="answerer")(facts)
    program = kag.Program(inputs=question, outputs=answer)
    program.compile(reward="f1")
    x, y = world_questions(2, seed=0)
    kinds = [k for _ in range(2) for k in QUESTION_KINDS]  # one of each kind in turn
    result = await program.evaluate(x, y, groups=kinds)
    # every answer is one the graph holds: the offline model, which reads it, finds them all
    assert result["errors"] == 0
    for kind in QUESTION_KINDS:
        assert result[f"reward/{kind}"] == 1.0, (kind, result)
