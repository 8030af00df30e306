"""Question skeletons: a question with its names masked, to choose worked examples by.

Two questions asked the same way about different things ("What is the capital of Peru?",
"What is the capital of Chad?") should be each other's nearest demos, and two questions about
the same thing asked differently ("Which cities are in Chad?") should not. A bag-of-words
embedding of the raw text gets this backwards when the names are the rarest words. Masking the
names first (the masked-question similarity DAIL-SQL uses to pick text-to-SQL examples) makes
the comparison about how a question is asked, which is what a demo teaches.

A name is a text the demo's own search quotes (its similarity texts), or, in any question, a
capitalized word that is not one of the usual sentence openers, or a number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "skeleton"]

MASK = "NAME"
"""What every masked name becomes (one token, so a two-word name weighs like a one-word one)."""

# capitalized words that open or shape questions rather than name things
_OPENERS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "give",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "list",
        "name",
        "of",
        "on",
        "or",
        "show",
        "tell",
        "the",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
    }
)
_TOKEN = re.compile(r"[^\W_](?:[\w'’.-]*[^\W_])?")


def skeleton(text: str, names: Iterable[str] = ()) -> str:
    """``text`` with ``names`` and name-like words replaced by :data:`MASK` (runs collapse to one)."""
    masked = text
    for name in sorted({n for n in names if isinstance(n, str) and n.strip() and n != "*"}, key=len, reverse=True):
        masked = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", MASK, masked, flags=re.IGNORECASE)
    out: list[str] = []
    for match in _TOKEN.finditer(masked):
        word = match.group(0)
        bare = re.sub(r"['’]s$", "", word)  # "What's", "Ghana's"
        is_name = word == MASK or word[0].isdigit() or (word[0].isupper() and bare.lower() not in _OPENERS)
        token = MASK if is_name else word.lower()
        if not (token == MASK and out and out[-1] == MASK):
            out.append(token)
    return " ".join(out)
