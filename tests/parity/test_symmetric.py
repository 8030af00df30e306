"""Symmetric relations (``symmetric=True``) are found from either end, the same on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

import kag

pytestmark = pytest.mark.neo4j


class Land(kag.Entity):
    label: Literal["Land"] = "Land"
    name: str


class Neighbours(kag.Relation, symmetric=True):
    subj: Land
    label: Literal["Neighbours"] = "Neighbours"
    obj: Land


class Owes(kag.Relation):  # not symmetric: direction matters
    subj: Land
    label: Literal["Owes"] = "Owes"
    obj: Land


PAIRS = [("Austria", "Germany"), ("Austria", "Italy"), ("France", "Germany"), ("France", "Italy")]  # once per pair


def facts() -> list[kag.Relation]:
    out: list[kag.Relation] = [Neighbours(subj=Land(name=a), obj=Land(name=b)) for a, b in PAIRS]
    out.append(Owes(subj=Land(name="Italy"), obj=Land(name="France")))
    return out


async def names(kb: kag.KnowledgeBase, search: dict[str, Any]) -> list[str]:
    hits = await kb.triplet_search(search, k=20)
    return sorted(
        h.subject.search_text() if search.get("object_similarity_search") else h.object.search_text() for h in hits
    )  # type: ignore[union-attr]


@pytest.mark.parametrize("country", ["Germany", "Austria", "Italy"])
async def test_a_symmetric_relation_is_found_from_either_end(
    neo4j_kb_factory: Callable[..., Any], country: str
) -> None:
    options: dict[str, Any] = {"entity_models": [Land], "relation_models": [Neighbours, Owes]}
    mem = kag.KnowledgeBase("memory://", **options)
    neo = await neo4j_kb_factory(**options)
    want = sorted({b for a, b in PAIRS if a == country} | {a for a, b in PAIRS if b == country})
    for kb in (mem, neo):
        await kb.upsert(facts())
        as_object = {
            "subject_label": "Land",
            "relation_label": "Neighbours",
            "object_label": "Land",
            "object_similarity_search": country,
        }
        as_subject = {
            "subject_label": "Land",
            "subject_similarity_search": country,
            "relation_label": "Neighbours",
            "object_label": "Land",
        }
        assert await names(kb, as_object) == want
        assert await names(kb, as_subject) == want
    a = await mem.triplet_search(as_object, k=20)
    b = await neo.triplet_search(as_object, k=20)
    assert [h.text() for h in a] == [h.text() for h in b] and a.query.text == b.query.text  # type: ignore[union-attr]
    assert "]-(" in a.query.text  # type: ignore[union-attr]  # compiled as an undirected pattern


async def test_a_directed_relation_keeps_its_direction() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Land], relation_models=[Neighbours, Owes])
    await kb.upsert(facts())
    search = {
        "subject_label": "Land",
        "relation_label": "Owes",
        "object_label": "Land",
        "object_similarity_search": "Italy",
    }
    assert await kb.triplet_search(search) == []  # Italy owes France, not the other way
    assert Neighbours.is_symmetric() and not Owes.is_symmetric()
