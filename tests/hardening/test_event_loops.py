"""One knowledge base, knowledge or program used from one event loop after another, concurrently in each.

``asyncio.run(fit)``, Ctrl-C, then ``asyncio.run(predict)`` (or a notebook cell interrupted, then
the next) used to raise an untyped ``RuntimeError: ... bound to a different event loop``: the
locks were ``asyncio.Lock``s, which belong to the first loop that waits on one. They are
:class:`kag._sync.LoopLock`s now; two loops at once (threads) get a typed ``EventLoopError``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import kag
from kag._sync import LoopLock
from kag.errors import EventLoopError, KagError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf, seed_facts


class Query(kag.DataModel):
    query: str


class Answer(kag.DataModel):
    answer: str


def facts(start: int, n: int = 40) -> list[IsCityOf]:
    return [
        IsCityOf(subj=City(name=f"Town {i}", population=i), obj=Country(name=f"Land {i % 7}"))
        for i in range(start, start + n)
    ]


async def busy_kb(kb: kag.KnowledgeBase, start: int) -> None:
    """Writes and searches at once, so every lock of the store is waited on (contended)."""
    search = {
        "subject_label": "City",
        "relation_label": "IsCityOf",
        "object_label": "Country",
        "object_similarity_search": "Land 3",
    }
    results = await asyncio.gather(
        *(kb.upsert(facts(start + 100 * j)) for j in range(3)),
        *(kb.triplet_search(search, k=5, threshold=0.5) for _ in range(6)),
    )
    assert all(r is not None for r in results)


def test_a_knowledge_base_in_two_asyncio_runs_in_a_row() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    asyncio.run(busy_kb(kb, 0))
    asyncio.run(busy_kb(kb, 1000))
    assert kb.sync.counts()["IsCityOf"] == 240  # and its blocking facade (a third loop) after both


def test_an_interrupted_run_leaves_the_knowledge_base_usable() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)

    async def interrupted() -> None:
        writes = [asyncio.ensure_future(kb.upsert(facts(1000 * j, 400))) for j in range(4)]
        await asyncio.sleep(0)  # the writes start: one of them takes the store's lock, the others wait
        assert writes
        raise KeyboardInterrupt  # Ctrl-C: asyncio.run cancels the rest and closes the loop

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(interrupted())
    asyncio.run(busy_kb(kb, 5000))
    counts = kb.sync.counts()
    assert counts["IsCityOf"] >= 120  # this run's writes, plus what the interrupted one finished


def test_knowledge_and_a_program_in_two_asyncio_runs_in_a_row() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    knowledge = kag.Knowledge(kb, sources=["Rome is the capital of Italy. Paris is the capital of France."])
    lm = kag.LexicalLM(knowledge_base=kb)

    async def build() -> kag.Program:
        await kb.upsert(seed_facts())
        inputs = kag.Input(data_model=Query)
        found = await kag.KnowledgeRetriever(knowledge_base=kb, language_model=lm)(inputs)
        return kag.Program(inputs=inputs, outputs=await kag.Generator(data_model=Answer, language_model=lm)(found))

    program = asyncio.run(build())

    async def use(round_: int) -> list[Any]:
        return await asyncio.gather(
            *(knowledge.search("capital of Italy", k=3) for _ in range(4)),
            knowledge.add_text(f"Round {round_}: Lyon is a city in France."),
            *(program(Query(query="What is the capital of Italy?")) for _ in range(3)),
        )

    for round_ in range(2):
        results = asyncio.run(use(round_))
        hits, answers = results[:4], results[5:]
        assert all(hits) and all("Rome" in a.answer for a in answers)


def test_two_loops_at_once_get_a_typed_error_not_a_hang() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    kb.sync.upsert(facts(0))
    lock: LoopLock = kb.store.lock  # type: ignore[attr-defined]
    held, release = threading.Event(), threading.Event()

    async def hold() -> None:
        async with lock:
            held.set()
            while not release.is_set():
                await asyncio.sleep(0.01)

    other = threading.Thread(target=lambda: asyncio.run(hold()))
    other.start()
    try:
        assert held.wait(30)
        with pytest.raises(EventLoopError, match="another running event loop") as caught:
            asyncio.run(kb.upsert(facts(500)))
        assert isinstance(caught.value, KagError) and isinstance(caught.value, RuntimeError)
    finally:
        release.set()
        other.join(30)
    asyncio.run(kb.upsert(facts(500)))  # the other loop let go: this one takes over
    assert kb.sync.counts()["IsCityOf"] == 80


async def test_loop_lock_excludes_within_one_loop() -> None:
    lock = LoopLock()
    inside: list[int] = []
    overlap = []

    async def critical(i: int) -> None:
        async with lock:
            inside.append(i)
            overlap.append(len(inside))
            await asyncio.sleep(0.001)
            inside.remove(i)

    await asyncio.gather(*(critical(i) for i in range(20)))
    assert max(overlap) == 1 and not lock.locked()
