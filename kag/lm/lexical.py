"""``LexicalLM``: the offline default "model" — a lexical matcher, not a language model.

It needs no network and no weights, so ``make demo``, notebooks and tests run
anywhere. It answers two kinds of requests:

* **Triplet searches** (the schema of :func:`kag.triplet_search_schema` or
  :func:`kag.triplet_chain_schema`): it reads the question, finds the entity
  names the knowledge base holds (n-grams looked up with
  ``kb.similarity_search``, exact after normalization, or a close spelling),
  the declared labels ("cities" -> ``City``), the relation names split on
  CamelCase (``IsCapitalOf`` -> "capital") plus the words of the relation
  models' docstrings and field descriptions, and the logic words ("how many"
  -> ``count``, "not"/"without" -> ``negated``). It then picks the pattern whose
  endpoint types fit, or a chain of up to ``max_hops`` patterns when no single
  relation links the names to the label being asked for.
* **Anything else** (e.g. a Generator's answer model): it fills the schema
  *extractively* from the facts rendered in the prompt — the entities of the
  retrieved facts that the question did not mention, a count, or a property
  value — and says so in the answer. It never invents facts.

Limits (by design): no paraphrase or synonym understanding beyond the words of
labels, relation names and docstrings; no numeric comparisons ("more than 1
million"), no superlatives, no coreference; at most two named entities per
question; questions in English. Wrong guesses are possible when several
relations fit equally well (it then uses ``"*"``). Use a real model
(:class:`~kag.lm.OpenAICompatibleLM`, :class:`~kag.lm.OllamaLM`) for anything
beyond look-up questions.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kag.datamodels.base import Entity
from kag.errors import ConfigError
from kag.lm.base import BaseLanguageModel, Message

if TYPE_CHECKING:
    from kag.knowledge.base import KnowledgeBase

__all__ = ["LexicalLM"]

ANY = "*"
_REPAIR_PREFIX = "Your previous answer was invalid"
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
_NEGATION = re.compile(r"\b(not|no|none|without|never|neither|nor)\b|n't\b", re.IGNORECASE)
_COUNT = re.compile(r"\bhow\s+many\b|\bnumber\s+of\b|\bcount\b|\bhow\s+much\b", re.IGNORECASE)
_YES_NO = frozenset({"is", "are", "was", "were", "does", "do", "did", "can", "has", "have"})
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_REL_DESC = re.compile(r"([A-Za-z][A-Za-z0-9_]*): ([A-Za-z0-9_|]+) -> ([A-Za-z0-9_|]+)")
_SECTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$")
_FACT_TAIL = re.compile(r"^(.*?) \((score [0-9.]+.*)\)$")
_ARROW = re.compile(r" -\[([A-Za-z0-9_]+)\]-> | <-\[([A-Za-z0-9_]+)\]- ")
_CONNECTORS = frozenset({"of", "the", "de", "del", "la", "le", "am", "an", "da", "do", "al", "el", "and"})


_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Casefolded, accent-stripped word tokens.

    The same normalization as :func:`kag.rag.embedders.words` (kept here because
    ``kag.lm`` sits below ``kag.rag`` in the layering), so a name found in the
    question compares equal to the name the knowledge base embedded.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(" ".join(stripped.casefold().split()))


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


def _content_words(text: str) -> list[str]:
    return [stem(w) for w in words(text) if w not in _STOPWORDS or w in _WEAK_STOPWORDS]


# -- what the schema allows -----------------------------------------------------------


@dataclass
class _Relation:
    label: str
    subj: tuple[str, ...]
    obj: tuple[str, ...]
    vocab: dict[str, float] = field(default_factory=dict)


@dataclass
class _Schema:
    entity_labels: tuple[str, ...]
    relations: dict[str, _Relation]
    label_phrases: dict[str, list[tuple[tuple[str, ...], float]]]  # label -> (stems, weight)
    max_hops: int = 1


def _schema_from_json(json_schema: dict[str, Any], kb: KnowledgeBase | None) -> _Schema:
    """Read labels and relation endpoints from a triplet-search JSON schema."""
    props = json_schema.get("properties") or {}
    max_hops = 1
    if "hops" in props:
        hops = props["hops"]
        max_hops = int(hops.get("maxItems") or 1)
        props = (hops.get("items") or {}).get("properties") or {}
    entity_labels = tuple(
        v for v in (props.get("subject_label") or {}).get("enum", []) if isinstance(v, str) and v != ANY
    )
    rel_prop = props.get("relation_label") or {}
    rel_labels = [v for v in rel_prop.get("enum", []) if isinstance(v, str) and v != ANY]
    declared = {m.group(1): m for m in _REL_DESC.finditer(rel_prop.get("description") or "")}
    graph = kb.schema if kb is not None else None
    relations: dict[str, _Relation] = {}
    for label in rel_labels:
        if graph is not None and label in graph.relations:
            spec = graph.relations[label]
            subj, obj = spec.subj_labels, spec.obj_labels
        elif label in declared:
            subj = tuple(declared[label].group(2).split("|"))
            obj = tuple(declared[label].group(3).split("|"))
        else:
            subj = obj = entity_labels
        rel = _Relation(label, subj, obj)
        for w in split_identifier(label):
            if w not in _STOPWORDS:
                rel.vocab[stem(w)] = 1.0
        if graph is not None and label in graph.relations:
            model = graph.relations[label].model
            doc = model.__doc__ or ""
            base_doc = (model.__mro__[1].__doc__ or "") if len(model.__mro__) > 1 else ""
            texts = [doc] if doc and doc != base_doc and "subj:" not in doc else []
            for name, info in model.model_fields.items():
                if name not in ("label", "subj", "obj"):
                    texts.append(" ".join(split_identifier(name)))
                    if info.description:
                        texts.append(info.description)
            for text in texts:
                for w in _content_words(text):
                    rel.vocab.setdefault(w, 0.25)
        relations[label] = rel
    phrases: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    primary = {label: tuple(stem(w) for w in split_identifier(label)) for label in entity_labels}
    for label in entity_labels:
        entries = [(primary[label], 1.0)]
        if graph is not None and label in graph.entities:
            entity_model = graph.entities[label]
            doc_lines = (entity_model.__doc__ or "").strip().splitlines()
            if doc_lines and entity_model.__doc__ != Entity.__doc__:
                others = {w for other, ws in primary.items() if other != label for w in ws}
                for w in _content_words(doc_lines[0]):
                    if w not in others and (w,) != primary[label]:
                        entries.append(((w,), 0.5))
        phrases[label] = entries
    return _Schema(entity_labels, relations, phrases, max_hops)


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
        kb: KnowledgeBase | None,
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


# -- from analysis to a search ----------------------------------------------------------


@dataclass(frozen=True)
class _Fill:
    """What goes on one side of a pattern: a mention, the asked-for label, or anything."""

    kind: str  # "mention" | "target" | "any"
    index: int = -1


def _side_label(fill: _Fill, allowed: tuple[str, ...], a: _Analysis) -> tuple[str, str] | None:
    """``(label, text)`` for a fill on a side allowing ``allowed`` labels, or None if it cannot fit."""
    if fill.kind == "mention":
        names = a.mentions[fill.index].names
        options = [lab for lab in names if lab == ANY or lab in allowed]
        if not options:
            return None
        hinted = [lab for lab in options if lab in a.hints]
        label = (hinted or options)[0]
        if label == ANY:
            label = allowed[0] if len(allowed) == 1 else ANY
        return label, names[options[0] if not hinted else hinted[0]]
    if fill.kind == "target":
        if a.target is None or a.target not in allowed:
            return None
        return a.target, ANY
    return (allowed[0] if len(allowed) == 1 else ANY), ANY


def _hop(
    subject: tuple[str, str],
    relation: str,
    obj: tuple[str, str],
    *,
    bidirectional: bool = False,
    negated: bool = False,
    count: bool = False,
) -> dict[str, Any]:
    return {
        "subject_label": subject[0],
        "subject_similarity_search": subject[1],
        "relation_label": relation,
        "object_label": obj[0],
        "object_similarity_search": obj[1],
        "negated": negated,
        "bidirectional": bidirectional,
        "count": count,
    }


def _single_hop(a: _Analysis, schema: _Schema) -> tuple[float, dict[str, Any] | None, bool]:
    """The best single pattern: ``(score, hop, complete)``; complete = everything placed."""
    fills = [_Fill("mention", i) for i in range(len(a.mentions))]
    if a.target is not None:
        fills.append(_Fill("target"))
    fills.append(_Fill("any"))
    wanted = len(a.mentions) + (1 if a.target is not None else 0)
    scored: list[tuple[float, str, bool, _Fill, _Fill, tuple[str, str], tuple[str, str]]] = []
    for rel in schema.relations.values():
        for bidi in (False, True):
            subj_allowed, obj_allowed = (rel.obj, rel.subj) if bidi else (rel.subj, rel.obj)
            for sf in fills:
                for of in fills:
                    if sf == of and sf.kind != "any":
                        continue
                    s = _side_label(sf, subj_allowed, a)
                    o = _side_label(of, obj_allowed, a)
                    if s is None or o is None:
                        continue
                    placed = [f for f in (sf, of) if f.kind != "any"]
                    score = 4.0 * sum(f.kind == "mention" for f in placed)
                    score += 2.0 * sum(f.kind == "target" for f in placed)
                    score += 1.5 * a.rel_scores.get(rel.label, 0.0)
                    score -= 0.6 if bidi else 0.0
                    if sf.kind == "mention" and not a.mentions[sf.index].after_preposition:
                        score += 0.1
                    if of.kind == "mention" and a.mentions[of.index].after_preposition:
                        score += 0.1
                    if a.negated:
                        # negated rows are subjects: the asked-for side must be the subject
                        score += 1.0 if sf.kind == "target" else (-5.0 if of.kind == "target" else 0.0)
                    if a.target is None and sf.kind == "any" and of.kind == "mention":
                        score += 0.05  # "capital of France": the subject is what is asked
                    scored.append((score, rel.label, bidi, sf, of, s, o))
    if not scored:
        return 0.0, None, False
    best = max(t[0] for t in scored)
    top = [t for t in scored if abs(t[0] - best) < 1e-9]
    first = top[0]
    score, rel_label, bidi, sf, of, s, o = first
    same_shape = {t[1] for t in top if (t[2], t[3], t[4]) == (bidi, sf, of)}
    # several relations fit equally well: do not guess, search any relation
    relation = rel_label if len(same_shape) == 1 else ANY
    n_placed = sum(f.kind != "any" for f in (sf, of))
    hop = _hop(s, relation, o, bidirectional=bidi, negated=a.negated, count=a.count)
    return score, hop, n_placed >= wanted


def _chain(a: _Analysis, schema: _Schema, max_hops: int) -> list[dict[str, Any]] | None:
    """A path of patterns from a mentioned entity to the asked-for label (or back)."""
    if not a.mentions or a.target is None or max_hops < 2:
        return None
    mention = a.mentions[0]
    starts = [lab for lab in mention.names if lab != ANY] or list(schema.entity_labels)
    # edges between labels, grouped: (from, to, backward) -> relations
    edges: dict[tuple[str, str, bool], list[str]] = {}
    for rel in schema.relations.values():
        for s in rel.subj:
            for o in rel.obj:
                edges.setdefault((s, o, False), []).append(rel.label)
                edges.setdefault((o, s, True), []).append(rel.label)
    best: tuple[float, list[tuple[str, str, bool]], bool] | None = None
    for start in starts:
        for reverse in (False, True):
            src, dst = (a.target, start) if reverse else (start, a.target)
            paths: list[list[tuple[str, str, bool]]] = [[]]
            for _ in range(max_hops):
                grown = []
                for path in paths:
                    here = path[-1][1] if path else src
                    for frm, to, back in edges:
                        if frm == here and all(to != step[0] for step in path) and to != src:
                            grown.append([*path, (frm, to, back)])
                paths = grown
                for path in paths:
                    if path[-1][1] == dst:
                        cost = 10.0 * len(path) + 3.0 * sum(back for _, _, back in path) + reverse * 0.5
                        if best is None or cost < best[0]:
                            best = (cost, path, reverse)
    if best is None:
        return None
    _, path, reverse = best
    hops = []
    for i, (frm, to, back) in enumerate(path):
        rels = edges[(frm, to, back)]
        scores = [a.rel_scores.get(r, 0.0) for r in rels]
        top = max(scores)
        chosen = [r for r, sc in zip(rels, scores, strict=True) if sc == top]
        relation = chosen[0] if len(chosen) == 1 else ANY
        subj_text = mention.names.get(frm, ANY) if (i == 0 and not reverse) else ANY
        obj_text = mention.names.get(to, ANY) if (i == len(path) - 1 and reverse) else ANY
        if ANY in mention.names:  # unknown label (no name index): the text is the same for all
            subj_text = mention.names[ANY] if (i == 0 and not reverse) else subj_text
            obj_text = mention.names[ANY] if (i == len(path) - 1 and reverse) else obj_text
        hops.append(_hop((frm, subj_text), relation, (to, obj_text), bidirectional=back, count=a.count and i == 0))
    return hops


def _fallback(a: _Analysis) -> dict[str, Any]:
    """Facts around the first mention (any relation, either way), or around the asked-for label."""
    if a.mentions:
        names = a.mentions[0].names
        label = next(iter(names))
        return _hop((label, names[label]), ANY, (a.target or ANY, ANY), bidirectional=True, count=a.count)
    return _hop((a.target or ANY, ANY), ANY, (ANY, ANY), negated=False, count=a.count)


def _search(a: _Analysis, schema: _Schema, level: int) -> list[dict[str, Any]]:
    """The hops to answer with; ``level`` > 0 relaxes the choice after a failed validation."""
    if level >= 2:
        return [_fallback(a)]
    score, hop, complete = _single_hop(a, schema)
    hops: list[dict[str, Any]] | None = [hop] if hop is not None else None
    if not complete and not a.negated:
        chained = _chain(a, schema, schema.max_hops)
        if chained is not None:
            hops = chained
    if hops is None or (score <= 0.0 and not a.mentions and a.target is None):
        hops = [_fallback(a)]
    if level == 1:
        hops = [{**h, "relation_label": ANY} for h in hops]
    return hops


# -- answering from the rendered context -------------------------------------------------


@dataclass
class _Fact:
    nodes: list[str]
    labels: list[str | None]
    text: str
    score: float | None
    props: dict[str, dict[str, str]]


def _sections(text: str) -> dict[str, list[str]]:
    """``name: value`` sections of a rendered prompt; continuation lines belong to the last."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m and not line.startswith((" ", "-")):
            current = out.setdefault(m.group(1).lower(), [])
            if m.group(2) is not None and m.group(2).strip():
                current.append(m.group(2).strip())
        elif current is not None and line.strip():
            current.append(line.strip())
    return out


def _parse_fact(line: str) -> _Fact | None:
    body = line[2:] if line.startswith("- ") else line
    score: float | None = None
    props: dict[str, dict[str, str]] = {}
    m = _FACT_TAIL.match(body)
    if m:
        body = m.group(1)
        for part in m.group(2).split("; "):
            if part.startswith("score "):
                try:
                    score = float(part[6:])
                except ValueError:
                    score = None
            elif ": " in part:
                name, _, rest = part.partition(": ")
                props[name] = dict(p.split(" ", 1) for p in rest.split(", ") if " " in p)
    pieces = _ARROW.split(body)
    if len(pieces) >= 3:
        nodes = [p for i, p in enumerate(pieces) if i % 3 == 0]
        return _Fact(nodes, [None] * len(nodes), body, score, props)
    single = re.match(r"^(.*) \(([A-Za-z][A-Za-z0-9_]*)\)$", body)
    if single:  # a negated or zero-hop hit: "Lyon (City)"
        return _Fact([single.group(1)], [single.group(2)], body, score, props)
    return None


def _contains(tokens: list[str], name: str) -> bool:
    key = words(name)
    n = len(key)
    return n > 0 and any(tokens[i : i + n] == key for i in range(len(tokens) - n + 1))


@dataclass
class _Answer:
    text: str
    names: list[str]
    facts: list[_Fact]
    count: int | None
    found: bool


def _compose(prompt: str) -> _Answer:
    """The extractive answer to the question in ``prompt``, from the facts it lists."""
    sections = _sections(prompt)
    question = _question(prompt, sections)
    facts = [f for lines in sections.values() for ln in lines if (f := _parse_fact(ln)) is not None]
    if not sections:
        facts = [f for ln in prompt.splitlines() if "-[" in ln and (f := _parse_fact(ln.strip()))]
    count: int | None = None
    for line in sections.get("count", []):
        if re.fullmatch(r"-?\d+", line):
            count = int(line)
    tokens = words(question)
    source = f"top fact: {facts[0].text}" if facts else ""

    if count is not None:
        return _Answer(
            f"{count} (the number of matches the knowledge-graph query counted; extractive answer)",
            [str(count)],
            facts,
            count,
            True,
        )
    if not facts:
        return _Answer(
            "No matching facts were found in the knowledge graph, so I cannot answer "
            "(extractive answer: only retrieved facts are used).",
            [],
            [],
            None,
            False,
        )
    # a property question ("What is the population of Tokyo?")
    for fact in facts:
        for name, props in fact.props.items():
            if not _contains(tokens, name):
                continue
            for prop, value in props.items():
                if prop in tokens or stem(prop) in {stem(t) for t in tokens}:
                    return _Answer(
                        f"The {prop} of {name} is {value} (extractive answer; {source}).",
                        [value],
                        facts,
                        None,
                        True,
                    )
    names: list[str] = []
    for fact in facts:
        mentioned = [i for i, n in enumerate(fact.nodes) if _contains(tokens, n)]
        if mentioned:
            far = max(range(len(fact.nodes)), key=lambda i: (min(abs(i - m) for m in mentioned), -i))
            pick = None if far in mentioned else fact.nodes[far]
        else:
            pick = fact.nodes[0]
        if pick is not None and pick not in names:
            names.append(pick)
    if tokens and tokens[0] in _YES_NO:
        text = f"Yes: the knowledge graph states {facts[0].text} (extractive answer)."
        return _Answer(text, ["yes"], facts, None, True)
    if not names:  # every entity of the facts was named in the question
        return _Answer(f"{facts[0].text} (extractive answer).", [facts[0].nodes[0]], facts, None, True)
    shown = names[:10]
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return _Answer(
        f"{', '.join(shown)}{more} (extractive answer from {len(facts)} retrieved fact(s); {source}).",
        names,
        facts,
        None,
        True,
    )


def _resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **rest}
    return node if isinstance(node, dict) else {}


_REASON = re.compile(r"reason|rational|explan|justif|thought|thinking|analysis|note")
_SOURCE = re.compile(r"fact|source|citation|evidence|support|context|reference")


def _fill(name: str, prop: Any, root: dict[str, Any], ans: _Answer, depth: int = 0) -> Any:
    """A value for one schema property, from the extractive answer."""
    prop = _resolve(prop, root)
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        options = list(prop["enum"])
        lowered = [str(o).lower() for o in options]
        for candidate in (*ans.names, ans.text):
            if str(candidate).lower() in lowered:
                return options[lowered.index(str(candidate).lower())]
        return options[0] if options else None
    for key in ("anyOf", "oneOf"):
        if key in prop:
            branches = [_resolve(b, root) for b in prop[key]]
            non_null = [b for b in branches if b.get("type") != "null"]
            if not non_null:
                return None
            if not ans.found and len(non_null) < len(branches):
                return None
            return _fill(name, non_null[0], root, ans, depth)
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    lname = name.lower()
    if kind == "string":
        if _REASON.search(lname):
            return (
                "Extractive: selected from the retrieved facts by lexical matching "
                "(kag.lm.LexicalLM, not a language model); no reasoning was performed."
            )
        if _SOURCE.search(lname):
            return ans.facts[0].text if ans.facts else ""
        return ans.text
    if kind == "integer":
        if ans.count is not None:
            return ans.count
        return len(ans.names) if "count" in lname or "number" in lname or "total" in lname else len(ans.facts)
    if kind == "number":
        scores = [f.score for f in ans.facts if f.score is not None]
        if ans.count is not None and not ("score" in lname or "confidence" in lname):
            return float(ans.count)
        return float(scores[0]) if scores else 0.0
    if kind == "boolean":
        return ans.found
    if kind == "array":
        items = _resolve(prop.get("items") or {}, root)
        item_kind = items.get("type")
        if item_kind == "string":
            return [f.text for f in ans.facts] if _SOURCE.search(lname) else list(ans.names)
        if item_kind == "object" and depth < 4:
            return [_fill_object(items, root, ans, depth + 1)] if ans.found and prop.get("minItems") else []
        return []
    if kind == "object" or "properties" in prop:
        return _fill_object(prop, root, ans, depth + 1) if depth < 4 else {}
    if kind == "null":
        return None
    return ans.text


def _fill_object(schema: dict[str, Any], root: dict[str, Any], ans: _Answer, depth: int = 0) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: _fill(name, prop, root, ans, depth) for name, prop in props.items()}


class LexicalLM(BaseLanguageModel):
    """A lexical matcher, not a language model: fills triplet searches and extractive answers offline.

    No network, no weights, no understanding. See the
    module docstring for what it matches and its limits. It implements the
    :class:`~kag.lm.LanguageModel` protocol through :class:`BaseLanguageModel`,
    so its answers go through the same validation and repair loop as real models
    (after a failed validation it relaxes its choice: any relation, then the
    facts around the first name).

    Args:
        knowledge_base: where entity names are looked up (``kb.similarity_search``
            per n-gram of the question); without it (and without ``names``),
            capitalized words are taken as names, which is much weaker.
        names: an explicit ``{label: [names]}`` index, used instead of / before the kb.
        max_ngram: the longest name, in words, that is looked up.
        fuzzy_ratio: how close (difflib ratio) a misspelled name must be to be accepted.
        max_repairs: repairs allowed by the validation loop.
    """

    def __init__(
        self,
        knowledge_base: KnowledgeBase | None = None,
        *,
        names: Mapping[str, Iterable[str]] | None = None,
        max_ngram: int = 6,
        fuzzy_ratio: float = 0.8,
        max_repairs: int = 2,
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        if isinstance(max_ngram, bool) or not isinstance(max_ngram, int) or not 1 <= max_ngram <= 12:
            raise ConfigError(f"max_ngram must be an integer in [1, 12], got {max_ngram!r}.")
        if isinstance(fuzzy_ratio, bool) or not isinstance(fuzzy_ratio, int | float) or not 0.5 <= fuzzy_ratio <= 1:
            raise ConfigError(f"fuzzy_ratio must be a number in [0.5, 1], got {fuzzy_ratio!r}.")
        if knowledge_base is not None and not hasattr(knowledge_base, "similarity_search"):
            raise ConfigError("knowledge_base must be a kag.KnowledgeBase (it needs similarity_search).")
        self.knowledge_base = knowledge_base
        self.max_ngram = max_ngram
        self.fuzzy_ratio = float(fuzzy_ratio)
        self._index = _NameIndex(knowledge_base, names, self.fuzzy_ratio)
        self._has_names = names is not None

    @property
    def name(self) -> str:
        """``"lexical"`` — a lexical matcher, not a language model."""
        return "lexical"

    def get_config(self) -> dict[str, Any]:
        """Settings only; the knowledge base (a runtime object) and ``names`` are not serialized."""
        return {
            "type": "lexical",
            "max_ngram": self.max_ngram,
            "fuzzy_ratio": self.fuzzy_ratio,
            "max_repairs": self.max_repairs,
            "uses_knowledge_base": self.knowledge_base is not None,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, knowledge_base: KnowledgeBase | None = None) -> LexicalLM:
        """Rebuild from :meth:`get_config` output; pass the knowledge base it should look names up in."""
        if config.get("type", "lexical") != "lexical":
            raise ConfigError(f"not a lexical model config: type {config.get('type')!r}.")
        allowed = {"type", "max_ngram", "fuzzy_ratio", "max_repairs", "uses_knowledge_base"}
        unknown = sorted(set(config) - allowed)
        if unknown:
            raise ConfigError(f"unknown key(s) {unknown} in a lexical model config; allowed: {sorted(allowed)}.")
        if config.get("uses_knowledge_base") and knowledge_base is None:
            raise ConfigError(
                "this LexicalLM looked entity names up in a knowledge base: pass knowledge_base=... to rebuild it."
            )
        return cls(
            knowledge_base,
            max_ngram=int(config.get("max_ngram", 6)),
            fuzzy_ratio=float(config.get("fuzzy_ratio", 0.8)),
            max_repairs=int(config.get("max_repairs", 2)),
        )

    def __repr__(self) -> str:
        kb = getattr(self.knowledge_base, "uri", None)
        return f"LexicalLM(knowledge_base={kb!r}, max_ngram={self.max_ngram})"

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        prompt, level = _request(messages)
        props = json_schema.get("properties") or {}
        hop_keys = {"subject_label", "relation_label", "object_label"}
        hops_prop = props.get("hops") or {}
        is_chain = isinstance(hops_prop, dict) and hop_keys <= set(
            (hops_prop.get("items") or {}).get("properties") or {}
        )
        if hop_keys <= set(props) or is_chain:
            schema = _schema_from_json(json_schema, self.knowledge_base)
            question = _question(prompt)
            analysis = await _analyze(question, schema, self._index, self.max_ngram)
            hops = _search(analysis, schema, level)
            if is_chain:
                return json.dumps({"hops": hops[: max(1, schema.max_hops)]})
            return json.dumps(hops[0])  # a single-pattern schema never chains (max_hops is 1)
        answer = _compose(prompt)
        if level >= 1:  # the first fill was refused: keep only what the schema demands
            answer = _Answer(answer.text[:200], answer.names[:1], answer.facts[:1], answer.count, answer.found)
        return json.dumps(_fill_object(json_schema, json_schema, answer))


def _request(messages: Sequence[Message]) -> tuple[str, int]:
    """The real request (last non-repair user message) and how many repairs followed it."""
    level = 0
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        if message["content"].startswith(_REPAIR_PREFIX):
            level += 1
            continue
        return message["content"], level
    return "", level


def _question(prompt: str, sections: Mapping[str, list[str]] | None = None) -> str:
    """The question inside a rendered prompt (``query: ...`` style sections or plain text)."""
    sections = _sections(prompt) if sections is None else sections
    for key in ("query", "question", "q", "input", "request", "prompt", "text"):
        lines = [ln for ln in sections.get(key, []) if not ln.startswith("- ")]
        if lines:
            return " ".join(lines)
    for lines in sections.values():
        if len(lines) == 1 and lines[0].endswith("?"):
            return lines[0]
    if sections:
        first = [ln for ln in next(iter(sections.values())) if not ln.startswith("- ")]
        if first:
            return " ".join(first)
    plain = [ln.strip() for ln in prompt.splitlines() if ln.strip() and "-[" not in ln]
    return next((ln for ln in plain if ln.endswith("?")), plain[0] if plain else prompt)
