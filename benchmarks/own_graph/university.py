"""Graph B: a university's course catalogue (courses, professors, departments, buildings, books).

Modelled the way a registrar's office might describe its catalogue. ``Requires`` is stored from a
course to its prerequisite; questions ask it both ways ("What do I need before X?", "Which courses
need X?").
"""

from __future__ import annotations

import random
from typing import Literal

from benchmarks.own_graph.graph import OwnGraph, Template
from kag.datamodels.base import Entity, Field, Relation


class Course(Entity):
    """A course in the catalogue."""

    label: Literal["Course"] = "Course"
    name: str = Field(description="Course title")
    credits: int | None = Field(default=None, description="ECTS credits")
    enrollment: int | None = Field(default=None, description="Students enrolled this year")


class Professor(Entity):
    """A member of the teaching staff."""

    label: Literal["Professor"] = "Professor"
    name: str
    hired: int | None = Field(default=None, description="Year hired")


class Department(Entity):
    """Academic department."""

    label: Literal["Department"] = "Department"
    name: str
    founded: int | None = Field(default=None, description="Year the department was founded")


class Building(Entity):
    """A campus building."""

    label: Literal["Building"] = "Building"
    name: str
    floors: int | None = None
    built: int | None = Field(default=None, description="Year of construction")


class Textbook(Entity):
    """Required reading."""

    label: Literal["Textbook"] = "Textbook"
    name: str = Field(description="Title")
    published: int | None = Field(default=None, description="Publication year")


class Programme(Entity):
    """A degree programme students enrol in."""

    label: Literal["Programme"] = "Programme"
    name: str


class Teaches(Relation):
    """Professor teaches the course."""

    label: Literal["Teaches"] = "Teaches"
    subj: Professor
    obj: Course


class OfferedBy(Relation):
    """Course belongs to the department."""

    label: Literal["OfferedBy"] = "OfferedBy"
    subj: Course
    obj: Department


class Requires(Relation):
    """Course has the other course as a prerequisite."""

    label: Literal["Requires"] = "Requires"
    subj: Course
    obj: Course


class AppointedIn(Relation):
    """Professor's home department."""

    label: Literal["AppointedIn"] = "AppointedIn"
    subj: Professor
    obj: Department


class TaughtIn(Relation):
    """Where the lectures take place."""

    label: Literal["TaughtIn"] = "TaughtIn"
    subj: Course
    obj: Building


class UsesTextbook(Relation):
    """Course reading list."""

    label: Literal["UsesTextbook"] = "UsesTextbook"
    subj: Course
    obj: Textbook


class PartOf(Relation):
    """Course counts towards the programme."""

    label: Literal["PartOf"] = "PartOf"
    subj: Course
    obj: Programme


class HousedIn(Relation):
    """Department offices are in the building."""

    label: Literal["HousedIn"] = "HousedIn"
    subj: Department
    obj: Building


ENTITIES: list[type[Entity]] = [Course, Professor, Department, Building, Textbook, Programme]
RELATIONS: list[type[Relation]] = [Teaches, OfferedBy, Requires, AppointedIn, TaughtIn, UsesTextbook, PartOf, HousedIn]

DEPARTMENTS = {
    "Computer Science": (1972, ["Introduction to Programming", "Data Structures", "Algorithms",
                                "Operating Systems", "Databases", "Machine Learning"]),
    "Mathematics": (1890, ["Calculus I", "Linear Algebra", "Probability", "Real Analysis"]),
    "Physics": (1895, ["Mechanics", "Electromagnetism", "Quantum Physics", "Thermodynamics"]),
    "History": (1901, ["Ancient Rome", "Medieval Europe", "Modern China"]),
    "Economics": (1948, ["Microeconomics", "Macroeconomics", "Econometrics"]),
    "Biology": (1923, ["Cell Biology", "Genetics", "Ecology", "Evolution"]),
}  # fmt: skip
PREREQUISITES = {
    "Data Structures": ["Introduction to Programming"],
    "Algorithms": ["Data Structures", "Linear Algebra"],
    "Operating Systems": ["Data Structures"],
    "Databases": ["Data Structures"],
    "Machine Learning": ["Algorithms", "Probability", "Linear Algebra"],
    "Linear Algebra": ["Calculus I"],
    "Probability": ["Calculus I"],
    "Real Analysis": ["Calculus I", "Linear Algebra"],
    "Mechanics": ["Calculus I"],
    "Electromagnetism": ["Mechanics", "Calculus I"],
    "Quantum Physics": ["Electromagnetism", "Linear Algebra"],
    "Thermodynamics": ["Mechanics"],
    "Medieval Europe": ["Ancient Rome"],
    "Macroeconomics": ["Microeconomics"],
    "Econometrics": ["Probability", "Microeconomics"],
    "Genetics": ["Cell Biology"],
    "Evolution": ["Genetics", "Ecology"],
}
PROFESSORS = {
    "Computer Science": ["Adaeze Okafor", "Bernard Lemaire", "Carmen Ruiz"],
    "Mathematics": ["David Kim", "Elena Popescu"],
    "Physics": ["Frank Osei", "Greta Lindqvist"],
    "History": ["Hiroshi Tanaka"],
    "Economics": ["Ingrid Bauer", "Jamal Wright"],
    "Biology": ["Katarzyna Nowak", "Luis Herrera"],
}
BUILDINGS = ["Hartwell Hall", "Newton Building", "Ashby Library", "Curie Laboratory", "Mercer Hall", "Old Observatory"]
TEXTBOOKS = {
    "Structure and Interpretation of Computer Programs": (1985, ["Introduction to Programming"]),
    "Introduction to Algorithms": (1990, ["Data Structures", "Algorithms"]),
    "Pattern Recognition and Machine Learning": (2006, ["Machine Learning", "Probability"]),
    "Linear Algebra Done Right": (1995, ["Linear Algebra", "Quantum Physics"]),
    "The Feynman Lectures on Physics": (1964, ["Mechanics", "Electromagnetism", "Thermodynamics"]),
    "Principles of Economics": (1890, ["Microeconomics", "Macroeconomics"]),
    "Molecular Biology of the Cell": (1983, ["Cell Biology", "Genetics"]),
    "SPQR": (2015, ["Ancient Rome"]),
}
PROGRAMMES = {
    "BSc Computer Science": ["Computer Science", "Mathematics"],
    "BSc Physics": ["Physics", "Mathematics"],
    "BA History": ["History"],
    "BSc Economics": ["Economics", "Mathematics"],
    "MSc Data Science": ["Economics", "Computer Science"],
}

ALIASES = {
    "Introduction to Programming": ["CS101", "Intro to Programming"],
    "Data Structures": ["CS201"],
    "Calculus I": ["MATH101", "Calc 1"],
    "Computer Science": ["CS", "the Department of Computing"],
    "Economics": ["Econ"],
    "Mathematics": ["Maths"],
    "Hartwell Hall": ["North Hall"],
    "Mercer Hall": ["the Science Annex"],
    "Structure and Interpretation of Computer Programs": ["SICP", "the Wizard Book"],
    "Introduction to Algorithms": ["CLRS"],
    "Pattern Recognition and Machine Learning": ["Bishop's book"],
    "BSc Computer Science": ["the Bachelor of Science in Computer Science"],
    "MSc Data Science": ["the data science master's"],
}


def graph(seed: int = 0) -> OwnGraph:
    """The catalogue: 24 courses, 12 professors, 6 departments, 6 buildings, 8 textbooks, 5 programmes."""
    rng = random.Random(seed)
    entities: dict[str, dict[str, dict[str, object]]] = {
        "Course": {},
        "Professor": {},
        "Department": {d: {"founded": f} for d, (f, _) in DEPARTMENTS.items()},
        "Building": {},
        "Textbook": {t: {"published": y} for t, (y, _) in TEXTBOOKS.items()},
        "Programme": {p: {} for p in PROGRAMMES},
    }
    floors = rng.sample(range(2, 12), len(BUILDINGS))
    for b, f in zip(BUILDINGS, floors, strict=True):
        entities["Building"][b] = {"floors": f, "built": rng.randint(1880, 2015)}
    edges: list[tuple[str, str, str]] = []
    enrollments = rng.sample(range(18, 420), sum(len(c) for _, c in DEPARTMENTS.values()))
    for dept, (_, courses) in DEPARTMENTS.items():
        edges.append(("HousedIn", dept, rng.choice(BUILDINGS)))
        staff = PROFESSORS[dept]
        for prof in staff:
            entities["Professor"][prof] = {"hired": rng.randint(1988, 2023)}
            edges.append(("AppointedIn", prof, dept))
        for course in courses:
            entities["Course"][course] = {"credits": rng.choice((5, 5, 6, 10, 15)), "enrollment": enrollments.pop()}
            edges.append(("OfferedBy", course, dept))
            edges.append(("TaughtIn", course, rng.choice(BUILDINGS)))
            for prof in rng.sample(staff, 1 if len(staff) < 3 or rng.random() < 0.7 else 2):
                edges.append(("Teaches", prof, course))
            for programme, depts in PROGRAMMES.items():
                if dept in depts and (dept == depts[0] or rng.random() < 0.5):
                    edges.append(("PartOf", course, programme))
    # a guest lecturer from economics teaches one machine-learning course
    edges.append(("Teaches", "Jamal Wright", "Machine Learning"))
    for course, needs in PREREQUISITES.items():
        edges += [("Requires", course, n) for n in needs]
    for book, (_, courses) in TEXTBOOKS.items():
        edges += [("UsesTextbook", c, book) for c in courses]
    return OwnGraph(
        "university",
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

    courses = g.names("Course")
    return {
        "lookup": [
            Template("Who teaches {a}?", ("Course",), lambda a: g.into("Teaches", a)),
            Template("Which department offers {a}?", ("Course",), lambda a: g.out("OfferedBy", a)),
            Template("What do I need to have taken before {a}?", ("Course",), lambda a: g.out("Requires", a)),
            Template("where is {a} taught", ("Course",), lambda a: g.out("TaughtIn", a)),
            Template("What is the textbook for {a}?", ("Course",), lambda a: g.out("UsesTextbook", a)),
            Template("Which department is {a} in?", ("Professor",), lambda a: g.out("AppointedIn", a)),
            Template(
                "In which building does the {a} department have its offices?",
                ("Department",),
                lambda a: g.out("HousedIn", a),
            ),
        ],
        "inverse": [
            Template("Which courses require {a}?", ("Course",), lambda a: g.into("Requires", a)),
            Template("What does {a} teach?", ("Professor",), lambda a: g.out("Teaches", a)),
            Template("Which courses are offered by {a}?", ("Department",), lambda a: g.into("OfferedBy", a)),
            Template("Which courses use {a}?", ("Textbook",), lambda a: g.into("UsesTextbook", a)),
            Template("What is taught in {a}?", ("Building",), lambda a: g.into("TaughtIn", a)),
            Template(
                "Who are the professors of the {a} department?", ("Department",), lambda a: g.into("AppointedIn", a)
            ),
            Template("Which courses count towards the {a}?", ("Programme",), lambda a: g.into("PartOf", a)),
        ],
        "count": [
            Template("How many courses does {a} teach?", ("Professor",), lambda a: len(g.out("Teaches", a))),
            Template("How many prerequisites does {a} have?", ("Course",), lambda a: len(g.out("Requires", a))),
            Template("How many courses require {a}?", ("Course",), lambda a: len(g.into("Requires", a))),
            Template(
                "How many courses does the {a} department offer?",
                ("Department",),
                lambda a: len(g.into("OfferedBy", a)),
            ),
            Template("number of courses held in {a}?", ("Building",), lambda a: len(g.into("TaughtIn", a))),
            Template("How many professors does {a} have?", ("Department",), lambda a: len(g.into("AppointedIn", a))),
            Template("How many courses make up the {a}?", ("Programme",), lambda a: len(g.into("PartOf", a))),
        ],
        "conjunction": [
            Template(
                "Which courses are taught in {a} and offered by {b}?",
                ("Building", "Department"),
                lambda a, b: both(g.into("TaughtIn", a), g.into("OfferedBy", b)),
            ),
            Template(
                "Which courses require both {a} and {b}?",
                ("Course", "Course"),
                lambda a, b: both(g.into("Requires", a), g.into("Requires", b)),
            ),
            Template(
                "Which {a} courses count towards the {b}?",
                ("Department", "Programme"),
                lambda a, b: both(g.into("OfferedBy", a), g.into("PartOf", b)),
            ),
            Template(
                "Which courses of the {a} are held in {b}?",
                ("Programme", "Building"),
                lambda a, b: both(g.into("PartOf", a), g.into("TaughtIn", b)),
            ),
            Template(
                "Courses that need {a} and are part of the {b}?",
                ("Course", "Programme"),
                lambda a, b: both(g.into("Requires", a), g.into("PartOf", b)),
            ),
            Template(
                "Which courses taught by {a} are in {b}?",
                ("Professor", "Building"),
                lambda a, b: both(g.out("Teaches", a), g.into("TaughtIn", b)),
            ),
            Template(
                "Which courses that use {a} does {b} teach?",
                ("Textbook", "Professor"),
                lambda a, b: both(g.into("UsesTextbook", a), g.out("Teaches", b)),
            ),
        ],
        "negation": [
            Template(
                "Which courses offered by {a} are not taught in {b}?",
                ("Department", "Building"),
                lambda a, b: minus(g.into("OfferedBy", a), g.into("TaughtIn", b)),
            ),
            Template(
                "Which {a} courses don't count towards the {b}?",
                ("Department", "Programme"),
                lambda a, b: minus(g.into("OfferedBy", a), g.into("PartOf", b)),
            ),
            Template(
                "Which courses in the {a} are held outside {b}?",
                ("Programme", "Building"),
                lambda a, b: minus(g.into("PartOf", a), g.into("TaughtIn", b)),
            ),
            Template(
                "Which courses taught in {a} belong to a department other than {b}?",
                ("Building", "Department"),
                lambda a, b: minus(g.into("TaughtIn", a), g.into("OfferedBy", b)),
            ),
            Template(
                "All courses of the {a} except those offered by {b}?",
                ("Programme", "Department"),
                lambda a, b: minus(g.into("PartOf", a), g.into("OfferedBy", b)),
            ),
            Template(
                "Which courses require {a} but do not require {b}?",
                ("Course", "Course"),
                lambda a, b: minus(g.into("Requires", a), g.into("Requires", b)),
            ),
            Template(
                "Which courses does {a} teach that are not in the {b}?",
                ("Professor", "Programme"),
                lambda a, b: minus(g.out("Teaches", a), g.into("PartOf", b)),
            ),
        ],
        "two_hop": [
            Template(
                "Who teaches the prerequisites of {a}?",
                ("Course",),
                lambda a: g.into("Teaches", g.out("Requires", a)),
            ),
            Template(
                "Which buildings does {a} lecture in?",
                ("Professor",),
                lambda a: g.out("TaughtIn", g.out("Teaches", a)),
            ),
            Template(
                "Which textbooks are used in courses offered by {a}?",
                ("Department",),
                lambda a: g.out("UsesTextbook", g.into("OfferedBy", a)),
            ),
            Template(
                "Which departments do the courses {a} needs belong to?",
                ("Course",),
                lambda a: g.out("OfferedBy", g.out("Requires", a)),
            ),
            Template(
                "Who teaches the courses that use {a}?",
                ("Textbook",),
                lambda a: g.into("Teaches", g.into("UsesTextbook", a)),
            ),
            Template(
                "Which programmes include a course taught by {a}?",
                ("Professor",),
                lambda a: g.out("PartOf", g.out("Teaches", a)),
            ),
            Template(
                "Where are the courses of the {a} department taught?",
                ("Department",),
                lambda a: g.out("TaughtIn", g.into("OfferedBy", a)),
            ),
        ],
        "alias": [
            Template("Who teaches {a}?", (("CS101", "Intro to Programming"),), lambda a: g.into("Teaches", name(a))),
            Template(
                "Which courses have {a} as a prerequisite?",
                (("CS201", "MATH101", "Calc 1"),),
                lambda a: g.into("Requires", name(a)),
                times=3,
            ),
            Template(
                "How many courses does {a} offer?",
                (("CS", "Econ", "Maths"),),
                lambda a: len(g.into("OfferedBy", name(a))),
                times=2,
            ),
            Template(
                "Who works in {a}?",
                (("the Department of Computing",),),
                lambda a: g.into("AppointedIn", name(a)),
                times=1,
            ),
            Template(
                "What is taught in {a}?", (("North Hall", "the Science Annex"),), lambda a: g.into("TaughtIn", name(a))
            ),
            Template(
                "Which courses use {a}?",
                (("SICP", "CLRS", "the Wizard Book", "Bishop's book"),),
                lambda a: g.into("UsesTextbook", name(a)),
                times=3,
            ),
            Template(
                "Which courses are part of {a}?",
                (("the Bachelor of Science in Computer Science", "the data science master's"),),
                lambda a: g.into("PartOf", name(a)),
            ),
        ],
        "comparison": [
            Template(
                "Which course has the highest enrollment?", (), lambda: unique_max(courses, "enrollment"), times=1
            ),
            Template(
                "Which courses have more than {a} students enrolled?",
                ((350, 380),),
                lambda a: [c for c in courses if num(c, "enrollment") > a],
            ),
            Template(
                "Which courses are worth more than {a} credits?",
                ((6, 10),),
                lambda a: [c for c in courses if num(c, "credits") > a],
            ),
            Template(
                "Which is the oldest department?",
                (),
                lambda: unique_max(g.names("Department"), "founded", low=True),
                times=1,
            ),
            Template(
                "Which building has the most floors?", (), lambda: unique_max(g.names("Building"), "floors"), times=1
            ),
            Template(
                "Which professors were hired after {a}?",
                ((2015, 2019),),
                lambda a: [p for p in g.names("Professor") if num(p, "hired") > a],
            ),
            Template(
                "What is the smallest course offered by {a}?",
                ("Department",),
                lambda a: unique_max(g.into("OfferedBy", a), "enrollment", low=True),
            ),
            Template(
                "Which textbooks were published before {a}?",
                ((1970, 1986),),
                lambda a: [t for t in g.names("Textbook") if num(t, "published") < a],
            ),
            Template(
                "Which buildings were built before {a}?",
                ((1950, 1980),),
                lambda a: [b for b in g.names("Building") if num(b, "built") < a],
            ),
        ],
    }


OUTSIDE = [
    ("When is the final exam of {a}?", "Course"),
    ("What is {a}'s office phone number?", "Professor"),
    ("How much is the tuition fee for the {a}?", "Programme"),
    ("Who is the dean of {a}?", "Department"),
    ("Which students failed {a} last year?", "Course"),
    ("Where did {a} get their PhD?", "Professor"),
    ("What is the wifi password in {a}?", "Building"),
    ("Who wrote {a}?", "Textbook"),
    ("What is the average grade in {a}?", "Course"),
    ("What is the salary of {a}?", "Professor"),
    ("Is {a} wheelchair accessible?", "Building"),
    ("Which companies hire graduates of the {a}?", "Programme"),
    ("How much does {a} cost in the campus bookshop?", "Textbook"),
    ("What research grants does {a} hold?", "Professor"),
    ("What time does {a} close on Sundays?", "Building"),
    ("Who is the teaching assistant for {a}?", "Course"),
    ("What is the acceptance rate of the {a}?", "Programme"),
]
