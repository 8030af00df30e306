"""Vector indexes populate in the background: opening a knowledge base waits for the uniqueness
constraints only, exact search answers while Neo4j builds the HNSW graph, and the first
approximate (``candidates=``) search of a label waits for its index."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import pytest

from kag.datamodels.base import Entity, Field, Relation
from kag.errors import StoreError
from kag.graph.neo4j import Neo4jGraphStore
from kag.query.cypher import vector_index_name

pytestmark = pytest.mark.neo4j

STATIONS = 30_000  # enough vectors that Neo4j needs seconds to index them (about 4k a second)


class Station(Entity):
    """A weather station (a label no other test uses: this test drops and re-creates its index)."""

    label: Literal["Station"] = "Station"
    name: str = Field(description="The station's name")


class Relays(Relation):
    """The station relays another's readings."""

    subj: Station
    label: Literal["Relays"] = "Relays"
    obj: Station


async def index_state(store: Neo4jGraphStore, name: str) -> str:
    res = await store.run(
        "SHOW INDEXES YIELD name, state WHERE name = $name RETURN state", {"name": name}, write=False, what="t"
    )
    return str(res.records[0]["state"])


async def test_only_approximate_search_waits_for_a_populating_vector_index(
    neo4j_kb_factory: Callable[..., Any],
) -> None:
    kb = await neo4j_kb_factory(entity_models=[Station], relation_models=[Relays], linking=False)
    store = kb.store
    assert isinstance(store, Neo4jGraphStore)
    index = vector_index_name("Station")
    # load without the index (fast), then have ensure_schema create it over the stored vectors
    await store.run(f"DROP INDEX {index} IF EXISTS", None, write=True, what="t")
    store.forget_index(index)
    stations = [Station(name=f"station {i} of the northern network") for i in range(STATIONS)]
    await kb.upsert([*stations, *(Relays(subj=stations[i], obj=stations[i + 1]) for i in range(12340, 12350))])

    started = time.perf_counter()
    await store.ensure_schema(kb.schema.entity_labels, kb.schema.relation_labels, 384)
    opened = time.perf_counter() - started
    assert await index_state(store, index) == "POPULATING", f"ensure_schema took {opened:.1f} s"
    # a caller who cannot wait gets a clear, typed error that says what to do
    with pytest.raises(StoreError, match=r"not ONLINE after .*search exactly"):
        await store.await_indexes([index], "t", timeout=1)

    search = {
        "subject_label": "Station",
        "subject_similarity_search": "station 12345 of the northern network",
        "relation_label": "Relays",
    }
    approx = await kb.triplet_search(search, k=3, candidates=50)  # waits for the index, then answers
    assert await index_state(store, index) == "ONLINE"
    assert "db.index.vector.queryNodes" in approx.query.text  # type: ignore[union-attr]
    exact = await kb.triplet_search(search, k=3)
    assert approx[0].subject.name == exact[0].subject.name == "station 12345 of the northern network"
    assert approx[0].score == pytest.approx(exact[0].score) == pytest.approx(1.0)
    await store.await_indexes([index], timeout=1)  # ONLINE now: returns at once
