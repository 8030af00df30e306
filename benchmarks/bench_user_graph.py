"""The packaged local model on a user's own geography graph, untrained, as a newcomer would try it.

The graph is built from kag's countries data under models a user might write (``Nation``, ``Town``,
``Landmass``, ``Zone``, ``Money``, ``Tongue``; ``CapitalOf``, ``TownOf``, ``OnLandmass``, ``InZone``,
``PaysWith``, ``Speaks``), none of them kag's own; the program is ``Input -> KnowledgeRetriever(max_hops=2)
-> Generator(Reply)`` with a one-field ``Reply(answer: str)``, nothing trained. 48 questions of 8 kinds
(6 each, names drawn by seed) and 10 questions outside the schema, written for this benchmark (the
kinds follow the issue that reported 31 of 48 such questions ending in ``GenerationError``).

Measured: ``GenerationError`` s per step (goal 0), right answers (the expected name or number is
in the answer text), "not found" on the questions outside the schema, seconds per question. The
offline ``LexicalLM`` runs the same questions for reference.

Run ``python -m benchmarks.bench_user_graph [--per-kind N] [--lm local|lexical|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import time
from collections import defaultdict
from importlib import resources
from typing import Any, Literal

from benchmarks.common import Report, Result, log
from kag.datamodels.base import DataModel, Entity, Field, Relation
from kag.errors import GenerationError
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel
from kag.lm.guards import NOT_FOUND_TEXT
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import FunctionReward, KNNFewShot


class Nation(Entity):
    """A nation (a country or territory)."""

    label: Literal["Nation"] = "Nation"
    name: str
    population: int | None = None


class Town(Entity):
    """A town or city."""

    label: Literal["Town"] = "Town"
    name: str
    population: int | None = None


class Landmass(Entity):
    """A continent."""

    label: Literal["Landmass"] = "Landmass"
    name: str


class Zone(Entity):
    """A subregion of the world, such as Western Europe."""

    label: Literal["Zone"] = "Zone"
    name: str


class Money(Entity):
    """A currency."""

    label: Literal["Money"] = "Money"
    name: str


class Tongue(Entity):
    """A language."""

    label: Literal["Tongue"] = "Tongue"
    name: str


class CapitalOf(Relation):
    """The town is the capital of the nation."""

    label: Literal["CapitalOf"] = "CapitalOf"
    subj: Town
    obj: Nation


class TownOf(Relation):
    """The town lies in the nation."""

    label: Literal["TownOf"] = "TownOf"
    subj: Town
    obj: Nation


class OnLandmass(Relation):
    """The nation lies on the continent."""

    label: Literal["OnLandmass"] = "OnLandmass"
    subj: Nation
    obj: Landmass


class InZone(Relation):
    """The nation belongs to the subregion."""

    label: Literal["InZone"] = "InZone"
    subj: Nation
    obj: Zone


class PaysWith(Relation):
    """The nation uses the currency."""

    label: Literal["PaysWith"] = "PaysWith"
    subj: Nation
    obj: Money


class Speaks(Relation):
    """A language spoken in the nation."""

    label: Literal["Speaks"] = "Speaks"
    subj: Nation
    obj: Tongue


class Query(DataModel):
    query: str = Field(description="The user's question")


class Reply(DataModel):
    answer: str = Field(description="The answer to the question")


ENTITIES: list[type[Entity]] = [Nation, Town, Landmass, Zone, Money, Tongue]
RELATIONS: list[type[Relation]] = [CapitalOf, TownOf, OnLandmass, InZone, PaysWith, Speaks]

KINDS = {
    "capital": "What is the capital of {nation}?",
    "town_nation": "Which nation is {town} in?",
    "landmass": "On which landmass is {nation}?",
    "money": "What money does {nation} pay with?",
    "tongues": "Which tongues are spoken in {nation}?",
    "zone": "Which zone is {nation} in?",
    "count_towns": "How many towns does {nation} have?",
    "town_landmass": "On which landmass is the town {town}?",
}
OUTSIDE = [
    "Who is the president of {nation}?",
    "What is the GDP of {nation}?",
    "Who is the mayor of {town}?",
    "What is the national sport of {nation}?",
    "How old is {town}?",
    "Which river flows through {town}?",
    "What is the time zone of {nation}?",
    "Who founded {town}?",
    "What is the national dish of {nation}?",
    "How high is the highest peak of {nation}?",
]

# written on 2026-12-07 (third session) before its first run, after OUTSIDE's misses had changed
# the scope rules; the first run's numbers are the untouched evidence
OUTSIDE_HELDOUT = [
    "Who is the prime minister of {nation}?",
    "What is the population density of {nation}?",
    "Which airport serves {town}?",
    "What is the official religion of {nation}?",
    "What is the climate of {town}?",
    "Which university is in {town}?",
    "Who is the king of {nation}?",
    "What is the biggest stadium in {nation}?",
    "What is the area code of {town}?",
    "Which ocean borders {nation}?",
    "What is the crime rate in {town}?",
    "When was {town} founded?",
]


def _data() -> dict[str, Any]:
    return json.loads(resources.files("kag.data").joinpath("countries.json").read_text(encoding="utf-8"))


async def user_graph(data: dict[str, Any]) -> KnowledgeBase:
    """The user's graph: their models over kag's countries data."""
    kb = KnowledgeBase(entity_models=ENTITIES, relation_models=RELATIONS, uri="memory://")
    money = {c["code"]: Money(name=c["name"]) for c in data["currencies"]}
    tongues = {t["code"]: Tongue(name=t["name"]) for t in data["languages"]}
    nations = {c["iso"]: Nation(name=c["name"], population=c.get("population")) for c in data["countries"]}
    towns = [Town(name=c["name"], population=c.get("population")) for c in data["cities"]]
    lands = {n: Landmass(name=n) for n in data["continents"]}
    zones = {n: Zone(name=n) for n in data["regions"]}
    await kb.upsert([*money.values(), *tongues.values(), *nations.values(), *towns, *lands.values(), *zones.values()])
    relations: list[Relation] = []
    by_name = {t.name: t for t in towns}
    for c in data["countries"]:
        nation = nations[c["iso"]]
        if c.get("continent") in lands:
            relations.append(OnLandmass(subj=nation, obj=lands[c["continent"]]))
        if c.get("region") in zones:
            relations.append(InZone(subj=nation, obj=zones[c["region"]]))
        relations += [PaysWith(subj=nation, obj=money[m]) for m in c.get("currencies", []) if m in money]
        relations += [Speaks(subj=nation, obj=tongues[t]) for t in c.get("languages", []) if t in tongues]
        if c.get("capital") in by_name:
            relations.append(CapitalOf(subj=by_name[c["capital"]], obj=nation))
    for city, town in zip(data["cities"], towns, strict=True):
        if city["country"] in nations:
            relations.append(TownOf(subj=town, obj=nations[city["country"]]))
    await kb.upsert(relations)
    return kb


def questions(data: dict[str, Any], per_kind: int, seed: int) -> list[dict[str, Any]]:
    """``per_kind`` questions of each kind with their expected answers, plus the ones outside the schema."""
    rng = random.Random(seed)
    currency = {c["code"]: c["name"] for c in data["currencies"]}
    language = {t["code"]: t["name"] for t in data["languages"]}
    cities = {c["name"] for c in data["cities"]}
    towns_of: dict[str, list[str]] = defaultdict(list)
    country_of = {c["iso"]: c for c in data["countries"]}
    for city in data["cities"]:
        towns_of[city["country"]].append(city["name"])
    # names a question can carry unambiguously: one word or a few, no parentheses
    fine = [
        c
        for c in data["countries"]
        if re.fullmatch(r"[A-Z][A-Za-z ]{2,24}", c["name"]) and c.get("capital") in cities and towns_of[c["iso"]]
    ]
    rng.shuffle(fine)
    city_rows = [
        c for c in data["cities"] if re.fullmatch(r"[A-Z][a-z]{3,14}", c["name"]) and c["country"] in country_of
    ]
    rng.shuffle(city_rows)
    out: list[dict[str, Any]] = []
    for kind, template in KINDS.items():
        for i in range(per_kind):
            c = fine[(i * len(KINDS) + list(KINDS).index(kind)) % len(fine)]
            town = city_rows[(i * len(KINDS) + list(KINDS).index(kind)) % len(city_rows)]
            home = country_of[town["country"]]
            expected = {
                "capital": [c["capital"]],
                "town_nation": [home["name"]],
                "landmass": [c["continent"]],
                "money": [currency[m] for m in c["currencies"] if m in currency],
                "tongues": [language[t] for t in c["languages"] if t in language],
                "zone": [c["region"]],
                "count_towns": [str(len(towns_of[c["iso"]]))],
                "town_landmass": [home["continent"]],
            }[kind]
            text = template.format(nation=c["name"], town=town["name"])
            out.append({"kind": kind, "question": text, "expected": expected})
    for kind, templates, at in (("outside", OUTSIDE, 1), ("outside_heldout", OUTSIDE_HELDOUT, 1 + len(OUTSIDE))):
        for i, template in enumerate(templates):
            c, town = fine[-at - i], city_rows[-at - i]
            out.append({"kind": kind, "question": template.format(nation=c["name"], town=town["name"]), "expected": []})
    return out


def build(kb: KnowledgeBase, lm: LanguageModel, answer_trainable: bool = True) -> Program:
    inputs = Input(data_model=Query)
    facts = KnowledgeRetriever(kb, lm, k=50, max_hops=2, name="retriever")(inputs)
    answer = Generator(data_model=Reply, language_model=lm, name="answerer", trainable=answer_trainable)(facts)
    return Program(inputs=inputs, outputs=answer)


def answer_holds(y_true: Any, y_pred: Any) -> float:
    """The reward of a fit: the labelled name (or count) is in the answer text."""
    if y_pred is None:
        return 0.0
    return float(right({"kind": "labelled", "expected": [str(y_true["answer"])]}, str(y_pred.get("answer") or "")))


async def fitted(kb: KnowledgeBase, lm: LanguageModel, rows: list[dict[str, Any]]) -> tuple[Program, float]:
    """The program fit with ``KNNFewShot(k=1)`` on labelled ``rows``, ``LexicalLM`` writing their searches."""
    program = build(kb, lm, answer_trainable=False)
    teacher = LexicalLM(knowledge_base=kb)
    program.compile(reward=FunctionReward(answer_holds), optimizer=KNNFewShot(k=1, teacher=teacher), concurrency=1)
    x = [{"query": r["question"]} for r in rows]
    y = [{"answer": r["expected"][0]} for r in rows]
    t0 = time.perf_counter()
    await program.fit(x, y, epochs=1, verbose=0)
    return program, time.perf_counter() - t0


def right(row: dict[str, Any], answer: str) -> bool:
    if row["kind"].startswith("outside"):
        return "not found" in answer.lower()
    return any(re.search(rf"\b{re.escape(e)}\b", answer, re.IGNORECASE) for e in row["expected"])


async def run_one(program: Program, rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors: dict[str, int] = defaultdict(int)
    scores: dict[str, list[bool]] = defaultdict(list)
    t0 = time.perf_counter()
    for row in rows:
        try:
            answer = (await program(Query(query=row["question"]))).answer
        except GenerationError as exc:
            errors["answer" if "'Reply'" in str(exc) else "search"] += 1
            answer = ""
        scores[row["kind"]].append(right(row, answer))
    answerable = [ok for k, oks in scores.items() if not k.startswith("outside") for ok in oks]
    return {
        "right": sum(answerable) / max(1, len(answerable)),
        "outside": sum(scores["outside"]) / max(1, len(scores["outside"])),
        "outside_heldout": sum(scores["outside_heldout"]) / max(1, len(scores["outside_heldout"])),
        "kinds": {k: sum(v) / len(v) for k, v in scores.items()},
        "errors": dict(errors),
        "seconds": (time.perf_counter() - t0) / max(1, len(rows)),
        "n": len(answerable),
    }


async def run(per_kind: int = 6, which: str = "both", seed: int = 0, fit: int = 2) -> Report:
    report = Report("A user's own graph, untrained (their models, kag's countries data)")
    data = _data()
    kb = await user_graph(data)
    rows = questions(data, per_kind, seed)
    # the labelled questions of a fit: other names (another seed), no question outside the schema
    labelled = [r for r in questions(data, fit, seed + 1) if not r["kind"].startswith("outside")] if fit else []
    programs: dict[str, Any] = {}
    if which in ("lexical", "both"):
        programs["LexicalLM"] = lambda: build(kb, LexicalLM(knowledge_base=kb))
    if which in ("local", "both"):
        from kag.lm.llamacpp import LlamaCppLM

        lm = LlamaCppLM("local")
        programs["SmolLM2-135M"] = lambda: build(kb, lm)
        if labelled:
            programs[f"SmolLM2-135M, fit on {len(labelled)} labelled questions"] = lambda: fitted(kb, lm, labelled)
    for name, make in programs.items():
        made = make()
        if asyncio.iscoroutine(made):
            made, fit_s = await made
            log(f"user graph {name}: fit {fit_s:.0f} s")
        r = await run_one(made, rows)
        errors = sum(r["errors"].values())
        log(f"user graph {name}: {r}")
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in r["kinds"].items())
        report.add(
            Result(
                "user graph",
                f"{name}: GenerationErrors on {r['n']} answerable + {len(OUTSIDE) + len(OUTSIDE_HELDOUT)} outside "
                "questions",
                errors,
                "errors",
                goal="0",
                met=errors == 0,
                note=f"{r['errors'] or 'none'}; {r['seconds']:.1f} s/question",
            )
        )
        report.add(
            Result(
                "user graph", f"{name}: right answers, {r['n']} questions of 8 kinds", r["right"], "share", note=kinds
            )
        )
        report.add(
            Result(
                "user graph",
                f"{name}: '{NOT_FOUND_TEXT}' to {len(OUTSIDE)} questions outside the schema",
                r["outside"],
                "share",
                goal=">= 0.95",
                met=r["outside"] >= 0.95,
            )
        )
        report.add(
            Result(
                "user graph",
                f"{name}: '{NOT_FOUND_TEXT}' to {len(OUTSIDE_HELDOUT)} more questions outside the schema, "
                "written after the rules were last changed",
                r["outside_heldout"],
                "share",
                goal=">= 0.95",
                met=r["outside_heldout"] >= 0.95,
            )
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--per-kind", type=int, default=6)
    parser.add_argument("--lm", choices=["local", "lexical", "both"], default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", type=int, default=2, help="labelled questions per kind for a fit (0: no fit)")
    args = parser.parse_args()
    print(asyncio.run(run(args.per_kind, args.lm, args.seed, args.fit)).markdown())


if __name__ == "__main__":
    main()
