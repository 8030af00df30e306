"""What the question says: the entity names it holds, the labels it asks for, its logic words."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kag.lm.lexical.schema import NameListing, NameLookup, _Schema
from kag.lm.lexical.text import (
    _COMPARE,
    _CONNECTORS,
    _PREPOSITIONS,
    _SCALE,
    _STOPWORDS,
    _SUPERLATIVE,
    _WH,
    _YES_NO,
    ANY,
    comparison_op,
    synonyms,
    verb_bases,
)
from kag.ranking.linking import abbreviates
from kag.text import says_count, says_negation, stem, words

# -- what the question says ------------------------------------------------------------


@dataclass
class _Mention:
    start: int
    end: int
    names: dict[str, str]  # label -> canonical name ("*" when the label is unknown)
    exact: bool
    after_preposition: bool


@dataclass
class _Compare:
    """``<field> <op> <value>`` asked for by a phrase ("more than 5 million people")."""

    op: str
    value: int | float
    start: int  # token span of the phrase (the number and its unit words)
    end: int
    written: int | float | None = None  # the number as written, where a scale word changed it ("170 million")


@dataclass
class _Superlative:
    """ "the most populous", "the smallest ... by area": order by a field, keep the first
    (which end: :func:`~kag.lm.lexical.text.superlative_descending` of ``word`` and the field)."""

    pos: int
    word: str  # as the question says it, lowercased ("oldest", "most recently")


@dataclass
class _Analysis:
    tokens: list[str]
    mentions: list[_Mention]
    target: str | None
    hints: set[str]
    rel_scores: dict[str, float]
    count: bool
    negated: bool
    # where the negation word is (token index), or None
    negation_at: int | None = None
    # relation label -> token positions of its strong words (outside names)
    rel_positions: dict[str, list[int]] | None = None
    compare: _Compare | None = None
    superlative: _Superlative | None = None
    # stems of the words that may name a field (outside names), with their positions
    field_words: list[tuple[int, str]] | None = None
    # the label words ("cities") by position: a relation word there names the label, not a hop
    label_at: dict[int, str] | None = None

    @property
    def label_positions(self) -> frozenset[int]:
        return frozenset(self.label_at or ())


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
                # the canonical name: the search is then written as the graph names it
                name = hit.entity.search_text()
                names_of = getattr(hit.entity, "names", None)
                known = names_of() if callable(names_of) else [name]
                forms = [words(n) for n in known]
                if any(tokens == list(gram) for tokens in forms):
                    found.setdefault(label, name)
                elif fuzzy:
                    ratios = [
                        difflib.SequenceMatcher(None, text, " ".join(tokens)).ratio()
                        for tokens in forms
                        if len(tokens) == len(gram)
                    ]
                    if ratios and max(ratios) >= self.fuzzy_ratio:
                        close.append((max(ratios), label, name))
        if found:
            return found, True
        if close:
            best = max(r for r, _, _ in close)
            return {lab: nm for r, lab, nm in close if r == best}, False
        return {}, False

    async def abbreviation(self, gram: Sequence[str], labels: Sequence[str]) -> dict[str, str]:
        """``{label: name}`` of the entities ``gram`` names in a short or long form (one per label)."""
        found: dict[str, str] = {}
        if self.table:
            for key, entries in self.table.items():
                if abbreviates(list(gram), key.split()):
                    for label, name in entries:
                        if label in labels:
                            found.setdefault(label, name)
        if not found and isinstance(self.kb, NameListing):
            index = await self.kb.names()
            matched = index.abbreviated(" ".join(gram), labels)
            if len({entity_id for entity_id, _, _ in matched}) != 1:
                return {}  # none, or ambiguous ("AB" for two names): no guess
            for _, label, key in matched:
                hits = await self.kb.similarity_search(label, key, k=1, threshold=0.0)
                found.setdefault(label, hits[0].entity.search_text() if hits else key)
        return found


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
    """The schema's own words (labels, relations, docstrings): n-grams made only of them are no names."""
    vocab = set(_STOPWORDS)
    for rel in schema.relations.values():
        vocab.update(w for w, weight in rel.vocab.items() if weight >= 1.0)
    for entries in schema.label_phrases.values():
        for phrase, _ in entries:
            vocab.update(phrase)
    return vocab


# a stopword may start or end a name the graph holds ("US Dollar", "Saint John's"); these
# may, when the whole n-gram is then found exactly
_HARD_EDGES = _PREPOSITIONS | _WH | _YES_NO | {"and", "or", "than"}
_NEGATION_WORDS = frozenset(
    {"not", "no", "none", "without", "never", "neither", "nor", "outside", "except", "excluding", "besides"}
)
# two-word negations: "other than X", "apart from X"
_NEGATION_PAIRS = frozenset({("other", "than"), ("apart", "from")})


def _token_index(question: str, offset: int) -> int:
    """The index of the token starting at (or after) character ``offset``."""
    return len(words(question[:offset]))


def _find_compare(question: str) -> _Compare | None:
    m = _COMPARE.search(question)
    if m is None:
        return None
    digits = re.sub(r"[,\s]", "", m.group(2))
    value: int | float = float(digits) if "." in digits else int(digits)
    written: int | float | None = None
    if m.group(3):
        written = value
        value = value * _SCALE[m.group(3).lower()]
        value = int(value) if float(value).is_integer() else value
    return _Compare(
        comparison_op(m.group(1)),
        value,
        _token_index(question, m.start()),
        _token_index(question, m.end()),
        written,
    )


def _negation_at(tokens: Sequence[str]) -> int | None:
    for i, t in enumerate(tokens):
        if t in _NEGATION_WORDS or (t == "t" and i and tokens[i - 1].endswith("n")):
            return i
        if i + 1 < len(tokens) and (t, tokens[i + 1]) in _NEGATION_PAIRS:
            return i
    return None


_ACRONYM = re.compile(r"[A-Z]{2,6}")


async def _abbreviation_mentions(
    tokens: Sequence[str], raw: Sequence[str] | None, taken: list[bool], index: _NameIndex, labels: Sequence[str]
) -> list[_Mention]:
    """Names said in a short or long form the graph does not hold: an acronym written in capitals
    ("BWF"), or a name of capitalized words one of which is shortened or lengthened ("Theodore Vance"
    for Theo Vance). Only where the asker capitalizes (``raw``: the question's words as written)."""
    if raw is None:
        return []
    found: list[_Mention] = []
    for n in (3, 2, 1):
        for i in range(len(tokens) - n + 1):
            j = i + n
            if any(taken[i:j]):
                continue
            if n == 1 and not _ACRONYM.fullmatch(raw[i]):
                continue
            if n > 1 and not all(r[:1].isupper() for r in raw[i:j]):
                continue
            names = await index.abbreviation(tokens[i:j], labels)
            if names:
                prev = tokens[i - 1] if i else ""
                found.append(_Mention(i, j, names, False, prev in _PREPOSITIONS))
                for p in range(i, j):
                    taken[p] = True
    return found


async def _analyze(question: str, schema: _Schema, index: _NameIndex, max_ngram: int) -> _Analysis:
    tokens = words(question)
    stems = [stem(t) for t in tokens]
    vocab = _vocabulary(schema)
    weak_vocab = vocab | schema.relation_words
    labels = schema.entity_labels
    compare = _find_compare(question)
    sup = _SUPERLATIVE.search(question)
    superlative = (
        _Superlative(_token_index(question, sup.start()), " ".join(sup.group(1).lower().split())) if sup else None
    )

    # 1. entity mentions: longest exact n-grams first, then close spellings
    mentions: list[_Mention] = []
    # where the asker capitalizes names, a lowercase word is no misspelt name ("symbol" is not "Yambol")
    raw = re.findall(r"\w+", question)
    cased = (
        [t[:1].isupper() for t in raw] if len(raw) == len(tokens) and any(t[:1].isupper() for t in raw[1:]) else None
    )
    if index.available:
        taken = [False] * len(tokens)
        if compare is not None:  # "more than 5 million": a number, not a name
            for p in range(compare.start, min(compare.end, len(tokens))):
                taken[p] = True
        if superlative is not None and superlative.pos < len(tokens):
            taken[superlative.pos] = True  # "largest" is no misspelt name
        grams = [
            (i, j)
            for n in range(min(max_ngram, len(tokens)), 0, -1)
            for i in range(len(tokens) - n + 1)
            for j in [i + n]
        ]
        for fuzzy in (False, True):
            for i, j in grams:
                inside = [m for m in mentions if i <= m.start and m.end <= j]
                if any(taken[i:j]):
                    # a misspelt longer name may hold a shorter exact one ("Frech Guiana": "Guiana")
                    if not fuzzy or not inside or j - i < 2:
                        continue
                    if sum(m.end - m.start for m in inside) != sum(taken[i:j]):
                        continue
                gram = tokens[i:j]
                edge_ok = not fuzzy and len(gram) > 1
                if (gram[0] in _STOPWORDS and gram[0] != "the" and not (edge_ok and gram[0] not in _HARD_EDGES)) or (
                    gram[-1] in _STOPWORDS and not (edge_ok and gram[-1] not in _HARD_EDGES)
                ):
                    continue
                if all(stem(t) in vocab or t in vocab for t in gram):
                    continue  # "cities", "capital of": schema words, not names
                if fuzzy and (len("".join(gram)) < 5 or any(t.isdigit() for t in gram)):
                    continue
                if fuzzy and cased is not None and not any(cased[i:j]):
                    continue
                if fuzzy and all(stem(t) in weak_vocab for t in gram):
                    continue  # "belong" (a relation's docstring word) is no misspelt "Bong"
                names, exact = await index.lookup(gram, labels, fuzzy)
                if names and cased is not None and not any(cased[i:j]):
                    # where the asker capitalizes names, a lowercase word is the common noun, not a
                    # name the graph capitalizes ("the highest mountain", not the province Mountain)
                    names = {label: name for label, name in names.items() if name == name.lower()}
                if names and inside:
                    ratio = max(
                        difflib.SequenceMatcher(None, " ".join(gram), " ".join(words(n))).ratio()
                        for n in names.values()
                    )
                    if ratio < 0.9:
                        continue
                    mentions = [m for m in mentions if m not in inside]
                if names:
                    prev = tokens[i - 1] if i else ""
                    mentions.append(_Mention(i, j, names, exact, prev in _PREPOSITIONS))
                    for p in range(i, j):
                        taken[p] = True
    if index.available:
        mentions += await _abbreviation_mentions(tokens, raw if cased is not None else None, taken, index, labels)
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

    # 3. relation evidence (a word of the relation's name, its docstring, or an everyday synonym)
    rel_scores: dict[str, float] = dict.fromkeys(schema.relations, 0.0)
    rel_positions: dict[str, list[int]] = {label: [] for label in schema.relations}
    seen: set[tuple[str, str]] = set()
    field_words: list[tuple[int, str]] = []
    for p, st in enumerate(stems):
        if p in covered:
            continue
        # a verb in another form than the relation's name ("directed" for Directs) is evidence too,
        # but only for relations: "filmed" does not name the label Film
        forms = (*synonyms(st), *verb_bases(st))
        field_words.extend((p, f) for f in forms)
        for label, rel in schema.relations.items():
            weight = max(rel.vocab.get(f, 0.0) for f in forms)
            if weight >= 1.0:
                rel_positions[label].append(p)
            if weight and (label, st) not in seen:
                rel_scores[label] += weight
        seen.update((label, st) for label in schema.relations)

    target: str | None = None
    for pos, label, _weight in label_hits:
        window = tokens[max(0, pos - 3) : pos]
        if any(w in _WH or w == "many" for w in window):
            target = _across_verb(pos, label, rel_positions, schema) or label
            break
    if target is None:
        # "What are the capitals of ...", "How many neighbours ...": the asked word names a
        # relation; what is asked is that relation's subject
        named = {label for m in mentions[:3] for label in m.names if label != ANY}
        target = _relation_noun_target(tokens, covered, label_hits, rel_positions, schema, named)
    if target is None and label_hits:
        strong = [h for h in label_hits if h[2] >= 1.0] or label_hits
        target = strong[0][1]
    hints = {label for _, label, _ in label_hits if label != target}
    negation_at = _negation_at(tokens) if says_negation(question) else None
    return _Analysis(
        tokens=tokens,
        mentions=mentions[:3],
        target=target,
        hints=hints,
        rel_scores=rel_scores,
        count=says_count(question),
        negated=bool(says_negation(question)),
        negation_at=negation_at,
        rel_positions=rel_positions,
        compare=compare,
        superlative=superlative,
        field_words=field_words,
        label_at={pos: label for pos, label, weight in sorted(label_hits, key=lambda h: h[2])},
    )


def _across_verb(pos: int, label: str, rel_positions: Mapping[str, list[int]], schema: _Schema) -> str | None:
    """The label asked for across a relation verb between the question word and a label noun.

    "Who directed the films X acted in?": "films" names ``Film``, but the question asks who directed
    them, the other side of ``Film -[DirectedBy]-> Director``. Only a relation word in the three
    positions before the noun counts ("who directed the"), and only a relation with one label on
    the other side.
    """
    for r, positions in rel_positions.items():
        if not any(pos - 3 <= p < pos for p in positions):
            continue
        rel = schema.relations[r]
        if label in rel.subj and len(rel.obj) == 1 and label not in rel.obj:
            return rel.obj[0]
        if label in rel.obj and len(rel.subj) == 1 and label not in rel.subj:
            return rel.subj[0]
    return None


def _relation_noun_target(
    tokens: Sequence[str],
    covered: set[int],
    label_hits: Sequence[tuple[int, str, float]],
    rel_positions: Mapping[str, list[int]],
    schema: _Schema,
    named: set[str] | None = None,
) -> str | None:
    """The subject label of a relation named right after the question word, if any; its object label
    where the question names an entity of the subject's label alone ("Who directed <a film>?" asks
    for the director of ``Film -[DirectedBy]-> Director``, not for a film)."""
    label_at = {pos for pos, _, _ in label_hits}
    for w, token in enumerate(tokens):
        if token not in _WH and token != "many":
            continue
        for p in range(w + 1, min(len(tokens), w + 4)):
            if p in covered or p in label_at:
                return None
            rels = [label for label, ps in rel_positions.items() if p in ps]
            subjects = {lab for r in rels for lab in schema.relations[r].subj}
            objects = {lab for r in rels for lab in schema.relations[r].obj}
            if len(subjects) == 1:
                subject = next(iter(subjects))
                if named and subject in named and len(objects) == 1 and not objects & named:
                    return objects.pop()
                return subject
            if tokens[p] not in _STOPWORDS:
                return None
        return None
    return None
