"""Overhead of the LangChain and LlamaIndex adapters over calling kag directly (memory store).

Data: the bundled world graph (``kag.examples.world``: 252 countries, their cities and continents)
plus a few short documents, so a search returns facts and passages. Each row times an adapter call
against the direct kag call it wraps, alternating the two (and which goes first) on the same queries:

* retrievers: ``KagRetriever.invoke`` / ``ainvoke`` (LangChain), ``retrieve`` / ``aretrieve``
  (LlamaIndex) vs ``knowledge.sync.search`` / ``await knowledge.search``;
* triplet tools: ``tool.invoke(args)`` (LangChain) and ``tool.call(**args)`` (LlamaIndex) vs
  ``kb.sync.triplet_search(args)``; the tool also checks the arguments against the strict schema and
  renders the JSON text, and that is counted as overhead.

The goal: the median adapter call takes at most 5% longer than the median direct call. What the adapters
add is also timed without the search ("parts"): the framework's own call machinery (an empty retriever or
tool of the same framework), kag's conversions of hits (``to_document`` / ``to_node``), the tool's argument
check and JSON rendering, each set against the median search it wraps.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import numpy as np
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from llama_index.core.base.base_retriever import BaseRetriever as LlamaBaseRetriever
from llama_index.core.tools import FunctionTool

from benchmarks.common import Report, Result, log
from kag import Knowledge, create_knowledge
from kag.examples.world import ENTITY_MODELS, RELATION_MODELS, world_items
from kag.integrations import langchain as lc
from kag.integrations import llamaindex as li
from kag.integrations._common import TripletSearchCore

GOAL = 1.05
QUERIES = (
    "What is the capital of France?",
    "Which cities are in Germany?",
    "Which continent is Peru in?",
    "What is the population of Tokyo?",
    "capital city on a river",
    "Nairobi Kenya",
)
DOCUMENTS = (
    ("paris.txt", "Paris is the capital of France and its largest city, on the Seine."),
    ("berlin.txt", "Berlin is the capital of Germany; the Spree flows through it."),
    ("tokyo.txt", "Tokyo is the capital of Japan, on Tokyo Bay, and the most populous city of the country."),
)
SEARCHES: tuple[dict[str, Any], ...] = tuple(
    {
        "subject_label": "City",
        "subject_similarity_search": "*",
        "relation_label": relation,
        "object_label": "Country",
        "object_similarity_search": country,
    }
    for relation, country in (("IsCapitalOf", "France"), ("IsCityOf", "Germany"), ("IsCityOf", "Japan"))
)


def world() -> Knowledge:
    """The world graph and the documents, in memory."""
    knowledge = create_knowledge("memory", name="world", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    knowledge.sync.upsert(world_items())
    for source, text in DOCUMENTS:
        knowledge.sync.add_text(text, source=source)
    return knowledge


Samples = tuple[list[float], list[float]]


def paired(direct: Callable[[Any], Any], adapter: Callable[[Any], Any], inputs: tuple[Any, ...], reps: int) -> Samples:
    """Seconds of each call of ``direct`` and ``adapter`` over ``reps`` rounds of ``inputs``, alternating."""
    for item in inputs:  # warm both (name caches, framework singletons)
        direct(item), adapter(item)
    a: list[float] = []
    b: list[float] = []
    for rep in range(reps):
        for item in inputs:
            order = ((direct, a), (adapter, b)) if rep % 2 == 0 else ((adapter, b), (direct, a))
            for fn, samples in order:
                t0 = time.perf_counter()
                fn(item)
                samples.append(time.perf_counter() - t0)
    return a, b


async def apaired(
    direct: Callable[[Any], Awaitable[Any]],
    adapter: Callable[[Any], Awaitable[Any]],
    inputs: tuple[Any, ...],
    reps: int,
) -> tuple:
    """:func:`paired` for coroutines, on one event loop."""
    for item in inputs:
        await direct(item)
        await adapter(item)
    a: list[float] = []
    b: list[float] = []
    for rep in range(reps):
        for item in inputs:
            order = ((direct, a), (adapter, b)) if rep % 2 == 0 else ((adapter, b), (direct, a))
            for fn, samples in order:
                t0 = time.perf_counter()
                await fn(item)
                samples.append(time.perf_counter() - t0)
    return a, b


def row(report: Report, metric: str, baseline_name: str, samples: Samples) -> None:
    """One table row: the medians, their ratio against the goal, and the median paired difference."""
    direct, adapter = (np.asarray(x) for x in samples)
    direct_s, adapter_s = float(np.median(direct)), float(np.median(adapter))
    ratio = adapter_s / direct_s
    delta = float(np.median(adapter - direct))  # each adapter call against the direct call beside it
    log(f"{metric}: adapter {adapter_s * 1e3:.3f} ms, direct {direct_s * 1e3:.3f} ms, {100 * (ratio - 1):+.1f}%")
    report.add(
        Result(
            "integrations",
            metric,
            adapter_s * 1e3,
            "ms",
            direct_s * 1e3,
            baseline_name,
            ratio,
            f"<= {GOAL:.2f}x (<= 5% overhead)",
            ratio <= GOAL,
            note=f"paired median {1e6 * delta:+.0f} us = {100 * delta / direct_s:+.1f}%",
        )
    )


def median_us(fn: Callable[[], Any], repeat: int) -> float:
    """Median microseconds of ``fn()``."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return float(np.median(samples)) * 1e6


class _EmptyLangChain(BaseRetriever):
    """The framework's own call machinery, with nothing to retrieve."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        return []


class _EmptyLangChainTool(BaseTool):
    """A tool built like ``KagTripletSearchTool`` (a ``BaseTool`` answering content and artifact) that does nothing."""

    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    def _run(self, **arguments: Any) -> tuple[str, None]:
        return "", None


class _EmptyLlamaIndex(LlamaBaseRetriever):
    def _retrieve(self, query_bundle: Any) -> list[Any]:
        return []


def breakdown(report: Report, knowledge: Knowledge, reps: int) -> None:
    """What the adapters add, measured without the search: the framework's call and kag's conversions.

    These rows are steadier than the end-to-end ratios on a loaded machine: each is a median of many
    calls that do not wait on the search, set against the median search they wrap.
    """
    repeat = reps * 20
    hits = [knowledge.sync.search(q) for q in QUERIES]
    search_us = float(np.median([median_us(lambda q=q: knowledge.sync.search(q), reps // 4 or 1) for q in QUERIES]))
    triplet_us = float(
        np.median([median_us(lambda a=a: knowledge.kb.sync.triplet_search(a), reps // 4 or 1) for a in SEARCHES])
    )
    results = [knowledge.kb.sync.triplet_search(a) for a in SEARCHES]
    core = TripletSearchCore(knowledge)
    empty_lc_tool = _EmptyLangChainTool(name="empty", description="nothing", args_schema=core.parameters)
    empty_li_tool = FunctionTool.from_defaults(fn=lambda **_: "", name="empty", description="nothing")
    parts = {
        "LangChain retriever: invoke of an empty retriever": (
            median_us(lambda: _EmptyLangChain().invoke("q"), repeat),
            search_us,
        ),
        "LlamaIndex retriever: retrieve of an empty retriever": (
            median_us(lambda: _EmptyLlamaIndex().retrieve("q"), repeat),
            search_us,
        ),
        "to_document over one search's hits": (
            float(np.median([median_us(lambda h=h: [lc.to_document(x) for x in h], repeat) for h in hits])),
            search_us,
        ),
        "to_node over one search's hits": (
            float(np.median([median_us(lambda h=h: [li.to_node(x) for x in h], repeat) for h in hits])),
            search_us,
        ),
        "LangChain tool: invoke of an empty tool": (
            median_us(lambda: empty_lc_tool.invoke(SEARCHES[0]), repeat),
            triplet_us,
        ),
        "LlamaIndex tool: call of an empty FunctionTool": (
            median_us(lambda: empty_li_tool.call(**SEARCHES[0]), repeat),
            triplet_us,
        ),
        "triplet tool: argument check": (
            float(np.median([median_us(lambda a=a: core.check(a), repeat) for a in SEARCHES])),
            triplet_us,
        ),
        "triplet tool: JSON text of the facts": (
            float(np.median([median_us(lambda r=r: core.render(r), repeat) for r in results])),
            triplet_us,
        ),
    }
    for metric, (cost_us, base_us) in parts.items():
        name = "knowledge.sync.search" if base_us == search_us else "kb.sync.triplet_search"
        report.add(
            Result(
                "integrations (parts)",
                metric,
                cost_us,
                "us",
                note=f"{100 * cost_us / base_us:.1f}% of a median {name} ({base_us / 1e3:.2f} ms)",
            )
        )


def run(reps: int = 100) -> Report:
    """Measure every adapter; ``reps`` rounds over the queries per row."""
    report = Report("Framework adapters: overhead over kag's own calls (memory store, world graph)")
    knowledge = world()
    kb = knowledge.kb
    log(f"integrations: world graph {knowledge.sync.counts()}, {reps} rounds of {len(QUERIES)} queries per row")

    search = knowledge.sync.search
    row(
        report,
        "LangChain KagRetriever.invoke",
        "knowledge.sync.search",
        paired(search, lc.KagRetriever(knowledge).invoke, QUERIES, reps),
    )
    row(
        report,
        "LlamaIndex KagRetriever.retrieve",
        "knowledge.sync.search",
        paired(search, li.KagRetriever(knowledge).retrieve, QUERIES, reps),
    )

    async def asynchronous() -> None:
        lc_retriever, li_retriever = lc.KagRetriever(knowledge), li.KagRetriever(knowledge)
        row(
            report,
            "LangChain KagRetriever.ainvoke",
            "await knowledge.search",
            await apaired(knowledge.search, lc_retriever.ainvoke, QUERIES, reps),
        )
        row(
            report,
            "LlamaIndex KagRetriever.aretrieve",
            "await knowledge.search",
            await apaired(knowledge.search, li_retriever.aretrieve, QUERIES, reps),
        )

    asyncio.run(asynchronous())

    triplet = kb.sync.triplet_search
    lc_tool = lc.triplet_search_tool(knowledge)
    li_tool = li.triplet_search_tool(knowledge)
    row(
        report,
        "LangChain triplet tool.invoke",
        "kb.sync.triplet_search",
        paired(triplet, lc_tool.invoke, SEARCHES, reps * 2),
    )
    row(
        report,
        "LlamaIndex triplet tool.call",
        "kb.sync.triplet_search",
        paired(triplet, lambda args: li_tool.call(**args), SEARCHES, reps * 2),
    )

    breakdown(report, knowledge, reps)
    report.notes.append(
        "Ratios are medians of alternating calls on the same queries; the goal allows the adapter 5% over the "
        "direct call. 'paired median' is the median difference of each adapter call and the direct call beside "
        "it. On a loaded machine both move by more than the adapters cost: the 'parts' rows time what the "
        "adapters add without the search (the framework's own call machinery, kag's conversions)."
    )
    return report


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=100, help="rounds over the queries per row")
    args = parser.parse_args()
    print(run(args.reps).markdown())


if __name__ == "__main__":
    main()
