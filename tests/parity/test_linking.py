"""Memory and Neo4j agree on linked searches and at scores exactly on the threshold.

Neo4j reports cosine similarities at float32 precision (0.7 comes back as 0.699999988);
both backends now compare scores with the threshold at that precision, so an entity whose
score is exactly the threshold is kept, or dropped, on both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import pytest

import kag
from kag.ranking.linking import LinkSettings

pytestmark = pytest.mark.neo4j


class Nation(kag.Entity):
    label: Literal["Nation"] = "Nation"
    name: str
    aliases: list[str] = []


class Capital(kag.Entity):
    label: Literal["Capital"] = "Capital"
    name: str


class CapitalOf(kag.Relation):
    subj: Capital
    label: Literal["CapitalOf"] = "CapitalOf"
    obj: Nation


# each nation's vector has cosine 2 * score - 1 with the query vector e0: its score is exactly `score`
SCORES = {"Iran": 0.7, "Iraq": 0.75, "Oman": 0.65, "Qatar": 0.6, "Yemen": 0.8}
CAPITALS = {"Iran": "Tehran", "Iraq": "Baghdad", "Oman": "Muscat", "Qatar": "Doha", "Yemen": "Sanaa"}


def _vector(text: str) -> np.ndarray:
    vec = np.zeros(8, dtype=np.float64)
    if text in SCORES:
        cos = 2 * SCORES[text] - 1
        vec[0], vec[1 + sorted(SCORES).index(text)] = cos, math.sqrt(1 - cos * cos)
    elif text in CAPITALS.values():
        vec[7] = 1.0
    else:  # any query text: the direction every nation is measured against
        vec[0] = 1.0
    return vec


def embed(texts: Sequence[str]) -> np.ndarray:
    return np.stack([_vector(t) for t in texts]).astype(np.float32)


def facts() -> list[CapitalOf]:
    return [CapitalOf(subj=Capital(name=c), obj=Nation(name=n, aliases=[f"State of {n}"])) for n, c in CAPITALS.items()]


async def pair(
    factory: Callable[..., Any], linking: LinkSettings | bool
) -> tuple[kag.KnowledgeBase, kag.KnowledgeBase]:
    options: dict[str, Any] = {
        "entity_models": [Nation, Capital],
        "relation_models": [CapitalOf],
        "embedder": kag.CallableEmbedder(embed, dimensions=8, name="boundary"),
        "linking": linking,
    }
    mem = kag.KnowledgeBase("memory://", **options)
    neo = await factory(**options)
    for kb in (mem, neo):
        await kb.upsert(facts())
    return mem, neo


def answers(result: kag.TripletResults) -> list[tuple[str, float]]:
    return [(h.subject.search_text(), round(h.score, 6)) for h in result]


SEARCH = {"subject_label": "Capital", "relation_label": "CapitalOf", "object_label": "Nation"}


@pytest.mark.parametrize(
    "linking",
    [False, LinkSettings(fuzzy=False, margin=1.0)],
    ids=["cosine", "linked-embedding"],
)
@pytest.mark.parametrize("threshold", [0.6, 0.65, 0.7, 0.75, 0.8])
async def test_a_score_exactly_on_the_threshold_is_kept_on_both(
    neo4j_kb_factory: Callable[..., Any], linking: LinkSettings | bool, threshold: float
) -> None:
    mem, neo = await pair(neo4j_kb_factory, linking)
    search = {**SEARCH, "object_similarity_search": "a Gulf state"}
    a = await mem.triplet_search(search, k=10, threshold=threshold)
    b = await neo.triplet_search(search, k=10, threshold=threshold)
    assert answers(a) == answers(b)
    expected = sorted((CAPITALS[n] for n, s in SCORES.items() if s >= threshold), key=lambda c: c)
    assert sorted(h.subject.search_text() for h in a) == expected  # the boundary entity included


@pytest.mark.parametrize("text", ["Iran", "iran", "State of Iraq", "Omam", "Yemen"])
async def test_linked_searches_agree(neo4j_kb_factory: Callable[..., Any], text: str) -> None:
    mem, neo = await pair(neo4j_kb_factory, True)
    search = {**SEARCH, "object_similarity_search": text}
    a = await mem.triplet_search(search, k=10, threshold=0.7)
    b = await neo.triplet_search(search, k=10, threshold=0.7)
    assert answers(a) == answers(b) and len(a) == 1
    assert a.query is not None and b.query is not None and a.query.params == b.query.params
    ranked_a = await mem.similarity_search("Nation", text, k=5)
    ranked_b = await neo.similarity_search("Nation", text, k=5)
    assert [(h.entity.id, h.score) for h in ranked_a] == [(h.entity.id, h.score) for h in ranked_b]
