"""Example models and datasets used by the demo, the notebooks and the tests."""

from kag.examples.world import (
    City,
    Continent,
    Country,
    IsCapitalOf,
    IsCityOf,
    IsInContinent,
    load_world,
    world_data,
    world_knowledge_base,
)

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
]
