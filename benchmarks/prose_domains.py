"""Two made-up domains of ordinary prose for the extraction benchmark (``bench_prose_extraction``).

An org chart (``Person``, ``Team``; ``Leads``, ``MemberOf``, ``ReportsTo``) and a software project
(``Package``, ``Developer``; ``DependsOn``, ``Maintains``, ``Replaces``). The relations' docstrings
say how prose writes them, the inverse reading included ("X manages Y" is ``Y ReportsTo X``): they
are what a user would write, and were written with the labelled passages, before any measurement.
The passages are in ``benchmarks/extraction_data/`` (``<domain>_train.jsonl``: labelled passages a
user would write; ``<domain>_heldout.jsonl``: never tuned on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import kag

DATA = Path(__file__).parent / "extraction_data"


class Person(kag.Entity):
    """A person who works at the company."""

    label: Literal["Person"] = "Person"
    name: str


class Team(kag.Entity):
    """A team of the company (its name without the word "team")."""

    label: Literal["Team"] = "Team"
    name: str


class Leads(kag.Relation):
    """The person leads (heads, runs, manages) the team."""

    subj: Person
    label: Literal["Leads"] = "Leads"
    obj: Team


class MemberOf(kag.Relation):
    """The person works on (is a member of, is an engineer on) the team."""

    subj: Person
    label: Literal["MemberOf"] = "MemberOf"
    obj: Team


class ReportsTo(kag.Relation):
    """The person reports to the other person, their manager ("X manages Y" is Y ReportsTo X)."""

    subj: Person
    label: Literal["ReportsTo"] = "ReportsTo"
    obj: Person


class Package(kag.Entity):
    """A software package, library or tool."""

    label: Literal["Package"] = "Package"
    name: str


class Developer(kag.Entity):
    """A person who works on software packages."""

    label: Literal["Person"] = "Person"
    name: str


class DependsOn(kag.Relation):
    """The package depends on (uses, needs, requires, is built on) the other package
    ("X is used by Y" is Y DependsOn X)."""

    subj: Package
    label: Literal["DependsOn"] = "DependsOn"
    obj: Package


class Maintains(kag.Relation):
    """The person maintains (looks after) the package ("X is maintained by Y" is Y Maintains X)."""

    subj: Developer
    label: Literal["Maintains"] = "Maintains"
    obj: Package


class Replaces(kag.Relation):
    """The package replaces (supersedes, takes the place of) the older package
    ("X was replaced by Y" is Y Replaces X)."""

    subj: Package
    label: Literal["Replaces"] = "Replaces"
    obj: Package


DOMAINS: dict[str, tuple[list[type[kag.Entity]], list[type[kag.Relation]]]] = {
    "org": ([Person, Team], [Leads, MemberOf, ReportsTo]),
    "software": ([Package, Developer], [DependsOn, Maintains, Replaces]),
}


def knowledge_base(domain: str) -> kag.KnowledgeBase:
    """An empty in-memory knowledge base of ``domain``'s models."""
    entities, relations = DOMAINS[domain]
    return kag.KnowledgeBase("memory://", entity_models=entities, relation_models=relations)


def labelled(domain: str, split: str) -> list[tuple[str, dict[str, Any]]]:
    """``(passage, extraction)`` pairs of ``domain`` (``org``, ``software``) and ``split`` (``train``, ``heldout``)."""
    rows = [json.loads(line) for line in (DATA / f"{domain}_{split}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [(row["x"]["text"], row["y"]) for row in rows if row]


ORG = [Person, Team, Leads, MemberOf, ReportsTo]  # ``--schema benchmarks.prose_domains:ORG``
SOFTWARE = [Package, Developer, DependsOn, Maintains, Replaces]  # ``--schema benchmarks.prose_domains:SOFTWARE``
