"""A small org-chart schema for the prose extraction tests (``--schema tests.extraction.org_models``)."""

from __future__ import annotations

from typing import Literal

import kag


class Person(kag.Entity):
    """A person who works at the company."""

    label: Literal["Person"] = "Person"
    name: str


class Team(kag.Entity):
    """A team of the company."""

    label: Literal["Team"] = "Team"
    name: str


class Leads(kag.Relation):
    """The person leads (heads, runs, manages) the team."""

    subj: Person
    label: Literal["Leads"] = "Leads"
    obj: Team


class ReportsTo(kag.Relation):
    """The person reports to the other person, their manager ("X manages Y" is Y ReportsTo X)."""

    subj: Person
    label: Literal["ReportsTo"] = "ReportsTo"
    obj: Person


ENTITY_MODELS = [Person, Team]
RELATION_MODELS = [Leads, ReportsTo]


class Passage(kag.DataModel):
    """A passage of prose: the input of an extraction program."""

    text: str
