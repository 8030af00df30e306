"""Text normalization shared by name matching, keyword ranking, the hash embedder and the offline model.

One home for "what counts as the same word": casefolded, accents stripped, whitespace
collapsed (:func:`normalize_text`, :func:`words`); identifiers split into words
(:func:`split_identifier`); a tiny English plural stemmer (:func:`stem`). Name linking, BM25, the
``HashEmbedder``, ``LexicalLM`` and the programs all tokenize through here, so a name found by one is
found by the others.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+", re.UNICODE)
# letters that Unicode does not decompose into a base letter and an accent
_FOLD = str.maketrans(
    {
        "ł": "l",
        "Ł": "l",
        "ø": "o",
        "Ø": "o",
        "đ": "d",
        "Đ": "d",
        "ħ": "h",
        "Ħ": "h",
        "ı": "i",
        "æ": "ae",
        "Æ": "ae",
        "œ": "oe",
        "Œ": "oe",
        "þ": "th",
        "Þ": "th",
        "ð": "d",
    }
)


def normalize_text(text: str) -> str:
    """Casefold, strip accents and collapse whitespace (the form names are matched in)."""
    if text.isascii():  # nothing to decompose: skip the per-character pass
        return " ".join(text.casefold().split())
    decomposed = unicodedata.normalize("NFKD", text.translate(_FOLD))
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(stripped.casefold().split())


def words(text: str) -> list[str]:
    """Normalized word tokens of ``text``."""
    return _WORD.findall(normalize_text(text))


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def split_identifier(identifier: str) -> list[str]:
    """``"IsCapitalOf"`` -> ``["is", "capital", "of"]`` (also splits ``snake_case``)."""
    out: list[str] = []
    for part in re.split(r"[_\W]+", identifier):
        out.extend(w.lower() for w in _CAMEL.findall(part))
    return out


def stem(word: str) -> str:
    """A tiny English plural stemmer: cities -> city, capitals -> capital, boxes -> box."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "zes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# words that ask for a negation or a count: the offline model reads them, and programs under a grammar
# let a small model set a search's ``negated`` / ``count`` only where the question says one
NEGATION_CUES = re.compile(
    r"\b(not|no|none|without|never|neither|nor|outside|except|excluding|besides)\b|\bother\s+than\b|"
    r"\bapart\s+from\b|n't\b",
    re.IGNORECASE,
)
COUNT_CUES = re.compile(r"\bhow\s+many\b|\bnumber\s+of\b|\bcount\b|\bhow\s+much\b", re.IGNORECASE)


def says_negation(text: str) -> bool:
    """Whether ``text`` holds a word of negation ("not", "without", "other than", "outside", "n't")."""
    return NEGATION_CUES.search(text) is not None


def says_count(text: str) -> bool:
    """Whether ``text`` asks for a number of things ("how many", "number of", "count")."""
    return COUNT_CUES.search(text) is not None
