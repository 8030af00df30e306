"""After a write through the knowledge base, its name caches (the linking ``NameIndex`` and the fact
finder's ``EntityMatcher``) refresh only the entities written, in place, and end up equal to caches
built from scratch; writes they cannot account for rebuild them whole. Memory and Neo4j."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

import kag
from kag.datamodels.base import Entity, Field, Relation
from kag.graph.factory import passage_store_for
from kag.knowledge.base import WRITE_LOG
from kag.knowledge.facts import FactFinder
from kag.knowledge.mentions import EntityMatcher, build_matcher
from kag.ranking.linking import NameIndex


class Town(Entity):
    label: Literal["Town"] = "Town"
    name: str = Field(description="The town's name")
    aliases: list[str] = Field(default_factory=list, description="Other names")


class Land(Entity):
    label: Literal["Land"] = "Land"
    name: str = Field(description="The country's name")


class TownIn(Relation):
    subj: Town
    label: Literal["TownIn"] = "TownIn"
    obj: Land


def facts() -> list[Relation]:
    towns = {"Paris": "France", "Lyon": "France", "Berlin": "Germany", "Hamburg": "Germany", "Rome": "Italy"}
    return [TownIn(subj=Town(name=t), obj=Land(name=c)) for t, c in towns.items()]


def index_state(index: NameIndex) -> tuple[dict[str, tuple[str, ...]], dict[str, list[tuple[str, str]]]]:
    return dict(index._keys), {key: sorted(bucket) for key, bucket in index._by_key.items()}


def matcher_state(matcher: EntityMatcher) -> tuple[Any, ...]:
    names = {eid: sorted(tokens) for eid, tokens in matcher._names_of.items()}
    return matcher._index, names, len(matcher)


async def fresh(kb: kag.KnowledgeBase) -> tuple[NameIndex, EntityMatcher]:
    """Caches built from scratch on what the store holds now."""
    probe = kag.KnowledgeBase(store=kb.store, entity_models=[Town, Land], relation_models=[TownIn])
    return await probe.names(), await build_matcher(passage_store_for(kb.store), kb.schema)


async def check_refresh(kb: kag.KnowledgeBase) -> None:
    await kb.upsert(facts())
    finder = FactFinder(kb, passage_store_for(kb.store), fetch_k=5, score_threshold=0.0)
    names, matcher = await kb.names(), await finder.matcher()
    assert len(names) == 8 and matcher.entities == 8

    steps: list[Callable[[], Any]] = [
        lambda: kb.upsert([Town(name="Paris", aliases=["City of Light", "Lutetia"])]),  # new names, same id
        lambda: kb.upsert([TownIn(subj=Town(name="Munich", aliases=["München"]), obj=Land(name="Germany"))]),
        lambda: kb.delete([Town(name="Lyon")]),  # gone
        lambda: kb.upsert([Town(name="Paris")]),  # aliases kept: only set fields overwrite
        lambda: kb.delete([TownIn(subj=Town(name="Rome"), obj=Land(name="Italy"))]),  # a relation: names stay
    ]
    for step in steps:
        await step()
        got_names, got_matcher = await kb.names(), await finder.matcher()
        # refreshed in place, not rebuilt
        assert got_names is names and got_matcher is matcher
        want_names, want_matcher = await fresh(kb)
        assert index_state(got_names) == index_state(want_names)
        assert matcher_state(got_matcher) == matcher_state(want_matcher)

    assert names.exact("lutetia", ["Town"]) == [Town(name="Paris").id]
    assert names.exact("lyon", ["Town"]) == []
    assert [m.id for m in matcher.find("From München to Lutetia, not Lyon")] == [
        Town(name="Munich").id,
        Town(name="Paris").id,
    ]

    # a write the knowledge base cannot account for (here: a bare revision bump) rebuilds them whole
    kb.revision += 1
    assert await kb.names() is not names
    assert await finder.matcher() is not matcher

    # so does a write log that no longer reaches back to the cache's revision
    names, matcher = await kb.names(), await finder.matcher()
    for n in range(WRITE_LOG + 1):
        await kb.upsert([Town(name=f"Town {n}")])
    assert await kb.names() is not names
    assert await finder.matcher() is not matcher


async def test_memory_name_caches_refresh_what_was_written() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Town, Land], relation_models=[TownIn])
    await check_refresh(kb)


@pytest.mark.neo4j
async def test_neo4j_name_caches_refresh_what_was_written(neo4j_kb_factory: Callable[..., Any]) -> None:
    kb = await neo4j_kb_factory(entity_models=[Town, Land], relation_models=[TownIn])
    await check_refresh(kb)


def test_written_since_reports_ids_until_unknown_or_over_the_limit() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Town, Land], relation_models=[TownIn])
    kb._wrote(["a", "b"])
    kb._wrote(["b", "c"])
    assert kb.written_since(0, limit=10) == frozenset({"a", "b", "c"})
    assert kb.written_since(1, limit=10) == frozenset({"b", "c"})
    assert kb.written_since(2, limit=10) == frozenset()
    assert kb.written_since(0, limit=2) is None  # more ids than the limit
    kb.revision += 1  # a write of unknown ids
    assert kb.written_since(0, limit=10) is None
    kb._wrote(["d"])
    assert kb.written_since(3, limit=10) == frozenset({"d"})


def test_matcher_buckets_are_ordered_by_id_however_built() -> None:
    one = EntityMatcher([("e_b", "Town", ["Springfield"]), ("e_a", "Town", ["Springfield"])])
    two = EntityMatcher([("e_a", "Town", ["Springfield"])])
    two.add("e_b", "Town", "Springfield")
    assert matcher_state(one) == matcher_state(two)
    # entities sharing a name come in id order, not in the order they were added
    assert [m.id for m in one.find("Springfield")] == [m.id for m in two.find("Springfield")] == ["e_a", "e_b"]
    one.remove("e_a")
    assert [m.id for m in one.find("Springfield")] == ["e_b"] and len(one) == 1
    one.remove("e_b")
    assert one.find("Springfield") == [] and len(one) == 0 and one._index == {}
