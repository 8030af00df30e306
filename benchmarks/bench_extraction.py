"""Extraction with the packaged model: short world passages -> entities and relations, checked against the world graph.

``KnowledgeExtractor(kb, LlamaCppLM("local"))`` ingests ``--passages`` short passages written from
the world dataset (``kag.examples.world``; countries drawn by seed), each stating three facts:

    "Lima is the capital of Peru. Arequipa is a city in Peru. Peru is a country in South America."

and, in every other passage, one stated number ("Arequipa has 1008290 inhabitants."). The store is
an empty memory knowledge base with the world models. Measured:

- **failed chunks** (the model's output could not be used after the repairs);
- **invented property values**: a property value (population, ISO code) on a written entity that
  its passage does not state;
- **relation precision**: written relations that hold in the world graph (by label and endpoint
  names), over all written relations;
- **relation recall**: the passages' stated relations that were written;
- **seconds per passage** (one at a time, the model loaded first).

The passages are made for this benchmark from data the extractor's rules and prompts were not
written for (any country may be drawn); the templates are fixed, so this is one phrasing per fact.

Run ``python -m benchmarks.bench_extraction [--passages N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

from benchmarks.common import Report, Result, log
from kag.datamodels.base import Relation
from kag.examples.world import world_data, world_knowledge_base

TEMPLATES = (
    "{capital} is the capital of {country}.",
    "{city} is a city in {country}.",
    "{country} is a country in {continent}.",
)
# written after the sentence rules of the extractor were made from TEMPLATES' errors, before any
# run with them: the same facts in other words (``--phrasing other``), not tuned on
OTHER_TEMPLATES = (
    "The capital of {country} is {capital}.",
    "{country} has a city called {city}.",
    "{country} lies in {continent}.",
)
PHRASINGS = {"fixed": TEMPLATES, "other": OTHER_TEMPLATES}


def passages(n: int, seed: int = 0, templates: tuple[str, ...] = TEMPLATES) -> list[dict[str, Any]]:
    """``n`` passages, each with its text, stated relations and stated numbers (as text), and its
    labelled extraction (``gold``: what a demo of it shows)."""
    data = world_data()
    cities: dict[str, list[dict[str, Any]]] = {}
    for row in data["cities"]:
        cities.setdefault(row["country"], []).append(row)
    rng = random.Random(seed)
    countries = [c for c in data["countries"] if c.get("capital") and len(cities.get(c["iso"], [])) >= 2]
    out = []
    for i, row in enumerate(rng.sample(countries, min(n, len(countries)))):
        others = sorted((c for c in cities[row["iso"]] if c["name"] != row["capital"]), key=lambda c: c["name"])
        city = rng.choice(others)
        names = {"capital": row["capital"], "city": city["name"], "country": row["name"]}
        text = " ".join(t.format(**names, continent=row["continent"]) for t in templates)
        stated = {
            ("IsCapitalOf", row["capital"], row["name"]),
            ("IsCityOf", city["name"], row["name"]),
            ("IsInContinent", row["name"], row["continent"]),
        }
        numbers = set()
        population = None
        if i % 2:
            text += f" {city['name']} has {city['population']} inhabitants."
            numbers.add(str(city["population"]))
            population = city["population"]
        entities = [
            {"label": "City", "name": row["capital"], "population": None},
            {"label": "City", "name": city["name"], "population": population},
            {"label": "Country", "name": row["name"], "iso": None, "population": None},
            {"label": "Continent", "name": row["continent"]},
        ]
        gold = {
            "entities": entities,
            "relations": [
                {"label": label, "subject": {"label": _LABELS[label][0], "name": s},
                 "object": {"label": _LABELS[label][1], "name": o}}
                for label, s, o in sorted(stated)
            ],
        }  # fmt: skip
        out.append({"text": text, "stated": stated, "numbers": numbers, "gold": gold})
    return out


_LABELS = {
    "IsCapitalOf": ("City", "Country"),
    "IsCityOf": ("City", "Country"),
    "IsInContinent": ("Country", "Continent"),
}


def world_truth() -> set[tuple[str, str, str]]:
    """Every relation of the world graph as (label, subject name, object name)."""
    from kag.examples.world import world_items

    return {(r.label, r.subj.name, r.obj.name) for r in world_items() if isinstance(r, Relation)}


async def run(
    n: int = 20,
    seed: int = 0,
    demos: int = 0,
    phrasing: str = "fixed",
    demo_phrasing: str | None = None,
    nearest: int | None = None,
) -> Report:
    """Ingest ``n`` passages one at a time with the packaged model; score against the world graph.

    ``demos``: labelled passages of other countries shown as examples (``KnowledgeExtractor(examples=)``),
    written in ``demo_phrasing`` (default: the passages' own; ``"both"``: each of them in both
    phrasings, ``2 * demos`` examples), so that demos in one phrasing can be measured on passages in
    the other. ``nearest``: each passage is shown only the ``nearest`` examples written most like it
    (``KnowledgeExtractor(nearest=)``).
    """
    from kag.lm.llamacpp import LOCAL, LlamaCppLM
    from kag.programs import KnowledgeExtractor

    report = Report("Extraction with the packaged model (SmolLM2-135M) over world passages")
    lm = LlamaCppLM(LOCAL)
    await lm.load()
    truth = world_truth()
    rows = passages(n + demos, seed, PHRASINGS[phrasing])
    # the same countries either way: the draw does not depend on the templates
    ways = ["fixed", "other"] if demo_phrasing == "both" else [demo_phrasing or phrasing]
    shown = [row for way in ways for row in passages(n + demos, seed, PHRASINGS[way])[n:]]
    examples = [(row["text"], row["gold"]) for row in shown]
    rows = rows[:n]
    failed = invented = values = 0
    written: list[tuple[str, str, str]] = []
    stated_found = stated_total = 0
    seconds: list[float] = []
    for i, row in enumerate(rows):
        kb = world_knowledge_base()  # one store per passage: what it wrote is what this passage gave
        extractor = KnowledgeExtractor(kb, lm, concurrency=1, progress=False, examples=examples, nearest=nearest)
        t0 = time.perf_counter()
        result = await extractor.ingest([row["text"]])
        seconds.append(time.perf_counter() - t0)
        failed += len(result.failed_chunks)
        mine = set()
        for rid in result.relation_ids:
            rel = await kb.get(rid)
            if isinstance(rel, Relation):
                mine.add((rel.label, rel.subj.name, rel.obj.name))
        written += sorted(mine)
        stated_total += len(row["stated"])
        stated_found += len(row["stated"] & mine)
        for eid in result.entity_ids:
            entity = await kb.get(eid)
            for key, value in (entity.model_dump() if entity is not None else {}).items():
                if key in ("name", "label") or key.startswith("_") or value in (None, "", [], {}):
                    continue
                if not isinstance(value, str | int | float) or isinstance(value, bool):
                    continue
                values += 1
                stated = str(value) in row["text"] or (
                    isinstance(value, float) and value.is_integer() and str(int(value)) in row["text"]
                )
                invented += not stated
                if not stated:
                    log(f"passage {i}: invented {entity.label}.{key}={value!r} for {entity.name!r}")  # type: ignore[union-attr]
        unresolved = [(u.label, u.subject.name, u.object.name, u.reason[:60]) for u in result.unresolved]
        log(
            f"passage {i}: {seconds[-1]:.1f} s, wrote {sorted(mine)}, unresolved {unresolved}, "
            f"failed {dict(result.failed_chunks)}"
        )
    right = sum(1 for r in written if r in truth)
    precision = right / len(written) if written else float("nan")
    recall = stated_found / stated_total if stated_total else float("nan")
    seconds.sort()
    p50 = seconds[len(seconds) // 2]
    where = f"{len(rows)} passages ({phrasing} phrasing), seed {seed}, {demos} labelled passage(s) as demos"
    if demos and demo_phrasing not in (None, phrasing):
        where += " in both phrasings" if demo_phrasing == "both" else f" in the {demo_phrasing} phrasing"
    if demos and nearest is not None:
        where += f", the {nearest} nearest shown"
    report.add(Result("extraction", f"failed chunks ({where})", failed, "", goal="0", met=failed == 0))
    report.add(
        Result(
            "extraction",
            f"invented property values ({values} values written)",
            invented,
            "",
            goal="0",
            met=invented == 0,
        )
    )
    report.add(
        Result(
            "extraction",
            f"relation precision against the world graph ({right} of {len(written)} written hold)",
            precision,
            "share",
            goal=">= 0.9",
            met=precision >= 0.9,
        )
    )
    report.add(
        Result("extraction", f"relation recall ({stated_found} of {stated_total} stated relations)", recall, "share")
    )
    report.add(
        Result(
            "extraction",
            "seconds per passage, p50 (one at a time)",
            p50,
            "s",
            goal="<= 5 s",
            met=p50 <= 5.0,
            note=f"max {seconds[-1]:.1f} s",
        )
    )
    report.notes.append(
        "Passages: "
        + " / ".join(PHRASINGS[phrasing])
        + ", and in every other one '<city> has <population> inhabitants.'; "
        "a relation holds when the world graph has it with the same label and endpoint names."
    )
    await lm.aclose()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--passages", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--demos", type=int, default=0, help="labelled passages of other countries as examples")
    parser.add_argument("--phrasing", choices=sorted(PHRASINGS), default="fixed", help="the passages' templates")
    parser.add_argument(
        "--demo-phrasing",
        choices=[*sorted(PHRASINGS), "both"],
        default=None,
        help="the demos' templates (default: --phrasing; both: each demo in both, 2 x --demos examples)",
    )
    parser.add_argument("--nearest", type=int, default=None, help="show each passage only the K nearest examples")
    args = parser.parse_args()
    report = asyncio.run(run(args.passages, args.seed, args.demos, args.phrasing, args.demo_phrasing, args.nearest))
    print(report.markdown())


if __name__ == "__main__":
    main()
