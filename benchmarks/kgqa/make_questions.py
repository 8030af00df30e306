"""Generate ``benchmarks/kgqa/questions.jsonl``: KGQA questions over ``kag/data/countries.json``.

Usage::

    .venv/bin/python -m benchmarks.kgqa.make_questions [OUTPUT]

Deterministic (``random.Random(SEED)``, inputs sorted). Every question has an ``id``, a
``type`` and ``subtype``, the ``question`` text, the ``answer`` computed from the data
itself (never from kag), and a ``gold_search`` in kag's triplet language; questions
whose search needs a negated hop in a chain, field conditions or ``order_by`` list
those features in ``extensions`` (see ``README.md``). ``answer_node`` is the path
position (0 = the first hop's subject) whose entity names form the answer.
"""

from __future__ import annotations

import json
import random
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "kag" / "data" / "countries.json"
OUTPUT = Path(__file__).resolve().parent / "questions.jsonl"
SEED = 12
ANY = "*"
TYPES = (
    "lookup",
    "inverse",
    "variant",
    "negation",
    "negation_chain",
    "count",
    "two_hop",
    "symmetric",
    "intersection",
    "comparison",
    "superlative",
)
VARIANT_KINDS = ("typo", "no_accent", "official_name", "other_name", "translation")
CONTINENT_ADJECTIVES = {
    "Africa": "African",
    "Asia": "Asian",
    "Europe": "European",
    "North America": "North American",
    "South America": "South American",
    "Oceania": "Oceanian",
}
LANGUAGE_NAMES = {"de": "German", "fr": "French", "es": "Spanish", "it": "Italian"}
POPULATION_STEPS = (
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_000_000,
    3_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
)
AREA_STEPS = (1_000, 10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_000_000)


# -- names ---------------------------------------------------------------------------------


_UNDECOMPOSABLE = str.maketrans({"ß": "ss", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ı": "i"})


def fold(text: str) -> str:
    """Casefolded, accents stripped (ł and ø too), non-alphanumerics collapsed: how names are compared."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSABLE))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in plain).split())


def strip_accents(text: str) -> str:
    """``text`` with its accents removed, case and punctuation kept ("Bogotá" -> "Bogota")."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSABLE))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def typo(name: str, rng: random.Random) -> str:
    """One keyboard slip in ``name``: a swapped, dropped, doubled or replaced letter (never the first)."""
    letters = [i for i, ch in enumerate(name) if ch.isalpha() and i > 0]
    i = rng.choice(letters)
    op = rng.choice(("swap", "drop", "double", "vowel"))
    if op == "swap" and i + 1 < len(name) and name[i + 1].isalpha() and name[i + 1] != name[i]:
        return name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    if op == "double":
        return name[:i] + name[i] + name[i:]
    if op == "vowel" and name[i].lower() in "aeiou":
        other = rng.choice([v for v in "aeiou" if v != name[i].lower()])
        return name[:i] + (other.upper() if name[i].isupper() else other) + name[i + 1 :]
    return name[:i] + name[i + 1 :]


def human(n: float) -> str:
    """A round number as people write it: 5 million, 250,000."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{int(n // 1_000_000)} million"
    return f"{int(n):,}"


# -- the data, indexed ----------------------------------------------------------------------


@dataclass
class Data:
    """The dataset with the lookups the question templates need."""

    raw: dict[str, Any]
    country: dict[str, dict[str, Any]] = field(default_factory=dict)  # iso -> record
    city: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> record
    currency: dict[str, str] = field(default_factory=dict)  # code -> name
    language: dict[str, str] = field(default_factory=dict)  # code -> name
    cities_of: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    provinces_of: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    province_country: dict[str, str] = field(default_factory=dict)
    neighbours: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    names: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # label -> folded names

    @classmethod
    def load(cls, path: Path = DATA) -> Data:
        d = cls(json.loads(path.read_text(encoding="utf-8")))
        d.currency = {c["code"]: c["name"] for c in d.raw["currencies"]}
        d.language = {lang["code"]: lang["name"] for lang in d.raw["languages"]}
        for c in d.raw["countries"]:
            d.country[c["iso"]] = c
            d.names["Country"].update(
                fold(n)
                for n in [c["name"], c.get("official_name") or "", *c["other_names"], *c["translations"].values()]
            )
        for c in d.raw["cities"]:
            d.city[c["name"]] = c
            d.cities_of[c["country"]].append(c["name"])
            d.names["City"].update(fold(n) for n in [c["name"], *c.get("other_names", [])])
        for p in d.raw["provinces"]:
            d.provinces_of[p["country"]].append(p["name"])
            d.province_country[p["name"]] = p["country"]
            d.names["Province"].add(fold(p["name"]))
        for a, b in d.raw["borders"]:
            d.neighbours[a].add(b)
            d.neighbours[b].add(a)
        for label, key in (("Currency", "currencies"), ("Language", "languages")):
            d.names[label].update(fold(x["name"]) for x in d.raw[key])
        d.names["Continent"] = {fold(x) for x in d.raw["continents"]}
        d.names["Region"] = {fold(x) for x in d.raw["regions"]}
        return d

    def name(self, iso: str) -> str:
        return str(self.country[iso]["name"])

    def isos(self, pred: Callable[[dict[str, Any]], bool] = lambda c: True) -> list[str]:
        return sorted(iso for iso, c in self.country.items() if pred(c))

    def in_continent(self, continent: str) -> set[str]:
        return {iso for iso, c in self.country.items() if c["continent"] == continent}

    def in_region(self, region: str) -> set[str]:
        return {iso for iso, c in self.country.items() if c["region"] == region}

    def using(self, code: str) -> set[str]:
        return {iso for iso, c in self.country.items() if code in c["currencies"]}

    def speaking(self, code: str) -> set[str]:
        return {iso for iso, c in self.country.items() if code in c["languages"]}

    def capital_country(self, city: str) -> str | None:
        return next((iso for iso, c in self.country.items() if c.get("capital") == city), None)

    def code_of_currency(self, name: str) -> str:
        return next(code for code, n in self.currency.items() if n == name)


# -- searches -------------------------------------------------------------------------------


def hop(
    subject_label: str,
    subject_text: str,
    relation: str,
    object_label: str,
    object_text: str,
    *,
    negated: bool = False,
    bidirectional: bool = False,
    count: bool = False,
    **extension: Any,
) -> dict[str, Any]:
    """One triplet search; ``extension`` adds the newer fields (``subject_where``, ``order_by``, ...)."""
    out: dict[str, Any] = {
        "subject_label": subject_label,
        "subject_similarity_search": subject_text,
        "relation_label": relation,
        "object_label": object_label,
        "object_similarity_search": object_text,
        "negated": negated,
        "bidirectional": bidirectional,
        "count": count,
    }
    out.update(extension)
    return out


def chain(*hops: dict[str, Any]) -> dict[str, Any]:
    return {"hops": list(hops)}


def where(fieldname: str, op: str, value: float) -> list[dict[str, Any]]:
    return [{"field": fieldname, "op": op, "value": value}]


def order(side: str, fieldname: str, direction: str) -> dict[str, Any]:
    return {"side": side, "field": fieldname, "direction": direction}


class Builder:
    """Collects questions, numbering them per type and refusing duplicate texts."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._texts: set[str] = set()
        self._n: dict[str, int] = defaultdict(int)

    def add(
        self,
        qtype: str,
        subtype: str,
        question: str,
        search: dict[str, Any],
        *,
        names: Iterable[str] | None = None,
        label: str | None = None,
        count: int | None = None,
        node: int | None = None,
        extensions: Sequence[str] = (),
        **extra: Any,
    ) -> bool:
        """Add one question (False when its text is already taken or its answer is empty)."""
        assert qtype in TYPES, qtype
        if question in self._texts:
            return False
        if count is None:
            answer_names = sorted(set(names or ()))
            if not answer_names:
                return False
            answer: dict[str, Any] = {"kind": "entities", "label": label, "names": answer_names}
        else:
            answer = {"kind": "count", "value": int(count)}
        self._texts.add(question)
        self._n[qtype] += 1
        row: dict[str, Any] = {
            "id": f"{qtype}-{self._n[qtype]:04d}",
            "type": qtype,
            "subtype": subtype,
            "question": question,
            "answer": answer,
            "gold_search": search,
            "answer_node": node,
            "extensions": sorted(extensions),
        }
        row.update(extra)
        self.rows.append(row)
        return True

    def count(self, qtype: str) -> int:
        return self._n[qtype]


def _pick(rng: random.Random, items: Sequence[Any], n: int) -> list[Any]:
    items = list(items)
    return rng.sample(items, min(n, len(items)))


def _t(rng: random.Random, templates: Sequence[str], **values: Any) -> str:
    return rng.choice(templates).format(**values)


def _the(name: str) -> str:
    """``the`` before names that take it in English ("the United Kingdom", "the Republic of Kenya")."""
    words = name.split()
    takes = (
        " of " in name
        or words[0] in {"United", "Kingdom", "Federal", "Republic", "State", "Commonwealth", "Principality"}
        or name.endswith(("Islands", "Republic", "Emirates", "States", "Bahamas", "Netherlands", "Philippines"))
    )
    return f"the {name}" if takes and not name.startswith("The ") else name


# -- question families ------------------------------------------------------------------------


def _plain_province(name: str) -> bool:
    """Province names fit for a question: no qualifier in parentheses, no numbered sectors."""
    return len(name) >= 5 and "(" not in name and not any(ch.isdigit() for ch in name)


def lookups(d: Data, b: Builder, rng: random.Random) -> None:
    """One named entity; the answer is the fact at the other end of one relation."""
    big = d.isos(lambda c: c["population"] >= 100_000)
    for iso in _pick(rng, [i for i in big if d.country[i]["capital"]], 16):
        c = d.name(iso)
        q = _t(
            rng,
            (
                "What is the capital of {c}?",
                "Which city is the capital of {c}?",
                "Name the capital city of {c}.",
                "What's {c}'s capital?",
            ),
            c=_the(c),
        )
        b.add(
            "lookup",
            "capital",
            q,
            hop("City", ANY, "IsCapitalOf", "Country", c),
            names=[d.country[iso]["capital"]],
            label="City",
            node=0,
        )
    for iso in _pick(rng, [i for i in big if d.country[i]["currencies"]], 10):
        c = d.name(iso)
        q = _t(
            rng,
            ("Which currency is used in {c}?", "What currency does {c} use?", "What is the currency of {c}?"),
            c=_the(c),
        )
        names = [d.currency[x] for x in d.country[iso]["currencies"]]
        b.add(
            "lookup",
            "currency",
            q,
            hop("Country", c, "UsesCurrency", "Currency", ANY),
            names=names,
            label="Currency",
            node=1,
        )
    for iso in _pick(rng, [i for i in big if d.country[i]["languages"]], 10):
        c = d.name(iso)
        q = _t(
            rng,
            (
                "Which languages are spoken in {c}?",
                "What are the official languages of {c}?",
                "What language do people speak in {c}?",
            ),
            c=_the(c),
        )
        names = [d.language[x] for x in d.country[iso]["languages"]]
        b.add(
            "lookup",
            "languages",
            q,
            hop("Country", c, "SpeaksLanguage", "Language", ANY),
            names=names,
            label="Language",
            node=1,
        )
    for iso in _pick(rng, big, 8):
        c = d.name(iso)
        q = _t(rng, ("On which continent is {c}?", "Which continent is {c} part of?"), c=_the(c))
        b.add(
            "lookup",
            "continent",
            q,
            hop("Country", c, "IsInContinent", "Continent", ANY),
            names=[d.country[iso]["continent"]],
            label="Continent",
            node=1,
        )
    for iso in _pick(rng, [i for i in big if d.country[i]["region"]], 7):
        c = d.name(iso)
        q = _t(rng, ("Which region of the world is {c} in?", "In which UN subregion does {c} lie?"), c=_the(c))
        b.add(
            "lookup",
            "region",
            q,
            hop("Country", c, "IsInRegion", "Region", ANY),
            names=[d.country[iso]["region"]],
            label="Region",
            node=1,
        )
    cities = sorted(n for n, c in d.city.items() if (c["population"] or 0) >= 200_000)
    for city in _pick(rng, cities, 12):
        q = _t(rng, ("Which country is {x} in?", "In which country is the city of {x}?", "Where is {x}?"), x=city)
        b.add(
            "lookup",
            "city_country",
            q,
            hop("City", city, "IsCityOf", "Country", ANY),
            names=[d.name(d.city[city]["country"])],
            label="Country",
            node=1,
        )
    provinces = sorted(p for p in d.province_country if _plain_province(p))
    for p in _pick(rng, provinces, 8):
        q = _t(rng, ("Which country is {p} a province of?", "{p} is a province of which country?"), p=p)
        b.add(
            "lookup",
            "province_country",
            q,
            hop("Province", p, "IsProvinceOf", "Country", ANY),
            names=[d.name(d.province_country[p])],
            label="Country",
            node=1,
        )


def inverses(d: Data, b: Builder, rng: random.Random) -> None:
    """The named entity is the relation's far end; the answer is who has it."""
    capitals = sorted(c["capital"] for c in d.country.values() if c["capital"] and c["population"] >= 100_000)
    for city in _pick(rng, capitals, 12):
        q = _t(
            rng,
            (
                "Of which country is {x} the capital?",
                "{x} is the capital of which country?",
                "Which country has {x} as its capital?",
            ),
            x=city,
        )
        iso = d.capital_country(city)
        assert iso is not None
        b.add(
            "inverse",
            "capital_country",
            q,
            hop("City", city, "IsCapitalOf", "Country", ANY),
            names=[d.name(iso)],
            label="Country",
            node=1,
        )
    shared = sorted(code for code in d.currency if len(d.using(code)) >= 2)
    for code in _pick(rng, shared, 10):
        name = d.currency[code]
        q = _t(rng, ("Which countries use the {x}?", "In which countries is the {x} the currency?"), x=name)
        b.add(
            "inverse",
            "currency_users",
            q,
            hop("Country", ANY, "UsesCurrency", "Currency", name),
            names=[d.name(i) for i in d.using(code)],
            label="Country",
            node=0,
        )
    langs = sorted(code for code in d.language if 2 <= len(d.speaking(code)) <= 30)
    for code in _pick(rng, langs, 10):
        name = d.language[code]
        q = _t(rng, ("In which countries is {x} an official language?", "Which countries speak {x}?"), x=name)
        b.add(
            "inverse",
            "language_countries",
            q,
            hop("Country", ANY, "SpeaksLanguage", "Language", name),
            names=[d.name(i) for i in d.speaking(code)],
            label="Country",
            node=0,
        )
    for region in _pick(rng, d.raw["regions"], 8):
        q = _t(rng, ("Which countries are in {x}?", "Which countries belong to the region {x}?"), x=region)
        b.add(
            "inverse",
            "region_countries",
            q,
            hop("Country", ANY, "IsInRegion", "Region", region),
            names=[d.name(i) for i in d.in_region(region)],
            label="Country",
            node=0,
        )
    for continent in _pick(rng, [c for c in d.raw["continents"] if c != "Antarctica"], 4):
        q = f"Which countries are in {continent}?"
        b.add(
            "inverse",
            "continent_countries",
            q,
            hop("Country", ANY, "IsInContinent", "Continent", continent),
            names=[d.name(i) for i in d.in_continent(continent)],
            label="Country",
            node=0,
        )
    with_cities = d.isos(lambda c: len(d.cities_of[c["iso"]]) >= 2)
    for iso in _pick(rng, with_cities, 18):
        c = d.name(iso)
        q = _t(rng, ("Which cities are in {c}?", "List the cities of {c}.", "What cities does {c} have?"), c=_the(c))
        b.add(
            "inverse",
            "country_cities",
            q,
            hop("City", ANY, "IsCityOf", "Country", c),
            names=d.cities_of[iso],
            label="City",
            node=0,
        )
    with_provinces = d.isos(lambda c: 2 <= len(d.provinces_of[c["iso"]]) <= 30)
    for iso in _pick(rng, with_provinces, 8):
        c = d.name(iso)
        q = _t(rng, ("What are the provinces of {c}?", "Which provinces does {c} have?"), c=_the(c))
        b.add(
            "inverse",
            "country_provinces",
            q,
            hop("Province", ANY, "IsProvinceOf", "Country", c),
            names=d.provinces_of[iso],
            label="Province",
            node=0,
        )


def _variant_question(
    d: Data, b: Builder, rng: random.Random, kind: str, label: str, target: str, text: str, **extra: Any
) -> bool:
    """A lookup about ``target`` asked with its variant name ``text``."""
    variant = {"kind": kind, "label": label, "text": text, "target": target, **extra}
    if label == "Country":
        iso = next(i for i, c in d.country.items() if c["name"] == target)
        c = d.country[iso]
        options = []
        if c["capital"]:
            options.append("capital")
        if c["currencies"]:
            options.append("currency")
        options.append("continent")
        form = rng.choice(options)
        shown = _the(text)
        if form == "capital":
            q = _t(rng, ("What is the capital of {c}?", "Which city is the capital of {c}?"), c=shown)
            return b.add(
                "variant",
                kind,
                q,
                hop("City", ANY, "IsCapitalOf", "Country", text),
                names=[c["capital"]],
                label="City",
                node=0,
                variant=variant,
            )
        if form == "currency":
            q = _t(rng, ("Which currency does {c} use?", "What is the currency of {c}?"), c=shown)
            return b.add(
                "variant",
                kind,
                q,
                hop("Country", text, "UsesCurrency", "Currency", ANY),
                names=[d.currency[x] for x in c["currencies"]],
                label="Currency",
                node=1,
                variant=variant,
            )
        q = _t(rng, ("On which continent is {c}?", "Which continent is {c} in?"), c=shown)
        return b.add(
            "variant",
            kind,
            q,
            hop("Country", text, "IsInContinent", "Continent", ANY),
            names=[c["continent"]],
            label="Continent",
            node=1,
            variant=variant,
        )
    if label == "City":
        iso = d.city[target]["country"]
        if d.country[iso]["capital"] == target and rng.random() < 0.5:
            q = _t(rng, ("Of which country is {x} the capital?", "{x} is the capital of which country?"), x=text)
            return b.add(
                "variant",
                kind,
                q,
                hop("City", text, "IsCapitalOf", "Country", ANY),
                names=[d.name(iso)],
                label="Country",
                node=1,
                variant=variant,
            )
        q = _t(rng, ("Which country is {x} in?", "In which country is {x}?"), x=text)
        return b.add(
            "variant",
            kind,
            q,
            hop("City", text, "IsCityOf", "Country", ANY),
            names=[d.name(iso)],
            label="Country",
            node=1,
            variant=variant,
        )
    assert label == "Province"
    q = f"Which country is {text} a province of?"
    return b.add(
        "variant",
        kind,
        q,
        hop("Province", text, "IsProvinceOf", "Country", ANY),
        names=[d.name(d.province_country[target])],
        label="Country",
        node=1,
        variant=variant,
    )


def variants(d: Data, b: Builder, rng: random.Random) -> None:
    """Lookups that name the entity differently: typos, missing accents, long forms, other names, translations."""
    every = set().union(*d.names.values())

    def new_typo(name: str) -> tuple[str, int] | None:
        # long names get two slips a third of the time ("Phillipines"-style misspellings)
        edits = 2 if len(name) >= 9 and rng.random() < 0.35 else 1
        for _ in range(20):
            t = typo(name, rng)
            if edits == 2:
                t = typo(t, rng)
            if fold(t) != fold(name) and fold(t) not in every:
                return t, edits
        return None

    countries = [c["name"] for c in d.country.values() if len(c["name"]) >= 6 and c["population"] >= 100_000]
    for name in _pick(rng, sorted(countries), 22):
        found = new_typo(name)
        if found:
            _variant_question(d, b, rng, "typo", "Country", name, found[0], edits=found[1])
    cities = [n for n, c in d.city.items() if len(n) >= 6 and (c["population"] or 0) >= 300_000]
    for name in _pick(rng, sorted(cities), 22):
        found = new_typo(name)
        if found:
            _variant_question(d, b, rng, "typo", "City", name, found[0], edits=found[1])

    accented_cities = sorted(n for n in d.city if strip_accents(n) != n and strip_accents(n).isascii())
    for name in _pick(rng, accented_cities, 22):
        _variant_question(d, b, rng, "no_accent", "City", name, strip_accents(name))
    accented_provinces = sorted(
        p for p in d.province_country if strip_accents(p) != p and strip_accents(p).isascii() and _plain_province(p)
    )
    for name in _pick(rng, accented_provinces, 6):
        _variant_question(d, b, rng, "no_accent", "Province", name, strip_accents(name))

    official = sorted((c["name"], c["official_name"]) for c in d.country.values() if c.get("official_name"))
    for name, long_form in _pick(rng, official, 22):
        _variant_question(d, b, rng, "official_name", "Country", name, long_form)

    def plain(o: str) -> bool:
        # names people type: Latin-1 letters, no inverted ISO form, short
        return ", " not in o and "(" not in o and len(o.split()) <= 4 and len(o) >= 2 and max(map(ord, o)) <= 0xFF

    others = sorted((c["name"], o) for c in d.country.values() for o in c["other_names"] if plain(o))
    picked: set[str] = set()
    for name, other in _pick(rng, others, 60):
        if name not in picked and len(picked) < 22:
            picked.add(name)
            _variant_question(d, b, rng, "other_name", "Country", name, other)
    city_others = sorted((n, o) for n, c in d.city.items() for o in c.get("other_names", []))
    for name, other in _pick(rng, city_others, 6):
        _variant_question(d, b, rng, "other_name", "City", name, other)

    for lang in ("de", "fr", "es", "it"):
        options = sorted(
            (c["name"], c["translations"][lang])
            for c in d.country.values()
            if lang in c["translations"] and c["population"] >= 100_000
        )
        for name, translated in _pick(rng, options, 10):
            _variant_question(
                d, b, rng, "translation", "Country", name, translated, language=lang, language_name=LANGUAGE_NAMES[lang]
            )


def negations(d: Data, b: Builder, rng: random.Random) -> None:
    """Single-hop negation: entities with no such relation (to a named entity, or to any)."""
    none_of = (
        (
            "Which countries have no land borders?",
            hop("Country", ANY, "Borders", "Country", ANY, negated=True, bidirectional=True),
            lambda iso: not d.neighbours[iso],
            "no_border",
        ),
        (
            "Which countries or territories have no capital city in the data?",
            hop("Country", ANY, "IsCapitalOf", "City", ANY, negated=True, bidirectional=True),
            lambda iso: not d.country[iso]["capital"],
            "no_capital",
        ),
        (
            "Which countries have no currency listed?",
            hop("Country", ANY, "UsesCurrency", "Currency", ANY, negated=True),
            lambda iso: not d.country[iso]["currencies"],
            "no_currency",
        ),
        (
            "Which countries have no official language in the data?",
            hop("Country", ANY, "SpeaksLanguage", "Language", ANY, negated=True),
            lambda iso: not d.country[iso]["languages"],
            "no_language",
        ),
        (
            "Which countries are not assigned to any UN subregion?",
            hop("Country", ANY, "IsInRegion", "Region", ANY, negated=True),
            lambda iso: not d.country[iso]["region"],
            "no_region",
        ),
        (
            "Which countries have no provinces listed?",
            hop("Country", ANY, "IsProvinceOf", "Province", ANY, negated=True, bidirectional=True),
            lambda iso: not d.provinces_of[iso],
            "no_province",
        ),
        (
            "Which countries have no cities in the data?",
            hop("Country", ANY, "IsCityOf", "City", ANY, negated=True, bidirectional=True),
            lambda iso: not d.cities_of[iso],
            "no_city",
        ),
    )
    for question, search, pred, subtype in none_of:
        b.add(
            "negation",
            subtype,
            question,
            search,
            names=[d.name(i) for i in d.isos() if pred(i)],
            label="Country",
            node=0,
        )

    everyone = set(d.country)
    for code in _pick(rng, sorted(c for c in d.currency if len(d.using(c)) >= 2), 14):
        name = d.currency[code]
        q = _t(
            rng,
            ("How many countries do not use the {x}?", "How many countries don't have the {x} as currency?"),
            x=name,
        )
        b.add(
            "negation",
            "currency_count",
            q,
            hop("Country", ANY, "UsesCurrency", "Currency", name, negated=True, count=True),
            count=len(everyone - d.using(code)),
        )
    for code in _pick(rng, sorted(c for c in d.language if len(d.speaking(c)) >= 2), 12):
        name = d.language[code]
        q = f"How many countries do not have {name} as an official language?"
        b.add(
            "negation",
            "language_count",
            q,
            hop("Country", ANY, "SpeaksLanguage", "Language", name, negated=True, count=True),
            count=len(everyone - d.speaking(code)),
        )
    for continent in d.raw["continents"]:
        q = f"How many countries are not in {continent}?"
        b.add(
            "negation",
            "continent_count",
            q,
            hop("Country", ANY, "IsInContinent", "Continent", continent, negated=True, count=True),
            count=len(everyone - d.in_continent(continent)),
        )


def negation_chains(d: Data, b: Builder, rng: random.Random) -> None:
    """A negated hop inside a chain: constrain the entity, then exclude a relation."""
    pairs = []
    for continent in d.raw["continents"]:
        members = d.in_continent(continent)
        for code in d.currency:
            users = d.using(code) & members
            rest = members - users
            if len(users) >= 2 and 1 <= len(rest) <= 60:
                pairs.append(("Continent", continent, members, code, rest))
    for region in d.raw["regions"]:
        members = d.in_region(region)
        for code in d.currency:
            users = d.using(code) & members
            rest = members - users
            if len(users) >= 2 and 1 <= len(rest) <= 40:
                pairs.append(("Region", region, members, code, rest))
    for label, place, _members, code, rest in _pick(rng, sorted(pairs, key=lambda p: (p[1], p[3])), 14):
        name = d.currency[code]
        q = f"Which countries in {place} do not use the {name}?"
        if place in CONTINENT_ADJECTIVES and rng.random() < 0.5:
            q = f"Which {CONTINENT_ADJECTIVES[place]} countries don't use the {name}?"
        rel = "IsInContinent" if label == "Continent" else "IsInRegion"
        b.add(
            "negation_chain",
            "place_not_currency",
            q,
            chain(
                hop(label, place, rel, "Country", ANY, bidirectional=True),
                hop("Country", ANY, "UsesCurrency", "Currency", name, negated=True),
            ),
            names=[d.name(i) for i in rest],
            label="Country",
            node=1,
            extensions=["negated_hop"],
        )
    lang_pairs = []
    for region in d.raw["regions"]:
        members = d.in_region(region)
        for code in d.language:
            speakers = d.speaking(code) & members
            rest = members - speakers
            if len(speakers) >= 3 and 1 <= len(rest) <= 40:
                lang_pairs.append((region, code, rest))
    for region, code, rest in _pick(rng, sorted(lang_pairs), 8):
        name = d.language[code]
        q = f"Which countries in {region} do not have {name} as an official language?"
        b.add(
            "negation_chain",
            "region_not_language",
            q,
            chain(
                hop("Region", region, "IsInRegion", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "SpeaksLanguage", "Language", name, negated=True),
            ),
            names=[d.name(i) for i in rest],
            label="Country",
            node=1,
            extensions=["negated_hop"],
        )
    neighbour_pairs = []
    for iso in d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 2 and bool(c["currencies"])):
        code = d.country[iso]["currencies"][0]
        rest = {n for n in d.neighbours[iso] if code not in d.country[n]["currencies"]}
        if rest and rest != d.neighbours[iso]:
            neighbour_pairs.append((iso, code, rest))
    for iso, code, rest in _pick(rng, neighbour_pairs, 8):
        c, name = d.name(iso), d.currency[code]
        q = f"Which neighbours of {_the(c)} do not use the {name}?"
        b.add(
            "negation_chain",
            "neighbours_not_currency",
            q,
            chain(
                hop("Country", c, "Borders", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "UsesCurrency", "Currency", name, negated=True),
            ),
            names=[d.name(i) for i in rest],
            label="Country",
            node=1,
            extensions=["negated_hop"],
        )
    capitals = {c["capital"] for c in d.country.values() if c["capital"]}
    with_cities = d.isos(lambda c: bool(c["capital"]) and c["capital"] in d.city and len(d.cities_of[c["iso"]]) >= 3)
    for iso in _pick(rng, with_cities, 6):
        c = d.name(iso)
        q = f"Which cities of {_the(c)} are not capitals?"
        b.add(
            "negation_chain",
            "cities_not_capital",
            q,
            chain(
                hop("Country", c, "IsCityOf", "City", ANY, bidirectional=True),
                hop("City", ANY, "IsCapitalOf", "Country", ANY, negated=True),
            ),
            names=[x for x in d.cities_of[iso] if x not in capitals],
            label="City",
            node=1,
            extensions=["negated_hop"],
        )
    for continent in _pick(rng, [c for c in d.raw["continents"] if c != "Antarctica"], 6):
        q = f"Which countries in {continent} have no land borders?"
        b.add(
            "negation_chain",
            "continent_no_border",
            q,
            chain(
                hop("Continent", continent, "IsInContinent", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "Borders", "Country", ANY, negated=True, bidirectional=True),
            ),
            names=[d.name(i) for i in d.in_continent(continent) if not d.neighbours[i]],
            label="Country",
            node=1,
            extensions=["negated_hop"],
        )


def counts(d: Data, b: Builder, rng: random.Random) -> None:
    """How many: the number of matching rows (one per answer entity)."""
    for code in _pick(rng, sorted(c for c in d.currency if len(d.using(c)) >= 2), 14):
        name = d.currency[code]
        q = _t(rng, ("How many countries use the {x}?", "In how many countries is the {x} used?"), x=name)
        b.add(
            "count",
            "currency_users",
            q,
            hop("Country", ANY, "UsesCurrency", "Currency", name, count=True),
            count=len(d.using(code)),
        )
    for code in _pick(rng, sorted(c for c in d.language if len(d.speaking(c)) >= 2), 10):
        name = d.language[code]
        q = _t(
            rng,
            ("How many countries have {x} as an official language?", "In how many countries is {x} spoken?"),
            x=name,
        )
        b.add(
            "count",
            "language_countries",
            q,
            hop("Country", ANY, "SpeaksLanguage", "Language", name, count=True),
            count=len(d.speaking(code)),
        )
    for continent in d.raw["continents"]:
        q = f"How many countries are in {continent}?"
        b.add(
            "count",
            "continent_countries",
            q,
            hop("Country", ANY, "IsInContinent", "Continent", continent, count=True),
            count=len(d.in_continent(continent)),
        )
    for region in _pick(rng, d.raw["regions"], 8):
        q = f"How many countries are there in {region}?"
        b.add(
            "count",
            "region_countries",
            q,
            hop("Country", ANY, "IsInRegion", "Region", region, count=True),
            count=len(d.in_region(region)),
        )
    for iso in _pick(rng, d.isos(lambda c: len(d.cities_of[c["iso"]]) >= 2), 10):
        c = d.name(iso)
        q = f"How many cities of {_the(c)} are in the knowledge graph?"
        b.add(
            "count",
            "country_cities",
            q,
            hop("City", ANY, "IsCityOf", "Country", c, count=True),
            count=len(d.cities_of[iso]),
        )
    for iso in _pick(rng, d.isos(lambda c: len(d.provinces_of[c["iso"]]) >= 2), 10):
        c = d.name(iso)
        q = _t(rng, ("How many provinces does {c} have?", "How many provinces are there in {c}?"), c=_the(c))
        b.add(
            "count",
            "country_provinces",
            q,
            hop("Province", ANY, "IsProvinceOf", "Country", c, count=True),
            count=len(d.provinces_of[iso]),
        )
    for iso in _pick(rng, d.isos(lambda c: len(c["languages"]) >= 1 and c["population"] >= 100_000), 6):
        c = d.name(iso)
        q = f"How many official languages does {_the(c)} have?"
        b.add(
            "count",
            "country_languages",
            q,
            hop("Country", c, "SpeaksLanguage", "Language", ANY, count=True),
            count=len(d.country[iso]["languages"]),
        )


def two_hops(d: Data, b: Builder, rng: random.Random) -> None:
    """Chains through an unnamed middle entity."""
    bordered = d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 1)
    for iso in _pick(rng, bordered, 12):
        c = d.name(iso)
        capitals = [d.country[n]["capital"] for n in d.neighbours[iso] if d.country[n]["capital"]]
        q = _t(
            rng,
            ("What are the capitals of the countries that border {c}?", "Name the capitals of {c}'s neighbours."),
            c=_the(c),
        )
        b.add(
            "two_hop",
            "neighbour_capitals",
            q,
            chain(
                hop("Country", c, "Borders", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "IsCapitalOf", "City", ANY, bidirectional=True),
            ),
            names=capitals,
            label="City",
            node=2,
        )
    capitals = sorted(
        c["capital"] for c in d.country.values() if c["capital"] and c["currencies"] and c["population"] > 50_000
    )
    for city in _pick(rng, capitals, 10):
        iso = d.capital_country(city)
        assert iso is not None
        q = f"Which currency is used in the country whose capital is {city}?"
        b.add(
            "two_hop",
            "capital_currency",
            q,
            chain(
                hop("City", city, "IsCapitalOf", "Country", ANY),
                hop("Country", ANY, "UsesCurrency", "Currency", ANY),
            ),
            names=[d.currency[x] for x in d.country[iso]["currencies"]],
            label="Currency",
            node=2,
        )
    cities = sorted(n for n, c in d.city.items() if (c["population"] or 0) >= 250_000)
    for city in _pick(rng, cities, 10):
        iso = d.city[city]["country"]
        q = _t(rng, ("On which continent is the city of {x}?", "Which continent is {x} on?"), x=city)
        b.add(
            "two_hop",
            "city_continent",
            q,
            chain(
                hop("City", city, "IsCityOf", "Country", ANY),
                hop("Country", ANY, "IsInContinent", "Continent", ANY),
            ),
            names=[d.country[iso]["continent"]],
            label="Continent",
            node=2,
        )
    spoken = [n for n in cities if d.country[d.city[n]["country"]]["languages"]]
    for city in _pick(rng, spoken, 10):
        iso = d.city[city]["country"]
        q = f"Which languages are official in the country where {city} is?"
        b.add(
            "two_hop",
            "city_languages",
            q,
            chain(
                hop("City", city, "IsCityOf", "Country", ANY),
                hop("Country", ANY, "SpeaksLanguage", "Language", ANY),
            ),
            names=[d.language[x] for x in d.country[iso]["languages"]],
            label="Language",
            node=2,
        )
    provinces = sorted(p for p, iso in d.province_country.items() if d.country[iso]["capital"] and _plain_province(p))
    for p in _pick(rng, provinces, 10):
        iso = d.province_country[p]
        q = f"What is the capital of the country that the province {p} belongs to?"
        b.add(
            "two_hop",
            "province_capital",
            q,
            chain(
                hop("Province", p, "IsProvinceOf", "Country", ANY),
                hop("Country", ANY, "IsCapitalOf", "City", ANY, bidirectional=True),
            ),
            names=[d.country[iso]["capital"]],
            label="City",
            node=2,
        )
    regional = [n for n in cities if d.country[d.city[n]["country"]]["region"]]
    for city in _pick(rng, regional, 8):
        iso = d.city[city]["country"]
        q = f"Which UN subregion is the city of {city} in?"
        b.add(
            "two_hop",
            "city_region",
            q,
            chain(hop("City", city, "IsCityOf", "Country", ANY), hop("Country", ANY, "IsInRegion", "Region", ANY)),
            names=[d.country[iso]["region"]],
            label="Region",
            node=2,
        )


def symmetrics(d: Data, b: Builder, rng: random.Random) -> None:
    """Borders, stored once per pair: correct only when searched both ways."""
    bordered = d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 1)
    for iso in _pick(rng, bordered, 36):
        c = d.name(iso)
        q = _t(
            rng,
            (
                "Which countries border {c}?",
                "Which countries share a land border with {c}?",
                "What are the neighbouring countries of {c}?",
                "Name the countries next to {c}.",
            ),
            c=_the(c),
        )
        search = hop("Country", c, "Borders", "Country", ANY, bidirectional=True)
        b.add(
            "symmetric",
            "neighbours",
            q,
            search,
            names=[d.name(n) for n in d.neighbours[iso]],
            label="Country",
            node=1,
            symmetric_search={**search, "bidirectional": False},
        )
    for iso in _pick(rng, bordered, 16):
        c = d.name(iso)
        q = _t(rng, ("How many countries border {c}?", "How many neighbours does {c} have?"), c=_the(c))
        search = hop("Country", c, "Borders", "Country", ANY, bidirectional=True, count=True)
        b.add(
            "symmetric",
            "neighbour_count",
            q,
            search,
            count=len(d.neighbours[iso]),
            symmetric_search={**search, "bidirectional": False},
        )


def intersections(d: Data, b: Builder, rng: random.Random) -> None:
    """Two constraints on one entity: a chain whose middle node is the answer (first hop read backwards)."""
    cur_pairs = []
    for continent in d.raw["continents"]:
        for code in d.currency:
            both = d.in_continent(continent) & d.using(code)
            if both and both != d.using(code):
                cur_pairs.append((continent, code, both))
    for continent, code, both in _pick(rng, sorted(cur_pairs), 14):
        name = d.currency[code]
        q = f"Which countries in {continent} use the {name}?"
        if continent in CONTINENT_ADJECTIVES and rng.random() < 0.5:
            q = f"Which {CONTINENT_ADJECTIVES[continent]} countries have the {name} as currency?"
        b.add(
            "intersection",
            "continent_currency",
            q,
            chain(
                hop("Continent", continent, "IsInContinent", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "UsesCurrency", "Currency", name),
            ),
            names=[d.name(i) for i in both],
            label="Country",
            node=1,
        )
    lang_pairs = []
    for region in d.raw["regions"]:
        for code in d.language:
            both = d.in_region(region) & d.speaking(code)
            if both and both != d.speaking(code) and both != d.in_region(region):
                lang_pairs.append((region, code, both))
    for region, code, both in _pick(rng, sorted(lang_pairs), 12):
        name = d.language[code]
        q = f"Which countries in {region} have {name} as an official language?"
        b.add(
            "intersection",
            "region_language",
            q,
            chain(
                hop("Region", region, "IsInRegion", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "SpeaksLanguage", "Language", name),
            ),
            names=[d.name(i) for i in both],
            label="Country",
            node=1,
        )
    nb_pairs = []
    for iso in d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 2):
        for code in d.language:
            both = {n for n in d.neighbours[iso] if code in d.country[n]["languages"]}
            if both and both != d.neighbours[iso]:
                nb_pairs.append((iso, code, both))
    for iso, code, both in _pick(rng, nb_pairs, 8):
        c, name = d.name(iso), d.language[code]
        q = f"Which neighbours of {_the(c)} speak {name}?"
        b.add(
            "intersection",
            "neighbours_language",
            q,
            chain(
                hop("Country", c, "Borders", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "SpeaksLanguage", "Language", name),
            ),
            names=[d.name(i) for i in both],
            label="Country",
            node=1,
        )
    cont_pairs = []
    for iso in d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 2):
        for continent in d.raw["continents"]:
            both = d.neighbours[iso] & d.in_continent(continent)
            if both and both != d.neighbours[iso]:
                cont_pairs.append((iso, continent, both))
    for iso, continent, both in _pick(rng, cont_pairs, 8):
        c = d.name(iso)
        q = f"Which countries in {continent} border {_the(c)}?"
        b.add(
            "intersection",
            "continent_neighbours",
            q,
            chain(
                hop("Continent", continent, "IsInContinent", "Country", ANY, bidirectional=True),
                hop("Country", ANY, "Borders", "Country", c, bidirectional=True),
            ),
            names=[d.name(i) for i in both],
            label="Country",
            node=1,
        )


def _threshold(values: Sequence[float], steps: Sequence[float], rng: random.Random) -> float | None:
    """A round step that splits ``values`` into two non-empty parts and equals none of them."""
    options = [s for s in steps if any(v > s for v in values) and any(v < s for v in values) and s not in values]
    return rng.choice(options) if options else None


def comparisons(d: Data, b: Builder, rng: random.Random) -> None:
    """Property comparisons on a declared numeric field (``subject_where``/``object_where``)."""
    for iso in _pick(rng, d.isos(lambda c: len(d.cities_of[c["iso"]]) >= 3), 14):
        c = d.name(iso)
        pops = {n: d.city[n]["population"] for n in d.cities_of[iso] if d.city[n]["population"] is not None}
        n = _threshold(list(pops.values()), POPULATION_STEPS, rng)
        if n is None:
            continue
        q = f"Which cities in {_the(c)} have more than {human(n)} inhabitants?"
        b.add(
            "comparison",
            "city_population_gt",
            q,
            hop("City", ANY, "IsCityOf", "Country", c, subject_where=where("population", ">", n)),
            names=[x for x, p in pops.items() if p > n],
            label="City",
            node=0,
            extensions=["where"],
        )
    for continent in [c for c in d.raw["continents"] if c != "Antarctica"]:
        for op, word in ((">", "more"), ("<", "fewer")):
            pops = {i: d.country[i]["population"] for i in d.in_continent(continent)}
            n = _threshold(list(pops.values()), POPULATION_STEPS[3:], rng)
            if n is None:
                continue
            q = f"Which countries in {continent} have {word} than {human(n)} inhabitants?"
            names = [d.name(i) for i, p in pops.items() if (p > n if op == ">" else p < n)]
            b.add(
                "comparison",
                "country_population_" + ("gt" if op == ">" else "lt"),
                q,
                hop("Country", ANY, "IsInContinent", "Continent", continent, subject_where=where("population", op, n)),
                names=names,
                label="Country",
                node=0,
                extensions=["where"],
            )
    for region in _pick(rng, d.raw["regions"], 10):
        areas = {i: d.country[i]["area"] for i in d.in_region(region) if d.country[i]["area"] is not None}
        a = _threshold(list(areas.values()), AREA_STEPS, rng)
        if a is None:
            continue
        q = f"Which countries in {region} are larger than {human(a)} square kilometres?"
        b.add(
            "comparison",
            "country_area_gt",
            q,
            hop("Country", ANY, "IsInRegion", "Region", region, subject_where=where("area", ">", a)),
            names=[d.name(i) for i, v in areas.items() if v > a],
            label="Country",
            node=0,
            extensions=["where"],
        )
    for iso in _pick(rng, d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 3), 10):
        c = d.name(iso)
        pops = {n: d.country[n]["population"] for n in d.neighbours[iso]}
        n = _threshold(list(pops.values()), POPULATION_STEPS, rng)
        if n is None:
            continue
        q = f"Which neighbours of {_the(c)} have a population of more than {human(n)}?"
        b.add(
            "comparison",
            "neighbour_population_gt",
            q,
            hop("Country", c, "Borders", "Country", ANY, bidirectional=True, object_where=where("population", ">", n)),
            names=[d.name(x) for x, p in pops.items() if p > n],
            label="Country",
            node=1,
            extensions=["where"],
        )
    for code in _pick(rng, sorted(c for c in d.currency if len(d.using(c)) >= 4), 6):
        name = d.currency[code]
        pops = {i: d.country[i]["population"] for i in d.using(code)}
        n = _threshold(list(pops.values()), POPULATION_STEPS, rng)
        if n is None:
            continue
        q = f"Which countries that use the {name} have fewer than {human(n)} inhabitants?"
        b.add(
            "comparison",
            "currency_population_lt",
            q,
            hop("Country", ANY, "UsesCurrency", "Currency", name, subject_where=where("population", "<", n)),
            names=[d.name(i) for i, p in pops.items() if p < n],
            label="Country",
            node=0,
            extensions=["where"],
        )
    everywhere = {n: c["population"] for n, c in d.city.items() if c["population"] is not None}
    for n in (5_000_000, 10_000_000, 20_000_000):
        q = f"Which cities have more than {human(n)} inhabitants?"
        b.add(
            "comparison",
            "city_population_gt",
            q,
            hop("City", ANY, "IsCityOf", "Country", ANY, subject_where=where("population", ">", n)),
            names=[x for x, p in everywhere.items() if p > n],
            label="City",
            node=0,
            extensions=["where"],
        )


def _unique_top(values: dict[str, float], direction: str) -> str | None:
    if len(values) < 2:
        return None
    ranked = sorted(values.items(), key=lambda kv: kv[1], reverse=direction == "desc")
    return ranked[0][0] if ranked[0][1] != ranked[1][1] else None


def superlatives(d: Data, b: Builder, rng: random.Random) -> None:
    """The entity with the highest or lowest value of a field (``order_by`` + ``limit``)."""
    multi = d.isos(lambda c: len([n for n in d.cities_of[c["iso"]] if d.city[n]["population"] is not None]) >= 2)
    for iso in _pick(rng, multi, 16):
        c = d.name(iso)
        pops = {n: d.city[n]["population"] for n in d.cities_of[iso] if d.city[n]["population"] is not None}
        top = _unique_top(pops, "desc")
        if top is None:
            continue
        q = _t(
            rng,
            (
                "What is the most populous city of {c}?",
                "Which city in {c} has the most inhabitants?",
                "What is the largest city in {c}?",
            ),
            c=_the(c),
        )
        b.add(
            "superlative",
            "city_most_populous",
            q,
            hop("City", ANY, "IsCityOf", "Country", c, order_by=order("subject", "population", "desc"), limit=1),
            names=[top],
            label="City",
            node=0,
            extensions=["order_by"],
        )
    for continent in [c for c in d.raw["continents"] if c != "Antarctica"]:
        members = d.in_continent(continent)
        for fieldname, direction, text in (
            ("population", "desc", "Which country in {p} has the largest population?"),
            ("population", "asc", "Which country in {p} has the fewest inhabitants?"),
            ("area", "desc", "Which is the largest country in {p} by area?"),
            ("area", "asc", "What is the smallest country in {p} by area?"),
        ):
            values = {i: d.country[i][fieldname] for i in members if d.country[i][fieldname] is not None}
            top = _unique_top(values, direction)
            if top is None:
                continue
            b.add(
                "superlative",
                f"country_{fieldname}_{direction}",
                text.format(p=continent),
                hop(
                    "Country",
                    ANY,
                    "IsInContinent",
                    "Continent",
                    continent,
                    order_by=order("subject", fieldname, direction),
                    limit=1,
                ),
                names=[d.name(top)],
                label="Country",
                node=0,
                extensions=["order_by"],
            )
    for iso in _pick(rng, d.isos(lambda c: len(d.neighbours[c["iso"]]) >= 2), 10):
        c = d.name(iso)
        values = {n: d.country[n]["population"] for n in d.neighbours[iso]}
        top = _unique_top(values, "desc")
        if top is None:
            continue
        q = f"Which neighbour of {_the(c)} has the most inhabitants?"
        b.add(
            "superlative",
            "neighbour_most_populous",
            q,
            hop(
                "Country",
                c,
                "Borders",
                "Country",
                ANY,
                bidirectional=True,
                order_by=order("object", "population", "desc"),
                limit=1,
            ),
            names=[d.name(top)],
            label="Country",
            node=1,
            extensions=["order_by"],
        )
    for code in _pick(rng, sorted(c for c in d.currency if len(d.using(c)) >= 3), 8):
        name = d.currency[code]
        values = {i: d.country[i]["population"] for i in d.using(code)}
        top = _unique_top(values, "desc")
        if top is None:
            continue
        q = f"What is the most populous country that uses the {name}?"
        b.add(
            "superlative",
            "currency_most_populous",
            q,
            hop(
                "Country",
                ANY,
                "UsesCurrency",
                "Currency",
                name,
                order_by=order("subject", "population", "desc"),
                limit=1,
            ),
            names=[d.name(top)],
            label="Country",
            node=0,
            extensions=["order_by"],
        )
    for region in _pick(rng, d.raw["regions"], 8):
        values = {i: d.country[i]["area"] for i in d.in_region(region) if d.country[i]["area"] is not None}
        top = _unique_top(values, "desc")
        if top is None:
            continue
        q = f"Which is the largest country by area in {region}?"
        b.add(
            "superlative",
            "region_area_desc",
            q,
            hop("Country", ANY, "IsInRegion", "Region", region, order_by=order("subject", "area", "desc"), limit=1),
            names=[d.name(top)],
            label="Country",
            node=0,
            extensions=["order_by"],
        )


FAMILIES = (
    lookups,
    inverses,
    variants,
    negations,
    negation_chains,
    counts,
    two_hops,
    symmetrics,
    intersections,
    comparisons,
    superlatives,
)


def build(data: Data | None = None, seed: int = SEED) -> list[dict[str, Any]]:
    """All questions, in family order; the same list for the same data and seed."""
    data = Data.load() if data is None else data
    b = Builder()
    for family in FAMILIES:
        # one generator per family, so a change in one family leaves the others' picks alone
        family(data, b, random.Random(f"{seed}:{family.__name__}"))
    return b.rows


def main(argv: list[str] | None = None) -> int:
    """Write the questions (JSON lines) and print the count per type."""
    args = sys.argv[1:] if argv is None else argv
    output = Path(args[0]) if args else OUTPUT
    rows = build()
    output.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    per_type: dict[str, int] = defaultdict(int)
    for r in rows:
        per_type[r["type"]] += 1
    print(f"wrote {output}: {len(rows)} questions; " + ", ".join(f"{t} {per_type[t]}" for t in TYPES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
