"""EntityMatcher: whole-word, normalized, leftmost-longest matching of entity names."""

from __future__ import annotations

from typing import Literal

import kag
from kag.datamodels.schema import GraphSchema
from kag.knowledge.mentions import EntityMatcher, entity_names, names_of


class Place(kag.Entity):
    label: Literal["Place"] = "Place"
    name: str
    aliases: list[str] = []


def matcher(*names: str) -> EntityMatcher:
    return EntityMatcher((f"e_{i}", "Place", [n]) for i, n in enumerate(names))


def test_whole_words_only() -> None:
    m = matcher("Paris", "Rome")
    assert m.entity_ids("Paris is nice; Romeo is not Rome.") == ["e_0", "e_1"]
    assert m.entity_ids("Parisian food, Rome-based") == ["e_1"]
    assert m.entity_ids("nothing here") == []


def test_normalization_casefold_and_accents() -> None:
    m = matcher("São Paulo", "Zürich")
    assert m.entity_ids("I flew from SAO  paulo to zurich.") == ["e_0", "e_1"]


def test_leftmost_longest_non_overlapping() -> None:
    m = matcher("York", "New York", "New York City")
    assert m.entity_ids("New York City is big") == ["e_2"]
    assert m.entity_ids("New York and York") == ["e_1", "e_0"]


def test_names_with_punctuation_must_occur_verbatim() -> None:
    m = matcher("C++", "U.S.")
    assert m.entity_ids("I write C++ in the U.S. daily") == ["e_0", "e_1"]
    assert m.entity_ids("the letter c and us") == []


def test_short_names_are_ignored_and_duplicates_once() -> None:
    m = EntityMatcher([("e_1", "Place", ["A", "Oslo", "oslo"])])
    assert len(m) == 1
    assert m.entity_ids("a trip to Oslo, OSLO again") == ["e_1"]


def test_same_name_two_labels_both_match() -> None:
    m = EntityMatcher([("e_1", "City", ["Paris"]), ("e_2", "Person", ["Paris"])])
    refs = m.find("Paris")
    assert [(r.id, r.label, r.name, r.text) for r in refs] == [
        ("e_1", "City", "paris", "Paris"),
        ("e_2", "Person", "paris", "Paris"),
    ]


def test_aliases_and_entity_names() -> None:
    place = Place(name="New York City", aliases=["NYC", "Big Apple"])
    assert names_of(place) == ["New York City", "NYC", "Big Apple"]
    schema = GraphSchema([Place], [])
    props = {"label": "Place", "name": "New York City", "aliases": ["NYC"]}
    assert entity_names(schema, "Place", props) == ["New York City", "NYC"]
    assert entity_names(schema, "Unknown", {"name": "Foo"}) == ["Foo"]
    m = EntityMatcher([(place.id, "Place", names_of(place))])
    (ref,) = m.find("the big apple at night")
    assert ref.id == place.id and ref.text == "New York City" and ref.name == "big apple"
