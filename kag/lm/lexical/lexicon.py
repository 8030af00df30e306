"""Relation words learned from demos: how the labelled questions say each relation.

A demo is reused whole only by a question asked the same way (:mod:`kag.lm.lexical.demos`). What it
teaches beyond that is its words: a question "Which packages does Quill pull in?" whose found search
uses ``DependsOn`` says that "pull" names ``DependsOn`` on this graph, although neither the relation's
name nor its docstring has the word. The rules (:mod:`kag.lm.lexical.search`) then score that relation
for any question using the word, whatever its shape or number of names.

A word is learned only when it is the demo's own: not inside an entity name, not a label word, not a
stopword, not already a word of some relation's vocabulary or an entity field, and used by the demos
of one relation only (a word two relations' demos share tells neither apart). Only demos with one
relation teach words: in a chain, which word says which hop is not known.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from kag.lm.lexical.analysis import _Analysis
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.text import _STOPWORDS, _WH
from kag.text import stem

DEMO_WORD_WEIGHT = 0.5
"""A learned word's evidence for its relation: above a docstring word (0.25), below a word of the
relation's own name (1.0), so a relation the question names by its name still wins."""


def demo_lexicon(demos: Sequence[tuple[Sequence[Mapping[str, Any]], _Analysis]], schema: _Schema) -> dict[str, str]:
    """``{stem: relation label}`` learned from ``(hops, analysis of the demo question)`` pairs."""
    known = schema.field_vocab | schema.relation_words | schema.label_words
    users: dict[str, set[str]] = defaultdict(set)
    for hops, a in demos:
        relations = {h.get("relation_label") for h in hops}
        if len(relations) != 1:
            continue
        (relation,) = relations
        if relation not in schema.relations:
            continue  # the abstention search, or a relation this schema lacks
        for st in _own_stems(a):
            if st not in known:
                users[st].add(str(relation))
    return {st: next(iter(rels)) for st, rels in users.items() if len(rels) == 1}


def with_lexicon(a: _Analysis, lexicon: Mapping[str, str]) -> _Analysis:
    """``a`` with its relation scores raised by the learned words it uses (each word once)."""
    if not lexicon:
        return a
    learned = {lexicon[st] for st in _own_stems(a) if st in lexicon}
    if not learned:
        return a
    scores = dict(a.rel_scores)
    for relation in learned:
        scores[relation] = scores.get(relation, 0.0) + DEMO_WORD_WEIGHT
    return dataclasses.replace(a, rel_scores=scores)


def _own_stems(a: _Analysis) -> set[str]:
    """The stems of ``a``'s words outside entity names and label words, stopwords left out, and not
    the noun a question asks for ("which *people*", "how many *people*"): that names what is
    asked, not the relation."""
    covered = {p for m in a.mentions for p in range(m.start, m.end)} | a.label_positions
    asked = {p + 1 for p, token in enumerate(a.tokens) if token in _WH or token == "many"}
    return {
        stem(token)
        for p, token in enumerate(a.tokens)
        if p not in covered | asked and token not in _STOPWORDS and stem(token) not in _STOPWORDS and token.isalpha()
    }
