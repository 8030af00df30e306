"""Questions outside the schema: when no relation fits, search for what was asked and find nothing.

"Who is the president of France?" on a graph of countries and cities names no relation the schema
declares: picking the only relation whose endpoint types fit would answer with a confident wrong
list. When no word of the question names a relation (a word of a relation's docstring alone is too
weak: "official religion"), the question asks for no label the schema declares, and a content word of the
question is explained by nothing the schema holds
(labels, relation words, field names, names), ``LexicalLM`` abstains: it writes the *abstention
search* — a single pattern whose one side is the unexplained words themselves ("president"), any
relation, and the named entity on the other side. Such a text matches no entity the graph holds
(each scored side must pass the threshold), so the search returns no facts and the answer step says
"not found in the knowledge graph". The same shape in a labelled demo teaches abstention (see
:mod:`kag.lm.lexical.demos`): its free text is replaced by the new question's unexplained words.

Demos also move the boundary itself (:class:`Scope`): a word an answerable demo question uses is in
scope, however the schema spells its relations ("Which nations does X trade with?" once labelled),
and a word that only the questions of abstention demos use marks a question out of scope even where
the schema explains it. Any model can be held to this boundary: a ``KnowledgeRetriever`` asks
:class:`kag.lm.lexical.gate.ScopeGate` before its model (``abstain``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kag.lm.lexical.analysis import _NEGATION_WORDS, _Analysis
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.search import _hop
from kag.lm.lexical.text import _PREPOSITIONS, _STOPWORDS, _WH, _YES_NO, ANY, synonyms, verb_bases
from kag.text import stem

# words of a question that ask for nothing in particular ("What do you know about X?")
_GENERIC = frozenset(
    str.split(
        "know knows known tell say said about information info fact facts everything anything something detail "
        "details describe description related relate relation relations relationship relationships connected "
        "connection link linked links you your i we our my me like see look get want need kind type types "
        "other others same else more entity entities thing things item items exist exists use uses used"
    )
)


def _explained(schema: _Schema) -> frozenset[str]:
    """Stems the schema accounts for: label words, relation vocabularies, entity field words."""
    return schema.field_vocab | schema.label_words | schema.relation_words


@dataclass(frozen=True)
class Scope:
    """What labelled demos taught about the schema's boundary (stems of question words).

    ``in_scope``: words of answerable demo questions (explained, whatever the schema says);
    ``out_of_scope``: words only abstention demos' questions use (a question holding one asks
    for something the graph does not hold).
    """

    in_scope: frozenset[str] = frozenset()
    out_of_scope: frozenset[str] = frozenset()


def content_stems(a: _Analysis) -> set[str]:
    """Stems of the question's content words outside its names (what a demo can teach about scope)."""
    covered = {p for m in a.mentions for p in range(m.start, m.end)}
    return {
        stem(token)
        for p, token in enumerate(a.tokens)
        if p not in covered and _content_word(token) and stem(token) not in _GENERIC
    }


def learned_scope(demos: Iterable[tuple[_Analysis, Sequence[Mapping[str, Any]]]]) -> Scope:
    """The :class:`Scope` of ``(question analysis, search hops)`` demos (abstention searches are the unanswerable)."""
    answerable: set[str] = set()
    unanswerable: set[str] = set()
    for a, hops in demos:
        (unanswerable if is_abstention(hops) else answerable).update(content_stems(a))
    return Scope(frozenset(answerable), frozenset(unanswerable - answerable))


def is_abstention(hops: Sequence[Mapping[str, Any]]) -> bool:
    """True for the shape :func:`abstain_hop` writes: any relation, free words on a side of any label."""
    return bool(hops) and all(
        hop.get("relation_label") == ANY
        and any(
            hop.get(f"{side}_label") == ANY and hop.get(f"{side}_similarity_search", ANY) != ANY
            for side in ("subject", "object")
        )
        for hop in hops
    )


def _content_word(token: str) -> bool:
    return not (
        token.isdigit()
        or len(token) < 3
        or token in _STOPWORDS
        or token in _WH
        or token in _YES_NO
        or token in _NEGATION_WORDS
        or token in _GENERIC
    )


def unexplained(a: _Analysis, schema: _Schema, scope: Scope | None = None) -> list[int]:
    """Token positions of content words that no name, label, relation or field of the schema explains
    (nor an answerable demo, with ``scope``)."""
    covered = {p for m in a.mentions for p in range(m.start, m.end)}
    if a.superlative is not None:  # "most recently": the superlative's own words order, they ask for nothing
        covered.update(range(a.superlative.pos, a.superlative.pos + max(1, len(a.superlative.word.split()))))
    known = _explained(schema) | (scope.in_scope if scope is not None else frozenset())
    relation_words = schema.relation_words - schema.label_words
    out = []
    for p, token in enumerate(a.tokens):
        if p in covered or not _content_word(token):
            continue
        st = stem(token)
        if st in _GENERIC or any(form in known for form in synonyms(st)) or _variant_of(st, known):
            continue
        if any(base in relation_words and base not in _PAST_FORMS for base in verb_bases(st)):
            continue  # a relation's word as a verb ("headquartered" for "headquarters"); not a label's
        out.append(p)
    return out


# words that are also another verb's past form: a docstring's "found" (from "find") says nothing of
# "founded", nor its "left" of "lefted"; such a base is no evidence that a verb form is the relation's
_PAST_FORMS = frozenset({"found", "ground", "wound", "bound", "left", "saw", "lay", "fell", "bore", "spoke"})


def _variant_of(st: str, known: frozenset[str]) -> bool:
    """A noun derived from a known word or a spelling variant of one ("dependency" of "depend",
    "licence" of "license"): a known stem of five letters or more plus a noun suffix, or one letter apart."""
    if len(st) < 5:
        return False
    for k in known:
        if len(k) < 5:
            continue
        if st.startswith(k) and st[len(k) :] in _NOUN_SUFFIXES:
            return True
        if len(k) == len(st) and sum(x != y for x, y in zip(k, st, strict=True)) == 1:
            return True
    return False


_NOUN_SUFFIXES = frozenset({"ency", "ence", "ancy", "ance", "ent", "ant", "ion", "ation", "ment", "er", "or"})


_ASK = frozenset({"what", "which", "who"})
_LEAD = frozenset({"is", "are", "was", "were", "the", "a", "an", "most", "least"})


def asked_head(a: _Analysis) -> list[int]:
    """Token positions of the noun phrase a question asks for: the content words right after
    "What/Which ..." or "Who/What is the ..." ("the mayor" of "Who is the mayor of the capital of X?"),
    up to a name or a small word; empty when the question is not asked that way."""
    covered = {p for m in a.mentions for p in range(m.start, m.end)}
    at = next((p for p, t in enumerate(a.tokens) if t in _ASK), None)
    if at is None:
        return []
    p = at + 1
    led = False
    while p < len(a.tokens) and a.tokens[p] in _LEAD and p not in covered:
        led = True
        p += 1
    if a.tokens[at] == "who" and not led:
        return []  # "Who wrote X?": a verb follows, not the thing asked for
    return _phrase_at(a, p, covered)


def _phrase_at(a: _Analysis, p: int, covered: set[int]) -> list[int]:
    out = []
    while p < len(a.tokens) and p not in covered and a.tokens[p] not in _STOPWORDS:
        out.append(p)
        p += 1
    return out


def _nouns(a: _Analysis, head: list[int]) -> list[int]:
    """The positions of ``head`` that decide what it asks for: its last word where a preposition or
    the question's end closes it (a noun phrase: "the first king of", where "first" may be a schema
    word), else all of them ("Which packages share ...": the phrase ran on into the verb)."""
    after = head[-1] + 1
    closed = after >= len(a.tokens) or a.tokens[after] in _PREPOSITIONS or a.tokens[after] in _AUXILIARIES
    return head[-1:] if closed else head


# a verb's helper after a noun phrase closes it: "Which film school did X attend?" asks for a school
_AUXILIARIES = _YES_NO | {"had", "will"}


def superlative_head(a: _Analysis) -> list[int]:
    """Token positions of what a superlative orders ("peak" of "the highest peak of Japan")."""
    if a.superlative is None:
        return []
    covered = {p for m in a.mentions for p in range(m.start, m.end)}
    p = a.superlative.pos + 1
    while p < len(a.tokens) and a.tokens[p] in _LEAD:
        p += 1
    return _phrase_at(a, p, covered)


def out_of_schema(a: _Analysis, schema: _Schema, scope: Scope | None = None) -> bool:
    """True when the question asks for something no relation of the schema can give (see the module doc)."""
    if scope is not None and scope.out_of_scope & content_stems(a):
        return True  # a word only unanswerable demos used
    unknown = set(unexplained(a, schema, scope))
    if any(head and set(_nouns(a, head)) <= unknown for head in (asked_head(a), superlative_head(a))):
        return True  # what is asked for ("the mayor of ...", "the highest peak of ...") is nothing the schema holds
    if a.rel_positions is not None and any(a.rel_positions.values()):
        # a relation's word that only modifies what is asked ("What currency symbol ...", "Which
        # language school ..."): the head noun after it is something no part of the schema explains
        unknown = set(unexplained(a, schema, scope))
        if any(p + 1 in unknown and p > 0 and a.tokens[p - 1] in _WH for ps in a.rel_positions.values() for p in ps):
            return True
    if a.target is not None or a.compare is not None or a.superlative is not None:
        return False
    if any(a.rel_positions.values()) if a.rel_positions is not None else any(a.rel_scores.values()):
        return False  # a word of a relation's name; a docstring word alone ("official") is too weak
    return bool(unexplained(a, schema, scope))


def abstain_hop(a: _Analysis, schema: _Schema, words: str | None = None, scope: Scope | None = None) -> dict[str, Any]:
    """The abstention search: the unexplained words on one side, the named entity (if any) on the other."""
    if words is None:
        positions = unexplained(a, schema, scope)
        if not positions and scope is not None:  # out of scope by a taught word: that word is the free text
            positions = [p for p, t in enumerate(a.tokens) if stem(t) in scope.out_of_scope]
        words = " ".join(a.tokens[p] for p in positions)
    text = words or ANY
    free = (ANY, text)
    if not a.mentions:
        return _hop(free, ANY, (ANY, ANY))
    names = a.mentions[0].names
    label = next((lab for lab in names if lab != ANY), ANY)
    name = names[label] if label in names else next(iter(names.values()))
    fits_object = label == ANY or any(label in rel.obj for rel in schema.relations.values())
    if fits_object:
        return _hop(free, ANY, (label, name))
    return _hop((label, name), ANY, free)
