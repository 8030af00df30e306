"""The seed example of the README: countries, cities and two relations."""

from __future__ import annotations

from typing import Literal

from kag.datamodels.base import Entity, Field, Relation


class Country(Entity):
    """A sovereign country."""

    label: Literal["Country"] = "Country"
    name: str = Field(description="The country's name")


class City(Entity):
    """A city."""

    label: Literal["City"] = "City"
    name: str = Field(description="The city's name")
    population: int | None = Field(default=None, description="Number of inhabitants")


class IsCapitalOf(Relation):
    """The city is the capital of the country."""

    subj: City
    label: Literal["IsCapitalOf"] = "IsCapitalOf"
    obj: Country


class IsCityOf(Relation):
    """The city lies in the country."""

    subj: City
    label: Literal["IsCityOf"] = "IsCityOf"
    obj: Country


ENTITY_MODELS: list[type[Entity]] = [Country, City]
RELATION_MODELS: list[type[Relation]] = [IsCapitalOf, IsCityOf]

CAPITALS = {
    "France": ("Paris", 2_103_000),
    "Germany": ("Berlin", 3_645_000),
    "Spain": ("Madrid", 3_266_000),
    "Italy": ("Rome", 2_873_000),
    "Japan": ("Tokyo", 13_960_000),
}
OTHER_CITIES = {
    "France": ["Lyon", "Marseille"],
    "Germany": ["Hamburg", "Munich"],
    "Spain": ["Barcelona"],
    "Italy": ["Milan"],
    "Japan": ["Osaka"],
}


def seed_facts() -> list[Relation]:
    """The small seed graph used by tests and docs."""
    facts: list[Relation] = []
    for country, (capital, population) in CAPITALS.items():
        facts.append(IsCapitalOf(subj=City(name=capital, population=population), obj=Country(name=country)))
        facts.append(IsCityOf(subj=City(name=capital), obj=Country(name=country)))
        for city in OTHER_CITIES[country]:
            facts.append(IsCityOf(subj=City(name=city), obj=Country(name=country)))
    return facts
