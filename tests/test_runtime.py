"""kag.runtime: the cores kag may use and the collector pause of large writes."""

from __future__ import annotations

import gc
import threading
from typing import Literal

import pytest

import kag
from kag.errors import SchemaError
from kag.examples.seed import City, Country, IsCapitalOf
from kag.runtime import available_cores, paused_gc


def test_available_cores_is_at_least_one() -> None:
    assert available_cores() >= 1


def test_paused_gc_pauses_the_block_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: the inner block does not turn it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("a failed write")
    assert gc.isenabled()


def test_paused_gc_leaves_a_collector_the_caller_turned_off() -> None:
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paused_gc_in_two_threads_ends_with_the_collector_on() -> None:
    inside = threading.Barrier(2)

    def work() -> None:
        with paused_gc():
            inside.wait(timeout=10)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()


async def test_an_upsert_refused_mid_way_leaves_the_collector_on() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[City, Country], relation_models=[IsCapitalOf])
    paris, france = City(name="Paris"), Country(name="France")
    await kb.upsert([IsCapitalOf(subj=paris, obj=france)])
    assert gc.isenabled()

    class Moon(kag.Entity):
        label: Literal["Moon"] = "Moon"
        name: str

    with pytest.raises(SchemaError):  # Moon is not in the schema: refused while validating
        await kb.upsert([City(name="Lyon"), Moon(name="Io")])
    assert gc.isenabled()
    assert (await kb.counts())["nodes"] == 2  # the refused call wrote nothing
    await kb.aclose()
