"""What the question says: the entity names it holds, the labels it asks for, its logic words."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kag.lm.lexical.schema import NameLookup, _Schema
from kag.lm.lexical.text import (
    _CONNECTORS,
    _COUNT,
    _NEGATION,
    _PREPOSITIONS,
    _STOPWORDS,
    _WH,
    _YES_NO,
    ANY,
    stem,
    words,
)

# -- what the question says ------------------------------------------------------------


@dataclass
class _Mention:
    start: int
    end: int
    names: dict[str, str]  # label -> canonical name ("*" when the label is unknown)
    exact: bool
    after_preposition: bool


@dataclass
class _Analysis:
    tokens: list[str]
    mentions: list[_Mention]
    target: str | None
    hints: set[str]
    rel_scores: dict[str, float]
    count: bool
    negated: bool


class _NameIndex:
    """Finds entity names in n-grams: through a knowledge base or a ``label -> names`` map."""

    def __init__(
        self,
        kb: NameLookup | None,
        names: Mapping[str, Iterable[str]] | None,
        fuzzy_ratio: float,
    ) -> None:
        self.kb = kb
        self.fuzzy_ratio = fuzzy_ratio
        self.table: dict[str, list[tuple[str, str]]] = {}  # normalized -> [(label, name)]
        for label, values in (names or {}).items():
            for name in values:
                self.table.setdefault(" ".join(words(name)), []).append((label, name))

    @property
    def available(self) -> bool:
        return self.kb is not None or bool(self.table)

    async def lookup(self, gram: Sequence[str], labels: Sequence[str], fuzzy: bool) -> tuple[dict[str, str], bool]:
        """``({label: name}, exact)`` for one n-gram, empty when nothing matches."""
        text = " ".join(gram)
        found: dict[str, str] = {}
        close: list[tuple[float, str, str]] = []
        if self.table:
            for label, name in self.table.get(text, []):
                if label in labels:
                    found.setdefault(label, name)
            if not found and fuzzy:
                for key in difflib.get_close_matches(text, list(self.table), n=3, cutoff=self.fuzzy_ratio):
                    if len(key.split()) == len(gram):
                        ratio = difflib.SequenceMatcher(None, text, key).ratio()
                        close += [(ratio, lab, nm) for lab, nm in self.table[key] if lab in labels]
        if self.kb is not None and not found:
            hits = await self.kb.similarity_search(ANY, text, k=8, threshold=0.0)
            for hit in hits:
                label = hit.entity.label
                if label not in labels:
                    continue
                name = hit.entity.search_text()
                tokens = words(name)
                if tokens == list(gram):
                    found.setdefault(label, name)
                elif fuzzy and len(tokens) == len(gram):
                    ratio = difflib.SequenceMatcher(None, text, " ".join(tokens)).ratio()
                    if ratio >= self.fuzzy_ratio:
                        close.append((ratio, label, name))
        if found:
            return found, True
        if close:
            best = max(r for r, _, _ in close)
            return {lab: nm for r, lab, nm in close if r == best}, False
        return {}, False


def _capitalized_mentions(question: str, labels: Sequence[str], vocab: set[str]) -> list[_Mention]:
    """Runs of capitalized words (not the first word) taken as names of unknown label."""
    raw = re.findall(r"[^\W_]+(?:['’][^\W_]+)?", question)
    tokens = words(question)
    if len(raw) != len(tokens):  # tokenizations disagree (odd punctuation): give up
        return []
    out: list[_Mention] = []
    i = 0
    while i < len(raw):
        if raw[i][:1].isupper() and not (i == 0 and tokens[0] in _STOPWORDS | _WH | _YES_NO):
            j = i + 1
            while j < len(raw) and (
                raw[j][:1].isupper() or (tokens[j] in _CONNECTORS and j + 1 < len(raw) and raw[j + 1][:1].isupper())
            ):
                j += 1
            name = " ".join(raw[i:j])
            prev = tokens[i - 1] if i else ""
            if all(t in vocab or stem(t) in vocab for t in tokens[i:j]):
                i = j
                continue
            out.append(_Mention(i, j, dict.fromkeys(labels, name), True, prev in _PREPOSITIONS))
            i = j
        else:
            i += 1
    return out


def _vocabulary(schema: _Schema) -> set[str]:
    vocab = set(_STOPWORDS)
    for rel in schema.relations.values():
        vocab.update(w for w, weight in rel.vocab.items() if weight >= 1.0)
    for entries in schema.label_phrases.values():
        for phrase, _ in entries:
            vocab.update(phrase)
    return vocab


async def _analyze(question: str, schema: _Schema, index: _NameIndex, max_ngram: int) -> _Analysis:
    tokens = words(question)
    stems = [stem(t) for t in tokens]
    vocab = _vocabulary(schema)
    labels = schema.entity_labels

    # 1. entity mentions: longest exact n-grams first, then close spellings
    mentions: list[_Mention] = []
    if index.available:
        taken = [False] * len(tokens)
        grams = [
            (i, j)
            for n in range(min(max_ngram, len(tokens)), 0, -1)
            for i in range(len(tokens) - n + 1)
            for j in [i + n]
        ]
        for fuzzy in (False, True):
            for i, j in grams:
                if any(taken[i:j]):
                    continue
                gram = tokens[i:j]
                if (gram[0] in _STOPWORDS and gram[0] != "the") or gram[-1] in _STOPWORDS:
                    continue
                if all(stem(t) in vocab or t in vocab for t in gram):
                    continue  # "cities", "capital of": schema words, not names
                if fuzzy and (len("".join(gram)) < 5 or any(t.isdigit() for t in gram)):
                    continue
                names, exact = await index.lookup(gram, labels, fuzzy)
                if names:
                    prev = tokens[i - 1] if i else ""
                    mentions.append(_Mention(i, j, names, exact, prev in _PREPOSITIONS))
                    for p in range(i, j):
                        taken[p] = True
    if not mentions:
        # no known name (or no index): capitalized words are names the graph may not hold,
        # searched as such so that nothing unrelated is returned for them
        mentions = _capitalized_mentions(question, labels, vocab)
    mentions.sort(key=lambda m: m.start)
    covered = {p for m in mentions for p in range(m.start, m.end)}

    # 2. label words ("which cities", "the country") outside mentions
    label_hits: list[tuple[int, str, float]] = []
    for label, entries in schema.label_phrases.items():
        for phrase, weight in entries:
            n = len(phrase)
            for i in range(len(stems) - n + 1):
                if tuple(stems[i : i + n]) == phrase and not covered & set(range(i, i + n)):
                    label_hits.append((i, label, weight))
    label_hits.sort(key=lambda h: (h[0], -h[2]))
    target: str | None = None
    for pos, label, _weight in label_hits:
        window = tokens[max(0, pos - 3) : pos]
        if any(w in _WH or w == "many" for w in window):
            target = label
            break
    if target is None and label_hits:
        strong = [h for h in label_hits if h[2] >= 1.0] or label_hits
        target = strong[0][1]
    hints = {label for _, label, _ in label_hits if label != target}

    # 3. relation evidence
    free = [s for p, s in enumerate(stems) if p not in covered]
    rel_scores = {
        label: sum(max((rel.vocab.get(s, 0.0),), default=0.0) for s in set(free))
        for label, rel in schema.relations.items()
    }
    return _Analysis(
        tokens=tokens,
        mentions=mentions[:2],
        target=target,
        hints=hints,
        rel_scores=rel_scores,
        count=bool(_COUNT.search(question)),
        negated=bool(_NEGATION.search(question)),
    )
