"""A short fit of the real packaged model (SmolLM2-135M under a grammar): the loop works on it for real.

Asserts only what the model reliably does: its searches are valid and plannable, training keeps the
validation reward from falling, demos hold searches that run, and a reloaded program answers exactly
as the trained one (greedy decoding is deterministic). Accuracy belongs in benchmarks/bench_training.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kag
from kag.examples.world import load_world, world_knowledge_base
from kag.lm.llamacpp import LOCAL, LlamaCppLM
from kag.training import KNNFewShot
from tests.training.conftest import Answer, Query

pytestmark = pytest.mark.timeout(300)

X = [
    {"query": "What is the capital of France?"},
    {"query": "What is the capital of Japan?"},
    {"query": "Which country is Osaka in?"},
]
Y = [{"entities": ["Paris"]}, {"entities": ["Tokyo"]}, {"entities": ["Japan"]}]


def program(kb: kag.KnowledgeBase, lm: LlamaCppLM) -> kag.Program:
    question = kag.Input(data_model=Query, name="question")
    facts = kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm, k=5, threshold=0.7, name="retriever")(question)
    answer = kag.Generator(data_model=Answer, language_model=lm, name="answerer")(facts)
    return kag.Program(inputs=question, outputs=answer, name="world_local")


async def test_a_short_fit_of_the_packaged_model(tmp_path: Path) -> None:
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    lm = LlamaCppLM(LOCAL, max_tokens=256, max_string_length=48)
    trained = program(kb, lm)
    trained.compile(reward="f1", optimizer=KNNFewShot(k=2, threshold=0.5, explore=1), concurrency=1)
    before = await trained.evaluate(X[2:], Y[2:])
    history = await trained.fit(X[:2], Y[:2], validation_data=(X[2:], Y[2:]), verbose=0)
    assert history.history["val_reward"][0] >= before["reward"]
    for demo in trained.modules["retriever"].variable.demos:
        trained.modules["retriever"].validate_search(demo.output)  # every demo search can run
    path = trained.save_variables(tmp_path / "variables.json")
    reloaded = program(kb, lm)
    reloaded.load_variables(path)
    same = X[2:]  # one question keeps the test short; determinism holds for each
    assert [a.model_dump() for a in await reloaded.predict(same)] == [
        a.model_dump() for a in await trained.predict(same)
    ]
    assert lm.usage["calls"] <= 40  # the fit's budget of model calls stays small


async def test_a_teacher_fit_makes_the_packaged_model_follow_the_nearest_demo() -> None:
    """KNNFewShot(k=1) with the offline LexicalLM as teacher: each question is shown the demo asked
    the same way, and the search schema lets the packaged model write only that demo's pattern."""
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    lm = LlamaCppLM(LOCAL, max_tokens=256, max_string_length=48)
    trained = program(kb, lm)
    teacher = kag.LexicalLM(knowledge_base=kb)
    trained.compile(reward="f1", optimizer=KNNFewShot(k=1, explore=0, teacher=teacher), concurrency=1)
    x = [{"query": f"What is the capital of {country}?"} for country in ("France", "Japan", "Germany")]
    await trained.fit(x, [{"entities": ["Paris"]}, {"entities": ["Tokyo"]}, {"entities": ["Berlin"]}], verbose=0)
    retriever = trained.modules["retriever"]
    assert retriever.variable.nearest == 1 and len(retriever.variable.demos) == 3  # the teacher's demos were kept
    found = await retriever(Query(query="What is the capital of Kenya?"))
    answer = await trained.modules["answerer"](found)
    # by construction: the demo's labels, relation and flags; the asked side stays "*"
    search = found.search
    assert (search["subject_label"], search["relation_label"], search["object_label"]) == (
        "City",
        "IsCapitalOf",
        "Country",
    )
    assert search["subject_similarity_search"] == "*" and search["object_similarity_search"] != "*"
    assert not (search["negated"] or search["bidirectional"] or search["count"])
    # the answer is every city the search found on the asked side, or nothing
    assert answer.entities in ([], [f.subject["name"] for f in found.facts])
