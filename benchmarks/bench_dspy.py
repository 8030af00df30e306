"""DSPy on kag's KGQA task: the same packaged model, questions, split and demo count as kag's own program.

Measures a DSPy program shaped like ``benchmarks.bench_training``'s local program (``Input ->
KnowledgeRetriever -> Generator``), to set beside kag's rows of that benchmark:

1. ``dspy.Predict(question -> search)``: the eight-field triplet search (labels as enums of the graph
   schema, kag's field descriptions; instructions: kag's retriever instructions and the graph schema);
2. the search runs on kag's knowledge base (``kb.triplet_search``, k=50, threshold 0.8, as kag's
   retriever) and its facts become short lines (``Paris -[IsCapitalOf]-> France``, or ``Number of
   matches: N`` for a counting search);
3. ``dspy.Predict(question, facts -> entities: list[str], number: int | None)``.

The model is the packaged SmolLM2-135M-Instruct GGUF (``LlamaCppLM("local").model_path``), loaded
with llama-cpp-python (n_ctx 4096, ``--threads`` threads, seed 0) behind a ``dspy.BaseLM``
(``benchmarks.dspy_lm``): greedy decoding of the GGUF's chat template, at most 512 answer tokens
(kag's ``LlamaCppLM`` bound), DSPy's caches off, nothing remote called. Two modes:

- **as-it-comes**: DSPy's default ``ChatAdapter`` (with its JSONAdapter fallback on a parse
  failure), free generation;
- **constrained**: ``JSONAdapter``, and each step's answer sampled under a grammar of its output
  object (``{"search": <kag's typed search schema>}``, ``{"entities": [...], "number": int|null}``,
  built with kag's ``schema_grammar`` and kag's bounds: strings of at most 160 characters, lists
  of at most 16 items), so the mode measures what DSPy's prompting and demos teach, not formatting.

Rows, per mode: untrained; ``BootstrapFewShot(max_bootstrapped_demos=4, max_labeled_demos=4)``;
``KNNFewShot(k)``, k = 4 and 1, over the training split (questions embedded offline with kag's
``HashEmbedder(384)``): each test question gets its k nearest training examples as demos
(``max_bootstrapped_demos=0, max_labeled_demos=k``: the counterpart of kag's "KNNFewShot, LexicalLM
teacher" row); ``--knn-bootstrap`` lets DSPy's per-question BootstrapFewShot run the program on
those k first and keep its correct traces (the BootstrapFewShot row's metric and limits; about k + 1
program runs per test question).
The metric is kag's ``ExactMatch`` (entity-name sets equal, casefolded; or the number equal). A
reply DSPy cannot parse, or a search kag cannot plan, is a wrong answer.

Training examples: the question, the search written by kag's teacher (``LexicalLM``, the teacher
of kag's "KNNFewShot, LexicalLM teacher" row: its rules were tuned on these questions), the facts
that search finds, and the labelled answer. The split is ``bench_training``'s local one for the
same N and ``--train``: ``bench_training.local_split`` (``N // 3`` one-hop questions of each type,
half of each type held out, or ``--train`` of them for training and the rest held out;
``--questions 30``: 15 training, 15 test questions).

Run ``PYTHONPATH=. python -m benchmarks.bench_dspy [--questions N] [--seed S] [--threads T] [--verbose]``
(needs ``pip install dspy==3.4.1`` next to kag's ``local`` extra). On a CPU other processes share, use
``--threads 1``: llama.cpp's threads wait for each other at every layer, and with a core taken a
2-thread decode step measured 0.4-2.8 s against 24 ms with one thread (greedy decoding either way).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.bench_training import local_split
from benchmarks.common import Report, Result, log
from kag.datasets import Query, kgqa_records, load_kgqa_graph
from kag.errors import KagError
from kag.knowledge.base import KnowledgeBase
from kag.lm.lexical import LexicalLM
from kag.programs import KnowledgeRetriever
from kag.rag.embedders import HashEmbedder
from kag.training import ExactMatch

ONE_HOP = ["lookup", "inverse", "count"]
MODES = ("as-it-comes", "constrained")
K = 50  # facts per search, as bench_training's local program (build(kb, lm, k=50, max_hops=1))
THRESHOLD = 0.8  # KnowledgeRetriever's default similarity threshold
DEMOS = 4  # kag's demo count (KNNFewShot(k=4), BootstrapFewShot(max_demos=4))
NO_FACTS = "No facts found."

T = TypeVar("T")


@dataclass
class Row:
    """One program's measurement on the test split."""

    mode: str
    name: str
    scores: dict[str, float] = field(default_factory=dict)  # "all" and per type
    fit_s: float = 0.0
    fit_calls: int = 0
    eval_s: float = 0.0
    eval_calls: int = 0
    eval_tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # kind -> questions
    note: str = ""


async def facts_of(kb: KnowledgeBase, search: dict[str, Any]) -> str:
    """The search's facts as lines (or its count); raises kag's ValueError for a search it cannot plan."""
    results = await kb.triplet_search(search, k=K, threshold=THRESHOLD, schema=kb.schema)
    if results.count is not None:
        return f"Number of matches: {results.count}"
    lines = [str(hit.to_dict()["text"]) for hit in results]
    return "\n".join(lines) if lines else NO_FACTS


def failure_kind(exc: BaseException) -> str:
    """``parse`` (DSPy could not parse the reply), ``search`` (kag cannot plan the search), or the error's type."""
    if type(exc).__name__ == "AdapterParseError":
        return "parse"
    return "search" if isinstance(exc, KagError) else type(exc).__name__


def label_of(example: Any) -> dict[str, Any]:
    """The KGQA label of a training example (the fields ExactMatch compares)."""
    return {"number": example.number} if example.number is not None else {"entities": list(example.entities)}


async def teacher_examples(
    kb: KnowledgeBase, x: Sequence[dict[str, str]], y: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Training records: question, LexicalLM's search, its facts, the label; and how many match the gold search."""
    from benchmarks.dspy_lm import SEARCH_FIELDS

    gold = {r["question"]: r["gold_search"] for r in kgqa_records(ONE_HOP)}
    teacher = KnowledgeRetriever(kb, LexicalLM(knowledge_base=kb), k=K, threshold=THRESHOLD, max_hops=1)
    records, same = [], 0
    for item, label in zip(x, y, strict=True):
        question = item["query"]
        record: dict[str, Any] = {
            "question": question,
            "entities": list(label.get("entities", [])),
            "number": label.get("number"),
        }
        try:
            out = await teacher.call(Query(query=question))
            written = dict(getattr(out, "search", None) or {})
        except ValueError:
            written = {}
        if written:
            search = {name: written.get(name, "*" if name.endswith("similarity_search") else False)
                      for name in SEARCH_FIELDS}  # fmt: skip
            record["search"] = search
            record["facts"] = await facts_of(kb, search)
            same += all(search[n] == gold[question].get(n, search[n]) for n in SEARCH_FIELDS)
        records.append(record)
    return records, same


async def run(
    questions: int = 30,
    seed: int = 0,
    modes: Sequence[str] = MODES,
    bootstrap_modes: Sequence[str] = MODES,
    knn_ks: Sequence[int] = (DEMOS, 1),
    threads: int = 2,
    knn_bootstrap: bool = False,
    max_tokens: int = 512,
    verbose: bool = False,
    train: int | None = None,
) -> Report:
    """DSPy's program on the packaged model, per mode: untrained, BootstrapFewShot, KNNFewShot(k).

    ``knn_bootstrap``: KNNFewShot's BootstrapFewShot also runs the program on the k nearest training
    questions at each test question and keeps its correct traces as demos (4 + 4, as the
    BootstrapFewShot row; about k + 1 program runs per question). Off: the k nearest training
    examples are the demos (``max_bootstrapped_demos=0, max_labeled_demos=k``), the counterpart
    of kag's "KNNFewShot, LexicalLM teacher" row.
    """
    import dspy
    import llama_cpp

    from benchmarks import dspy_lm
    from kag.lm.llamacpp import LlamaCppLM

    report = Report("DSPy on the KGQA one-hop questions (packaged SmolLM2-135M)")
    # a failed training run is counted (optimizer.error_count), not logged with its whole example
    logging.getLogger("dspy.teleprompt.bootstrap").setLevel(logging.CRITICAL)
    loop = asyncio.get_running_loop()

    def on_loop(coro: Coroutine[Any, Any, T]) -> T:
        """Run a kag coroutine on the benchmark's event loop from DSPy's (synchronous) worker thread."""
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    kb = await load_kgqa_graph()
    (x, y, _), (x_test, y_test, t_test) = local_split(questions, seed, train)
    records, same = await teacher_examples(kb, x, y)
    trainset = [dspy.Example(**r).with_inputs("question") for r in records]
    types = sorted(set(t_test))
    log(f"{len(x)} training / {len(x_test)} test questions; teacher search = gold search on {same}/{len(x)}")

    reward = ExactMatch()

    def exact(y_true: dict[str, Any], y_pred: dict[str, Any] | None) -> float:
        return on_loop(reward(y_true, y_pred))

    def metric(example: Any, prediction: Any, trace: Any = None) -> bool:
        return exact(label_of(example), {"entities": prediction.entities, "number": prediction.number}) == 1.0

    embedder = HashEmbedder(dimensions=384)

    def embed(texts: list[str]) -> Any:
        return on_loop(embedder.embed(list(texts)))

    def run_search(search: dict[str, Any]) -> str:
        return on_loop(facts_of(kb, search))

    model_path = LlamaCppLM("local").model_path

    def make_llama() -> Any:
        return llama_cpp.Llama(model_path=str(model_path), n_ctx=4096, n_threads=threads, verbose=False, seed=0)

    decoder = dspy_lm.GreedyDecoder(make_llama, max_tokens=max_tokens)
    search_gbnf, answer_gbnf = dspy_lm.grammars(kb.schema)
    bootstrap_args = {"metric": metric, "max_bootstrapped_demos": DEMOS, "max_labeled_demos": DEMOS}

    def evaluate(row: Row, program: Any, lm: dspy_lm.LlamaCppDSPyLM) -> None:
        calls0, tokens0, t0 = lm.calls, lm.tokens, time.perf_counter()
        totals: dict[str, list[float]] = {t: [] for t in types}
        for item, label, kind in zip(x_test, y_test, t_test, strict=True):
            failure, seen = "", len(lm.history)
            try:
                pred = program(question=item["query"])
                y_pred: dict[str, Any] | None = {"entities": pred.entities, "number": pred.number}
            except Exception as exc:  # a reply DSPy cannot parse, a search kag cannot plan: a wrong answer
                failure = failure_kind(exc)
                row.failures[failure] = row.failures.get(failure, 0) + 1
                y_pred = None
            totals[kind].append(exact(label, y_pred))
            if verbose:
                replies = [str((h["outputs"] or [""])[0])[:160] for h in lm.history[seen:]]
                got = f"{failure}, replies {replies}" if y_pred is None else f"{pred.search} -> {y_pred}"
                log(f"  {item['query']!r}: {got}; label {label}; reward {totals[kind][-1]:.0f}")
        row.eval_s, row.eval_calls = time.perf_counter() - t0, lm.calls - calls0
        row.eval_tokens = lm.tokens - tokens0
        every = [s for scores in totals.values() for s in scores]
        row.scores = {"all": sum(every) / len(every), **{t: sum(s) / len(s) for t, s in totals.items() if s}}
        log(
            f"{row.mode}, {row.name}: {row.scores['all']:.3f} ({row.eval_calls} calls, "
            f"{row.eval_tokens} tokens, {row.eval_s:.0f} s; failed: {row.failures or 'none'})"
        )

    def measure(mode: str) -> list[Row]:
        constrained = mode == "constrained"
        lm = dspy_lm.LlamaCppDSPyLM(decoder)
        adapter = dspy.JSONAdapter() if constrained else dspy.ChatAdapter()
        configs = ({"grammar": search_gbnf}, {"grammar": answer_gbnf}) if constrained else ({}, {})

        def program() -> Any:
            return dspy_lm.KGQAProgram(kb.schema, run_search, *configs)

        rows = []
        with dspy.context(lm=lm, adapter=adapter, max_errors=10**6):
            row = Row(mode, "untrained")
            evaluate(row, program(), lm)
            rows.append(row)

            if mode in bootstrap_modes:
                row = Row(mode, f"BootstrapFewShot({DEMOS}+{DEMOS})")
                optimizer = dspy.BootstrapFewShot(**bootstrap_args, max_errors=10**6)
                calls0, t0 = lm.calls, time.perf_counter()
                compiled = optimizer.compile(program(), trainset=trainset)
                row.fit_s, row.fit_calls = time.perf_counter() - t0, lm.calls - calls0
                boot = sum(1 for d in compiled.search.demos if d.get("augmented"))
                row.note = (
                    f"{boot} bootstrapped + {len(compiled.search.demos) - boot} labelled demos; "
                    f"{optimizer.error_count} training runs failed (parse or search)"
                )
                evaluate(row, compiled, lm)
                rows.append(row)

            for k in knn_ks:
                row = Row(mode, f"KNNFewShot(k={k})")
                vectorizer = dspy.Embedder(embed, caching=False)
                t0 = time.perf_counter()
                if knn_bootstrap:
                    knn_args = {**bootstrap_args, "max_errors": 10**6}
                    row.note = f"bootstraps over the {k} nearest at each test question (in the evaluation's calls)"
                else:
                    knn_args = {"max_bootstrapped_demos": 0, "max_labeled_demos": k}
                    row.note = f"the {k} nearest training examples as demos"
                knn = dspy.KNNFewShot(k, trainset, vectorizer, **knn_args)
                compiled = knn.compile(program())
                row.fit_s = time.perf_counter() - t0
                evaluate(row, compiled, lm)
                rows.append(row)
        return rows

    rows: list[Row] = []
    try:
        for mode in modes:
            with contextlib.redirect_stdout(sys.stderr):  # BootstrapFewShot prints its progress
                rows += await asyncio.to_thread(measure, mode)
    finally:
        decoder.close()
    report.notes.append(
        f"Exact answers on {len(x_test)} held-out one-hop questions (seed {seed}; split as "
        f"`bench_training --local {questions}{f' --local-train {train}' if train else ''}`); {len(x)} training "
        "questions, whose searches come from "
        f"kag's LexicalLM teacher (equal to the gold search on {same}/{len(x)}):\n\n" + table(rows, types)
    )
    report.notes.append(
        f"Modes: {', '.join(modes)}; answers bounded at {max_tokens} tokens; BootstrapFewShot run in: "
        f"{', '.join(m for m in modes if m in bootstrap_modes) or 'no mode'}; {threads} llama.cpp thread(s)."
    )
    timing = decoder.timings
    report.notes.append(
        f"Decoding (all rows, {threads} llama.cpp thread(s)): {timing['prompt_tokens']:.0f} prompt tokens evaluated "
        f"in {timing['prompt_s']:.0f} s ({timing['reused_tokens']:.0f} resumed from a cached prefix), "
        f"{timing['decode_s']:.0f} s decoding answer tokens, {timing['sample_s']:.0f} s choosing them "
        f"({timing['masked']:.0f} steps where the grammar refused the model's favourite token)."
    )
    for row in rows:
        per_type = ", ".join(f"{t} {row.scores.get(t, float('nan')):.2f}" for t in types)
        failures = ", ".join(f"{n} {k}" for k, n in sorted(row.failures.items())) or "none"
        report.add(
            Result(
                "dspy",
                f"{row.mode}, {row.name}: exact answers, test split",
                row.scores["all"],
                "share",
                note=f"{per_type}; fit {row.fit_s:.0f} s, {row.fit_calls} calls; evaluation {row.eval_s:.0f} s, "
                f"{row.eval_calls} calls; failed questions: {failures}" + (f"; {row.note}" if row.note else ""),
            )
        )
    return report


def table(rows: Sequence[Row], types: Sequence[str]) -> str:
    """Mode x program, exact-answer shares per type and overall, cost of fit and evaluation."""
    columns = ["mode", "program", *types, "all", "fit s", "fit calls", "eval s", "eval calls", "eval tokens", "failed"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [r.mode, r.name, *(f"{r.scores.get(t, float('nan')):.2f}" for t in [*types, "all"])]
        cells += [f"{r.fit_s:.0f}", str(r.fit_calls), f"{r.eval_s:.0f}", str(r.eval_calls), str(r.eval_tokens)]
        cells.append(", ".join(f"{n} {k}" for k, n in sorted(r.failures.items())) or "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=int, default=30, help="as bench_training --local N (N // 3 per type)")
    parser.add_argument("--train", type=int, metavar="N", help="as bench_training --local-train N (default: half)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), metavar="MODE")
    parser.add_argument(
        "--bootstrap-modes",
        nargs="*",
        choices=MODES,
        default=list(MODES),
        metavar="MODE",
        help="the modes with a BootstrapFewShot row (its fit runs the program over the training split)",
    )
    parser.add_argument("--knn-k", type=int, nargs="+", default=[DEMOS, 1], help="KNNFewShot k values (4 1)")
    parser.add_argument("--knn-bootstrap", action="store_true", help="KNNFewShot bootstraps at each question")
    parser.add_argument(
        "--threads", type=int, default=len(os.sched_getaffinity(0)), help="llama.cpp threads (the usable cores)"
    )
    parser.add_argument("--max-tokens", type=int, default=512, help="answer tokens per call (kag's LlamaCppLM: 512)")
    parser.add_argument("--verbose", action="store_true", help="log each test question's search and answer")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the report there as JSON (run_all)")
    args = parser.parse_args(argv)
    report = asyncio.run(
        run(
            args.questions,
            args.seed,
            modes=args.modes,
            bootstrap_modes=args.bootstrap_modes,
            knn_ks=args.knn_k,
            threads=args.threads,
            knn_bootstrap=args.knn_bootstrap,
            max_tokens=args.max_tokens,
            verbose=args.verbose,
            train=args.train,
        )
    )
    print(report.markdown())
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_dict()), encoding="utf-8")


if __name__ == "__main__":
    main()
