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
"""

from __future__ import annotations

from typing import Any

from kag.lm.lexical.analysis import _NEGATION_WORDS, _Analysis
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.search import _hop
from kag.lm.lexical.text import _STOPWORDS, _WH, _YES_NO, ANY, stem, synonyms

# words of a question that ask for nothing in particular ("What do you know about X?")
_GENERIC = frozenset(
    str.split(
        "know knows known tell say said about information info fact facts everything anything something detail "
        "details describe description related relate relation relations relationship relationships connected "
        "connection link linked links you your i we our my me like see look get want need kind type types "
        "other others same else more entity entities thing things item items exist exists"
    )
)


def _explained(schema: _Schema) -> frozenset[str]:
    """Stems the schema accounts for: label words, relation vocabularies, entity field words."""
    out: set[str] = set(schema.field_vocab)
    for entries in schema.label_phrases.values():
        for phrase, _ in entries:
            out.update(phrase)
    for rel in schema.relations.values():
        out.update(rel.vocab)
    return frozenset(out)


def unexplained(a: _Analysis, schema: _Schema) -> list[int]:
    """Token positions of content words that no name, label, relation or field of the schema explains."""
    covered = {p for m in a.mentions for p in range(m.start, m.end)}
    known = _explained(schema)
    out = []
    for p, token in enumerate(a.tokens):
        if p in covered or token.isdigit() or len(token) < 3:
            continue
        if token in _STOPWORDS or token in _WH or token in _YES_NO or token in _NEGATION_WORDS or token in _GENERIC:
            continue
        st = stem(token)
        if st in _GENERIC or any(form in known for form in synonyms(st)):
            continue
        out.append(p)
    return out


def out_of_schema(a: _Analysis, schema: _Schema) -> bool:
    """True when the question asks for something no relation of the schema can give (see the module doc)."""
    if a.rel_positions is not None and any(a.rel_positions.values()):
        # a relation's word that only modifies what is asked ("What currency symbol ...", "Which
        # language school ..."): the head noun after it is something no part of the schema explains
        unknown = set(unexplained(a, schema))
        if any(p + 1 in unknown and p > 0 and a.tokens[p - 1] in _WH for ps in a.rel_positions.values() for p in ps):
            return True
    if a.target is not None or a.compare is not None or a.superlative is not None:
        return False
    if any(a.rel_positions.values()) if a.rel_positions is not None else any(a.rel_scores.values()):
        return False  # a word of a relation's name; a docstring word alone ("official") is too weak
    return bool(unexplained(a, schema))


def abstain_hop(a: _Analysis, schema: _Schema, words: str | None = None) -> dict[str, Any]:
    """The abstention search: the unexplained words on one side, the named entity (if any) on the other."""
    text = words if words is not None else " ".join(a.tokens[p] for p in unexplained(a, schema)) or ANY
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
