"""Text normalization shared by name matching, keyword ranking and the hash embedder.

One home for "what counts as the same word": casefolded, accents stripped, whitespace
collapsed. Name linking, BM25 and the ``HashEmbedder`` all tokenize through here, so a
name found by one is found by the others.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize_text(text: str) -> str:
    """Casefold, strip accents and collapse whitespace (the form names are matched in)."""
    if text.isascii():  # nothing to decompose: skip the per-character pass
        return " ".join(text.casefold().split())
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(stripped.casefold().split())


def words(text: str) -> list[str]:
    """Normalized word tokens of ``text``."""
    return _WORD.findall(normalize_text(text))
