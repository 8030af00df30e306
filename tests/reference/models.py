"""The data models of the reference KnowledgeRetriever document's example program, as it writes them."""

from __future__ import annotations

from typing import Literal

import kag


class Query(kag.DataModel):
    query: str = kag.Field(
        description="The user query",
    )


class Answer(kag.DataModel):
    query: str = kag.Field(
        description="The answer to the user query",
    )


class Country(kag.Entity):
    label: Literal["Country"]
    name: str = kag.Field(
        description="The country's name",
    )


class City(kag.Entity):
    label: Literal["City"]
    name: str = kag.Field(
        description="The city's name",
    )


class IsCapitalOf(kag.Relation):
    subj: City
    label: Literal["IsCapitalOf"]
    obj: Country


class IsCityOf(kag.Relation):
    subj: City
    label: Literal["IsCityOf"]
    obj: Country
