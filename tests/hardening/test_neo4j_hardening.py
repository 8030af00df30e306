"""The hardening scenarios on a real Neo4j next to the memory store.

* 300 of the adversarial triplet searches run on both backends: identical
  results, no write of any kind (global node/relationship/label counts), and
  the EXPLAIN read-only guard never trips on a compiled plan (while it does
  trip on real write queries);
* hostile metadata filters compiled by ``compile_cypher`` evaluate on Neo4j
  exactly as ``matches()`` does, and are read-only;
* searches during ingestion, and overlapping concurrent ingests: no errors,
  exact final counts.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kag
from kag.errors import SchemaError, UnsafeQueryError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, seed_facts
from kag.graph.neo4j import Neo4jGraphStore
from kag.query.cypher import compile_plan
from kag.query.filters import compile_cypher, flatten_metadata, matches
from kag.query.plan import plan_triplet_search
from tests.hardening import Payload
from tests.hardening.test_concurrency import expected_counts, facts, ingest, run_scenario, search_storm
from tests.hardening.test_filter_injection import FILTERS, strings_in
from tests.hardening.test_triplet_injection import PAYLOADS, SCHEMA, bind_constant, with_placeholders

pytestmark = pytest.mark.neo4j
THRESHOLDS = (0.0, 0.55, 0.6, 0.7)  # not 0.5: unrelated hash vectors score exactly 0.5, the boundary
KS = (1, 3, 10)


def runnable_sample(count: int) -> list[Payload]:
    """Deterministic well-formed payloads that plan without a schema error (texts of any size)."""
    out = []
    for p in PAYLOADS:
        if p.bad_label or p.bad_text:
            continue
        try:
            plan_triplet_search(p.search, SCHEMA)
        except SchemaError:
            continue
        out.append(p)
    rng = random.Random(77)
    return rng.sample(out, count)


async def graph_totals(store: Neo4jGraphStore) -> tuple[int, int, list[str], list[str]]:
    """Every node, relationship, label and type in the database (not only kag's)."""
    nodes = await store.run("MATCH (n) RETURN count(n) AS c", {}, write=False, what="counting")
    rels = await store.run("MATCH ()-[r]->() RETURN count(r) AS c", {}, write=False, what="counting")
    labels = await store.run(
        "MATCH (n) UNWIND labels(n) AS l RETURN collect(DISTINCT l) AS ls", {}, write=False, what="labels"
    )
    types = await store.run("MATCH ()-[r]->() RETURN collect(DISTINCT type(r)) AS ts", {}, write=False, what="types")
    return (
        int(nodes.records[0]["c"]),
        int(rels.records[0]["c"]),
        sorted(labels.records[0]["ls"]),
        sorted(types.records[0]["ts"]),
    )


Row = tuple[tuple[str, ...], float]


def rows(result: kag.TripletResults) -> list[Row]:
    """(ids along the path, score) of each hit."""
    return [(tuple(e.id for e in h.path) + tuple(r.id for r in h.relations), h.score) for h in result]


def assert_same_up_to_ties(a: list[Row], b: list[Row], k: int, search: Any) -> None:
    """Same rows and scores (1e-6); inside a group of scores equal to 1e-9 the order may differ.

    Both backends compute cosines in float64 the same way, so ties should break by
    id identically (``exact_order`` below checks that strictly); this helper keeps the
    row/score comparison readable when that check fails.
    """
    assert len(a) == len(b), search
    assert [s for _, s in b] == pytest.approx([s for _, s in a], abs=1e-6), search
    start = 0
    while start < len(a):
        end = start
        while end < len(a) and abs(a[end][1] - a[start][1]) <= 1e-9:
            end += 1
        if end < len(a) or len(a) < k:  # a complete group: same members
            assert {r for r, _ in a[start:end]} == {r for r, _ in b[start:end]}, search
        start = end


@pytest.fixture(params=[False, True], ids=["cosine", "linked"])
async def pair(
    neo4j_kb_factory: Callable[..., Any], request: pytest.FixtureRequest
) -> tuple[kag.KnowledgeBase, kag.KnowledgeBase]:
    linking = request.param
    mem = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=linking)
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, linking=linking)
    for kb in (mem, neo):
        await kb.upsert(seed_facts())
    return mem, neo


async def test_adversarial_searches_agree_and_write_nothing(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    mem, neo = pair
    store = neo.store
    assert isinstance(store, Neo4jGraphStore)
    before = await graph_totals(store)
    counts_before = (await mem.counts(), await neo.counts())
    sample = runnable_sample(300)
    non_empty = exact_order = 0
    for i, payload in enumerate(sample):
        threshold, k = THRESHOLDS[i % len(THRESHOLDS)], KS[i % len(KS)]
        a = await mem.triplet_search(payload.search, k=k, threshold=threshold)
        b = await neo.triplet_search(payload.search, k=k, threshold=threshold)
        assert a.count == b.count, payload.search
        assert_same_up_to_ties(rows(a), rows(b), k, payload.search)
        assert a.query is not None and b.query is not None and a.query.text == b.query.text
        non_empty += bool(len(a)) or bool(a.count)
        exact_order += rows(a) == rows(b) or [r[0] for r in rows(a)] == [r[0] for r in rows(b)]
    # the sample exercises real matches, not only empty results; linked texts match only the
    # entities they name (exact or near names), so fewer adversarial texts match anything
    assert non_empty > (50 if mem.linking else 100)
    assert exact_order == len(sample)  # same rows in the same order, ties broken by ids on both
    assert await graph_totals(store) == before
    assert (await mem.counts(), await neo.counts()) == counts_before


async def test_exact_ties_are_broken_by_id_on_both_backends(
    pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase],
) -> None:
    # Paris and Lyon are both orthogonal to the subject text (cosine 0, score 0.5); the object is
    # France for both, so the rows tie exactly and the id order (Paris first) must decide.
    mem, neo = pair
    search = {
        "subject_label": "*",
        "subject_similarity_search": "FOREACH (n IN [1] | CREATE (:Pwned))`Москва```zq00967s0`\\u0060"
        "`MERGE (p:Pwned) RETURN p`Tokyo",
        "relation_label": "*",
        "object_label": "Country",
        "object_similarity_search": "東京{{ 7*7 }}zq00967o0MERGE (p:Pwned) RETURN pWITH 1 AS x CALL "
        "apoc.cypher.runWrite('MATCH (n) DELETE n', {}) YIELD value/*😀France",
    }
    a = await mem.triplet_search(search, k=3, threshold=0.0)
    b = await neo.triplet_search(search, k=3, threshold=0.0)
    assert [r for r, _ in rows(a)] == [r for r, _ in rows(b)]


async def test_compiled_plans_never_trip_the_explain_guard(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = neo.store
    assert isinstance(store, Neo4jGraphStore)
    shapes: dict[str, dict[str, Any]] = {}
    for payload in PAYLOADS:
        if payload.bad_label or payload.bad_text:
            continue
        search = with_placeholders(payload.search)
        try:
            plan = plan_triplet_search(search, SCHEMA, k=10, threshold=0.6)
        except SchemaError:
            continue
        compiled = compile_plan(bind_constant(plan))
        shapes.setdefault(compiled.text, compiled.params)
    assert len(shapes) > 50
    for text, params in shapes.items():
        await store.assert_read_only(text, params)  # raises UnsafeQueryError if Neo4j saw a write
    for write in (
        "MATCH (n) DETACH DELETE n",
        "CREATE (:Pwned)",
        "MATCH (n:City) SET n.pwned = true RETURN n",
        "MERGE (p:Pwned) RETURN p",
        "MATCH (n) WITH n LIMIT 1 CALL (n) { DETACH DELETE n } RETURN 1",
    ):
        with pytest.raises(UnsafeQueryError):
            await store.assert_read_only(write, {})
    assert (await neo.counts())["nodes"] == 0  # EXPLAIN executed nothing


def rows_for(where: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """Metadata rows that reuse the filter's own values, so that conditions can hold."""
    values = strings_in(where) or ["x"]
    out: list[dict[str, Any]] = [{}]
    for _ in range(3):
        out.append(
            {
                "lang": rng.choice(values),
                "year": rng.choice([0, 5, 2.5, 2**62, "2021"]),
                "tags": rng.sample(values, min(2, len(values))),
                "draft": rng.choice([True, False, 1]),
                "title": rng.choice(values) + rng.choice(["", " tail"]),
                "author": {"name": rng.choice(values)},
                "a_b": {"c_d": rng.choice(values)},
                "_private": rng.choice(values),
                "source": {"url_": rng.choice(values)},
            }
        )
    return out


async def test_hostile_filters_agree_with_matches_on_neo4j(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    store = neo.store
    assert isinstance(store, Neo4jGraphStore)
    rng = random.Random(31)
    checked = true_seen = 0
    for start in range(0, 150, 30):
        batch = FILTERS[start : start + 30]
        rows = [row for where in batch for row in rows_for(where, rng)]
        params: dict[str, Any] = {"rows": [flatten_metadata(r) for r in rows]}
        exprs = [compile_cypher(w, "n", params, prefix=f"c{i}_") for i, w in enumerate(batch)]
        query = (
            "UNWIND range(0, size($rows) - 1) AS i WITH i, $rows[i] AS n "
            f"RETURN i, [{', '.join(exprs)}] AS results ORDER BY i"
        )
        await store.assert_read_only(query, params)
        res = await store.run(query, params, write=False, what="evaluating filters")
        for record in res.records:
            row = rows[record["i"]]
            for where, got in zip(batch, record["results"], strict=True):
                assert bool(got) is matches(where, row), (where, row)
                checked += 1
                true_seen += bool(got)
    assert checked >= 2_000 and true_seen > 50
    sample = FILTERS[0]
    params = {}
    expr = compile_cypher(sample, "n", params)
    await store.assert_read_only(f"MATCH (n:KagEntity) WHERE {expr} RETURN count(n) AS c", params)


async def test_neo4j_searches_during_ingest(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await run_scenario(neo, n_cities=400, batch=25, searchers=4, rounds=12)


async def test_neo4j_parallel_overlapping_ingests(neo4j_kb_factory: Callable[..., Any]) -> None:
    neo = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    items = facts(300)
    parts = [items[i::3] for i in range(3)] + [items[::3]]  # shared countries, a third written twice
    await asyncio.gather(*[ingest(neo, part, 20) for part in parts], search_storm(neo, 8, set()))
    counts = await neo.counts()
    assert {k: counts[k] for k in ("nodes", "relations")} == expected_counts(items)


async def test_two_knowledge_bases_write_the_same_entities_at_once(neo4j_kb_factory: Callable[..., Any]) -> None:
    # separate drivers, same endpoints: MERGE on the unique id must not duplicate or fail
    a = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    b = await neo4j_kb_factory(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    items = facts(200, seed=9)
    await asyncio.gather(ingest(a, items, 10), ingest(b, list(reversed(items)), 10))
    counts = await a.counts()
    assert {k: counts[k] for k in ("nodes", "relations")} == expected_counts(items)
    store = a.store
    assert isinstance(store, Neo4jGraphStore)
    ids = await store.run(
        "MATCH (n:KagEntity {kag_ns: $ns}) WITH n.id AS id, count(*) AS c WHERE c > 1 RETURN count(id) AS dup",
        {"ns": store.namespace},
        write=False,
        what="checking duplicates",
    )
    assert ids.records[0]["dup"] == 0
    assert np.isfinite([h.score for h in await b.triplet_search({"relation_label": "*"}, threshold=0.0)]).all()
