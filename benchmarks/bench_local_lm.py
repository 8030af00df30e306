"""The packaged local model (SmolLM2-135M-Instruct, llama.cpp) on the world graph.

Measures, over gold questions of four types generated from the world dataset
(capital of a country, country of a city, continent of a country, number of
cities of a country):

- structured-output validity of the triplet search on the first try and after
  the repair loop, with the plain strict schema (grammar: JSON + declared labels)
  and with the endpoint-typed schema (``kag.query.typed_search``);
- latency per search, completion tokens per second (prompt processing included);
- end-to-end answer accuracy of ``Input -> KnowledgeRetriever -> Generator`` by
  question type: the local model (default instructions, and with four worked
  examples in the instructions) against the offline ``LexicalLM``.

Run ``python -m benchmarks.bench_local_lm [--per-type N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from collections import defaultdict
from typing import Any

from benchmarks.common import Report, Result, log, percentiles
from kag.datamodels.base import DataModel, Field
from kag.errors import GenerationError
from kag.examples.world import load_world, world_data, world_knowledge_base
from kag.lm.base import LanguageModel
from kag.lm.jsonschema_check import fill_defaults, validate_json_schema
from kag.lm.lexical import LexicalLM
from kag.lm.llamacpp import LOCAL, LlamaCppLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.programs.prompts import DEFAULT_RETRIEVER_INSTRUCTIONS
from kag.query import triplet_search_schema
from kag.query.typed_search import typed_triplet_search_schema

EXAMPLES = "\n".join(
    [
        "",
        "Examples:",
        "Request: What is the capital of Spain?",
        json.dumps(
            {
                "subject_label": "City",
                "subject_similarity_search": "*",
                "relation_label": "IsCapitalOf",
                "object_label": "Country",
                "object_similarity_search": "Spain",
                "negated": False,
                "bidirectional": False,
                "count": False,
            }
        ),
        "Request: Which country is Osaka in?",
        json.dumps(
            {
                "subject_label": "City",
                "subject_similarity_search": "Osaka",
                "relation_label": "IsCityOf",
                "object_label": "Country",
                "object_similarity_search": "*",
                "negated": False,
                "bidirectional": False,
                "count": False,
            }
        ),
        "Request: Which continent is Chile in?",
        json.dumps(
            {
                "subject_label": "Country",
                "subject_similarity_search": "Chile",
                "relation_label": "IsInContinent",
                "object_label": "Continent",
                "object_similarity_search": "*",
                "negated": False,
                "bidirectional": False,
                "count": False,
            }
        ),
        "Request: How many cities are in Peru?",
        json.dumps(
            {
                "subject_label": "City",
                "subject_similarity_search": "*",
                "relation_label": "IsCityOf",
                "object_label": "Country",
                "object_similarity_search": "Peru",
                "negated": False,
                "bidirectional": False,
                "count": True,
            }
        ),
    ]
)


def _search(subject: str, subject_name: str, relation: str, obj: str, object_name: str, count: bool = False) -> dict:
    return {
        "subject_label": subject,
        "subject_similarity_search": subject_name,
        "relation_label": relation,
        "object_label": obj,
        "object_similarity_search": object_name,
        "negated": False,
        "bidirectional": False,
        "count": count,
    }


DEMOS = [
    ({"query": "What is the capital of Spain?"}, _search("City", "*", "IsCapitalOf", "Country", "Spain")),
    ({"query": "Which country is Osaka in?"}, _search("City", "Osaka", "IsCityOf", "Country", "*")),
    ({"query": "Which continent is Chile in?"}, _search("Country", "Chile", "IsInContinent", "Continent", "*")),
    ({"query": "How many cities are in Peru?"}, _search("City", "*", "IsCityOf", "Country", "Peru", count=True)),
]
"""The same four worked examples as (user, assistant) pairs: what a trained program's demos look like."""


class Query(DataModel):
    """A user question."""

    query: str = Field(description="The user's question")


class Answer(DataModel):
    """An answer grounded in the retrieved facts."""

    answer: str = Field(description="The answer, using only the retrieved facts")


def gold(per_type: int) -> list[tuple[str, str, str]]:
    """``(type, question, expected answer)`` with ``per_type`` questions of each type."""
    data = world_data()
    by_iso = {c["iso"]: c for c in data["countries"]}
    with_capital = [c for c in data["countries"] if c.get("capital") and (c["population"] or 0) > 5_000_000]
    step = max(1, len(with_capital) // per_type)
    picked = with_capital[::step][:per_type]
    cities = [c for c in data["cities"] if (c["population"] or 0) > 1_000_000 and c["country"] in by_iso]
    city_step = max(1, len(cities) // per_type)
    counts: dict[str, int] = defaultdict(int)
    for city in data["cities"]:
        counts[city["country"]] += 1
    rows: list[tuple[str, str, str]] = []
    rows += [("capital", f"What is the capital of {c['name']}?", c["capital"]) for c in picked]
    rows += [
        ("city-country", f"Which country is {c['name']} in?", by_iso[c["country"]]["name"])
        for c in cities[::city_step][:per_type]
    ]
    rows += [("continent", f"Which continent is {c['name']} in?", c["continent"]) for c in picked]
    rows += [("count", f"How many cities are in {c['name']}?", str(counts[c["iso"]])) for c in picked]
    return rows


def build(kb: Any, lm: LanguageModel, instructions: str | None = None, demos: bool = False) -> Program:
    """The demo program; grammar-constrained models get the endpoint-typed search schema (automatic)."""
    inputs = Input(data_model=Query, name="question")
    retriever = KnowledgeRetriever(
        knowledge_base=kb,
        language_model=lm,
        k=10,
        threshold=0.7,
        instructions=instructions,
        examples=DEMOS if demos else None,
        name="retriever",
    )
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True, name="answerer")(retriever(inputs))
    return Program(inputs=inputs, outputs=answer, name="world_qa")


async def validity(kb: Any, questions: list[str]) -> dict[str, Any]:
    """First-try / after-repair validity and speed of the filled searches."""
    first_try = LlamaCppLM(LOCAL, max_repairs=0)
    repaired = LlamaCppLM(LOCAL, max_repairs=2)
    retriever = KnowledgeRetriever(knowledge_base=kb, language_model=first_try)
    # the plain strict schema, not retriever.search_schema (a constrained model is given the typed one)
    plain = strict = triplet_search_schema(retriever.graph_schema)
    typed = typed_triplet_search_schema(retriever.graph_schema)
    out: dict[str, Any] = defaultdict(int)
    latencies: list[float] = []
    for question in questions:
        messages = retriever.messages(Query(query=question))
        # the grammar alone: JSON + strict schema + declared labels, first try
        search = await first_try.generate(messages, plain)
        # properties the grammar leaves out (the extended language) count with their declared defaults
        validate_json_schema(fill_defaults(search, strict), strict)
        out["plain_json"] += 1
        try:
            retriever.validate_search(search)
            out["plain_plan_first"] += 1
        except ValueError:
            pass
        try:
            await repaired.generate(messages, plain, validate=retriever.validate_search)
            out["plain_plan_repaired"] += 1
        except GenerationError:
            pass
        started = time.perf_counter()
        search = await first_try.generate(messages, typed, validate=retriever.validate_search)
        latencies.append(time.perf_counter() - started)
        validate_json_schema(fill_defaults(search, strict), strict)
        out["typed_plan_first"] += 1
        out["typed_completion_tokens"] += first_try.last_usage["completion_tokens"]
        out["typed_seconds"] += first_try.last_usage["seconds"]
    out["latencies"] = latencies
    out["prompt_tokens_per_search"] = first_try.last_usage["prompt_tokens"]
    await first_try.aclose()
    await repaired.aclose()
    return out


async def accuracy(kb: Any, rows: list[tuple[str, str, str]], lm: LanguageModel, **options: Any) -> dict[str, float]:
    """Share of questions whose answer contains the expected string, by type (and overall).

    Also ``errors_search`` / ``errors_answer``: GenerationErrors of each step, and ``seconds``.
    """
    program = build(kb, lm, **options)
    right: dict[str, list[bool]] = defaultdict(list)
    errors = {"errors_search": 0, "errors_answer": 0}
    started = time.perf_counter()
    for kind, question, expected in rows:
        try:
            result = await program(Query(query=question))
            ok = re.search(rf"\b{re.escape(expected)}\b", str(result.answer), re.IGNORECASE) is not None
        except GenerationError as exc:
            errors["errors_answer" if "'Answer'" in str(exc) or "'output'" in str(exc) else "errors_search"] += 1
            ok = False
        right[kind].append(ok)
        right["all"].append(ok)
    out: dict[str, float] = {kind: sum(v) / len(v) for kind, v in right.items()}
    out.update({k: float(v) for k, v in errors.items()})
    out["seconds"] = time.perf_counter() - started
    return out


SPLIT = ("prompt_eval_seconds", "sample_seconds", "decode_seconds")


async def latency(kb: Any, rows: list[tuple[str, str, str]], lm: LlamaCppLM) -> dict[str, dict[str, float]]:
    """One constrained search (4 demos, typed schema) then one answer step per question, alternating.

    Per step: wall p50/p95 and the p50 of each part. Parts are measured by kag's decoder
    (``last_timings``); llama-cpp-python's own path reports only the wall time, so its split is
    taken by timing ``Llama.eval`` (batched = prompt, one token = decoding) and ``Llama.sample``.
    """
    await lm.load()
    parts: dict[str, float] = defaultdict(float)
    llama = lm._llama
    if lm.decoding == "llama-cpp":  # time the library's own calls: what else is there is sampling
        eval_, sample = llama.eval, llama.sample

        def timed_eval(tokens: Any) -> None:
            started = time.perf_counter()
            eval_(tokens)
            parts["prompt_eval_seconds" if len(tokens) > 1 else "decode_seconds"] += time.perf_counter() - started
            if len(tokens) > 1:
                parts["prompt_tokens_evaluated"] += len(tokens)

        def timed_sample(**kwargs: Any) -> int:
            started = time.perf_counter()
            token = sample(**kwargs)
            parts["sample_seconds"] += time.perf_counter() - started
            return int(token)

        llama.eval, llama.sample = timed_eval, timed_sample
    program = build(kb, lm, demos=True)
    retriever = next(m for m in program.modules.values() if isinstance(m, KnowledgeRetriever))
    generator = next(m for m in program.modules.values() if isinstance(m, Generator))
    samples: dict[str, dict[str, list[float]]] = {"search": defaultdict(list), "answer": defaultdict(list)}
    for _, question, _ in rows:
        query = Query(query=question)
        for step in ("search", "answer"):
            if step == "search":
                messages, schema, check = retriever.messages(query), retriever.search_schema, retriever.validate_search
            else:
                messages, schema, check = generator.messages(await retriever.call(query)), Answer, None
            parts.clear()
            calls = lm.usage["calls"]
            started = time.perf_counter()
            try:
                await lm.generate(messages, schema, validate=check)
                samples[step]["errors"].append(0.0)
            except GenerationError:
                samples[step]["errors"].append(1.0)
            samples[step]["wall"].append(time.perf_counter() - started)
            samples[step]["repairs"].append(lm.usage["calls"] - calls - 1)
            source = lm.last_timings if lm.decoding == "kag" else parts
            for part in SPLIT:
                samples[step][part].append(float(source.get(part, 0.0)))
            samples[step]["prompt_tokens_evaluated"].append(float(source.get("prompt_tokens_evaluated", 0.0)))
            samples[step]["load"].append(os.getloadavg()[0])
    if lm.decoding == "llama-cpp":
        del llama.eval, llama.sample  # back to the class methods
    out: dict[str, dict[str, float]] = {}
    for step, values in samples.items():
        p50, p95 = percentiles(values["wall"])
        out[step] = {"p50": p50, "p95": p95, "errors": sum(values["errors"]), "repairs": sum(values["repairs"])}
        for part in (*SPLIT, "prompt_tokens_evaluated", "load"):
            out[step][part] = statistics.median(values[part])
    return out


async def run(per_type: int = 5, latency_per_type: int = 2, validity_check: bool = False) -> Report:
    """Measure the packaged model."""
    report = Report("Local model: SmolLM2-135M-Instruct Q4_1 through llama.cpp (2 cores)")
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    rows = gold(per_type)
    questions = [q for _, q, _ in rows]
    n = len(questions)
    lat_rows = gold(latency_per_type)
    lines = [
        "| decoder | step | p50 | p95 | prompt eval p50 | sampling p50 | decoding p50 | prompt tokens evaluated p50 "
        "| repairs | errors | load avg p50 |",
        "| --- | --- |" + " ---: |" * 9,
    ]
    for decoding in ("llama-cpp", "kag"):
        log(f"latency split, decoding={decoding}, {len(lat_rows)} questions")
        lm = LlamaCppLM(LOCAL, decoding=decoding)
        split = await latency(kb, lat_rows, lm)
        await lm.aclose()
        for step, m in split.items():
            lines.append(
                f"| {decoding} | {step} | {m['p50'] / 1000:.2f} s | {m['p95'] / 1000:.2f} s | "
                f"{m['prompt_eval_seconds']:.2f} s | {m['sample_seconds']:.2f} s | {m['decode_seconds']:.2f} s | "
                f"{m['prompt_tokens_evaluated']:.0f} | {m['repairs']:.0f} | {m['errors']:.0f} | {m['load']:.1f} |"
            )
            report.add(
                Result("local-lm", f"{step} latency p50 ({decoding})", m["p50"], "ms", note=f"p95 {m['p95']:.0f} ms")
            )
    report.notes.append(
        "latency per step (4 demos in the search prompt, typed schema; answer = Generator step), "
        "medians over the questions:\n\n" + "\n".join(lines)
    )
    if validity_check:
        await _validity_report(report, kb, questions)
    log("end-to-end accuracy")
    local = LlamaCppLM(LOCAL)
    unguarded = LlamaCppLM(LOCAL, repetition_guard=False)
    results = {
        "LexicalLM": await accuracy(kb, rows, LexicalLM(knowledge_base=kb)),
        "local (default prompt)": await accuracy(kb, rows, local),
        "local (+4 examples)": await accuracy(kb, rows, local, instructions=DEFAULT_RETRIEVER_INSTRUCTIONS + EXAMPLES),
        "local (4 demos as messages)": await accuracy(kb, rows, local, demos=True),
        "local (4 demos, no repetition guard)": await accuracy(kb, rows, unguarded, demos=True),
    }
    await local.aclose()
    await unguarded.aclose()
    kinds = ["capital", "city-country", "continent", "count", "all"]
    lines = [
        "| model | " + " | ".join(kinds) + " | search errors | answer errors | seconds |",
        "| --- |" + " ---: |" * (len(kinds) + 3),
    ]
    for name, acc in results.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{acc.get(k, 0.0):.2f}" for k in kinds)
            + f" | {acc['errors_search']:.0f} | {acc['errors_answer']:.0f} | {acc['seconds']:.0f} |"
        )
        report.add(Result("local-lm", f"answer accuracy, {name}", acc["all"], "", note=f"{n} questions"))
    report.notes.append("end-to-end answer accuracy by question type:\n\n" + "\n".join(lines))
    report.notes.append(
        f"{per_type} questions per type; an answer counts as right when it contains the expected name or number "
        "as a whole word. "
        "LexicalLM fills the plain schema; the local model the endpoint-typed one. "
        f"Load average while measuring: {os.getloadavg()[0]:.1f} (2 cores shared with other jobs)."
    )
    await kb.aclose()
    return report


async def _validity_report(report: Report, kb: Any, questions: list[str]) -> None:
    """Structured-output validity of the searches (plain and typed schema)."""
    n = len(questions)
    log(f"validity over {n} questions")
    v = await validity(kb, questions)
    report.add(
        Result(
            "local-lm",
            "searches valid JSON + strict schema, first try",
            v["plain_json"] / n,
            "",
            goal="1.0",
            met=v["plain_json"] == n,
            note="plain schema, grammar",
        )
    )
    report.add(Result("local-lm", "searches plannable, first try (plain schema)", v["plain_plan_first"] / n, ""))
    report.add(
        Result("local-lm", "searches plannable after <= 2 repairs (plain schema)", v["plain_plan_repaired"] / n, "")
    )
    report.add(
        Result(
            "local-lm",
            "searches plannable, first try (typed schema)",
            v["typed_plan_first"] / n,
            "",
            goal="1.0",
            met=v["typed_plan_first"] == n,
        )
    )
    p50, p95 = percentiles(v["latencies"])
    report.add(Result("local-lm", "latency per search p50", p50, "ms", note=f"p95 {p95:.0f} ms, typed schema"))
    report.add(
        Result(
            "local-lm",
            "completion tokens/s",
            v["typed_completion_tokens"] / v["typed_seconds"],
            "tok/s",
            note="prompt processing included",
        )
    )


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-type", type=int, default=5, help="accuracy questions per type")
    parser.add_argument("--latency-per-type", type=int, default=2, help="latency questions per type")
    parser.add_argument("--validity", action="store_true", help="also measure search validity (slow)")
    args = parser.parse_args()
    print(asyncio.run(run(args.per_type, args.latency_per_type, args.validity)).markdown())


if __name__ == "__main__":
    main()
