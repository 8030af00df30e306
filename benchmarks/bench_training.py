"""Training programs (``compile`` / ``fit`` / ``evaluate``): rewards before and after, fit cost, loop overhead.

On the KGQA questions (``kag.datasets.load_kgqa``, split by seed and stratified by type) with the
benchmark's program (``Query -> KnowledgeRetriever(max_hops=2) -> Generator(Answer)``):

- **exact answers on the held-out test split by question type**, untrained and after ``fit`` with
  each optimizer (``RandomFewShot``, ``BootstrapFewShot``, ``KNNFewShot``), for ``LexicalLM`` (the
  offline matcher; its rules were tuned on these very questions, so this measures the mechanics,
  not generalization) and, with ``--local N``, the packaged SmolLM2-135M on ``N`` questions of the
  one-hop types;
- **the cost of a fit**: model calls and wall time per epoch;
- **the loop's own overhead**: a fit at concurrency 1, minus the time spent inside the program's
  runs (model calls and graph searches), as a share of the fit's wall time (goal: under 5%).

Run ``python -m benchmarks.bench_training [--per-type N] [--local N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import Report, Result, log
from kag.datasets import Answer, Query, load_kgqa, load_kgqa_graph
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import BaseLanguageModel, Message
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import BootstrapFewShot, ExactMatch, KNNFewShot, Optimizer, RandomFewShot

OPTIMIZERS: dict[str, Callable[[], Optimizer]] = {
    "RandomFewShot": lambda: RandomFewShot(max_demos=4, num_candidates=4, seed=0),
    "BootstrapFewShot": lambda: BootstrapFewShot(max_demos=4, num_candidates=4, seed=0),
    "KNNFewShot": lambda: KNNFewShot(k=4),
}
ONE_HOP = ["lookup", "inverse", "count"]


class Counted:
    """Counts a model's completions and the time spent in them (wraps ``_complete``)."""

    def __init__(self, lm: BaseLanguageModel) -> None:
        self.calls = 0
        self.seconds = 0.0
        inner = lm._complete

        async def complete(messages: list[Message], schema: dict[str, Any], name: str) -> str:
            t0 = time.perf_counter()
            try:
                return await inner(messages, schema, name)
            finally:
                self.calls += 1
                self.seconds += time.perf_counter() - t0

        lm._complete = complete  # type: ignore[method-assign]


def build(
    kb: KnowledgeBase,
    lm: BaseLanguageModel,
    k: int = 300,
    max_hops: int = 2,
    *,
    answer_trainable: bool = True,
    **answerer: Any,
) -> Program:
    """The KGQA benchmark's program shape (``answerer``: extra ``Generator`` settings)."""
    inputs = Input(data_model=Query, name="question")
    facts = KnowledgeRetriever(knowledge_base=kb, language_model=lm, k=k, max_hops=max_hops, name="retriever")(inputs)
    answer = Generator(data_model=Answer, language_model=lm, name="answerer", trainable=answer_trainable, **answerer)(
        facts
    )
    return Program(inputs=inputs, outputs=answer, name="kgqa")


async def by_type(program: Program, x: list[Any], y: list[Any], types: list[str]) -> dict[str, Any]:
    result = await program.evaluate(x, y, groups=types)
    return {"all": result["reward"], **{k.split("/", 1)[1]: v for k, v in result.items() if k.startswith("reward/")}}


def table(rows: dict[str, dict[str, float]], types: list[str]) -> str:
    header = "| program | " + " | ".join(types) + " | all |"
    lines = [header, "|" + "---|" * (len(types) + 2)]
    for name, scores in rows.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{scores.get(t, float('nan')):.2f}" for t in types)
            + f" | {scores['all']:.2f} |"
        )
    return "\n".join(lines)


async def lexical(report: Report, per_type: int, seed: int) -> None:
    kb = await load_kgqa_graph()
    (x, y, _), (x_test, y_test, t_test) = load_kgqa(per_type=per_type, seed=seed, return_types=True)
    types = sorted(set(t_test))
    lm = LexicalLM(knowledge_base=kb)
    counter = Counted(lm)
    program = build(kb, lm)
    program.compile(reward=ExactMatch())
    rows = {"untrained": await by_type(program, x_test, y_test, t_test)}
    for name, make in OPTIMIZERS.items():
        program = build(kb, lm)
        program.compile(reward=ExactMatch(), optimizer=make(), concurrency=4)
        calls0, t0 = counter.calls, time.perf_counter()
        history = await program.fit(x, y, epochs=1, validation_split=0.25, seed=seed, verbose=0)
        wall = time.perf_counter() - t0
        rows[f"{name} (fit)"] = await by_type(program, x_test, y_test, t_test)
        report.add(
            Result(
                "training",
                f"LexicalLM fit, {name}: model calls / wall time per epoch ({len(x)} training questions)",
                wall,
                "s",
                note=f"{counter.calls - calls0} model calls; val_reward {history.history['val_reward'][-1]:.2f}",
            )
        )
        log(f"{name}: fit {wall:.1f} s, test {rows[f'{name} (fit)']['all']:.3f}")
    report.notes.append(
        f"LexicalLM, exact answers on the held-out split ({len(x_test)} questions, seed {seed}; tuned on: yes, "
        "its rules were written for these questions):\n\n" + table(rows, types)
    )
    for name, scores in rows.items():
        report.add(Result("training", f"LexicalLM exact answers, test split, {name}", scores["all"], "share"))
    # the loop's own cost: everything in fit that is not a program run
    program = build(kb, lm)
    program.compile(reward=ExactMatch(), optimizer=BootstrapFewShot(seed=0), concurrency=1)
    inside = 0.0
    run = program.call

    async def timed(item: Any) -> Any:
        nonlocal inside
        t0 = time.perf_counter()
        try:
            return await run(item)
        finally:
            inside += time.perf_counter() - t0

    program.call = timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    await program.fit(x, y, epochs=1, validation_split=0.25, seed=seed, verbose=0)
    wall = time.perf_counter() - t0
    share = (wall - inside) / wall
    report.add(
        Result(
            "training",
            "fit overhead: wall time outside program runs (LexicalLM, concurrency 1)",
            share * 100,
            "%",
            goal="< 5%",
            met=share < 0.05,
            note=f"fit {wall:.2f} s, inside program runs {inside:.2f} s",
        )
    )


def local_split(questions: int, seed: int, train: int | None = None) -> tuple[tuple[list[Any], ...], ...]:
    """The packaged model's KGQA split: ``questions // 3`` one-hop questions of each type, ``train`` of
    them (default: half of each type) for training, the rest held out (``bench_dspy`` uses the same)."""
    return load_kgqa(
        types=ONE_HOP,
        per_type=max(2, questions // len(ONE_HOP)),
        train_size=0.5 if train is None else train,
        seed=seed,
        return_types=True,
    )


async def local(
    report: Report, questions: int, seed: int, only: Sequence[str] | None = None, train: int | None = None
) -> None:
    """The packaged model on one-hop KGQA questions: untrained (answers grounded or not), then trained.

    The program searches one pattern (``max_hops=1``: a chain schema costs the small model most of
    its accuracy); the answer step is grounded (its names and numbers come from the facts) and not
    trained. Training fits the retriever's demos with each optimizer, on the student's own runs or
    with ``LexicalLM`` as the teacher that writes the training searches. ``LexicalLM``'s rules were
    tuned on these questions: the student is measured on held-out questions, but its demos come
    from a teacher that knows the set. ``KNNFewShot`` shows each question its nearest demos (by
    question skeleton), and the packaged model then chooses only among the patterns they show.

    The split: ``questions // 3`` of each one-hop type, half of each type for training, or ``train``
    questions in all for training and the rest held out (``local_split``).
    """
    from kag.lm.llamacpp import LlamaCppLM

    kb = await load_kgqa_graph()
    (x, y, _), (x_test, y_test, t_test) = local_split(questions, seed, train)
    lm = LlamaCppLM("local")
    counter = Counted(lm)
    rows: dict[str, dict[str, Any]] = {}
    costs: dict[str, str] = {}
    untrained = {
        "untrained, answers not grounded": {"grounded": False, "whole_answers": False},
        "untrained": {},
    }
    if only is not None:  # a subset of the rows (each costs minutes on 2 cores)
        untrained = {n: v for n, v in untrained.items() if n in only}
    for name, answerer in untrained.items():
        program = build(kb, lm, k=50, max_hops=1, answer_trainable=False, **answerer)
        program.compile(reward=ExactMatch())
        calls0, t0 = counter.calls, time.perf_counter()
        rows[name] = await by_type(program, x_test, y_test, t_test)
        costs[name] = f"evaluation {time.perf_counter() - t0:.0f} s, {counter.calls - calls0} calls"
        log(f"local {name}: {costs[name]}, test {rows[name]['all']:.3f}")
    teacher = LexicalLM(knowledge_base=kb)
    fits: dict[str, Callable[[], Optimizer]] = {
        "KNNFewShot(k=1), LexicalLM teacher": lambda: KNNFewShot(k=1, teacher=teacher),
        "KNNFewShot(k=4), LexicalLM teacher": lambda: KNNFewShot(k=4, teacher=teacher),
        "BootstrapFewShot, LexicalLM teacher": lambda: BootstrapFewShot(
            max_demos=4, num_candidates=4, seed=0, teacher=teacher
        ),
        "RandomFewShot, LexicalLM teacher": lambda: RandomFewShot(
            max_demos=4, num_candidates=4, seed=0, teacher=teacher
        ),
        "KNNFewShot(k=1), own runs": lambda: KNNFewShot(k=1),
    }
    if only is not None:
        fits = {n: f for n, f in fits.items() if n in only}
    for name, make in fits.items():
        program = build(kb, lm, k=50, max_hops=1, answer_trainable=False)
        program.compile(reward=ExactMatch(), optimizer=make(), concurrency=1)
        calls0, t0 = counter.calls, time.perf_counter()
        await program.fit(x, y, epochs=1, validation_split=0.25, seed=seed, verbose=0)
        fit_s = time.perf_counter() - t0
        costs[name] = f"fit {fit_s:.0f} s, {counter.calls - calls0} student calls on {len(x)} training questions"
        calls0, t0 = counter.calls, time.perf_counter()
        rows[name] = await by_type(program, x_test, y_test, t_test)
        per_question = (time.perf_counter() - t0) / max(1, len(x_test))
        costs[name] += f"; evaluation {per_question:.1f} s/question, {counter.calls - calls0} calls"
        log(f"local {name}: {costs[name]}, test {rows[name]['all']:.3f}")
    report.notes.append(
        f"Packaged SmolLM2-135M, exact answers on {len(x_test)} held-out one-hop questions, seed {seed} (the "
        "student was not tuned on them; the teacher's rules were):\n\n"
        + table(rows, sorted(set(t_test)))
        + "\n\n"
        + "\n".join(f"- {name}: {cost}" for name, cost in costs.items())
    )
    best = max((n for n in fits if "teacher" in n), key=lambda n: rows[n]["all"], default="")
    for name, scores in rows.items():
        report.add(
            Result(
                "training",
                f"SmolLM2-135M exact answers, {name}",
                scores["all"],
                "share",
                goal=">= 0.70" if name == best else "",
                met=scores["all"] >= 0.70 if name == best else None,
                note=costs[name],
            )
        )


async def local_abstention(report: Report, questions: int, seed: int, train: int | None = None) -> None:
    """The packaged model taught to say "not found": ``KNNFewShot(k=1)`` with the ``LexicalLM`` teacher
    on the local training split plus 12 questions outside the schema labelled "not found" (no
    entities, no number; ``bench_lexical_demos.COUNTRY_OUT_OF_SCHEMA``), measured on the held-out
    answerable questions and on 12 questions outside the schema asked in other words
    (``COUNTRY_OUT_OF_SCHEMA_FRESH``, different country names), untrained and trained.
    """
    from benchmarks.bench_lexical_demos import (
        COUNTRY_OUT_OF_SCHEMA,
        COUNTRY_OUT_OF_SCHEMA_FRESH,
        country_out_of_schema,
    )
    from kag.lm.llamacpp import LlamaCppLM

    kb = await load_kgqa_graph()
    (x, y, _), (x_test, y_test, t_test) = local_split(questions, seed, train)
    not_found = {"entities": [], "number": None}
    taught = [{"query": r["question"]} for r in country_out_of_schema(seed, COUNTRY_OUT_OF_SCHEMA)]
    fresh = [{"query": r["question"]} for r in country_out_of_schema(seed + 1, COUNTRY_OUT_OF_SCHEMA_FRESH)]
    lm = LlamaCppLM("local")
    program = build(kb, lm, k=50, max_hops=1, answer_trainable=False)
    program.compile(reward=ExactMatch(), optimizer=KNNFewShot(k=1, teacher=LexicalLM(knowledge_base=kb)), concurrency=1)
    before = (await program.evaluate(fresh, [not_found] * len(fresh)))["reward"]
    t0 = time.perf_counter()
    await program.fit(
        [*x, *taught], [*y, *[not_found] * len(taught)], epochs=1, validation_split=0.25, seed=seed, verbose=0
    )
    fit_s = time.perf_counter() - t0
    answerable = await by_type(program, x_test, y_test, t_test)
    after = (await program.evaluate(fresh, [not_found] * len(fresh)))["reward"]
    where = f"{len(x)} answerable + {len(taught)} labelled 'not found' training questions"
    report.add(
        Result(
            "training",
            f"SmolLM2-135M says 'not found' to 12 questions outside the schema, new phrasings ({where})",
            after,
            "share",
            goal=">= 0.95",
            met=after >= 0.95,
            note=f"untrained {before:.2f}; fit {fit_s:.0f} s",
        )
    )
    report.add(
        Result(
            "training",
            f"SmolLM2-135M exact answers, held-out answerable questions, trained with the 'not found' labels ({where})",
            answerable["all"],
            "share",
            note=", ".join(f"{k} {v:.2f}" for k, v in answerable.items() if k != "all"),
        )
    )
    log(
        f"abstention: fresh out-of-schema {before:.2f} -> {after:.2f}; "
        f"answerable {answerable['all']:.3f}; fit {fit_s:.0f} s"
    )


async def run(
    per_type: int = 10,
    local_questions: int = 0,
    seed: int = 0,
    local_rows: Sequence[str] | None = None,
    local_train: int | None = None,
    local_abstain: bool = False,
) -> Report:
    """The training benchmark (``local_questions`` > 0 adds the packaged model; ``local_rows``: some of
    its rows; ``local_train``: its training questions, default half; ``local_abstain``: also teach it
    to say "not found", :func:`local_abstention`)."""
    report = Report("Training programs (compile / fit / evaluate)")
    await lexical(report, per_type, seed)
    if local_questions:
        await local(report, local_questions, seed, local_rows, local_train)
        if local_abstain:
            await local_abstention(report, local_questions, seed, local_train)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-type", type=int, default=10, help="KGQA questions per type before the split")
    parser.add_argument("--local", type=int, default=0, metavar="N", help="also the packaged model on N questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--local-row", action="append", metavar="NAME", help="only this row of the local table")
    parser.add_argument("--local-train", type=int, metavar="N", help="training questions of the N (default: half)")
    parser.add_argument("--local-abstain", action="store_true", help="also teach it 'not found' (another fit)")
    args = parser.parse_args()
    report = asyncio.run(
        run(args.per_type, args.local, args.seed, args.local_row, args.local_train, args.local_abstain)
    )
    print(report.markdown())


if __name__ == "__main__":
    main()
