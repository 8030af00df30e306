"""Searches found from an answer: every search a schema allows for a question, simplest first.

A labelled question teaches nothing when no model writes the search that answers it. But the label
and the schema together are usually enough to *find* that search, the way a semantic parser is
learned from denotations: link the question's spans to the graph's entities, enumerate the
searches the schema allows around them (each typed pattern in each direction, count and negation,
two patterns joined on the asked entity with either one negated, a chain through one intermediate
label, comparisons and superlatives on a numeric field), run them, and keep those whose results
hold the label's answer. The simplest such search becomes the example's demo.

:class:`SearchSpace` does the enumeration and the cheap check (the label's values among the
results); the trainer then confirms a candidate by running the whole program with it
(:func:`kag.training.trace.forcing`). Everything is bounded: ``max_searches`` searches run and a
``deadline`` in seconds per example (:class:`SearchBudget`); what ran out is reported, not raised.

Where a question names an entity by a name the graph lacks ("the Infirmary" for "Royal
Infirmary of Leith"), the spans left unlinked are tried as each entity of the label a pattern
needs; a search found that way carries the *alias* it needs (``span -> name``), which the
retriever then keeps and applies to every search (:attr:`Found.aliases`).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.datamodels.schema import ANY, GraphSchema
from kag.errors import KagError
from kag.knowledge.base import KnowledgeBase
from kag.lm.guards import text_spans
from kag.query.plan import plan_triplet_search
from kag.ranking.linking import name_key
from kag.text import stem, words
from kag.training.explore import SearchBudget

__all__ = ["Found", "Link", "SearchSpace", "answer_values", "question_numbers"]

# exact-name links win; a fuzzy one (a misspelling) must be this close
_FUZZY_LINK = 0.9
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*)\s*(thousand|million|billion|k\b|m\b|bn\b)?", re.IGNORECASE)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9}


@dataclass(frozen=True)
class Link:
    """A span of the question linked to an entity (``alias``: the span is no name the graph holds)."""

    span: str
    label: str
    name: str
    alias: bool = False


@dataclass
class Found:
    """What the search for one example found: candidate searches, simplest first, and the cost."""

    candidates: list[dict[str, Any]] = field(default_factory=list)
    aliases: dict[str, list[Link]] = field(default_factory=dict)  # candidate key -> the aliases it needs
    searches: int = 0
    seconds: float = 0.0
    exhausted: str | None = None  # "max_searches" | "deadline" | None

    def aliases_of(self, candidate: Mapping[str, Any]) -> list[Link]:
        """The aliases ``candidate`` relies on (empty for one that names entities as the graph does)."""
        return self.aliases.get(_key(candidate), [])


def answer_values(label: Any) -> tuple[set[str], set[float]]:
    """The name keys and numbers a label holds (every leaf string and number, nested or not)."""
    names: set[str] = set()
    numbers: set[float] = set()

    def walk(value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int | float):
            numbers.add(float(value))
        elif isinstance(value, str):
            key = name_key(value)
            if key:
                names.add(key)
            if re.fullmatch(r"-?\d+(?:\.\d+)?", value.strip()):
                numbers.add(float(value))
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(label)
    return names, numbers


def _key(search: Mapping[str, Any]) -> str:
    return json.dumps(search, sort_keys=True)


def _hop(
    subject: tuple[str, str],
    relation: str,
    obj: tuple[str, str],
    **flags: Any,
) -> dict[str, Any]:
    return {
        "subject_label": subject[0],
        "subject_similarity_search": subject[1],
        "relation_label": relation,
        "object_label": obj[0],
        "object_similarity_search": obj[1],
        "negated": False,
        "bidirectional": False,
        "count": False,
        **flags,
    }


def question_numbers(text: str) -> list[float]:
    """The numbers a question states ("2 million" -> 2e6, "1,500" -> 1500), in order."""
    out: list[float] = []
    for match in _NUMBER.finditer(text):
        raw = match.group(1).replace(",", "")
        try:
            value = float(raw)
        except ValueError:
            continue
        scale = (match.group(2) or "").lower()
        out.append(value * _SCALES.get(scale, 1.0))
        if scale:  # "170 million" may be stored as 170 (a field "in millions")
            out.append(value)
    return list(dict.fromkeys(out))


class SearchSpace:
    """The searches a retriever's schema allows for a question, enumerated simplest first and checked
    against a label's answer on the knowledge base.

    Args:
        knowledge_base: where entities are linked and searches run.
        schema: the retriever's graph schema (labels, relations, numeric fields).
        max_hops: the longest chain the retriever may write (1: single patterns only).
        k, threshold: the retriever's search settings (results are judged as it would see them).
    """

    def __init__(
        self, knowledge_base: KnowledgeBase, schema: GraphSchema, max_hops: int, k: int, threshold: float
    ) -> None:
        self.kb = knowledge_base
        self.schema = schema
        self.max_hops = max_hops
        self.k = k
        self.threshold = threshold
        self.numeric = {
            label: [name for name, kind in schema.field_kinds(label).items() if kind in ("int", "float")]
            for label in schema.entities
        }

    # -- linking -------------------------------------------------------------------------------
    async def links(self, texts: Sequence[str], aliases: Mapping[str, Link] | None = None) -> list[Link]:
        """The question's spans linked to entities: exact names (and known ``aliases``), longest first;
        a span inside a longer linked span is not linked again."""
        found: list[Link] = []
        covered: list[set[int]] = []
        spans = sorted(text_spans(texts, names_only=True), key=lambda s: -len(s.split()))
        tokens = [words(t) for t in texts]
        for span in spans:
            positions = _positions(tokens, words(span))
            if positions and any(positions <= c for c in covered):
                continue
            key = name_key(span)
            if aliases and key in aliases:
                known = aliases[key]
                found.append(Link(span, known.label, known.name, alias=True))
                covered.append(positions)
                continue
            linked = await self._link(span)
            if not linked and stem(span.split()[-1].lower()) != span.split()[-1].lower():
                # a plural of a name ("mysteries" for the genre Mystery): its singular links
                linked = await self._link(" ".join([*span.split()[:-1], stem(span.split()[-1].lower())]))
            if not linked:
                continue
            best = linked[0].score
            for hit in linked:
                if hit.score >= best - 1e-6:
                    found.append(Link(span, hit.entity.label, hit.entity.search_text()))
            covered.append(positions)
        return found

    async def _link(self, text: str) -> list[Any]:
        """The entities ``text`` names (exact, or a close spelling), of the schema's labels."""
        hits = await self.kb.similarity_search(ANY, text, k=4, threshold=_FUZZY_LINK)
        return [h for h in hits if h.entity.label in self.schema.entities]

    async def entities_of(self, label: str, limit: int = 500) -> list[str]:
        """The names (as keys) of the entities of ``label``: for a span no name links, each is tried as
        what it stands for."""
        index = await self.kb.names()
        return [key for _, key in index.named([label])[:limit]]

    # -- enumeration -------------------------------------------------------------------------------
    def patterns(self, link: Link) -> Iterator[tuple[dict[str, Any], str]]:
        """Single patterns naming ``link``'s entity: ``(hop, asked side)`` for each relation and direction."""
        # an exact link quotes the question (what a model under a grammar can write); an alias, a
        # plural or a possessive runs under the graph's name (a search matches names, not forms)
        exact = not link.alias and name_key(link.span) == name_key(link.name)
        named = (link.label, link.span if exact else link.name)
        for spec in self.schema.relations.values():
            if link.label in spec.subj_labels:
                for other in spec.obj_labels:
                    yield _hop(named, spec.label, (other, ANY)), "object"
            if link.label in spec.obj_labels:
                for other in spec.subj_labels:
                    yield _hop((other, ANY), spec.label, named), "subject"

    def enumerate(self, links: Sequence[Link], numbers: Sequence[float], wants_number: bool) -> Iterator[list[dict]]:
        """Candidate chains (lists of hops), simplest first."""
        singles = [(hop, side) for link in links for hop, side in self.patterns(link)]
        # 1. one pattern, as stored; the count where a number is the answer
        for hop, _ in singles:
            yield [dict(hop, count=True) if wants_number else hop]
        # 2. either direction (a relation stored one way, asked the other)
        for hop, _ in singles:
            if hop["subject_label"] == hop["object_label"]:
                yield [dict(hop, bidirectional=True, count=wants_number)]
        # 3. the negation: the asked side lacks the relation to the named entity
        for hop, side in singles:
            if side == "subject":
                yield [dict(hop, negated=True, count=wants_number)]
        # 4. comparisons and superlatives on a numeric field of the asked side
        yield from self._numeric(singles, numbers, wants_number)
        if self.max_hops < 2:
            return
        # 5. two patterns joined on the asked entity, either one negated
        asked = [(hop, side) for hop, side in singles if side == "subject"]
        for (first, _), (second, _) in itertools.permutations(asked, 2):
            if first["subject_label"] != second["subject_label"] or first is second:
                continue
            if first["object_similarity_search"] == second["object_similarity_search"]:
                continue
            for negated in (False, True):
                yield [first, dict(second, subject_from="first_subject", negated=negated, count=wants_number)]
        # 6. a chain through one intermediate entity
        for hop, side in singles:
            yield from self._chains(hop, side, wants_number)
        # 7. no name at all: superlatives and comparisons over a whole label
        yield from self._unnamed(numbers, wants_number)

    def _numeric(
        self, singles: Sequence[tuple[dict[str, Any], str]], numbers: Sequence[float], wants_number: bool
    ) -> Iterator[list[dict[str, Any]]]:
        for hop, side in singles:
            label = hop[f"{side}_label"]
            for name in self.numeric.get(label, []):
                for value in numbers:
                    for op in (">", "<", ">=", "<="):
                        cond = [{"field": name, "op": op, "value": value}]
                        yield [dict(hop, **{f"{side}_where": cond}, count=wants_number)]
                if not wants_number:
                    for direction in ("desc", "asc"):
                        yield [dict(hop, order_by={"side": side, "field": name, "direction": direction}, limit=1)]

    def _chains(self, hop: dict[str, Any], side: str, wants_number: bool) -> Iterator[list[dict[str, Any]]]:
        """The named pattern, then one more from the entity it reached (read either way)."""
        if side == "object":  # named -> M: continue from M
            middle = hop["object_label"]
            first = hop
        else:  # M -> named: read it from the named side, either direction
            middle = hop["subject_label"]
            first = _hop(
                (hop["object_label"], hop["object_similarity_search"]),
                hop["relation_label"],
                (middle, ANY),
                bidirectional=True,
            )
        for spec in self.schema.relations.values():
            if middle in spec.subj_labels:
                for target in spec.obj_labels:
                    yield [first, _hop((middle, ANY), spec.label, (target, ANY), count=wants_number)]
            if middle in spec.obj_labels:
                for target in spec.subj_labels:
                    yield [
                        first,
                        _hop((middle, ANY), spec.label, (target, ANY), bidirectional=True, count=wants_number),
                    ]

    def _unnamed(self, numbers: Sequence[float], wants_number: bool) -> Iterator[list[dict[str, Any]]]:
        for spec in self.schema.relations.values():
            for subject, obj in itertools.product(spec.subj_labels, spec.obj_labels):
                hop = _hop((subject, ANY), spec.label, (obj, ANY))
                yield from self._numeric([(hop, "subject"), (hop, "object")], numbers, wants_number)

    # -- search -----------------------------------------------------------------------------------
    def _shaped(self, hops: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The chain as the retriever writes it (one pattern flat when ``max_hops`` is 1), or None when
        it cannot be planned here."""
        if len(hops) > self.max_hops:
            return None
        search: dict[str, Any] = {"hops": hops} if self.max_hops > 1 else dict(hops[0])
        try:
            plan_triplet_search(search, self.schema, k=self.k, threshold=self.threshold)
        except (KagError, ValueError):
            return None
        return search

    async def find(
        self,
        texts: Sequence[str],
        label: Any,
        budget: SearchBudget,
        *,
        aliases: Mapping[str, Link] | None = None,
        limit: int = 3,
    ) -> Found:
        """Up to ``limit`` searches whose results hold the label's answer, best first.

        A search holds the answer when the entities its results answer with (in each result, the
        entity farthest from those the question names, as an extractive answer step reads it)
        include every name of the label, or, for a number, when its count equals it. Best: fewest
        other entities answered, then the simplest. A label with neither (a "not found" answer)
        finds nothing.
        """
        started = time.perf_counter()
        found = Found()
        wanted, numbers = answer_values(label)
        text = " ".join(texts)
        # a name the question itself holds is no answer ("Which teams does Ada lead?" answers teams)
        asked_names = {name_key(s) for s in text_spans(texts, names_only=True)}
        wanted_names = {w for w in wanted if w not in asked_names}
        wants_number = bool(numbers) and not (wanted_names - {name_key(_fmt(n)) for n in numbers})
        if wants_number:
            wanted_names = set()
        if not wanted_names and not numbers:
            return found
        links = await self.links(texts, aliases)
        stated = question_numbers(text)
        scored: list[tuple[int, int, int, dict[str, Any]]] = []
        seen: set[str] = set()

        async def run(hops: list[dict[str, Any]], rank: int, needs: Sequence[Link]) -> bool:
            """Run one candidate; False once the budget is spent."""
            if found.searches >= budget.max_searches:
                found.exhausted = "max_searches"
                return False
            if time.perf_counter() - started > budget.deadline:
                found.exhausted = "deadline"
                return False
            search = self._shaped(hops)
            if search is None:
                return True
            key = _key(search)
            if key in seen:
                return True
            seen.add(key)
            found.searches += 1
            try:
                results = await self.kb.triplet_search(search, k=self.k, threshold=self.threshold, schema=self.schema)
            except (KagError, ValueError):
                return True
            named = {name_key(link.name) for link in [*links, *needs]} | {name_key(link.span) for link in links}
            extra = _matches(results, named, wanted_names, numbers, wants_number)
            if extra is not None:
                scored.append((extra, rank, len(scored), search))
                if needs:
                    found.aliases[key] = list(needs)
            return True

        used = [link for link in links if link.alias]
        for rank, hops in enumerate(self.enumerate(links, stated, wants_number), start=1):
            if not await run(hops, rank, [u for u in used if _quotes(hops, u.name)]):
                break
            if sum(1 for item in scored if item[0] == 0) >= limit:  # enough exact ones among the simplest
                break
        if not any(item[0] == 0 for item in scored) and found.exhausted is None:
            answer_labels = await self._labels_of(wanted_names)
            await self._try_aliases(texts, links, answer_labels, wants_number, run)
        found.seconds = time.perf_counter() - started
        scored.sort(key=lambda item: (item[0], item[1], item[2]))
        found.candidates = [search for *_, search in scored[:limit]]
        return found

    async def _labels_of(self, keys: set[str]) -> set[str]:
        """The labels of the entities named by these name keys."""
        index = await self.kb.names()
        labels = list(self.schema.entity_labels)
        out: set[str] = set()
        for key in keys:
            out.update(label for label in labels if index.exact(key, [label]))
        return out

    async def _try_aliases(
        self, texts: Sequence[str], links: Sequence[Link], answer_labels: set[str], wants_number: bool, run: Any
    ) -> None:
        """Spans no name links, tried as each entity of a label next to the answer's (an alias): one
        pattern from it to the answer's label, as stored, negated or counted."""
        tokens = [words(t) for t in texts]
        covered = [_positions(tokens, words(link.span)) for link in links]
        index = await self.kb.names()
        labels = list(self.schema.entity_labels)
        spans = [
            span
            for span in sorted(text_spans(texts, names_only=True), key=lambda s: -len(s.split()))
            if _capitalized(span)
            and not _sentence_start_only(texts, span)
            # inside a linked name ("Iron Tide" in "Iron Tide: Reckoning"), or a name the graph
            # holds: no alias
            and not any(_positions(tokens, words(span)) <= c for c in covered if c)
            and not index.exact(name_key(span), labels)
        ]
        neighbours: set[str] = set()
        for spec in self.schema.relations.values():
            if answer_labels & set(spec.subj_labels) or wants_number:
                neighbours.update(spec.obj_labels)
            if answer_labels & set(spec.obj_labels) or wants_number:
                neighbours.update(spec.subj_labels)
        for span in spans[:4]:
            for label in [lab for lab in self.schema.entity_labels if lab in neighbours]:
                for name in await self.entities_of(label):
                    link = Link(span, label, name, alias=True)
                    for hop, side in self.patterns(link):
                        if not wants_number and hop[f"{side}_label"] not in answer_labels:
                            continue
                        flags = [{}, {"negated": True}] if side == "subject" else [{}]
                        for flag in flags:
                            if not await run([dict(hop, count=wants_number, **flag)], 1000, [link]):
                                return


# words that open a question capitalized without being part of a name ("List the SF films")
_OPENERS = frozenset(
    [
        "list",
        "which",
        "what",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "how",
        "name",
        "show",
        "give",
        "find",
        "tell",
        "is",
        "are",
        "was",
        "were",
        "does",
        "do",
        "did",
        "can",
        "could",
        "all",
        "any",
        "each",
        "every",
        "the",
        "a",
        "an",
        "in",
        "on",
        "of",
        "for",
        "from",
        "by",
        "with",
        "apart",
        "besides",
        "except",
    ]
)


def _capitalized(span: str) -> bool:
    """A span that reads as a name: its first and last words capitalized (or numbers), and its first
    word none that opens a question or a clause."""
    parts = span.split()
    if parts[0].lower() in _OPENERS:
        return False
    return all(p[:1].isupper() or p[:1].isdigit() for p in (parts[0], parts[-1]))


def _quotes(hops: Sequence[Mapping[str, Any]], text: str) -> bool:
    return any(h.get(f) == text for h in hops for f in ("subject_similarity_search", "object_similarity_search"))


def _sentence_start_only(texts: Sequence[str], span: str) -> bool:
    """A one-word span capitalized only because it starts the question ("Which")."""
    if len(span.split()) > 1:
        return False
    return all(not re.search(r"(?<!^)\b" + re.escape(span) + r"\b", t.strip()) for t in texts)


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _positions(tokens: Sequence[Sequence[str]], span: Sequence[str]) -> set[int]:
    """The token positions (across texts) of the first occurrence of ``span``."""
    offset = 0
    n = len(span)
    for toks in tokens:
        for i in range(len(toks) - n + 1):
            if list(toks[i : i + n]) == list(span):
                return set(range(offset + i, offset + i + n))
        offset += len(toks) + 1
    return set()


def answered(results: Any, named: set[str]) -> set[str]:
    """The name keys a set of results answers with: in each result, the entity farthest from those
    the question names (the first one when it names none), as an extractive answer reads them."""
    out: set[str] = set()
    for hit in results:
        entities = list(hit.path) or [e for e in (hit.subject, hit.object) if e is not None]
        keys = [name_key(e.search_text()) for e in entities]
        if not keys:
            continue
        mentioned = [i for i, key in enumerate(keys) if key in named]
        if not mentioned:
            out.add(keys[0])
            continue
        far = max(range(len(keys)), key=lambda i: (min(abs(i - m) for m in mentioned), -i))
        if far not in mentioned:
            out.add(keys[far])
    return out


def _matches(results: Any, named: set[str], wanted: set[str], numbers: set[float], wants_number: bool) -> int | None:
    """How many entities beyond the answer the results answer with (None: they miss the answer)."""
    if wants_number:
        if results.count is not None and float(results.count) in numbers:
            return 0
        return None
    got = answered(results, named)
    if not got or not wanted <= got:
        return None
    return len(got - wanted)
