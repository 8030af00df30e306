"""The word lists and patterns ``LexicalLM`` reads questions with (words, stems and identifiers: :mod:`kag.text`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kag.text import stem, words

ANY = "*"
_STOPWORDS = frozenset(
    " ".join(
        (
            "a an the of in on at to for by with from into onto and or is are was were be been being",
            "do does did what which who whom whose where when how many much number count list name",
            "names show find give tell me us all any some there that this these those it its has have",
            "had not no none without never than as s t can could would should will shall may might",
            "please each every one ones then also about located lie lies",
        )
    ).split()
)
# "located"/"lies" are kept out of relation vocabularies only when they come from names.
_WEAK_STOPWORDS = frozenset({"located", "lie", "lies"})
_WH = frozenset({"which", "what", "who", "list", "name", "names", "show", "find", "give", "count", "all"})
_PREPOSITIONS = frozenset({"of", "in", "from", "on", "to", "at", "for", "with", "into", "by", "inside"})
# negation said without "not" too: "made outside X", "other than X", "apart from X", "except X"
_YES_NO = frozenset({"is", "are", "was", "were", "does", "do", "did", "can", "has", "have"})
_REL_DESC = re.compile(r"([A-Za-z][A-Za-z0-9_]*): ([A-Za-z0-9_|]+) -> ([A-Za-z0-9_|]+)")
_SECTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$")
_FACT_TAIL = re.compile(r"^(.*?) \((score [0-9.]+.*)\)$")
_ARROW = re.compile(r" -\[([A-Za-z0-9_]+)\]-> | <-\[([A-Za-z0-9_]+)\]- ")
_CONNECTORS = frozenset({"of", "the", "de", "del", "la", "le", "am", "an", "da", "do", "al", "el", "and"})


def _content_words(text: str) -> list[str]:
    return [stem(w) for w in words(text) if w not in _STOPWORDS or w in _WEAK_STOPWORDS]


# Everyday words for what schemas usually call otherwise: a question's word is read as the
# schema word too (relation vocabularies and field names), never instead of it.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "neighbour": ("border",),
    "neighbor": ("border",),
    "neighbouring": ("border",),
    "neighboring": ("border",),
    "adjacent": ("border",),
    "populous": ("population", "inhabitant"),
    "people": ("population", "inhabitant"),
    "resident": ("population", "inhabitant"),
    "inhabitant": ("population",),
    "large": ("area", "size"),
    "larger": ("area", "size"),
    "largest": ("area", "size"),
    "big": ("area", "size"),
    "bigger": ("area", "size"),
    "biggest": ("area", "size"),
    "small": ("area", "size"),
    "smaller": ("area", "size"),
    "smallest": ("area", "size"),
    "km": ("kilometre", "kilometer"),
    "km2": ("kilometre", "kilometer", "square"),
    "kilometer": ("kilometre",),
    "mile": ("area",),
    "old": ("age",),
    "older": ("age",),
    "oldest": ("age",),
    "young": ("age",),
    "younger": ("age",),
    "youngest": ("age",),
    "tall": ("height",),
    "taller": ("height",),
    "tallest": ("height",),
    "high": ("height",),
    "higher": ("height",),
    "highest": ("height",),
    "long": ("length",),
    "longer": ("length",),
    "longest": ("length",),
}
# size adjectives name a field only weakly: an explicit field word ("by population") wins
_WEAK_SYNONYMS = frozenset(
    {
        "large",
        "larger",
        "largest",
        "big",
        "bigger",
        "biggest",
        "small",
        "smaller",
        "smallest",
        "high",
        "higher",
        "highest",
    }
)


def synonyms(stemmed: str) -> tuple[str, ...]:
    """The word itself, then the schema words it may stand for."""
    return (stemmed, *_SYNONYMS.get(stemmed, ()))


def verb_bases(word: str) -> tuple[str, ...]:
    """The forms a past or -ing verb may come from: "directed" -> "direct"/"directe", "produced" ->
    "produc"/"produce", "starring" -> "star", "studied" -> "study". Candidates, not a lemmatizer:
    a form that is no word matches nothing, so only the right one ever counts."""
    for suffix in ("ed", "ing"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            base = word[: -len(suffix)]
            if suffix == "ed" and base.endswith("i"):
                return (base[:-1] + "y",)
            forms = [base, base + "e"]
            if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "aeiouls":
                forms.append(base[:-1])  # a doubled consonant: "stopped", "starring"
            return tuple(forms)
    return ()


# comparisons: "more than 5 million", "fewer than 2,000", "at least 3", "below 1.5 billion"
# "after 2019" / "before 2000": a year (or any number) compared in time
_MORE = r"more|greater|larger|bigger|higher|over|above|exceeding|longer|taller|older|after|later"
_LESS = r"less|fewer|smaller|lower|below|under|shorter|younger|before|earlier"
_COMPARE = re.compile(
    rf"\b(?:(at\s+least|at\s+most|no\s+more\s+than|no\s+less\s+than|(?:{_MORE}|{_LESS})(?:\s+than)?))\s+"
    r"(\d+(?:[,\s]\d{3})*(?:\.\d+)?)\s*(thousand|million|billion|k\b|bn\b)?",
    re.IGNORECASE,
)
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "billion": 1e9, "bn": 1e9}
_SUPERLATIVE = re.compile(
    r"\b(most\s+recent(?:ly)?|least\s+recent(?:ly)?|most|least|fewest|largest|biggest|smallest|highest|lowest|"
    r"greatest|longest|shortest|tallest|oldest|youngest|newest|latest|earliest)\b",
    re.IGNORECASE,
)
_DESCENDING = frozenset({"most", "largest", "biggest", "highest", "greatest", "longest", "tallest", "oldest"})
# superlatives said in time: on a field that holds a year they order by the year itself
_LATEST_IN_TIME = frozenset({"newest", "latest", "youngest", "most recent", "most recently"})
_EARLIEST_IN_TIME = frozenset({"oldest", "earliest", "least recent", "least recently"})
# words naming a field that holds a year (of birth, founding, release...), its name or its description
_YEAR_FIELD_WORDS = frozenset(
    {"year", "born", "birth", "founded", "established", "release", "released", "built", "opened", "started", "since"}
)


def holds_year(field_words: Iterable[str]) -> bool:
    """Whether a numeric field named and described by ``field_words`` holds a year ("born", "Year founded")."""
    return any(w in _YEAR_FIELD_WORDS for w in field_words)


def superlative_descending(word: str, in_years: bool) -> bool:
    """Whether the superlative ``word`` keeps the largest value of its field.

    On a field holding a year the words of time order by the year: "the oldest director" has the
    smallest year of birth and "the studio founded most recently" the largest year founded, while on
    any other field "oldest" keeps the largest value (an age) as "largest" does.
    """
    w = " ".join(word.lower().split())
    if in_years and w in _LATEST_IN_TIME:
        return True
    if in_years and w in _EARLIEST_IN_TIME:
        return False
    # plain sense: an age ("youngest" keeps the smallest), a date kept as any number ("newest" the largest)
    return w in _DESCENDING or (w in _LATEST_IN_TIME and w != "youngest")


def comparison_op(phrase: str) -> str:
    """``"more than"`` -> ``">"``, ``"at most"`` -> ``"<="`` (the phrase as matched by ``_COMPARE``)."""
    p = " ".join(phrase.lower().split())
    if p in ("at least", "no less than"):
        return ">="
    if p in ("at most", "no more than"):
        return "<="
    return ">" if re.match(rf"(?:{_MORE})\b", p) else "<"
