"""Entity linking: which entities a similarity text names, and how well.

A text is linked to entities in three steps, the same on every backend:

1. **Exact name.** The text's *name key* (casefolded, accents stripped, punctuation and
   spacing collapsed: :func:`name_key`) is looked up among the keys of every entity's
   names (its key text and its aliases). Entities named exactly so win outright: they
   score 1.0 and nothing else matches. Several entities with that name (two cities
   called Santiago) are all returned.
2. **Fuzzy name + embedding.** Otherwise the candidates are the embedding's nearest
   entities. Each gets ``max(embedding score, name similarity)``, the name similarity
   being the best normalized InDel similarity (``2 * LCS / (len(a) + len(b))``, what
   rapidfuzz's ``fuzz.ratio`` computes) between the text's key and the candidate's
   name keys. A misspelt name ("Germny") scores high on the characters even where the
   embedding hesitates; a description ("the big city on the Seine") keeps its
   embedding score.
3. **Relative margin.** Only candidates within ``margin`` of the best one are kept, so a
   close sibling ("Niger" for "Nigeria") does not ride along with a near-exact match,
   while genuinely tied candidates are all returned.

Scores are rounded to float32, the precision Neo4j's ``vector.similarity.cosine``
returns, so a score exactly at the threshold is decided the same way on both backends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kag.text import words
from kag.validation import check_k, check_threshold

try:  # the same formula, in C++: used when installed (graph-kag[fast]); results are identical
    from rapidfuzz.distance import Indel as _Indel
except ImportError:  # pragma: no cover - exercised where rapidfuzz is absent
    _Indel = None


def name_key(text: str) -> str:
    """The form names are compared in: normalized words joined by single spaces."""
    return " ".join(words(text))


def _lcs(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


_MIN_ACRONYM = 2  # "UK": two letters still say two words
_MAX_ACRONYM = 6
_MIN_PART = 3  # a shortened name part keeps at least three letters ("Theo", "Liz")


def abbreviates(span: Sequence[str], name: Sequence[str]) -> bool:
    """Whether the words ``span`` name the same thing as the words ``name`` in a short or long form.

    Two forms, both independent of the domain: an **acronym** (one word whose letters are the
    initials of a name of two or more words, "bwf" for "blackwood wren films"), and a **name part
    shortened or lengthened** (as many words, each the same or one a prefix of the other of at
    least three letters, at least one the same: "theodore vance" for "theo vance").
    """
    if len(span) == 1 and len(name) >= 2:
        letters = span[0]
        initials = "".join(part[0] for part in name if part)
        return _MIN_ACRONYM <= len(letters) <= _MAX_ACRONYM and letters.isalpha() and letters == initials
    if len(span) != len(name) or len(span) < 2:
        return False
    same = changed = 0
    for a, b in zip(span, name, strict=True):
        if a == b:
            same += 1
            continue
        short, long = sorted((a, b), key=len)
        if len(short) < _MIN_PART or not long.startswith(short):
            return False
        changed += 1
    return same >= 1 and changed >= 1


def name_similarity(a: str, b: str) -> float:
    """Normalized InDel similarity of two name keys in [0, 1] (1.0: identical)."""
    if not a and not b:
        return 1.0
    if _Indel is not None:
        return float(_Indel.normalized_similarity(a, b))
    return 2.0 * _lcs(a, b) / (len(a) + len(b))


def as_float32(score: float) -> float:
    """``score`` at float32 precision (how Neo4j reports cosine similarities)."""
    return float(np.float32(score))


@dataclass(frozen=True)
class LinkSettings:
    """How similarity texts are linked to entities (see the module docstring).

    ``candidates``: how many nearest entities (by embedding) are considered when no name
    matches exactly. ``margin``: how far below the best candidate another may score and
    still match. ``fuzzy=False`` keeps the embedding score alone (exact names still win).
    """

    candidates: int = 50
    margin: float = 0.02
    fuzzy: bool = True

    def __post_init__(self) -> None:
        check_k(self.candidates, name="candidates", maximum=10_000)
        check_threshold(self.margin, name="margin")


class NameIndex:
    """Name keys of every entity: exact lookup by key, and each entity's keys for fuzzy scoring."""

    def __init__(self, entries: Iterable[tuple[str, str, Sequence[str]]] = ()) -> None:
        self._by_key: dict[str, list[tuple[str, str]]] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        # own names (not aliases) by (first letter, number of words): the only names a span can be a
        # short or long form of (an acronym's letters are the initials; a shortened part keeps its start)
        self._by_shape: dict[tuple[str, int], dict[str, str]] = {}
        for entity_id, label, names in entries:
            self.add(entity_id, label, names)

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, entity_id: str, label: str, names: Sequence[str]) -> None:
        """Index an entity's names (its key text first, then aliases)."""
        self.remove(entity_id)  # a re-added entity's old names go (its own name may have changed)
        keys = tuple(dict.fromkeys(k for k in (name_key(n) for n in names) if k))
        self._keys[entity_id] = keys
        if keys:
            self._by_shape.setdefault(_shape(keys[0]), {})[entity_id] = keys[0]
        for key in keys:  # distinct keys, and the entity's old entries are gone: one entry per key
            self._by_key.setdefault(key, []).append((entity_id, label))

    def remove(self, entity_id: str) -> None:
        """Forget an entity's names (nothing when it is not indexed)."""
        keys = self._keys.pop(entity_id, ())
        if keys:
            self._by_shape.get(_shape(keys[0]), {}).pop(entity_id, None)
        for key in keys:
            bucket = [entry for entry in self._by_key.get(key, ()) if entry[0] != entity_id]
            if bucket:
                self._by_key[key] = bucket
            else:
                self._by_key.pop(key, None)

    def exact(self, key: str, labels: Sequence[str]) -> list[str]:
        """Ids of the entities of ``labels`` one of whose names has this key (sorted)."""
        allowed = set(labels)
        return sorted(e for e, label in self._by_key.get(key, ()) if label in allowed)

    def named(self, labels: Sequence[str]) -> list[tuple[str, str]]:
        """``(entity id, name key)`` of every entity of ``labels``, by its own name (aliases left out)."""
        allowed = set(labels)
        out: list[tuple[str, str]] = []
        for entity_id, keys in self._keys.items():
            if keys and any(e == entity_id and label in allowed for e, label in self._by_key.get(keys[0], ())):
                out.append((entity_id, keys[0]))
        return sorted(out)

    def abbreviated(self, text: str, labels: Sequence[str]) -> list[tuple[str, str, str]]:
        """``(entity id, label, name key)`` of the entities of ``labels`` whose own name ``text`` is a
        short or long form of (:func:`abbreviates`: "BWF" for Blackwood Wren Films, "Theodore Vance"
        for Theo Vance), sorted.

        For a text no name links exactly; scans the names of ``labels`` (a question's few
        unlinked spans, not every write, pay for it).
        """
        span = words(text)
        if not span:
            return []
        allowed = set(labels)
        shape = (span[0][:1], len(span[0]) if len(span) == 1 else len(span))
        candidates = list(self._by_shape.get(shape, {}).items())
        if len(span) == 1:  # a one-word span is an acronym of a longer name only
            candidates = [c for c in candidates if len(c[1].split()) >= 2]
        out = []
        for entity_id, key in sorted(candidates):
            if abbreviates(span, key.split()):
                out += [
                    (e, label, key) for e, label in self._by_key.get(key, ()) if e == entity_id and label in allowed
                ]
        return sorted(out)

    def keys_of(self, entity_id: str) -> tuple[str, ...]:
        """The name keys of an entity (empty if unknown)."""
        return self._keys.get(entity_id, ())


def _shape(key: str) -> tuple[str, int]:
    """A name key's first letter and number of words (see ``NameIndex._by_shape``)."""
    parts = key.split()
    return (parts[0][:1] if parts else "", len(parts))


def fused_scores(
    text: str, embedding: Mapping[str, float], index: NameIndex, settings: LinkSettings
) -> dict[str, float]:
    """``max(embedding, name similarity)`` of each embedding candidate, at float32 precision."""
    key = name_key(text)
    out = {}
    for entity_id, score in embedding.items():
        fused = score
        if settings.fuzzy and key:
            names = index.keys_of(entity_id)
            if names:
                fused = max(fused, max(name_similarity(key, n) for n in names))
        out[entity_id] = as_float32(fused)
    return out


def link(
    text: str,
    labels: Sequence[str],
    embedding: Mapping[str, float],
    index: NameIndex,
    settings: LinkSettings,
) -> dict[str, float]:
    """The entities ``text`` names, with their scores: exact names win, else fused and margin-pruned."""
    exact = index.exact(name_key(text), labels)
    if exact:
        return dict.fromkeys(exact, 1.0)
    scores = fused_scores(text, embedding, index, settings)
    if not scores:
        return {}
    best = max(scores.values())
    floor = best - settings.margin
    return {entity_id: s for entity_id, s in scores.items() if s >= floor}


def rank(
    text: str, labels: Sequence[str], embedding: Mapping[str, float], index: NameIndex, settings: LinkSettings
) -> list[tuple[str, float]]:
    """Candidates best first (exact names at 1.0, then fused scores; ties by id), without margin pruning."""
    exact = index.exact(name_key(text), labels)
    scores = fused_scores(text, {k: v for k, v in embedding.items() if k not in exact}, index, settings)
    scores.update(dict.fromkeys(exact, 1.0))
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
