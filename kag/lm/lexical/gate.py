"""``ScopeGate``: the schema's boundary as its own unit, shared by programs and ``LexicalLM``.

A question that asks for something no relation of the schema can give ("Who is the president of
France?" on a graph of countries and cities) should not reach a model that picks the nearest
demo's relation for any question. The gate reads the question lexically (names linked in the
knowledge base, label and relation words, what the demos taught about the boundary: see
:mod:`kag.lm.lexical.scope`) and, when it is outside the schema, returns the *abstention search*:
a search that finds nothing, so the answer step says "not found".

A ``KnowledgeRetriever`` asks the gate before its model (``abstain``); ``LexicalLM`` asks the same
gate for its own searches. One gate per knowledge base (:meth:`ScopeGate.shared`) caches each
question's analysis, so the two read a question once.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kag.lm.lexical.analysis import _Analysis, _analyze, _NameIndex
from kag.lm.lexical.answer import _question
from kag.lm.lexical.schema import NameLookup, _Schema, _schema_from_json
from kag.lm.lexical.scope import Scope, abstain_hop, learned_scope, out_of_schema
from kag.lm.lexical.search import _finish

__all__ = ["ScopeGate"]

DEFAULT_MAX_NGRAM = 6
DEFAULT_FUZZY_RATIO = 0.8
_CACHE_SIZE = 1024

DemoSearch = tuple[str, Mapping[str, Any]]


class ScopeGate:
    """Decides whether a question is outside a schema, and writes the search that then finds nothing.

    Args:
        knowledge_base: where the question's names are looked up (``similarity_search``), or None.
        names: an explicit ``{label: [names]}`` index, used before the knowledge base.
        max_ngram: the longest name, in words, that is looked up.
        fuzzy_ratio: how close a misspelled name must be (difflib ratio) to be linked.
    """

    def __init__(
        self,
        knowledge_base: NameLookup | None = None,
        *,
        names: Mapping[str, Iterable[str]] | None = None,
        max_ngram: int = DEFAULT_MAX_NGRAM,
        fuzzy_ratio: float = DEFAULT_FUZZY_RATIO,
    ) -> None:
        self.knowledge_base = knowledge_base
        self.max_ngram = max_ngram
        self.fuzzy_ratio = float(fuzzy_ratio)
        self.index = _NameIndex(knowledge_base, names, self.fuzzy_ratio)
        self._analyses: dict[tuple[Any, ...], _Analysis] = {}

    _shared: weakref.WeakKeyDictionary[Any, ScopeGate] = weakref.WeakKeyDictionary()

    @classmethod
    def shared(cls, knowledge_base: NameLookup) -> ScopeGate:
        """The default gate of ``knowledge_base`` (one per knowledge base, so its analyses are shared)."""
        try:
            gate = cls._shared.get(knowledge_base)
        except TypeError:  # not weak-referenceable or not hashable: a gate of its own
            return cls(knowledge_base)
        if gate is None:
            gate = cls(knowledge_base)
            cls._shared[knowledge_base] = gate
        return gate

    async def analysis(self, question: str, schema: _Schema) -> _Analysis:
        """The question's lexical analysis against ``schema`` (cached: demos come with every request)."""
        key = (question, schema.entity_labels, tuple(schema.relations), schema.hop_fields)
        cached = self._analyses.get(key)
        if cached is None:
            cached = await _analyze(question, schema, self.index, self.max_ngram)
            if len(self._analyses) >= _CACHE_SIZE:
                self._analyses.pop(next(iter(self._analyses)))
            self._analyses[key] = cached
        return cached

    async def scope(self, demos: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], schema: _Schema) -> Scope:
        """What ``(question, hops)`` demos teach about the boundary (:func:`~kag.lm.lexical.scope.learned_scope`)."""
        return learned_scope([(await self.analysis(question, schema), hops) for question, hops in demos])

    def schema(self, json_schema: Mapping[str, Any]) -> _Schema:
        """The gate's reading of a triplet search (or chain) JSON schema."""
        return _schema_from_json(dict(json_schema), self.knowledge_base)

    async def search(
        self, question: str, json_schema: Mapping[str, Any], demos: Sequence[DemoSearch] = ()
    ) -> dict[str, Any] | None:
        """The abstention search when ``question`` asks for something the schema cannot give, else None.

        ``json_schema`` is the plain triplet search or chain schema; ``demos`` the labelled
        ``(question, search)`` pairs that move the boundary (a word an answerable demo asks with is in
        scope; a word only abstention demos use is out). The search returned finds nothing.
        """
        schema = self.schema(json_schema)
        analysis = await self.analysis(_question(question), schema)
        taught = []
        for text, search in demos:
            hops = search.get("hops") if "hops" in search else [search]
            if isinstance(hops, list) and hops and all(isinstance(h, Mapping) for h in hops):
                taught.append((_question(text), tuple(dict(h) for h in hops)))
        scope = await self.scope(taught, schema) if taught else None
        if not out_of_schema(analysis, schema, scope):
            return None
        hop = _finish([abstain_hop(analysis, schema, scope=scope)], schema)[0]
        props = json_schema.get("properties") or {}
        return {"hops": [hop]} if "hops" in props else hop
