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
import re
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


def build(kb: Any, lm: LanguageModel, instructions: str | None = None, typed: bool = True) -> Program:
    """The demo program; grammar-constrained models get the endpoint-typed search schema."""
    inputs = Input(data_model=Query, name="question")
    retriever = KnowledgeRetriever(
        knowledge_base=kb, language_model=lm, k=10, threshold=0.7, instructions=instructions, name="retriever"
    )
    if typed:
        retriever.search_schema = typed_triplet_search_schema(retriever.graph_schema)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True, name="answerer")(retriever(inputs))
    return Program(inputs=inputs, outputs=answer, name="world_qa")


async def validity(kb: Any, questions: list[str]) -> dict[str, Any]:
    """First-try / after-repair validity and speed of the filled searches."""
    first_try = LlamaCppLM(LOCAL, max_repairs=0)
    repaired = LlamaCppLM(LOCAL, max_repairs=2)
    retriever = KnowledgeRetriever(knowledge_base=kb, language_model=first_try)
    plain, typed = retriever.search_schema, typed_triplet_search_schema(retriever.graph_schema)
    strict = triplet_search_schema(retriever.graph_schema)
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
    """Share of questions whose answer contains the expected string, by type (and overall)."""
    program = build(kb, lm, **options)
    right: dict[str, list[bool]] = defaultdict(list)
    for kind, question, expected in rows:
        try:
            result = await program(Query(query=question))
            ok = re.search(rf"\b{re.escape(expected)}\b", str(result.answer), re.IGNORECASE) is not None
        except GenerationError:
            ok = False
        right[kind].append(ok)
        right["all"].append(ok)
    return {kind: sum(v) / len(v) for kind, v in right.items()}


async def run(per_type: int = 5) -> Report:
    """Measure the packaged model."""
    report = Report("Local model: SmolLM2-135M-Instruct Q4_1 through llama.cpp (2 cores)")
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    rows = gold(per_type)
    questions = [q for _, q, _ in rows]
    log(f"validity over {len(questions)} questions")
    v = await validity(kb, questions)
    n = len(questions)
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
    log("end-to-end accuracy")
    local = LlamaCppLM(LOCAL)
    results = {
        "LexicalLM": await accuracy(kb, rows, LexicalLM(knowledge_base=kb), typed=False),
        "local (default prompt)": await accuracy(kb, rows, local),
        "local (+4 examples)": await accuracy(kb, rows, local, instructions=DEFAULT_RETRIEVER_INSTRUCTIONS + EXAMPLES),
    }
    await local.aclose()
    kinds = ["capital", "city-country", "continent", "count", "all"]
    lines = ["| model | " + " | ".join(kinds) + " |", "| --- |" + " ---: |" * len(kinds)]
    for name, acc in results.items():
        lines.append(f"| {name} | " + " | ".join(f"{acc.get(k, 0.0):.2f}" for k in kinds) + " |")
        report.add(Result("local-lm", f"answer accuracy, {name}", acc["all"], "", note=f"{n} questions"))
    report.notes.append("end-to-end answer accuracy by question type:\n\n" + "\n".join(lines))
    report.notes.append(
        f"{per_type} questions per type; an answer counts as right when it contains the expected name or number "
        "as a whole word. "
        "LexicalLM fills the plain schema; the local model the endpoint-typed one."
    )
    await kb.aclose()
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-type", type=int, default=5)
    args = parser.parse_args()
    print(asyncio.run(run(args.per_type)).markdown())


if __name__ == "__main__":
    main()
