"""Searches running while an ingest is in flight (memory store): no errors, no lost writes.

The same scenario runs on Neo4j in ``test_neo4j_hardening.py``; the helpers here
are shared with it.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import kag
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf, IsCityOf

N_COUNTRIES = 12


def facts(n_cities: int, seed: int = 5) -> list[kag.Relation]:
    """Cities spread over a few countries; every country gets a capital (shared endpoints)."""
    rng = random.Random(seed)
    countries = [Country(name=f"Country {i:02d}") for i in range(N_COUNTRIES)]
    out: list[kag.Relation] = []
    for i in range(n_cities):
        country = countries[i % N_COUNTRIES]
        city = City(name=f"Town {i:04d}", population=rng.randint(1_000, 9_000_000))
        out.append(IsCityOf(subj=city, obj=country))
        if i < N_COUNTRIES:
            out.append(IsCapitalOf(subj=City(name=f"Town {i:04d}"), obj=country))
    return out


def expected_counts(items: list[kag.Relation]) -> dict[str, int]:
    """Node/relation totals of ``items`` (endpoints deduplicated by identity)."""
    nodes = {e.id for r in items for e in (r.subj, r.obj)}
    rels = {r.id for r in items}
    return {"nodes": len(nodes), "relations": len(rels)}


SEARCHES: list[dict[str, Any]] = [
    {"subject_label": "City", "subject_similarity_search": "Town 0003", "relation_label": "IsCityOf"},
    {"relation_label": "IsCapitalOf", "object_similarity_search": "Country 07"},
    {"relation_label": "*", "bidirectional": True, "count": True},
    {"subject_label": "City", "relation_label": "IsCapitalOf", "negated": True, "count": True},
    {"hops": [{"relation_label": "IsCityOf", "subject_similarity_search": "Town 0100"},
              {"relation_label": "IsCapitalOf", "bidirectional": True}]},
]  # fmt: skip


async def ingest(kb: kag.KnowledgeBase, items: list[kag.Relation], batch: int) -> None:
    """Upsert ``items`` in batches, yielding to the event loop in between."""
    for start in range(0, len(items), batch):
        await kb.upsert(items[start : start + batch])
        await asyncio.sleep(0)


async def search_storm(kb: kag.KnowledgeBase, rounds: int, ids_seen: set[str]) -> int:
    """Run every search ``rounds`` times, checking each hit's internal consistency."""
    done = 0
    for i in range(rounds):
        search = SEARCHES[i % len(SEARCHES)]
        result = await kb.triplet_search(search, k=20, threshold=0.5)
        for hit in result:
            assert hit.path[0] == hit.subject
            for rel in hit.relations:
                ids_seen.add(rel.id)
                assert rel.subj.label == "City" and rel.obj.label == "Country"
        hits = await kb.similarity_search("*", f"Town {i:04d}", k=3)
        assert all(0.0 <= h.score <= 1.0 for h in hits)
        await kb.counts()
        done += 1
        await asyncio.sleep(0)
    return done


async def run_scenario(kb: kag.KnowledgeBase, n_cities: int, batch: int, searchers: int, rounds: int) -> None:
    """Ingest plus ``searchers`` concurrent search loops, then exact final counts."""
    items = facts(n_cities)
    seen: set[str] = set()
    results = await asyncio.gather(
        ingest(kb, items, batch), *[search_storm(kb, rounds, seen) for _ in range(searchers)]
    )
    assert results[1:] == [rounds] * searchers
    counts = await kb.counts()
    want = expected_counts(items)
    assert counts["nodes"] == want["nodes"] and counts["relations"] == want["relations"], (counts, want)
    assert seen <= {r.id for r in items}  # every relation a search saw is one that was written
    after = await kb.triplet_search({"relation_label": "*", "count": True}, threshold=0.0)
    assert after.count == want["relations"]


async def test_memory_searches_during_ingest() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await run_scenario(kb, n_cities=1_500, batch=40, searchers=8, rounds=25)


async def test_memory_parallel_overlapping_ingests() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    items = facts(600)
    # four writers share endpoints (the countries) and overlap on a third of the items
    parts = [items[i::3] for i in range(3)] + [items[::3]]
    await asyncio.gather(*[ingest(kb, part, 25) for part in parts], search_storm(kb, 20, set()))
    counts = await kb.counts()
    assert {k: counts[k] for k in ("nodes", "relations")} == expected_counts(items)


async def test_memory_first_use_from_many_tasks_at_once() -> None:
    # ensure_ready runs once even when the very first calls are concurrent
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    items = facts(50)
    await asyncio.gather(kb.upsert(items), *[kb.triplet_search(SEARCHES[0]) for _ in range(10)])
    assert (await kb.counts())["relations"] == expected_counts(items)["relations"]
