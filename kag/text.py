"""Text normalization shared by name matching, keyword ranking and the hash embedder.

One home for "what counts as the same word": casefolded, accents stripped, whitespace
collapsed. Name linking, BM25 and the ``HashEmbedder`` all tokenize through here, so a
name found by one is found by the others.
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
