"""Learning from demos: adapt the search of the closest labelled question to the names of a new one.

Programs show few-shot demos as (user, assistant) message pairs before the request: the demo's input
rendered by the prompt template, then its search as JSON. ``LexicalLM`` reads them like a model
would. Each demo question is reduced to a *skeleton*: its words with every entity name it holds
replaced by a slot (``"which packages does <e> depend on"``). The new question's skeleton is
compared with each demo's (cosine over stems and bigrams, content words required to overlap); the
closest demo above ``_THRESHOLD`` gives its search — labels, relation, direction, ``negated``,
``bidirectional``, ``count``, chain shape, conditions, ordering — and only the similarity texts
change: a demo text that named the demo question's n-th entity becomes the new question's n-th
entity (as the graph names it, under the label the hop's side needs), a condition's value that the
demo question stated becomes the value the new question states, and the free words of an abstention
search (:mod:`kag.lm.lexical.scope`) become the new question's unexplained words. Anything that does
not map (a different number of names, a label that does not fit, a value the question lacks, a
negation or a count the new question does not ask for) makes that demo unusable; when no demo is
usable, the rules decide as without demos. Deterministic: ties go to the earlier demo.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kag.lm.base import Message, is_repair
from kag.lm.lexical.analysis import _Analysis
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.scope import unexplained
from kag.lm.lexical.text import _STOPWORDS, ANY
from kag.ranking.linking import name_key
from kag.text import stem, words

_THRESHOLD = 0.75  # skeleton cosine a demo needs to be used (tuned on the train split of the package benchmark)
_MIN_CONTENT = 0.5  # Jaccard overlap of content words: "capital of <e>" is no demo for "currency of <e>"
_SLOT = "<e>"
_SIDES = ("subject", "object")


@dataclass(frozen=True)
class Demo:
    """One labelled example read from the prompt: the question and its search as hops."""

    question: str
    hops: tuple[dict[str, Any], ...]
    chained: bool  # written as {"hops": [...]}


def read_demos(messages: Sequence[Message], question_of: Any) -> list[Demo]:
    """The (user, assistant) pairs before the request whose answer is a triplet search."""
    last = max((i for i, m in enumerate(messages) if _is_request(m)), default=-1)
    out: list[Demo] = []
    for i in range(last - 1):
        user, answer = messages[i], messages[i + 1]
        if not _is_request(user) or answer["role"] != "assistant":
            continue
        try:
            data = json.loads(answer["content"])
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        hops = data.get("hops") if "hops" in data else [data]
        if not isinstance(hops, list) or not hops or not all(_is_hop(h) for h in hops):
            continue
        out.append(Demo(question_of(user["content"]), tuple(dict(h) for h in hops), "hops" in data))
    return out


def _is_request(message: Message) -> bool:
    return message["role"] == "user" and not is_repair(message)


def _is_hop(hop: Any) -> bool:
    return isinstance(hop, dict) and {"subject_label", "relation_label", "object_label"} <= set(hop)


# -- similarity ---------------------------------------------------------------------------


def skeleton(a: _Analysis) -> list[str]:
    """The question's stems with each entity name replaced by one slot."""
    starts = {m.start: m for m in a.mentions}
    out: list[str] = []
    p = 0
    while p < len(a.tokens):
        if p in starts:
            out.append(_SLOT)
            p = starts[p].end
            continue
        out.append(stem(a.tokens[p]))
        p += 1
    return out


def _features(sk: Sequence[str]) -> dict[str, float]:
    feats: dict[str, float] = defaultdict(float)
    for w in sk:
        feats[w] += 1.0 if w not in _STOPWORDS else 0.5
    for x, y in itertools.pairwise(sk):
        feats[f"{x} {y}"] += 1.0
    return feats


def _content(sk: Sequence[str]) -> set[str]:
    return {w for w in sk if w not in _STOPWORDS}


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cosine of the skeletons' weighted words and bigrams; 0 when their content words barely overlap."""
    ca, cb = _content(a), _content(b)
    if (ca or cb) and len(ca & cb) / len(ca | cb) < _MIN_CONTENT:
        return 0.0
    fa, fb = _features(a), _features(b)
    dot = sum(v * fb[k] for k, v in fa.items() if k in fb)
    norm = math.sqrt(sum(v * v for v in fa.values())) * math.sqrt(sum(v * v for v in fb.values()))
    return dot / norm if norm else 0.0


# -- adaptation ---------------------------------------------------------------------------


def _mention_of(a: _Analysis, text: str) -> int | None:
    """The index of the mention of ``a`` whose name (any label) is ``text``."""
    key = name_key(text)
    for i, m in enumerate(a.mentions):
        if any(name_key(n) == key for n in m.names.values()):
            return i
    return None


def _name_for(a: _Analysis, index: int, label: str) -> tuple[str, str] | None:
    """``(label, name)`` of the new question's ``index``-th mention on a side labelled ``label``."""
    names = a.mentions[index].names
    if label == ANY:
        first = next(iter(names))
        return first, names[first]
    if label in names:
        return label, names[label]
    if ANY in names:  # a capitalized guess of unknown label
        return label, names[ANY]
    return None


def adapt(demo: Demo, demo_a: _Analysis, a: _Analysis, schema: _Schema) -> list[dict[str, Any]] | None:
    """The demo's hops rewritten for the new question, or None when they do not map onto it."""
    # the questions must agree on what their words say: "how many", and a negation word (a demo may still
    # teach a negation its words do not spell with one: "anything but X")
    if demo_a.count != a.count or demo_a.negated != a.negated:
        return None
    if a.negated and not any(h.get("negated") for h in demo.hops):
        return None
    used: dict[int, int] = {}  # demo mention index -> order of first use
    for hop in demo.hops:
        for side in _SIDES:
            text = hop.get(f"{side}_similarity_search", ANY)
            if isinstance(text, str) and text != ANY:
                i = _mention_of(demo_a, text)
                if i is not None:
                    used.setdefault(i, len(used))
    if len(used) != len(a.mentions) or len(demo_a.mentions) != len(a.mentions):
        return None
    free_demo = " ".join(demo_a.tokens[p] for p in unexplained(demo_a, schema))
    free_new = " ".join(a.tokens[p] for p in unexplained(a, schema))
    out: list[dict[str, Any]] = []
    for hop in demo.hops:
        new = dict(hop)
        for side in _SIDES:
            text = hop.get(f"{side}_similarity_search", ANY)
            if not isinstance(text, str) or text == ANY:
                continue
            label = str(hop.get(f"{side}_label", ANY))
            i = _mention_of(demo_a, text)
            if i is not None:
                # mentions are mapped by position: the demo's n-th name is the new question's n-th
                fit = _name_for(a, i, label)
                if fit is None:
                    return None
                new[f"{side}_label"] = label if label != ANY else ANY
                new[f"{side}_similarity_search"] = fit[1]
            elif hop.get("relation_label") == ANY or (free_demo and name_key(text) == name_key(free_demo)):
                # the free words of an abstention search (any relation): the new question's own
                if not free_new:
                    return None
                new[f"{side}_similarity_search"] = free_new
            elif set(words(text)) <= set(demo_a.tokens):
                return None  # a word of the demo question we cannot place in the new one
            # else: a constant of the demo's search (not in its question): kept
        for side in _SIDES:
            conditions = hop.get(f"{side}_where")
            if conditions:
                mapped = _map_conditions(conditions, demo_a, a)
                if mapped is None:
                    return None
                new[f"{side}_where"] = mapped
        out.append(new)
    if len(out) > max(1, schema.max_hops):
        return None
    for h in out:
        if h["relation_label"] != ANY and h["relation_label"] not in schema.relations:
            return None
    return out


def named_relations(a: _Analysis) -> set[str]:
    """The relations a question names by a strong word of theirs (outside its names)."""
    return {label for label, positions in (a.rel_positions or {}).items() if positions}


def overrides_question(demo_a: _Analysis, a: _Analysis, hops: Sequence[dict[str, Any]]) -> bool:
    """Whether an adapted demo search would override what the question itself says.

    A demo is reused for how a question is *asked*; what it asks *about* is the question's own. So
    the adapted search is refused when the question names relations (by their words) that the demo
    question did not and the search uses none of them ("Which courses does X teach?" shown "Which
    courses does Y take?"), or when the question asks for a label the demo did not and the search
    never reaches it.
    """
    used = {str(h.get("relation_label")) for h in hops}
    named = named_relations(a)
    if named and named != named_relations(demo_a) and not named & used:
        return True
    if a.target is not None and a.target != demo_a.target:
        reached = {str(h.get(f"{side}_label")) for h in hops for side in _SIDES}
        if a.target not in reached and ANY not in reached:
            return True
    return False


def _map_conditions(conditions: Any, demo_a: _Analysis, a: _Analysis) -> list[dict[str, Any]] | None:
    if not isinstance(conditions, list):
        return None
    mapped = []
    for cond in conditions:
        if not isinstance(cond, dict):
            return None
        value = cond.get("value")
        if demo_a.compare is not None and value == demo_a.compare.value:
            if a.compare is None:
                return None
            mapped.append({**cond, "value": a.compare.value})
        elif demo_a.compare is not None and demo_a.compare.written is not None and value == demo_a.compare.written:
            # the field holds the number as written ("170 million" stored as 170, "in millions")
            if a.compare is None:
                return None
            mapped.append({**cond, "value": a.compare.written if a.compare.written is not None else a.compare.value})
        elif isinstance(value, int | float) and str(value) in demo_a.tokens:
            return None  # a number the demo question stated and the new one may not
        else:
            mapped.append(dict(cond))
    return mapped


def best_demos(a: _Analysis, demos: Sequence[tuple[Demo, _Analysis]]) -> list[tuple[float, int]]:
    """``(similarity, index)`` of the demos above the threshold, closest first (earlier first on ties)."""
    sk = skeleton(a)
    scored = [(similarity(sk, skeleton(da)), i) for i, (_, da) in enumerate(demos)]
    return sorted((s for s in scored if s[0] >= _THRESHOLD), key=lambda s: (-s[0], s[1]))
