"""The scope gate: which questions a ``KnowledgeRetriever`` with ``abstain`` on answers "not found" itself.

No model runs: this measures :meth:`kag.programs.KnowledgeRetriever.scope_search` alone, the decision
taken before the model is asked (on by default for the packaged local model). A question it gates
gets no search but the abstention search, so the share gated is

* on questions outside the schema: the share answered "not found" by any model behind it (goal 0.95);
* on answerable questions: an upper bound on what the gate costs (a gated question the model would
  have got wrong costs nothing; goal: 0). For those gated, the note says how many ``LexicalLM``
  itself finds facts for with the gate off: the share the gate costs the offline model.

Which sets were tuned on, and which were not:

* ``KGQA`` (722 answerable questions) and ``COUNTRY_OUT_OF_SCHEMA`` (12): the scope rules of
  ``LexicalLM`` were written while looking at both;
* ``COUNTRY_OUT_OF_SCHEMA_FRESH`` (12): written after the rules, never used to change one;
* ``*_NEW`` below (world and packages, out of scope and answerable in new phrasings): written for
  this benchmark in the session that made the gate a retriever setting, before its first run, and
  not used to change a rule since;
* the packages graph (``bench_lexical_demos``): another domain, whose questions the rules were not
  written for (its ``out_of_schema`` family was seen when the rules were last changed).

Each set is measured untrained and with demos: the labelled questions a fit would keep (the world's
12 taught questions as "not found" demos plus 48 answerable KGQA training questions; the packages
graph's train half). Demos move the boundary: a word an answerable demo uses is in scope, a word
only "not found" demos use is out.

Run ``python -m benchmarks.bench_scope``.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from typing import Any

from benchmarks import bench_user_graph
from benchmarks.bench_lexical_demos import (
    COUNTRY_OUT_OF_SCHEMA,
    COUNTRY_OUT_OF_SCHEMA_FRESH,
    country_names,
    country_out_of_schema,
    package_questions,
    packages_graph,
    read_packages,
    split,
)
from benchmarks.common import Report, Result, log
from kag.datasets import Query, load_kgqa, load_kgqa_graph
from kag.datasets.kgqa import kgqa_records
from kag.knowledge.base import KnowledgeBase
from kag.lm.lexical import LexicalLM
from kag.programs import KnowledgeRetriever

# written for this benchmark before its first run ({x}: a country drawn by seed); not tuned on
COUNTRY_OUT_OF_SCHEMA_NEW = [
    "Who is the mayor of the capital of {x}?",
    "What is the unemployment rate in {x}?",
    "Which rivers flow through {x}?",
    "What is the national bird of {x}?",
    "How many universities are in {x}?",
    "Which sports are popular in {x}?",
    "What is the minimum wage in {x}?",
    "Which famous writers were born in {x}?",
    "What is the tallest building in {x}?",
    "What colours are on the flag of {x}?",
    "What is the internet domain of {x}?",
    "Who designed the flag of {x}?",
]
# answerable on the countries graph, in phrasings the KGQA set does not use; not tuned on
COUNTRY_ANSWERABLE_NEW = [
    "What money do people pay with in {x}?",
    "Name the cities located in {x}.",
    "Which tongues are spoken in {x}?",
    "On which continent does {x} lie?",
    "Which nations share a border with {x}?",
    "What is {x}'s capital?",
    "List the provinces of {x}.",
    "Which subregion is {x} part of?",
    "How many cities does {x} contain?",
    "Tell me the neighbours of {x}.",
    "Which official languages does {x} have?",
    "In which part of the world is {x}?",
]
# written on 2026-12-07 (third session) before its first run, after the rules the sets above
# led to; the first run's numbers are the untouched evidence (results.md keeps them)
COUNTRY_OUT_OF_SCHEMA_HELDOUT = [
    "What is the longest river in {x}?",
    "Who won the last election in {x}?",
    "What is the life expectancy in {x}?",
    "Which mountain range runs through {x}?",
    "What is the literacy rate of {x}?",
    "Which airline is based in {x}?",
    "What is the dialling code of {x}?",
    "When did {x} become independent?",
    "Who is the head of state of {x}?",
    "What is the main export of {x}?",
    "Which ocean lies west of {x}?",
    "What is the biggest lake in {x}?",
    "Which football club is the most successful in {x}?",
    "What religion do most people in {x} follow?",
    "What is the average temperature in {x} in July?",
    "Which UNESCO sites are in {x}?",
    "Who was the first king of {x}?",
    "Which volcano is the highest in {x}?",
    "How many tourists visit {x} each year?",
    "What time zone is {x} in?",
]
COUNTRY_ANSWERABLE_HELDOUT = [
    "What currency is used in {x}?",
    "Which languages do people speak in {x}?",
    "What continent is {x} on?",
    "Which countries are next to {x}?",
    "What city is the capital of {x}?",
    "Which provinces belong to {x}?",
    "What region does {x} belong to?",
    "How many countries border {x}?",
    "Give me the cities of {x}.",
    "What language is spoken in {x}?",
    "Which currency does {x} have?",
    "How many provinces does {x} have?",
]
# the packages graph ({x}: a package drawn by seed); not tuned on
PACKAGE_OUT_OF_SCHEMA_NEW = [
    "How large is the wheel of {x}?",
    "Which operating systems does {x} run on?",
    "What is the source repository of {x}?",
    "Who reviewed the last pull request of {x}?",
    "Which security advisories affect {x}?",
    "How many stars does {x} have on GitHub?",
    "Which programming language is {x} written in?",
    "What is the changelog of {x}?",
]
PACKAGE_ANSWERABLE_NEW = [
    "What are the dependencies of {x}?",
    "Which packages require {x}?",
    "Who wrote {x}?",
    "What license is {x} released under?",
    "Which packages need {x} installed?",
    "Count the packages that depend on {x}.",
    "Who are the authors of {x}?",
    "Which licence does {x} use?",
]


async def gated(retriever: KnowledgeRetriever, questions: Sequence[str]) -> list[str]:
    """The questions the retriever's scope gate answers "not found" itself."""
    return [q for q in questions if await retriever.scope_search(Query(query=q)) is not None]


def _filled(templates: Sequence[str], names: Sequence[str]) -> list[str]:
    return [t.format(x=x) for t, x in zip(templates, names, strict=False)]


async def measure(
    report: Report,
    kb: KnowledgeBase,
    sets: dict[str, tuple[list[str], bool]],
    examples: list[tuple[dict[str, Any], dict[str, Any]]],
    graph: str,
    max_hops: int = 1,
) -> None:
    """Report the share gated per set (``sets``: name -> (questions, out of scope)), untrained and with demos."""
    for trained, shown in (("untrained", []), (f"{len(examples)} demos", examples)):
        retriever = KnowledgeRetriever(
            kb, LexicalLM(knowledge_base=kb), k=50, max_hops=max_hops, examples=shown, abstain=True
        )
        for name, (questions, outside) in sets.items():
            hit = await gated(retriever, questions)
            share = len(hit) / max(1, len(questions))
            goal, met = (">= 0.95", share >= 0.95) if outside else ("0", not hit)
            what = "outside the schema answered 'not found'" if outside else "answerable gated (cost)"
            wrong = [q for q in questions if (q in hit) != outside]
            # what a gated answerable question costs LexicalLM itself: does it find facts without the gate?
            lost = [] if outside else await found_ungated(kb, hit, shown, max_hops)
            report.add(
                Result(
                    "scope",
                    f"{graph}, {name}: {what}, {trained}",
                    share,
                    "share",
                    goal=goal,
                    met=met,
                    note=f"{len(hit)} of {len(questions)}"
                    + (f"; {'missed' if outside else 'gated'}: " + "; ".join(wrong[:6]) if wrong else "")
                    + (f"; LexicalLM without the gate finds facts for {len(lost)}" if hit and not outside else ""),
                )
            )
            log(f"scope {graph} {name} {trained}: {len(hit)}/{len(questions)}")


async def found_ungated(
    kb: KnowledgeBase, questions: Sequence[str], examples: list[tuple[dict[str, Any], dict[str, Any]]], max_hops: int
) -> list[str]:
    """The ``questions`` for which ``LexicalLM`` with the gate off finds facts (what gating them costs it)."""
    retriever = KnowledgeRetriever(
        kb, LexicalLM(knowledge_base=kb), k=50, max_hops=max_hops, examples=examples, abstain=False
    )
    return [q for q in questions if (await retriever(Query(query=q))).facts]


async def world(report: Report, seed: int) -> None:
    kb = await load_kgqa_graph()
    rows = [r["question"] for r in kgqa_records()]
    countries = country_names(seed + 2)
    others = other_countries(set(countries), seed)
    (x_train, _), _ = load_kgqa(per_type=4, seed=seed)
    taught = [r["question"] for r in country_out_of_schema(seed, COUNTRY_OUT_OF_SCHEMA)]
    teacher = LexicalLM(knowledge_base=kb)
    labeller = KnowledgeRetriever(kb, teacher, k=50)
    examples = [({"query": q}, await _search_of(labeller, q)) for q in [x["query"] for x in x_train] + taught]
    sets = {
        "KGQA (tuned on)": (rows, False),
        "taught out of schema (tuned on)": (taught, True),
        "fresh out of schema": (
            [r["question"] for r in country_out_of_schema(seed + 1, COUNTRY_OUT_OF_SCHEMA_FRESH)],
            True,
        ),
        "new out of schema": (_filled(COUNTRY_OUT_OF_SCHEMA_NEW, countries), True),
        "new answerable phrasings": (_filled(COUNTRY_ANSWERABLE_NEW, countries), False),
        "held-out out of schema": (_filled(COUNTRY_OUT_OF_SCHEMA_HELDOUT, others), True),
        "held-out answerable phrasings": (
            _filled(COUNTRY_ANSWERABLE_HELDOUT, others[len(COUNTRY_OUT_OF_SCHEMA_HELDOUT) :]),
            False,
        ),
    }
    await measure(report, kb, sets, examples, "world")


def other_countries(skip: set[str], seed: int) -> list[str]:
    """Countries of kag's data with plain one- or two-word names no KGQA lookup question uses, shuffled by seed."""
    rows = bench_user_graph._data()["countries"]
    names = sorted(
        r["name"] for r in rows if re.fullmatch(r"[A-Z][a-z]+( [A-Z][a-z]+)?", r["name"]) and r["name"] not in skip
    )
    random.Random(seed).shuffle(names)
    return names


async def _search_of(retriever: KnowledgeRetriever, question: str) -> dict[str, Any]:
    """The search the teacher writes for ``question`` (the demo a fit with it as teacher would keep)."""
    result = await retriever(Query(query=question))
    return dict(result.search)


async def packages(report: Report) -> None:
    pk = read_packages()
    kb = await packages_graph(pk)
    rows = package_questions(pk)
    train, test = split(rows, "family")
    drawn = [r["search"] for r in rows if r["family"] == "depends_out"]
    pkgs = [str(s.get("subject_similarity_search")) for s in drawn]
    examples = [({"query": r["question"]}, r["search"]) for r in train]
    sets = {
        "answerable families": ([r["question"] for r in test if r["answer"] is not None], False),
        "out_of_schema family": ([r["question"] for r in test if r["answer"] is None], True),
        "new out of schema": (_filled(PACKAGE_OUT_OF_SCHEMA_NEW, pkgs), True),
        "new answerable phrasings": (_filled(PACKAGE_ANSWERABLE_NEW, pkgs), False),
    }
    await measure(report, kb, sets, examples, "packages")


async def user(report: Report, seed: int) -> None:
    """A user's own models over the countries data (``bench_user_graph``), demos as its fit keeps them."""
    data = bench_user_graph._data()
    kb = await bench_user_graph.user_graph(data)
    rows = bench_user_graph.questions(data, 6, seed)
    labelled = [r for r in bench_user_graph.questions(data, 2, seed + 1) if not r["kind"].startswith("outside")]
    labeller = KnowledgeRetriever(kb, LexicalLM(knowledge_base=kb), k=50, max_hops=2)
    examples = [({"query": r["question"]}, await _search_of(labeller, r["question"])) for r in labelled]
    sets = {
        "answerable (tuned on)": ([r["question"] for r in rows if not r["kind"].startswith("outside")], False),
        "outside (tuned on)": ([r["question"] for r in rows if r["kind"] == "outside"], True),
        "outside, held out": ([r["question"] for r in rows if r["kind"] == "outside_heldout"], True),
    }
    await measure(report, kb, sets, examples, "user graph", max_hops=2)


async def run(seed: int = 0) -> Report:
    report = Report("The scope gate (questions outside the schema, no model)")
    await world(report, seed)
    await packages(report)
    await user(report, seed)
    return report


def main() -> None:
    print(asyncio.run(run()).markdown())


if __name__ == "__main__":
    main()
