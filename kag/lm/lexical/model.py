"""``LexicalLM``: the offline default "model" — a lexical matcher, not a language model.

It needs no network and no weights, so ``make demo``, notebooks and tests run
anywhere. It answers two kinds of requests:

* **Triplet searches** (the schema of :func:`kag.triplet_search_schema` or
  :func:`kag.triplet_chain_schema`): it reads the question, finds the entity
  names the knowledge base holds (n-grams looked up with
  ``kb.similarity_search``: a name or alias exact after normalization, or a
  close spelling; the search is written with the graph's own name), the
  declared labels ("cities" -> ``City``), the relation names split on
  CamelCase (``IsCapitalOf`` -> "capital") plus the words of the relation
  models' docstrings and field descriptions (and a few everyday synonyms:
  "neighbour" -> "border", "populous" -> "population"), and the logic words
  ("how many" -> ``count``, "not"/"without" -> ``negated``). It then picks
  the pattern whose endpoint types fit, or a chain of up to ``max_hops``
  patterns when no single relation links the names to the label being asked
  for, or when a chain uses more of the relations the question names ("the
  capitals of the countries that border X"). Two conditions on the asked-for
  entity ("Which countries in Africa use the Euro?", "... do not use the
  Euro?") become a chain through it, the second hop negated when the
  negation governs it. "more than 5 million people" becomes a
  ``subject_where``/``object_where`` condition and "the most populous" an
  ``order_by`` + ``limit`` 1, on a declared numeric field of the asked-for side.
* **Demos** (few-shot (user, assistant) pairs before the request, as programs
  send their ``examples``): when the question is close to a demo question once
  names are set aside, the demo's search is reused with this question's names
  (:mod:`kag.lm.lexical.demos`); otherwise the rules above decide.
* **Questions outside the schema** ("Who is the president of France?" on a
  graph without presidents): no relation is guessed; the abstention search finds
  nothing and the answer says "Not found in the knowledge graph"
  (:mod:`kag.lm.lexical.scope`).
* **Anything else** (e.g. a Generator's answer model): it fills the schema
  *extractively* from the facts rendered in the prompt — the entities of the
  retrieved facts that the search did not name, a count, or a property
  value — and says so in the answer; without facts, it quotes the best
  supporting sentence of the labelled passages shown and cites its label
  (:mod:`kag.lm.lexical.passages`; also an agent's JSON turns). It never
  invents facts.

Limits (by design): no paraphrase or synonym understanding beyond the words of
labels, relation names, docstrings, field descriptions and a short list of
everyday synonyms; no coreference; at most three named entities per question;
questions in English. Wrong guesses are possible when several relations fit
equally well (it then uses ``"*"``). Use a real model
(:class:`~kag.lm.OpenAICompatibleLM`, :class:`~kag.lm.OllamaLM`) for anything
beyond such questions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kag.errors import ConfigError, KagError
from kag.lm.base import BaseLanguageModel, Message, ModelCapabilities, is_repair
from kag.lm.lexical.analysis import _Analysis
from kag.lm.lexical.answer import _Answer, _compose, _fill_object, _question
from kag.lm.lexical.demos import Demo, adapt, best_demos, overrides_question, read_demos
from kag.lm.lexical.gate import DEFAULT_FUZZY_RATIO, DEFAULT_MAX_NGRAM, ScopeGate
from kag.lm.lexical.lexicon import demo_lexicon, with_lexicon
from kag.lm.lexical.passages import read_results, results_from_data
from kag.lm.lexical.schema import NameLookup, _Schema, _schema_from_json
from kag.lm.lexical.scope import Scope, abstain_hop, out_of_schema
from kag.lm.lexical.search import _finish, _search
from kag.query.plan import plan_triplet_search
from kag.validation import check_int, check_number


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
        knowledge_base: NameLookup | None = None,
        *,
        names: Mapping[str, Iterable[str]] | None = None,
        max_ngram: int = 6,
        fuzzy_ratio: float = 0.8,
        max_repairs: int = 2,
    ) -> None:
        super().__init__(max_repairs=max_repairs)
        check_int(max_ngram, name="max_ngram", maximum=12)
        check_number(fuzzy_ratio, name="fuzzy_ratio", minimum=0.5, maximum=1)
        if knowledge_base is not None and not hasattr(knowledge_base, "similarity_search"):
            raise ConfigError("knowledge_base must provide similarity_search() and schema (a kag.KnowledgeBase does).")
        self.knowledge_base = knowledge_base
        self.max_ngram = max_ngram
        self.fuzzy_ratio = float(fuzzy_ratio)
        self._has_names = names is not None
        defaults = max_ngram == DEFAULT_MAX_NGRAM and self.fuzzy_ratio == DEFAULT_FUZZY_RATIO
        # the knowledge base's own gate where this model reads names as it does: a retriever gated by
        # it and this model then analyse each question once
        self.gate = (
            ScopeGate.shared(knowledge_base)
            if knowledge_base is not None and names is None and defaults
            else ScopeGate(knowledge_base, names=names, max_ngram=max_ngram, fuzzy_ratio=self.fuzzy_ratio)
        )

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
    def from_config(cls, config: Mapping[str, Any], *, knowledge_base: NameLookup | None = None) -> LexicalLM:
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
            analysis = await self._analysis_of(question, schema)  # the scope gate may have read it
            demos = read_demos(messages, _question)
            hops = await self._from_demos(demos, analysis, schema) if level == 0 else None
            if hops is None:
                scope = await self._scope_of([(d.question, d.hops) for d in demos], schema) if demos else None
                if demos:  # no demo fits whole: the words the demos use for their relations still count
                    analysed = [(d.hops, await self._analysis_of(d.question, schema)) for d in demos]
                    analysis = with_lexicon(analysis, demo_lexicon(analysed, schema))
                hops = _rules(analysis, schema, level, scope)
            if is_chain:
                return json.dumps({"hops": hops[: max(1, schema.max_hops)]})
            return json.dumps(hops[0])  # a single-pattern schema never chains (max_hops is 1)
        action = _agent_action(json_schema)
        if action is not None:
            return json.dumps(_act(messages, action))
        data = _request_data(messages)
        results = results_from_data(data)
        if results is not None:  # the request as data: nothing of the rendered text is parsed back
            asked = data.get("question") if isinstance(data, Mapping) else None
            answer = _compose("", str(asked or ""), results)
        else:
            answer = _compose(prompt)
        if level >= 1:  # the first fill was refused: keep only what the schema demands
            answer = _Answer(
                answer.text[:200], answer.names[:1], answer.facts[:1], answer.count, answer.found, answer.labels[:1]
            )
        return json.dumps(_fill_object(json_schema, json_schema, answer))

    @property
    def capabilities(self) -> ModelCapabilities:
        """No grammar (its answers are validated like any model's); the scope gate on (its own boundary)."""
        return ModelCapabilities(scope_gate=True)

    async def scope_search(
        self,
        question: str,
        json_schema: Mapping[str, Any],
        demos: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> dict[str, Any] | None:
        """The abstention search when ``question`` is outside the schema, else None (:meth:`ScopeGate.search`)."""
        return await self.gate.search(question, json_schema, demos)

    async def _scope_of(self, demos: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], schema: _Schema) -> Scope:
        """What the demos teach about the schema's boundary (:func:`~kag.lm.lexical.scope.learned_scope`)."""
        return await self.gate.scope(demos, schema)

    async def _from_demos(
        self, demos: Sequence[Demo], analysis: _Analysis, schema: _Schema
    ) -> list[dict[str, Any]] | None:
        """The closest demo's search adapted to this question (see :mod:`kag.lm.lexical.demos`), or None."""
        if not demos:
            return None
        analysed = [(demo, await self._analysis_of(demo.question, schema)) for demo in demos]
        graph = getattr(self.knowledge_base, "schema", None)
        for _, i in best_demos(analysis, analysed):
            hops = adapt(demos[i], analysed[i][1], analysis, schema)
            if hops is None or overrides_question(analysed[i][1], analysis, hops):
                continue
            hops = _finish(hops, schema)
            if graph is not None:
                try:  # a search the graph cannot plan is no answer: try the next demo, then the rules
                    plan_triplet_search({"hops": hops}, graph)
                except (KagError, ValueError):
                    continue
            return hops
        return None

    async def _analysis_of(self, question: str, schema: _Schema) -> _Analysis:
        """A question's analysis (cached by the gate, which may have read it just before)."""
        return await self.gate.analysis(question, schema)


def _rules(analysis: _Analysis, schema: _Schema, level: int, scope: Scope | None = None) -> list[dict[str, Any]]:
    """The search the rules write; a question outside the schema (``scope``: as demos taught it) gets
    the abstention search."""
    if level == 0 and out_of_schema(analysis, schema, scope):
        return _finish([abstain_hop(analysis, schema, scope=scope)], schema)
    return _search(analysis, schema, level)


def _agent_action(json_schema: dict[str, Any]) -> list[str] | None:
    """The actions an agent's turn schema allows (``search``/``answer``), or None for another schema."""
    action = (json_schema.get("properties") or {}).get("action")
    if not isinstance(action, dict):
        return None
    options = action.get("enum")
    if not isinstance(options, list) or "answer" not in options:
        return None
    return [str(o) for o in options]


def _act(messages: Sequence[Message], actions: list[str]) -> dict[str, Any]:
    """An agent's turn: search the question once when nothing was retrieved yet, else answer from the results.

    The question is in the first user turn; results come in it (pre-retrieval) and in later
    turns (tool results), so every user turn is read.
    """
    asked = [m for m in messages if m["role"] == "user" and not is_repair(m)]
    turns = [m["content"] for m in asked]
    structured = [results_from_data(m.get("data")) for m in asked]
    if asked and all(r is not None for r in structured):  # the results as data, every turn
        results = [r for found in structured if found is not None for r in found]
        first = asked[0].get("data") or {}
        question = str(first.get("question") or "") or _question(turns[0])
        answer = _compose("", question, results)
        empty_turns = not results
    else:
        results = [r for turn in turns for r in read_results(turn)[0]]
        question = _question(read_results(turns[0])[1]) if turns else ""
        answer = None
        empty_turns = not results
    searched = any(m["role"] == "assistant" for m in messages)
    empty: dict[str, Any] = {"tool": None, "query": None, "k": None, "where": None, "answer": None, "citations": []}
    if empty_turns and not searched and "search" in actions:
        return {**empty, "action": "search", "query": question, "tool": _first_tool(messages)}
    if answer is None:
        answer = _compose("\n\n".join(turns), question)  # later turns are tool results, not the question
    return {**empty, "action": "answer", "answer": answer.text, "citations": list(answer.labels)}


def _first_tool(messages: Sequence[Message]) -> str | None:
    """The first tool the system prompt lists (``- search_docs(query, k, where): ...``)."""
    for message in messages:
        if message["role"] == "system":
            for line in message["content"].splitlines():
                if line.startswith("- ") and "(query" in line:
                    return line[2:].split("(", 1)[0].strip()
    return None


def _request_data(messages: Sequence[Message]) -> Any:
    """The ``data`` of the real request (the last user message that is no repair turn), or None."""
    for message in reversed(messages):
        if message["role"] == "user" and not is_repair(message):
            return message.get("data")
    return None


def _request(messages: Sequence[Message]) -> tuple[str, int]:
    """The real request (last non-repair user message) and how many repairs followed it."""
    level = 0
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        if is_repair(message):
            level += 1
            continue
        return message["content"], level
    return "", level
