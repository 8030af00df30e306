"""The same datasets and plans on memory and Neo4j give identical results.

Rows (ids along the path), their order, and scores to 1e-6 must agree, for every
flag combination, thresholds, ties, chains and similarity search.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Literal

import pytest

import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCityOf, seed_facts

pytestmark = pytest.mark.neo4j


class Person(kag.Entity):
    label: Literal["Person"] = "Person"
    name: str
    tags: list[str] = []
    profile: dict[str, Any] = {}


class Knows(kag.Relation):
    subj: Person
    label: Literal["Knows"] = "Knows"
    obj: Person
    since: int | None = None


def social() -> list[kag.Relation]:
    people = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Ada Lovelace"]
    rels: list[kag.Relation] = []
    for i, a in enumerate(people):
        for j, b in enumerate(people):
            if (i * 7 + j * 3) % 4 == 0:  # includes self-loops (i == j == 0, ...)
                rels.append(Knows(subj=Person(name=a, tags=[a[:1]], profile={"n": i}), obj=Person(name=b), since=i + j))
    return rels


def searches() -> list[tuple[dict[str, Any], float]]:
    out: list[tuple[dict[str, Any], float]] = []
    for negated, bidirectional, count in itertools.product([False, True], repeat=3):
        for subj, obj in [("*", "*"), ("*", "France"), ("Pariss", "*"), ("Lyon", "Frnace"), ("Atlantis", "*")]:
            for rel in ("IsCapitalOf", "IsCityOf", "*"):
                search = {
                    "subject_label": "City",
                    "subject_similarity_search": subj,
                    "relation_label": rel,
                    "object_label": "Country",
                    "object_similarity_search": obj,
                    "negated": negated,
                    "bidirectional": bidirectional,
                    "count": count,
                }
                out.append((search, 0.6))
    out.append(
        (
            {
                "subject_label": "Country",
                "subject_similarity_search": "Spain",
                "relation_label": "IsCityOf",
                "bidirectional": True,
            },
            0.7,
        )
    )
    out.append(({"relation_label": "*"}, 0.0))
    out.append(({"subject_similarity_search": "Japan", "bidirectional": True}, 0.0))  # all scores, many ties
    out.append(
        (
            {
                "hops": [
                    {"subject_label": "City", "subject_similarity_search": "Lyon", "relation_label": "IsCityOf"},
                    {"relation_label": "IsCapitalOf", "bidirectional": True},
                ]
            },
            0.6,
        )
    )
    out.append(({"hops": [{"relation_label": "IsCityOf"}, {"relation_label": "IsCityOf", "bidirectional": True}]}, 0.0))
    return out


def social_searches() -> list[tuple[dict[str, Any], float]]:
    return [
        ({"relation_label": "Knows"}, 0.0),
        ({"relation_label": "Knows", "bidirectional": True}, 0.0),
        ({"subject_similarity_search": "Ada", "relation_label": "Knows", "bidirectional": True}, 0.55),
        ({"relation_label": "Knows", "negated": True, "object_similarity_search": "Grace"}, 0.7),
        ({"relation_label": "Knows", "count": True, "bidirectional": True}, 0.0),
        (
            {
                "hops": [
                    {"relation_label": "Knows", "subject_similarity_search": "Alan"},
                    {"relation_label": "Knows", "bidirectional": True},
                ]
            },
            0.5,
        ),
    ]


def rows(result: kag.TripletResults) -> tuple[Any, list[tuple[tuple[str, ...], tuple[str, ...]]], list[float]]:
    return (
        result.count,
        [(tuple(e.id for e in h.path), tuple(r.id for r in h.relations)) for h in result],
        [h.score for h in result],
    )


async def assert_same(
    mem: kag.KnowledgeBase, neo: kag.KnowledgeBase, search: dict[str, Any], threshold: float, k: int
) -> None:
    a = await mem.triplet_search(search, k=k, threshold=threshold)
    b = await neo.triplet_search(search, k=k, threshold=threshold)
    count_a, ids_a, scores_a = rows(a)
    count_b, ids_b, scores_b = rows(b)
    assert count_a == count_b, search
    assert ids_a == ids_b, search
    assert scores_b == pytest.approx(scores_a, abs=1e-6), search
    assert [(h.text(), h.subject, h.relations) for h in a] == [(h.text(), h.subject, h.relations) for h in b]


@pytest.fixture
async def seed_pair(neo4j_kb_factory: Callable[..., Any]) -> tuple[kag.KnowledgeBase, kag.KnowledgeBase]:
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    for kb in (mem, neo):
        await kb.upsert(seed_facts())
    return mem, neo


async def test_counts_agree(seed_pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    mem, neo = seed_pair
    assert await mem.counts() == await neo.counts()


@pytest.mark.parametrize("k", [1, 3, 100])
async def test_seed_searches_agree(seed_pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase], k: int) -> None:
    mem, neo = seed_pair
    for search, threshold in searches():
        await assert_same(mem, neo, search, threshold, k)


async def test_similarity_search_agrees(seed_pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    mem, neo = seed_pair
    for label, text in [("City", "Pariss"), ("Country", "Germny"), ("*", "Osaka"), ("*", "zzz")]:
        a = await mem.similarity_search(label, text, k=5)
        b = await neo.similarity_search(label, text, k=5)
        assert [h.entity.id for h in a] == [h.entity.id for h in b]
        assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-6)


async def test_social_graph_with_self_loops_and_nested_props(neo4j_kb_factory: Callable[..., Any]) -> None:
    mem = kag.KnowledgeBase("memory://", entity_models=[Person], relation_models=[Knows])
    neo = await neo4j_kb_factory(entity_models=[Person], relation_models=[Knows])
    for kb in (mem, neo):
        await kb.upsert(social())
    assert await mem.counts() == await neo.counts()
    for search, threshold in social_searches():
        for k in (2, 50):
            await assert_same(mem, neo, search, threshold, k)
    ada = await neo.get(Person(name="Ada"))
    assert ada == await mem.get(Person(name="Ada"))
    assert ada.profile == {"n": 0} and ada.tags == ["A"]  # type: ignore[union-attr]


async def test_updates_and_deletes_agree(seed_pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    mem, neo = seed_pair
    for kb in (mem, neo):
        await kb.upsert(
            [City(name="Paris", population=1), IsCityOf(subj=City(name="Nice"), obj=Country(name="France"))]
        )
        assert await kb.delete([Country(name="Japan"), "e_missing"]) == 1
    assert await mem.counts() == await neo.counts()
    for search, threshold in searches()[:40]:
        await assert_same(mem, neo, search, threshold, 10)
