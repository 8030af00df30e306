"""A large generated schema (40 entity labels, 80 relations by default), for prompt-size budgets.

``large_schema(n_labels, n_relations, seed)`` returns ``(entity models, relation models)`` built
with ``pydantic.create_model``: each label has a ``name`` and one to three properties (numbers,
years, short strings) with descriptions and a docstring; each relation joins two labels (a few of
them a label to itself) and has a docstring. The same arguments give the same models.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import pydantic

from kag.datamodels.base import Entity, Field, Relation

__all__ = ["large_schema"]

_create: Any = pydantic.create_model  # the models are built at run time

_NOUNS = [
    "Account", "Asset", "Batch", "Budget", "Campaign", "Carrier", "Clinic", "Contract", "Customer",
    "Device", "Donor", "Engine", "Event", "Facility", "Farm", "Grant", "Invoice", "Journal", "Kiosk",
    "Ledger", "Lesson", "Machine", "Meeting", "Mission", "Order", "Parcel", "Patent", "Permit",
    "Pipeline", "Policy", "Product", "Project", "Recipe", "Region", "Report", "Route", "Sample",
    "Sensor", "Shipment", "Station", "Store", "Supplier", "Survey", "Ticket", "Tool", "Trial",
    "Vehicle", "Vendor", "Venue", "Warehouse",
]  # fmt: skip
_QUALIFIERS = ["", "Field", "Regional", "Legacy", "Partner", "Mobile", "Central", "Remote"]
_VERBS = [
    ("Owns", "owns"), ("Uses", "uses"), ("Supplies", "supplies"), ("Audits", "audits"),
    ("Funds", "funds"), ("Ships", "ships"), ("Hosts", "hosts"), ("Replaces", "replaces"),
    ("Monitors", "monitors"), ("Approves", "approves"), ("Schedules", "schedules"),
    ("Contains", "contains"), ("Serves", "serves"), ("Tracks", "tracks"), ("Maintains", "maintains"),
    ("Requests", "requests"), ("Reviews", "reviews"), ("Stores", "stores"), ("Cites", "cites"),
    ("Insures", "insures"),
]  # fmt: skip
_PROPERTIES: list[tuple[str, Any, str]] = [
    ("size", int, "How big it is, in units"),
    ("created_year", int, "Year it was created"),
    ("cost", float, "Cost in euros"),
    ("code", str, "Internal reference code"),
    ("status", str, "Current status, e.g. active or closed"),
    ("rating", float, "Average rating from 1 to 5"),
    ("capacity", int, "Maximum capacity"),
    ("owner_email", str, "Contact e-mail of the owner"),
]


def _labels(n: int, rng: random.Random) -> list[str]:
    names = [q + noun for q in _QUALIFIERS for noun in _NOUNS]
    plain = [n for n in names if n in _NOUNS]
    rest = [n for n in names if n not in _NOUNS]
    rng.shuffle(plain)
    rng.shuffle(rest)
    pool = plain + rest  # plain nouns first, qualified ones when more labels are asked for
    if n > len(pool):
        raise ValueError(f"large_schema: at most {len(pool)} labels")
    return pool[:n]


def large_schema(
    n_labels: int = 40, n_relations: int = 80, seed: int = 0
) -> tuple[list[type[Entity]], list[type[Relation]]]:
    """``n_labels`` entity models and ``n_relations`` relation models, generated from ``seed``."""
    if n_labels < 1 or n_relations < 0:
        raise ValueError("large_schema: n_labels >= 1 and n_relations >= 0")
    rng = random.Random(seed)
    entities: list[type[Entity]] = []
    for label in _labels(n_labels, rng):
        fields: dict[str, Any] = {
            "label": (Literal[label], label),
            "name": (str, Field(description=f"The {label.lower()}'s name")),
        }
        for prop, kind, description in rng.sample(_PROPERTIES, rng.randint(1, 3)):
            fields[prop] = (kind | None, Field(default=None, description=description))
        model = _create(label, __base__=Entity, __doc__=f"A {_words(label)} in the records.", **fields)
        entities.append(model)
    relations: list[type[Relation]] = []
    seen: set[str] = set()
    while len(relations) < n_relations:
        subj, obj = rng.choice(entities), rng.choice(entities)
        verb, word = rng.choice(_VERBS)
        subj_label, obj_label = subj.model_fields["label"].default, obj.model_fields["label"].default
        label = f"{verb}{obj_label}"
        if label in seen:
            label = f"{subj_label}{verb}{obj_label}"
        if label in seen or label in {e.model_fields["label"].default for e in entities}:
            if len(seen) > 50 * max(1, n_relations):
                raise ValueError("large_schema: could not name that many distinct relations")
            seen.add(label)
            continue
        seen.add(label)
        doc = f"The {_words(subj_label)} {word} the {_words(obj_label)}."
        relation = _create(
            label,
            __base__=Relation,
            __doc__=doc,
            label=(Literal[label], label),
            subj=(subj, ...),
            obj=(obj, ...),
        )
        relations.append(relation)
    return entities, relations


def _words(label: str) -> str:
    """``FieldSensor`` -> ``field sensor``."""
    out = "".join(" " + c.lower() if c.isupper() else c for c in label)
    return out.strip()
