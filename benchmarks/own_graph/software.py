"""Graph A: a small open-source package ecosystem (packages, their maintainers, licenses, languages).

Written the way a team would model its own dependency inventory; nothing here was shaped after
kag's matcher. Relations are stored one way (``DependsOn`` from the dependent package to its
dependency, ``MaintainedBy`` from the package to the person, ...); the questions ask them both ways.
"""

from __future__ import annotations

import random
from typing import Literal

from benchmarks.own_graph.graph import OwnGraph, Template
from kag.datamodels.base import Entity, Field, Relation


class Package(Entity):
    """A software package published to the registry."""

    label: Literal["Package"] = "Package"
    name: str = Field(description="Package name as published")
    stars: int | None = Field(default=None, description="GitHub stars")
    first_release: int | None = Field(default=None, description="Year of the first release")
    weekly_downloads: int | None = Field(default=None, description="Downloads per week")


class Developer(Entity):
    """Someone who maintains packages."""

    label: Literal["Developer"] = "Developer"
    name: str = Field(description="Full name")
    commits: int | None = Field(default=None, description="Number of commits across all packages")


class Organization(Entity):
    """A company or foundation."""

    label: Literal["Organization"] = "Organization"
    name: str
    founded: int | None = Field(default=None, description="Year founded")


class License(Entity):
    """An open-source license (SPDX identifier)."""

    label: Literal["License"] = "License"
    name: str = Field(description="SPDX id")


class Language(Entity):
    """Programming language."""

    label: Literal["Language"] = "Language"
    name: str


class Topic(Entity):
    """A topic/tag of the registry."""

    label: Literal["Topic"] = "Topic"
    name: str


class DependsOn(Relation):
    """Package needs the other package to be installed."""

    label: Literal["DependsOn"] = "DependsOn"
    subj: Package
    obj: Package


class MaintainedBy(Relation):
    """Package is maintained by the developer."""

    label: Literal["MaintainedBy"] = "MaintainedBy"
    subj: Package
    obj: Developer


class LicensedUnder(Relation):
    """The package's license."""

    label: Literal["LicensedUnder"] = "LicensedUnder"
    subj: Package
    obj: License


class WrittenIn(Relation):
    """Main implementation language of the package."""

    label: Literal["WrittenIn"] = "WrittenIn"
    subj: Package
    obj: Language


class TaggedWith(Relation):
    """Package has this topic tag."""

    label: Literal["TaggedWith"] = "TaggedWith"
    subj: Package
    obj: Topic


class WorksFor(Relation):
    """Developer's employer."""

    label: Literal["WorksFor"] = "WorksFor"
    subj: Developer
    obj: Organization


class BackedBy(Relation):
    """Organization that funds the package."""

    label: Literal["BackedBy"] = "BackedBy"
    subj: Package
    obj: Organization


ENTITIES: list[type[Entity]] = [Package, Developer, Organization, License, Language, Topic]
RELATIONS: list[type[Relation]] = [DependsOn, MaintainedBy, LicensedUnder, WrittenIn, TaggedWith, WorksFor, BackedBy]

PACKAGES = [
    "arrowdb", "birchlog", "cobalt-http", "dune", "emberkit", "fernet-tools", "glint", "harbor",
    "ironclad", "jetstream", "kestrel", "lumen", "mosaic", "nimbus-cli", "orchid", "pebble",
    "quasar", "rivet", "sable", "tundra", "umbra", "vortex", "willow", "zephyr",
]  # fmt: skip
DEVELOPERS = [
    "Ana Silva", "Bram Visser", "Chen Wei", "Dmitri Volkov", "Esi Mensah",
    "Farah Haddad", "Gustavo Ortiz", "Hana Kobayashi", "Ivo Petrov", "Julia Novak",
]  # fmt: skip
ORGANIZATIONS = {
    "Apache Software Foundation": 1999,
    "Meta": 2004,
    "Microsoft": 1975,
    "Mozilla": 2003,
    "Canonical": 2005,
}
LICENSES = ["MIT", "Apache-2.0", "GPL-3.0", "BSD-3-Clause", "MPL-2.0"]
LANGUAGES = ["Python", "JavaScript", "TypeScript", "Rust", "Go", "C++"]
TOPICS = ["web", "databases", "logging", "cryptography", "command line", "machine learning"]

# other names people use; none of them is stored in the graph
ALIASES = {
    "JavaScript": ["JS", "ECMAScript"],
    "TypeScript": ["TS"],
    "Go": ["Golang"],
    "C++": ["CPP"],
    "Apache-2.0": ["the Apache License, Version 2.0", "ASL 2"],
    "GPL-3.0": ["the GNU General Public License v3", "GPLv3"],
    "BSD-3-Clause": ["the New BSD License"],
    "MIT": ["the Expat license"],
    "Meta": ["Facebook"],
    "Apache Software Foundation": ["the ASF"],
    "Microsoft": ["MSFT"],
    "machine learning": ["ML"],
    "command line": ["CLI"],
    "lumen": ["lightbox"],
    "arrowdb": ["quiver"],
    "kestrel": ["falconet"],
}


def graph(seed: int = 0) -> OwnGraph:
    """The ecosystem: 24 packages, 10 developers, 5 organizations, 5 licenses, 6 languages, 6 topics."""
    rng = random.Random(seed)
    entities: dict[str, dict[str, dict[str, object]]] = {
        "Package": {},
        "Developer": {},
        "Organization": {n: {"founded": y} for n, y in ORGANIZATIONS.items()},
        "License": {n: {} for n in LICENSES},
        "Language": {n: {} for n in LANGUAGES},
        "Topic": {n: {} for n in TOPICS},
    }
    stars = rng.sample(range(40, 42000), len(PACKAGES))
    downloads = rng.sample(range(200, 900000), len(PACKAGES))
    for name, star, down in zip(PACKAGES, stars, downloads, strict=True):
        entities["Package"][name] = {
            "stars": star,
            "first_release": rng.randint(2008, 2024),
            "weekly_downloads": down,
        }
    commits = rng.sample(range(30, 6000), len(DEVELOPERS))
    entities["Developer"] = {n: {"commits": c} for n, c in zip(DEVELOPERS, commits, strict=True)}
    edges: list[tuple[str, str, str]] = []
    orgs = list(ORGANIZATIONS)
    for dev in DEVELOPERS:
        edges.append(("WorksFor", dev, rng.choice(orgs)))
    for i, pkg in enumerate(PACKAGES):
        edges.append(("WrittenIn", pkg, rng.choice(LANGUAGES)))
        edges.append(("LicensedUnder", pkg, rng.choice(LICENSES)))
        for dev in rng.sample(DEVELOPERS, rng.choice((1, 1, 2))):
            edges.append(("MaintainedBy", pkg, dev))
        for topic in rng.sample(TOPICS, rng.choice((1, 2, 2))):
            edges.append(("TaggedWith", pkg, topic))
        if rng.random() < 0.6:
            edges.append(("BackedBy", pkg, rng.choice(orgs)))
        # dependencies point to other packages, mostly the widely used early ones
        pool = [p for p in PACKAGES if p != pkg]
        weights = [3 if PACKAGES.index(p) < 8 else 1 for p in pool]
        deps: set[str] = set()
        for _ in range(rng.choice((0, 1, 2, 2, 3)) if i else 0):
            deps.add(rng.choices(pool, weights)[0])
        edges += [("DependsOn", pkg, d) for d in sorted(deps)]
    return OwnGraph(
        "software",
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
        """``a`` without ``b``, only where the condition removes something and leaves something."""
        left = [x for x in a if x not in b]
        return left if left and len(left) < len(a) else None

    def both(a: list[str], b: list[str]) -> list[str] | None:
        common = [x for x in a if x in b]
        return common if common and (len(common) < len(a) or len(common) < len(b)) else None

    pkgs = g.names("Package")
    return {
        "lookup": [
            Template("Which license is {a} released under?", ("Package",), lambda a: g.out("LicensedUnder", a)),
            Template("what language is {a} implemented in", ("Package",), lambda a: g.out("WrittenIn", a)),
            Template("Who maintains {a}?", ("Package",), lambda a: g.out("MaintainedBy", a)),
            Template("Tags on the {a} package?", ("Package",), lambda a: g.out("TaggedWith", a)),
            Template("Which company does {a} work for?", ("Developer",), lambda a: g.out("WorksFor", a)),
            Template("What does {a} depend on?", ("Package",), lambda a: g.out("DependsOn", a)),
            Template("Who funds {a}?", ("Package",), lambda a: g.out("BackedBy", a)),
        ],
        "inverse": [
            Template("Which packages depend on {a}?", ("Package",), lambda a: g.into("DependsOn", a)),
            Template("What packages are maintained by {a}?", ("Developer",), lambda a: g.into("MaintainedBy", a)),
            Template("Which packages use the {a} license?", ("License",), lambda a: g.into("LicensedUnder", a)),
            Template("Name the packages written in {a}.", ("Language",), lambda a: g.into("WrittenIn", a)),
            Template("Who works at {a}?", ("Organization",), lambda a: g.into("WorksFor", a)),
            Template("Which projects does {a} sponsor?", ("Organization",), lambda a: g.into("BackedBy", a)),
            Template("which packages pull in {a} as a dependency", ("Package",), lambda a: g.into("DependsOn", a)),
        ],
        "count": [
            Template("How many packages depend on {a}?", ("Package",), lambda a: len(g.into("DependsOn", a))),
            Template("How many dependencies does {a} have?", ("Package",), lambda a: len(g.out("DependsOn", a))),
            Template("How many packages does {a} maintain?", ("Developer",), lambda a: len(g.into("MaintainedBy", a))),
            Template("How many people work for {a}?", ("Organization",), lambda a: len(g.into("WorksFor", a))),
            Template("number of packages written in {a}?", ("Language",), lambda a: len(g.into("WrittenIn", a))),
            Template(
                "How many projects are released under {a}?", ("License",), lambda a: len(g.into("LicensedUnder", a))
            ),
            Template("Count the packages tagged {a}.", ("Topic",), lambda a: len(g.into("TaggedWith", a))),
        ],
        "conjunction": [
            Template(
                "Which packages are written in {a} and licensed under {b}?",
                ("Language", "License"),
                lambda a, b: both(g.into("WrittenIn", a), g.into("LicensedUnder", b)),
            ),
            Template(
                "Which {a} packages does {b} maintain?",
                ("Language", "Developer"),
                lambda a, b: both(g.into("WrittenIn", a), g.into("MaintainedBy", b)),
            ),
            Template(
                "What packages depend on {a} and are tagged {b}?",
                ("Package", "Topic"),
                lambda a, b: both(g.into("DependsOn", a), g.into("TaggedWith", b)),
            ),
            Template(
                "Which of the projects {a} funds are written in {b}?",
                ("Organization", "Language"),
                lambda a, b: both(g.into("BackedBy", a), g.into("WrittenIn", b)),
            ),
            Template(
                "Find packages under the {a} license that are about {b}.",
                ("License", "Topic"),
                lambda a, b: both(g.into("LicensedUnder", a), g.into("TaggedWith", b)),
            ),
            Template(
                "Which packages are tagged both {a} and {b}?",
                ("Topic", "Topic"),
                lambda a, b: both(g.into("TaggedWith", a), g.into("TaggedWith", b)),
            ),
            Template(
                "Packages maintained by {a} that are backed by {b}?",
                ("Developer", "Organization"),
                lambda a, b: both(g.into("MaintainedBy", a), g.into("BackedBy", b)),
            ),
        ],
        "negation": [
            Template(
                "Which {a} packages are not licensed under {b}?",
                ("Language", "License"),
                lambda a, b: minus(g.into("WrittenIn", a), g.into("LicensedUnder", b)),
            ),
            Template(
                "Which packages maintained by {a} aren't written in {b}?",
                ("Developer", "Language"),
                lambda a, b: minus(g.into("MaintainedBy", a), g.into("WrittenIn", b)),
            ),
            Template(
                "Which packages depend on {a} but are not tagged {b}?",
                ("Package", "Topic"),
                lambda a, b: minus(g.into("DependsOn", a), g.into("TaggedWith", b)),
            ),
            Template(
                "Which packages tagged {a} use a license other than {b}?",
                ("Topic", "License"),
                lambda a, b: minus(g.into("TaggedWith", a), g.into("LicensedUnder", b)),
            ),
            Template(
                "Which {a} packages get their funding from outside {b}?",
                ("Language", "Organization"),
                lambda a, b: minus(g.into("WrittenIn", a), g.into("BackedBy", b)),
            ),
            Template(
                "Apart from the {b} ones, which packages does {a} maintain?",
                ("Developer", "Language"),
                lambda a, b: minus(g.into("MaintainedBy", a), g.into("WrittenIn", b)),
            ),
            Template(
                "Everything tagged {a} except what is written in {b}?",
                ("Topic", "Language"),
                lambda a, b: minus(g.into("TaggedWith", a), g.into("WrittenIn", b)),
            ),
        ],
        "two_hop": [
            Template(
                "Which organizations employ the maintainers of {a}?",
                ("Package",),
                lambda a: g.out("WorksFor", g.out("MaintainedBy", a)),
            ),
            Template(
                "What licenses do {a}'s dependencies use?",
                ("Package",),
                lambda a: g.out("LicensedUnder", g.out("DependsOn", a)),
            ),
            Template(
                "In which languages are the packages {a} maintains written?",
                ("Developer",),
                lambda a: g.out("WrittenIn", g.into("MaintainedBy", a)),
            ),
            Template(
                "Who maintains the packages that {a} depends on?",
                ("Package",),
                lambda a: g.out("MaintainedBy", g.out("DependsOn", a)),
            ),
            Template(
                "Which packages are maintained by people working at {a}?",
                ("Organization",),
                lambda a: g.into("MaintainedBy", g.into("WorksFor", a)),
            ),
            Template(
                "What topics do the dependencies of {a} cover?",
                ("Package",),
                lambda a: g.out("TaggedWith", g.out("DependsOn", a)),
            ),
            Template(
                "Which packages depend on something written in {a}?",
                ("Language",),
                lambda a: g.into("DependsOn", g.into("WrittenIn", a)),
            ),
        ],
        "alias": [
            Template(
                "Which packages are written in {a}?",
                (("JS", "TS", "Golang", "CPP"),),
                lambda a: _via(g, a, "WrittenIn"),
            ),
            Template(
                "How many packages are implemented in {a}?",
                (("ECMAScript",),),
                lambda a: len(_via(g, a, "WrittenIn")),
                times=1,
            ),
            Template(
                "Which packages are distributed under {a}?",
                (("the Apache License, Version 2.0", "the GNU General Public License v3"),),
                lambda a: _via(g, a, "LicensedUnder"),
            ),
            Template(
                "list everything under {a}",
                (("GPLv3", "ASL 2", "the New BSD License", "the Expat license"),),
                lambda a: _via(g, a, "LicensedUnder"),
                times=4,
            ),
            Template(
                "Which packages does {a} back?",
                (("Facebook", "MSFT", "the ASF"),),
                lambda a: _via(g, a, "BackedBy"),
                times=3,
            ),
            Template("Who is employed by {a}?", (("Facebook",),), lambda a: _via(g, a, "WorksFor"), times=1),
            Template("Which packages are tagged {a}?", (("ML", "CLI"),), lambda a: _via(g, a, "TaggedWith")),
            Template(
                "Who maintains {a}?",
                (("lightbox", "quiver", "falconet"),),
                lambda a: g.out("MaintainedBy", _name(g, a)),
                times=3,
            ),
        ],
        "comparison": [
            Template("Which package has the most GitHub stars?", (), lambda: unique_max(pkgs, "stars"), times=1),
            Template(
                "Which packages have more than {a} stars?",
                ((20000, 30000, 35000),),
                lambda a: [p for p in pkgs if num(p, "stars") > a],
            ),
            Template(
                "Which packages were first released before {a}?",
                ((2010, 2012),),
                lambda a: [p for p in pkgs if num(p, "first_release") < a],
            ),
            Template("Which is the oldest package?", (), lambda: unique_max(pkgs, "first_release", low=True), times=1),
            Template(
                "Which organization was founded first?",
                (),
                lambda: unique_max(g.names("Organization"), "founded", low=True),
                times=1,
            ),
            Template(
                "Which packages get fewer than {a} downloads a week?",
                ((100000, 250000),),
                lambda a: [p for p in pkgs if num(p, "weekly_downloads") < a],
            ),
            Template(
                "What is the most downloaded package written in {a}?",
                ("Language",),
                lambda a: unique_max(g.into("WrittenIn", a), "weekly_downloads"),
            ),
            Template(
                "Which developer has made the most commits?",
                (),
                lambda: unique_max(g.names("Developer"), "commits"),
                times=1,
            ),
            Template(
                "Name the packages first released after {a}.",
                ((2021, 2022),),
                lambda a: [p for p in pkgs if num(p, "first_release") > a],
            ),
        ],
    }


def _name(g: OwnGraph, alias: str) -> str:
    return next(name for name, others in g.aliases.items() if alias in others)


def _via(g: OwnGraph, alias: str, rel: str) -> list[str]:
    """Who reaches the entity called ``alias`` (another name of it) through ``rel``."""
    return g.into(rel, _name(g, alias))


OUTSIDE = [
    ("Who founded {a}?", "Organization"),
    ("What is the latest version of {a}?", "Package"),
    ("Which CVEs affect {a}?", "Package"),
    ("How many open issues does {a} have?", "Package"),
    ("Where is {a} headquartered?", "Organization"),
    ("What is {a}'s email address?", "Developer"),
    ("Which conferences has {a} spoken at?", "Developer"),
    ("What is the homepage of {a}?", "Package"),
    ("Which operating systems does {a} run on?", "Package"),
    ("Who is the CEO of {a}?", "Organization"),
    ("What was {a}'s revenue last year?", "Organization"),
    ("When does long-term support for {a} end?", "Package"),
    ("Which university did {a} study at?", "Developer"),
    ("What is the test coverage of {a}?", "Package"),
    ("Which CI service builds {a}?", "Package"),
    ("Who designed {a}?", "Language"),
    ("In which country does {a} live?", "Developer"),
]
