"""Memory footprint of the memory store, per million edges (measured, then extrapolated).

The records of the GeoNames graph (the ``NodeRecord`` / ``RelationRecord``
objects kag hands to the store, 384-d embeddings) are built first and kept
alive; then a fresh ``MemoryGraphStore`` is filled with the nodes, then with
the edges, then its search index is built by one query. Measured twice:

* ``tracemalloc`` (Python and numpy allocations that stay referenced), and
* the process's resident set size (RSS) delta of the same steps in a fresh
  store — allocator slack included, freed memory not returned.

Edges are measured at two sizes to show the cost is linear; the per-million
figure is extrapolated from the largest measured size (said so in the table).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import tracemalloc
from collections.abc import Sequence

from benchmarks import world
from benchmarks.common import Report, Result, log
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.memory import MemoryGraphStore
from kag.query.plan import plan_triplet_search


def rss() -> int:
    """Resident set size of this process in bytes."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def records(edges: int) -> tuple[list[NodeRecord], list[RelationRecord], world.WorldData]:
    """The store records of the world graph with at least ``edges`` relations."""
    data = world.load()
    kb = world.knowledge_base()
    nodes: list[NodeRecord] = []
    rels: list[RelationRecord] = []
    real = kb.store.upsert

    async def keep(n: Sequence[NodeRecord], r: Sequence[RelationRecord]) -> None:
        nodes.extend(n)
        rels.extend(r)
        await real(n, r)

    kb.store.upsert = keep  # type: ignore[method-assign,assignment]
    await world.build(kb, data, world.near_count(data, edges))
    unique_nodes = list({n.id: n for n in nodes}.values())
    unique_rels = list({r.id: r for r in rels}.values())
    return unique_nodes, unique_rels, data


async def fill(nodes: Sequence[NodeRecord], rels: Sequence[RelationRecord], probe: object) -> MemoryGraphStore:
    """A store with ``nodes`` and ``rels``, its index built by running ``probe``."""
    store = MemoryGraphStore()
    schema = world.knowledge_base().schema
    await store.ensure_schema(schema.entity_labels, schema.relation_labels, int(nodes[0].embedding.shape[0]))
    await store.upsert(nodes, [])
    if rels:
        await store.upsert([], rels)
    store.evaluate(probe)  # type: ignore[arg-type]
    return store


async def footprint(nodes: Sequence[NodeRecord], rels: Sequence[RelationRecord], probe: object) -> tuple[int, int]:
    """(tracemalloc bytes, RSS bytes) held by a store of ``nodes`` + ``rels``."""
    gc.collect()
    before = rss()
    store = await fill(nodes, rels, probe)
    gc.collect()
    rss_delta = rss() - before
    del store
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    store = await fill(nodes, rels, probe)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del store
    gc.collect()
    return traced, rss_delta


async def run(edges: int = 100_000) -> Report:
    """Measure nodes only, half the edges, all edges; return the report."""
    log(f"memory: building records of a {edges:,}-edge graph")
    nodes, rels, data = await records(edges)
    kb = world.knowledge_base()
    probe = await kb.bind(
        plan_triplet_search(
            {"subject_label": "City", "subject_similarity_search": "Paris", "relation_label": "NearTo"},
            kb.schema,
        )
    )
    log("memory: measuring")
    node_traced, node_rss = await footprint(nodes, [], probe)
    half = rels[: len(rels) // 2]
    half_traced, _ = await footprint(nodes, half, probe)
    full_traced, full_rss = await footprint(nodes, rels, probe)
    per_edge = (full_traced - node_traced) / len(rels)
    per_edge_half = (half_traced - node_traced) / len(half)
    per_edge_rss = (full_rss - node_rss) / len(rels)
    mib = 1024 * 1024
    report = Report("Memory store footprint")
    shape = f"measured at {len(nodes):,} nodes + {len(rels):,} edges, extrapolated"
    report.add(Result("memory store", "edges only, MiB per 1M edges (tracemalloc)", per_edge * 1e6 / mib, "MiB",
                      note=shape))
    report.add(Result("memory store", "edges only, MiB per 1M edges (RSS delta)", per_edge_rss * 1e6 / mib, "MiB"))
    report.add(Result("memory store", "per node incl. its 384-d float32 embedding, KiB (tracemalloc)",
                      node_traced / len(nodes) / 1024, "KiB"))
    report.add(Result("memory store", f"whole store as measured ({len(nodes):,} nodes + {len(rels):,} edges)",
                      full_traced / mib, "MiB"))
    report.notes.append(
        f"per edge: {per_edge:,.0f} B at {len(rels):,} edges, {per_edge_half:,.0f} B at {len(half):,} edges "
        "(linear); an edge costs a networkx adjacency entry in both directions, its props dict, its id "
        "string and slots in the store's lists and numpy side index."
    )
    report.notes.append(
        f"whole store: {full_traced / mib:,.0f} MiB traced, {full_rss / mib:,.0f} MiB RSS delta (untouched "
        "pages of the zero-filled matrix are not resident); the embedding matrix grows by doubling "
        f"({len(nodes):,} rows fill a {1 << (len(nodes) - 1).bit_length():,}-row buffer)."
    )
    del data
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=100_000)
    args = parser.parse_args()
    print(asyncio.run(run(args.edges)).markdown())


if __name__ == "__main__":
    main()
