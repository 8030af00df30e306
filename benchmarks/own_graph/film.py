"""Graph T: a film archive (films, directors, actors, studios, genres, awards, countries). TUNING set.

Unlike graphs A and B, this one may be tuned on (see README.md). Modelled the way a small film
archive might catalogue its holdings. ``ActedIn`` is stored from the actor to the film and asked both
ways ("What has X been in?", "Who stars in Y?"); ``SequelOf`` is stored from the sequel to the film it
follows. All titles and people are made up, so no model knows the answers beforehand.
"""

from __future__ import annotations

import random
from typing import Literal

from benchmarks.own_graph.graph import OwnGraph, Template
from kag.datamodels.base import Entity, Field, Relation


class Film(Entity):
    """A feature film held in the archive."""

    label: Literal["Film"] = "Film"
    name: str = Field(description="Release title")
    year: int | None = Field(default=None, description="Year of release")
    runtime: int | None = Field(default=None, description="Running time in minutes")
    budget: int | None = Field(default=None, description="Production budget, millions of US dollars")


class Director(Entity):
    """A film director."""

    label: Literal["Director"] = "Director"
    name: str
    born: int | None = Field(default=None, description="Year of birth")


class Actor(Entity):
    """Someone credited in a cast."""

    label: Literal["Actor"] = "Actor"
    name: str
    born: int | None = None


class Studio(Entity):
    """Production company."""

    label: Literal["Studio"] = "Studio"
    name: str
    founded: int | None = Field(default=None, description="Year founded")


class Genre(Entity):
    """Film genre."""

    label: Literal["Genre"] = "Genre"
    name: str


class Award(Entity):
    """A film prize."""

    label: Literal["Award"] = "Award"
    name: str
    established: int | None = Field(default=None, description="Year first awarded")


class Country(Entity):
    label: Literal["Country"] = "Country"
    name: str


class DirectedBy(Relation):
    """Film was directed by the person."""

    label: Literal["DirectedBy"] = "DirectedBy"
    subj: Film
    obj: Director


class ActedIn(Relation):
    """Actor appears in the film."""

    label: Literal["ActedIn"] = "ActedIn"
    subj: Actor
    obj: Film


class ProducedBy(Relation):
    """Film was produced by the studio."""

    label: Literal["ProducedBy"] = "ProducedBy"
    subj: Film
    obj: Studio


class InGenre(Relation):
    label: Literal["InGenre"] = "InGenre"
    subj: Film
    obj: Genre


class Won(Relation):
    """Film won the award."""

    label: Literal["Won"] = "Won"
    subj: Film
    obj: Award


class SequelOf(Relation):
    """Film is the sequel to the other film."""

    label: Literal["SequelOf"] = "SequelOf"
    subj: Film
    obj: Film


class BasedIn(Relation):
    """Studio headquarters."""

    label: Literal["BasedIn"] = "BasedIn"
    subj: Studio
    obj: Country


class BornIn(Relation):
    """Director's country of birth."""

    label: Literal["BornIn"] = "BornIn"
    subj: Director
    obj: Country


ENTITIES: list[type[Entity]] = [Film, Director, Actor, Studio, Genre, Award, Country]
RELATIONS: list[type[Relation]] = [DirectedBy, ActedIn, ProducedBy, InGenre, Won, SequelOf, BasedIn, BornIn]

COUNTRIES = ["USA", "UK", "France", "South Korea", "Canada", "Italy"]
DIRECTORS = {
    "Mara Delacroix": (1961, "France"),
    "Theo Vance": (1970, "USA"),
    "Hana Seo": (1978, "South Korea"),
    "Rupert Ashdown": (1952, "UK"),
    "Lucia Ferrante": (1983, "Italy"),
    "Desmond Okoro": (1967, "UK"),
    "Nadia Brennan": (1974, "Canada"),
}
STUDIOS = {
    "Meridian Pictures": (1924, "USA"),
    "Blackwater Films": (1979, "UK"),
    "Lumen Studio": (1997, "France"),
    "Red Pine Entertainment": (2003, "Canada"),
    "Hanbit Cinema": (1994, "South Korea"),
}
GENRES = ["Drama", "Comedy", "Science Fiction", "Thriller", "Horror", "Romance", "Action"]
AWARDS = {
    "Golden Lantern": 1952,
    "Silver Heron": 1968,
    "Critics' Circle Award": 1975,
    "Audience Choice Award": 1990,
    "Northern Lights Jury Prize": 2001,
}
FILMS = {  # title: (director, studio, year, genres)
    "The Glass Orchard": ("Mara Delacroix", "Lumen Studio", 1998, ["Drama"]),
    "Winter Cartography": ("Mara Delacroix", "Lumen Studio", 2003, ["Drama", "Romance"]),
    "Salt and Ember": ("Mara Delacroix", "Meridian Pictures", 2009, ["Thriller", "Drama"]),
    "Nocturne for Two": ("Mara Delacroix", "Lumen Studio", 2016, ["Romance"]),
    "Iron Tide": ("Theo Vance", "Meridian Pictures", 1996, ["Action", "Science Fiction"]),
    "Iron Tide II": ("Theo Vance", "Meridian Pictures", 2000, ["Action", "Science Fiction"]),
    "Iron Tide: Reckoning": ("Theo Vance", "Meridian Pictures", 2007, ["Action", "Science Fiction"]),
    "Small Hours": ("Theo Vance", "Red Pine Entertainment", 2012, ["Thriller"]),
    "Paper Lanterns": ("Hana Seo", "Hanbit Cinema", 2008, ["Drama", "Romance"]),
    "The Tenth Floor": ("Hana Seo", "Hanbit Cinema", 2013, ["Horror", "Thriller"]),
    "The Tenth Floor: Descent": ("Hana Seo", "Hanbit Cinema", 2017, ["Horror"]),
    "Moon over Mapo": ("Hana Seo", "Hanbit Cinema", 2021, ["Comedy", "Romance"]),
    "A Grey Afternoon": ("Rupert Ashdown", "Blackwater Films", 1985, ["Drama"]),
    "Kingsmere": ("Rupert Ashdown", "Blackwater Films", 1991, ["Drama", "Thriller"]),
    "The Lighthouse Keeper's Daughter": ("Rupert Ashdown", "Blackwater Films", 1999, ["Romance", "Drama"]),
    "Vespa Summer": ("Lucia Ferrante", "Lumen Studio", 2015, ["Comedy"]),
    "Lemon Grove": ("Lucia Ferrante", "Meridian Pictures", 2019, ["Comedy", "Drama"]),
    "Lemon Grove 2": ("Lucia Ferrante", "Meridian Pictures", 2023, ["Comedy"]),
    "Brass Knuckle Waltz": ("Desmond Okoro", "Blackwater Films", 2004, ["Action", "Comedy"]),
    "The Long Hallway": ("Desmond Okoro", "Blackwater Films", 2010, ["Horror"]),
    "Signal Lost": ("Desmond Okoro", "Red Pine Entertainment", 2018, ["Science Fiction", "Thriller"]),
    "Northbound": ("Nadia Brennan", "Red Pine Entertainment", 2006, ["Drama"]),
    "Timber": ("Nadia Brennan", "Red Pine Entertainment", 2014, ["Drama", "Action"]),
    "Frostbite Diaries": ("Nadia Brennan", "Red Pine Entertainment", 2020, ["Comedy", "Horror"]),
}
SEQUELS = {
    "Iron Tide II": "Iron Tide",
    "Iron Tide: Reckoning": "Iron Tide II",
    "The Tenth Floor: Descent": "The Tenth Floor",
    "Lemon Grove 2": "Lemon Grove",
}
ACTORS = [
    "Ines Carvalho",
    "Jonah Whitlock",
    "Priya Raman",
    "Marco Bellandi",
    "Soo-ah Lim",
    "Gideon Marsh",
    "Clementine Dufour",
    "Rafael Ortiz",
    "Tomasz Wierzba",
    "Elsie Harrow",
    "Kwame Asante",
    "Dae-jung Park",
    "Beatrix Lowe",
    "Callum Reid",
]

ALIASES = {
    "The Glass Orchard": ["Le Verger de verre"],
    "Lemon Grove": ["Il Limoneto"],
    "The Tenth Floor": ["Project Elevator"],
    "Iron Tide II": ["Iron Tide 2"],
    "Iron Tide: Reckoning": ["Iron Tide 3"],
    "Theo Vance": ["Theodore Vance"],
    "Mara Delacroix": ["Madame D"],
    "Jonah Whitlock": ["Joe Whitlock"],
    "Beatrix Lowe": ["Trixie Lowe"],
    "Meridian Pictures": ["Meridian-Hale"],
    "Blackwater Films": ["BWF"],
    "Science Fiction": ["sci-fi", "SF"],
    "USA": ["the United States", "America"],
    "UK": ["the United Kingdom", "Britain"],
    "South Korea": ["Korea"],
    "Golden Lantern": ["the Lantern"],
    "Critics' Circle Award": ["the CCA"],
}


def graph(seed: int = 0) -> OwnGraph:
    """The archive: 24 films, 7 directors, 14 actors, 5 studios, 7 genres, 5 awards, 6 countries."""
    rng = random.Random(seed)
    entities: dict[str, dict[str, dict[str, object]]] = {
        "Film": {},
        "Director": {d: {"born": b} for d, (b, _) in DIRECTORS.items()},
        "Actor": {a: {"born": rng.randint(1948, 1986)} for a in ACTORS},
        "Studio": {s: {"founded": f} for s, (f, _) in STUDIOS.items()},
        "Genre": {g: {} for g in GENRES},
        "Award": {a: {"established": y} for a, y in AWARDS.items()},
        "Country": {c: {} for c in COUNTRIES},
    }
    edges: list[tuple[str, str, str]] = []
    edges += [("BornIn", d, c) for d, (_, c) in DIRECTORS.items()]
    edges += [("BasedIn", s, c) for s, (_, c) in STUDIOS.items()]
    runtimes = rng.sample(range(82, 171), len(FILMS))
    budgets = rng.sample(range(2, 190), len(FILMS))
    for (film, (director, studio, year, genres)), runtime, budget in zip(FILMS.items(), runtimes, budgets, strict=True):
        entities["Film"][film] = {"year": year, "runtime": runtime, "budget": budget}
        edges.append(("DirectedBy", film, director))
        edges.append(("ProducedBy", film, studio))
        edges += [("InGenre", film, g) for g in genres]
        edges += [("ActedIn", a, film) for a in sorted(rng.sample(ACTORS, rng.choice((2, 3, 3, 4))))]
        edges += [("Won", film, a) for a, y in AWARDS.items() if y < year and rng.random() < 0.22]
    edges += [("SequelOf", sequel, first) for sequel, first in SEQUELS.items()]
    return OwnGraph(
        "film",
        {m.model_fields["label"].default: m for m in ENTITIES},
        {m.model_fields["label"].default: m for m in RELATIONS},
        entities,
        edges,
        ALIASES,
    )


def templates(g: OwnGraph) -> dict[str, list[Template]]:
    """Hand-written phrasings of the 8 kinds, each with its gold answer computed from ``g``."""

    def num(name: str, key: str) -> int:
        value = g.prop(name, key)
        assert isinstance(value, int)
        return value

    def unique_max(names: list[str], key: str, low: bool = False) -> list[str] | None:
        values = sorted((num(n, key) for n in names), reverse=not low)
        if len(values) < 2 or values[0] == values[1]:
            return None
        return [n for n in names if num(n, key) == values[0]]

    def minus(a: list[str], b: list[str]) -> list[str] | None:
        left = [x for x in a if x not in b]
        return left if left and len(left) < len(a) else None

    def both(a: list[str], b: list[str]) -> list[str] | None:
        common = [x for x in a if x in b]
        return common if common and (len(common) < len(a) or len(common) < len(b)) else None

    def name(alias: str) -> str:
        return next(n for n, others in g.aliases.items() if alias in others)

    films = g.names("Film")
    return {
        "lookup": [
            Template("Who directed {a}?", ("Film",), lambda a: g.out("DirectedBy", a)),
            Template("Which studio made {a}?", ("Film",), lambda a: g.out("ProducedBy", a)),
            Template("what genre is {a}", ("Film",), lambda a: g.out("InGenre", a)),
            Template("Which awards did {a} win?", ("Film",), lambda a: g.out("Won", a)),
            Template("{a} is a sequel to which film?", ("Film",), lambda a: g.out("SequelOf", a)),
            Template("What films has {a} acted in?", ("Actor",), lambda a: g.out("ActedIn", a)),
            Template("Where is {a} headquartered?", ("Studio",), lambda a: g.out("BasedIn", a)),
        ],
        "inverse": [
            Template("Who is in the cast of {a}?", ("Film",), lambda a: g.into("ActedIn", a)),
            Template("Which films did {a} direct?", ("Director",), lambda a: g.into("DirectedBy", a)),
            Template("What has {a} produced?", ("Studio",), lambda a: g.into("ProducedBy", a)),
            Template("Which film followed {a} as its sequel?", ("Film",), lambda a: g.into("SequelOf", a)),
            Template("Which films have won the {a}?", ("Award",), lambda a: g.into("Won", a)),
            Template("Which directors were born in {a}?", ("Country",), lambda a: g.into("BornIn", a)),
            Template("Name the studios based in {a}.", ("Country",), lambda a: g.into("BasedIn", a)),
        ],
        "count": [
            Template("How many films has {a} directed?", ("Director",), lambda a: len(g.into("DirectedBy", a))),
            Template("How many films has {a} appeared in?", ("Actor",), lambda a: len(g.out("ActedIn", a))),
            Template("How many actors are credited in {a}?", ("Film",), lambda a: len(g.into("ActedIn", a))),
            Template("how many films did {a} produce", ("Studio",), lambda a: len(g.into("ProducedBy", a))),
            Template("How many awards has {a} won?", ("Film",), lambda a: len(g.out("Won", a))),
            Template("How many films in the archive are {a}?", ("Genre",), lambda a: len(g.into("InGenre", a))),
            Template("Number of films that won the {a}?", ("Award",), lambda a: len(g.into("Won", a))),
        ],
        "conjunction": [
            Template(
                "Which films did {a} make with {b}?",
                ("Director", "Studio"),
                lambda a, b: both(g.into("DirectedBy", a), g.into("ProducedBy", b)),
            ),
            Template(
                "Which films feature both {a} and {b}?",
                ("Actor", "Actor"),
                lambda a, b: both(g.out("ActedIn", a), g.out("ActedIn", b)),
            ),
            Template(
                "Which {a} films were produced by {b}?",
                ("Genre", "Studio"),
                lambda a, b: both(g.into("InGenre", a), g.into("ProducedBy", b)),
            ),
            Template(
                "Which films starring {a} won the {b}?",
                ("Actor", "Award"),
                lambda a, b: both(g.out("ActedIn", a), g.into("Won", b)),
            ),
            Template(
                "{a} films with {b} in the cast?",
                ("Genre", "Actor"),
                lambda a, b: both(g.into("InGenre", a), g.out("ActedIn", b)),
            ),
            Template(
                "In which of {a}'s films did {b} act?",
                ("Director", "Actor"),
                lambda a, b: both(g.into("DirectedBy", a), g.out("ActedIn", b)),
            ),
            Template(
                "Which films are {a} as well as {b}?",
                ("Genre", "Genre"),
                lambda a, b: both(g.into("InGenre", a), g.into("InGenre", b)),
            ),
        ],
        "negation": [
            Template(
                "Which films produced by {a} were not directed by {b}?",
                ("Studio", "Director"),
                lambda a, b: minus(g.into("ProducedBy", a), g.into("DirectedBy", b)),
            ),
            Template(
                "Which {a} films don't have {b} in them?",
                ("Genre", "Actor"),
                lambda a, b: minus(g.into("InGenre", a), g.out("ActedIn", b)),
            ),
            Template(
                "Which films has {a} acted in for directors other than {b}?",
                ("Actor", "Director"),
                lambda a, b: minus(g.out("ActedIn", a), g.into("DirectedBy", b)),
            ),
            Template(
                "Apart from those made by {b}, which {a} films are in the archive?",
                ("Genre", "Studio"),
                lambda a, b: minus(g.into("InGenre", a), g.into("ProducedBy", b)),
            ),
            Template(
                "Which of {a}'s films were made outside {b}?",
                ("Director", "Studio"),
                lambda a, b: minus(g.into("DirectedBy", a), g.into("ProducedBy", b)),
            ),
            Template(
                "Which films with {a} never won the {b}?",
                ("Actor", "Award"),
                lambda a, b: minus(g.out("ActedIn", a), g.into("Won", b)),
            ),
            Template(
                "All {a} films except the {b} ones?",
                ("Genre", "Genre"),
                lambda a, b: minus(g.into("InGenre", a), g.into("InGenre", b)),
            ),
        ],
        "two_hop": [
            Template(
                "Who directed the films {a} has been in?",
                ("Actor",),
                lambda a: g.out("DirectedBy", g.out("ActedIn", a)),
            ),
            Template(
                "Which actors have worked with {a}?",
                ("Director",),
                lambda a: g.into("ActedIn", g.into("DirectedBy", a)),
            ),
            Template(
                "Which studios has {a} made films for as an actor?",
                ("Actor",),
                lambda a: g.out("ProducedBy", g.out("ActedIn", a)),
            ),
            Template(
                "What genres has {a} directed?",
                ("Director",),
                lambda a: g.out("InGenre", g.into("DirectedBy", a)),
            ),
            Template(
                "Who stars in the sequel to {a}?",
                ("Film",),
                lambda a: g.into("ActedIn", g.into("SequelOf", a)),
            ),
            Template(
                "Which films were produced by studios based in {a}?",
                ("Country",),
                lambda a: g.into("ProducedBy", g.into("BasedIn", a)),
            ),
            Template(
                "Who directed the winners of the {a}?",
                ("Award",),
                lambda a: g.out("DirectedBy", g.into("Won", a)),
            ),
        ],
        "alias": [
            Template(
                "Who directed {a}?",
                (("Le Verger de verre", "Il Limoneto", "Project Elevator"),),
                lambda a: g.out("DirectedBy", name(a)),
                times=3,
            ),
            Template("Who stars in {a}?", (("Iron Tide 2", "Iron Tide 3"),), lambda a: g.into("ActedIn", name(a))),
            Template("Which films is {a} in?", (("Joe Whitlock", "Trixie Lowe"),), lambda a: g.out("ActedIn", name(a))),
            Template(
                "What did {a} direct?", (("Theodore Vance", "Madame D"),), lambda a: g.into("DirectedBy", name(a))
            ),
            Template(
                "Which films were made by {a}?", (("Meridian-Hale", "BWF"),), lambda a: g.into("ProducedBy", name(a))
            ),
            Template("List the {a} films.", (("sci-fi", "SF"),), lambda a: g.into("InGenre", name(a))),
            Template(
                "Which studios are in {a}?",
                (("the United States", "America", "the United Kingdom", "Britain", "Korea"),),
                lambda a: g.into("BasedIn", name(a)),
                times=3,
            ),
            Template("Which films won {a}?", (("the Lantern", "the CCA"),), lambda a: g.into("Won", name(a))),
        ],
        "comparison": [
            Template("Which film is the longest?", (), lambda: unique_max(films, "runtime"), times=1),
            Template(
                "Which films run longer than {a} minutes?",
                ((150, 160),),
                lambda a: [f for f in films if num(f, "runtime") > a],
            ),
            Template(
                "Which films cost more than {a} million dollars?",
                ((150, 170),),
                lambda a: [f for f in films if num(f, "budget") > a],
            ),
            Template(
                "Which films came out before {a}?",
                ((1995, 2000),),
                lambda a: [f for f in films if num(f, "year") < a],
            ),
            Template(
                "Who is the oldest director?", (), lambda: unique_max(g.names("Director"), "born", low=True), times=1
            ),
            Template(
                "Which actors were born after {a}?",
                ((1975, 1980),),
                lambda a: [p for p in g.names("Actor") if num(p, "born") > a],
            ),
            Template(
                "What is the most expensive film {a} has produced?",
                ("Studio",),
                lambda a: unique_max(g.into("ProducedBy", a), "budget"),
            ),
            Template(
                "Which award is the oldest?", (), lambda: unique_max(g.names("Award"), "established", low=True), times=1
            ),
            Template(
                "Which studio was founded most recently?", (), lambda: unique_max(g.names("Studio"), "founded"), times=1
            ),
        ],
    }


OUTSIDE = [
    ("How much did {a} make at the box office?", "Film"),
    ("Who composed the score for {a}?", "Film"),
    ("Where was {a} filmed?", "Film"),
    ("What rating do critics give {a}?", "Film"),
    ("Which streaming service has {a}?", "Film"),
    ("Who is {a} married to?", "Actor"),
    ("How tall is {a}?", "Actor"),
    ("Which agency represents {a}?", "Actor"),
    ("Who runs {a} today?", "Studio"),
    ("How many people work at {a}?", "Studio"),
    ("What is the capital of {a}?", "Country"),
    ("Where is the {a} ceremony held?", "Award"),
    ("How much prize money comes with the {a}?", "Award"),
    ("Which film school did {a} attend?", "Director"),
    ("What is {a} working on next?", "Director"),
    ("Who edited {a}?", "Film"),
    ("What age rating does {a} carry?", "Film"),
]
