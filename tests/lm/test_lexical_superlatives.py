"""Superlatives said in time: on a field that holds a year, "oldest" is its smallest value and "most
recently" its largest; the answer to "Which prize is the oldest?" is the prize, not what won it.

The graph is a small invented publishing house (authors, publishers, prizes), not geography.
"""

from __future__ import annotations

from typing import Literal

import pytest

import kag
from kag.lm.lexical.text import holds_year, superlative_descending


class Book(kag.Entity):
    """A published book."""

    label: Literal["Book"] = "Book"
    name: str
    pages: int = kag.Field(default=0, description="Number of pages")


class Author(kag.Entity):
    """A person who writes books."""

    label: Literal["Author"] = "Author"
    name: str
    born: int = 0


class Publisher(kag.Entity):
    """A publishing house."""

    label: Literal["Publisher"] = "Publisher"
    name: str
    founded: int = kag.Field(default=0, description="Year founded")


class Prize(kag.Entity):
    """A literary prize."""

    label: Literal["Prize"] = "Prize"
    name: str
    established: int = kag.Field(default=0, description="Year first awarded")


class WrittenBy(kag.Relation):
    """The book was written by the author."""

    label: Literal["WrittenBy"] = "WrittenBy"
    subj: Book
    obj: Author


class PublishedBy(kag.Relation):
    """The book was published by the publisher."""

    label: Literal["PublishedBy"] = "PublishedBy"
    subj: Book
    obj: Publisher


class Won(kag.Relation):
    """The book won the prize."""

    label: Literal["Won"] = "Won"
    subj: Book
    obj: Prize


def test_year_fields_and_the_direction_of_time_words() -> None:
    assert holds_year(["born"]) and holds_year(["founded", "year"]) and holds_year(["established", "year"])
    assert not holds_year(["pages", "number"])
    # on a year: oldest = smallest year, youngest / newest / most recently = largest year
    assert superlative_descending("oldest", in_years=True) is False
    assert superlative_descending("earliest", in_years=True) is False
    assert superlative_descending("youngest", in_years=True) is True
    assert superlative_descending("most recently", in_years=True) is True
    assert superlative_descending("newest", in_years=True) is True
    # on anything else the word keeps its plain sense (an age: oldest = largest)
    assert superlative_descending("oldest", in_years=False) is True
    assert superlative_descending("youngest", in_years=False) is False
    assert superlative_descending("longest", in_years=True) is True


@pytest.fixture
async def house() -> kag.KnowledgeBase:
    kb = kag.KnowledgeBase(
        "memory://",
        entity_models=[Book, Author, Publisher, Prize],
        relation_models=[WrittenBy, PublishedBy, Won],
    )
    tide = Book(name="Low Tide Letters", pages=320)
    orchard = Book(name="The Quiet Orchard", pages=180)
    await kb.upsert(
        [
            WrittenBy(subj=tide, obj=Author(name="Ines Valdes", born=1951)),
            WrittenBy(subj=orchard, obj=Author(name="Tobias Rehn", born=1984)),
            PublishedBy(subj=tide, obj=Publisher(name="Harrow Press", founded=1921)),
            PublishedBy(subj=orchard, obj=Publisher(name="Lantern Books", founded=2009)),
            Won(subj=tide, obj=Prize(name="Copper Quill", established=1968)),
            Won(subj=orchard, obj=Prize(name="First Light Award", established=2015)),
        ]
    )
    return kb


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who is the oldest author?", "Ines Valdes"),
        ("Who is the youngest author?", "Tobias Rehn"),
        ("Which publisher was founded most recently?", "Lantern Books"),
        ("Which is the oldest publisher?", "Harrow Press"),
        ("Which prize is the oldest?", "Copper Quill"),
        ("Which book is the longest?", "Low Tide Letters"),
    ],
)
async def test_superlatives_in_time_answer_the_asked_entity(
    house: kag.KnowledgeBase, question: str, expected: str
) -> None:
    lm = kag.LexicalLM(knowledge_base=house)
    retriever = kag.KnowledgeRetriever(house, lm, max_hops=2)

    class Q(kag.DataModel):
        query: str

    class A(kag.DataModel):
        entities: list[str]

    found = await retriever(Q(query=question))
    assert found.search["hops"][0]["limit"] == 1, found.search
    answer = await kag.Generator(data_model=A, language_model=lm)(found)
    assert answer.entities == [expected], (found.search, answer)
