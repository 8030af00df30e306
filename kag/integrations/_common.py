"""What the LangChain and LlamaIndex adapters share; no framework is imported here.

* :func:`as_knowledge` / :func:`knowledge_base_of`: the ``Knowledge`` or ``KnowledgeBase`` an adapter wraps;
* :func:`hit_metadata`: the metadata of one search hit as a framework document carries it;
* :class:`TripletSearchCore`: the triplet-search tool without a framework: its strict schema (exactly
  the one kag sends its own models), argument checking and the JSON text it returns;
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pydantic

from kag.datamodels.schema import DEFAULT_KEY, provider_schema
from kag.errors import ConfigError, InvalidInputError, SchemaError
from kag.knowledge import Knowledge, KnowledgeBase, SearchHit, TripletHit, TripletResults
from kag.query.triplet import TripletChain, TripletSearch, triplet_chain_schema, triplet_search_schema
from kag.validation import check_k, check_threshold

__all__ = [
    "TOOL_ERRORS",
    "KnowledgeSource",
    "TripletSearchCore",
    "as_knowledge",
    "blocking_call",
    "fact_payload",
    "hit_metadata",
    "knowledge_base_of",
]

KnowledgeSource = Knowledge | KnowledgeBase
"""What an adapter wraps: managed or retrieval-only ``Knowledge``, or a ``KnowledgeBase``."""

# what an agent did wrong (a label outside the enums, a bad field, a search the planner refuses): these go
# back to the agent as tool errors; anything else (a store down, a bug) is raised as usual
TOOL_ERRORS: tuple[type[Exception], ...] = (
    InvalidInputError,
    SchemaError,
    pydantic.ValidationError,
)

R = TypeVar("R")

MAX_TOOL_K = 100
MAX_HOPS = 5


def blocking_call(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """Call a blocking kag facade method (``knowledge.sync.search``...) from a framework's sync API.

    Inside a running event loop (Jupyter, or a framework's own loop) the facade would refuse; the call
    then runs on a worker thread, where the facade's private loop is free to run, and this thread waits.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args, **kwargs)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kag-sync") as pool:
        return pool.submit(fn, *args, **kwargs).result()


def as_knowledge(source: Any, *, name: str = "knowledge") -> Knowledge:
    """``source`` as :class:`Knowledge`: a ``KnowledgeBase`` is wrapped (facts, and passages stored beside it)."""
    if isinstance(source, Knowledge):
        return source
    if isinstance(source, KnowledgeBase):
        return Knowledge(source, name=name)
    raise ConfigError(
        f"expected a kag Knowledge (kag.create_knowledge(...)) or a KnowledgeBase, got {type(source).__name__}."
    )


def knowledge_base_of(source: Any) -> KnowledgeBase:
    """The typed graph behind ``source`` (a ``KnowledgeBase``, or managed ``Knowledge``)."""
    if isinstance(source, KnowledgeBase):
        return source
    if isinstance(source, Knowledge):
        if source.retriever is not None:
            raise ConfigError(
                f"knowledge '{source.name}' is retrieval-only (no typed graph): a triplet search needs a "
                "KnowledgeBase, or knowledge made by kag.create_knowledge('memory' | 'sqlite' | 'neo4j')."
            )
        return source.kb  # raises ConfigError while the embedder's dimensions are still unknown
    raise ConfigError(f"expected a kag KnowledgeBase or a Knowledge with a typed graph, got {type(source).__name__}.")


def hit_metadata(hit: SearchHit) -> dict[str, Any]:
    """The metadata a framework document carries for ``hit``.

    Every hit: ``kind`` (``fact`` or ``passage``), ``source`` (``graph`` for facts, the document's source
    for passages), ``score``, ``rank``, ``ids`` and ``title``. A passage adds its chunk metadata (the
    document's own metadata, ``chunk_index``, ``start``, ``end``; kag's keys win a clash), ``chunk_id``,
    ``document_id`` and ``mentions`` (ids of the entities it names). A fact adds ``triplet``:
    ``{"subject", "relation", "object"}`` as stored (``relation``/``object`` are ``None`` for an entity on
    its own).
    """
    if hit.kind == "fact":
        fact = hit.metadata
        meta: dict[str, Any] = {
            "triplet": {
                "subject": fact.get("subject"),
                "relation": fact.get("relation"),
                "object": fact.get("object"),
            }
        }
    else:
        meta = dict(hit.metadata)
        meta["chunk_id"] = hit.chunk_id
        meta["document_id"] = hit.document_id
        meta["mentions"] = list(hit.mentions)
    meta["kind"] = hit.kind
    meta["source"] = hit.source
    meta["score"] = hit.score
    meta["rank"] = hit.rank
    meta["ids"] = list(hit.ids)
    meta["title"] = hit.title
    return meta


class TripletSearchCore:
    """The triplet-search tool before any framework wraps it.

    ``parameters`` is ``provider_schema(triplet_search_schema(kb.schema))`` (or of the chain schema when
    ``max_hops > 1``): the very schema kag's own programs send a language model, labels and fields as
    enums. :meth:`run` checks the arguments (:meth:`check`) and runs ``kb.triplet_search`` with the
    tool's ``k`` and ``threshold``; :meth:`render` is the JSON text an agent reads: the facts, ``count``
    for a counting search and the compiled ``cypher``.
    """

    def __init__(
        self,
        source: Knowledge | KnowledgeBase,
        *,
        k: int = 10,
        threshold: float = 0.7,
        max_hops: int = 1,
        name: str = "triplet_search",
        description: str | None = None,
    ) -> None:
        self.kb = knowledge_base_of(source)
        self.k = check_k(k, maximum=MAX_TOOL_K, error=ConfigError)
        self.threshold = check_threshold(threshold, error=ConfigError)
        self.max_hops = check_k(max_hops, name="max_hops", maximum=MAX_HOPS, error=ConfigError)
        self.name = name
        graph = self.kb.schema
        self.checked_schema = (
            triplet_search_schema(graph) if self.max_hops == 1 else triplet_chain_schema(graph, self.max_hops)
        )
        self.parameters: dict[str, Any] = provider_schema(self.checked_schema)
        # what an agent must give in each search: the properties without a declared default (the labels)
        single = triplet_search_schema(graph)
        self._must_give = tuple(name for name in single["required"] if DEFAULT_KEY not in single["properties"][name])
        self.description = description or self._describe()

    def _describe(self) -> str:
        graph = self.kb.schema
        relations = "; ".join(f"{s.label}: {s.arrow()}" for s in graph.relations.values()) or "(none)"
        shape = (
            "one (subject)-[relation]->(object) pattern"
            if self.max_hops == 1
            else f"a chain of 1 to {self.max_hops} patterns (`hops`), each object the next subject"
        )
        return (
            f"Search the knowledge graph for facts matching {shape}. Entity labels: "
            f"{', '.join(graph.entity_labels) or '(none)'}. Relations: {relations}. "
            'Use "*" for any label or any text. Returns the facts (best first) and the Cypher they came from.'
        )

    def check(self, arguments: Any) -> TripletSearch | TripletChain:
        """The arguments as a search, checked as strictly as kag checks its own models' answers.

        The properties the schema declares without a default (the labels) must be given; the rest is
        validated strictly (no coercion: ``"yes"`` is no boolean, ``"2"`` no integer) by the search
        models themselves, and the labels, fields and endpoint types by the planner when the search runs.
        """
        if not isinstance(arguments, Mapping):
            raise InvalidInputError(f"{self.name} takes a JSON object of arguments, got {type(arguments).__name__}.")
        if self.max_hops == 1:
            _require(arguments, self._must_give, "")
            return TripletSearch.model_validate(dict(arguments), strict=True)
        _require(arguments, ("hops",), "")
        hops = arguments["hops"]
        if not isinstance(hops, list) or not 1 <= len(hops) <= self.max_hops:
            raise InvalidInputError(f"hops must be a list of 1 to {self.max_hops} triplet searches.")
        for i, hop in enumerate(hops):
            if isinstance(hop, Mapping):
                _require(hop, self._must_give, f"hops[{i}].")
        return TripletChain.model_validate(dict(arguments), strict=True)

    async def run(self, arguments: Any) -> TripletResults:
        """Check ``arguments`` and run the search (raises one of :data:`TOOL_ERRORS` for a bad call)."""
        return await self.kb.triplet_search(self.check(arguments), k=self.k, threshold=self.threshold)

    @staticmethod
    def payload(results: TripletResults) -> dict[str, Any]:
        """``{"facts": [...], "count": ..., "cypher": ...}`` (the query's parameters, vectors, are left out).

        Each fact is :func:`fact_payload`.
        """
        query = results.query
        return {
            "facts": [fact_payload(hit) for hit in results],
            "count": results.count,
            "cypher": query.text if query is not None else None,
        }

    @classmethod
    def render(cls, results: TripletResults) -> str:
        """The JSON text an agent reads."""
        return json.dumps(cls.payload(results), ensure_ascii=False, default=str)

    @staticmethod
    def error_text(exc: Exception) -> str:
        """What an agent is told about a call it got wrong."""
        if isinstance(exc, pydantic.ValidationError):
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '$'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
            )
            return f"Error: invalid triplet search: {problems}. Fix the arguments and call again."
        text = str(exc).rstrip()
        return f"Error: {text}{'' if text.endswith('.') else '.'} Fix the arguments and call again."


def fact_payload(hit: TripletHit) -> dict[str, Any]:
    """A fact as the tools show it: ``hit.to_dict()``, without ``path`` and ``relations`` for a single fact.

    For one relation (or an entity on its own) they only repeat ``subject``/``relation``/``object``: an
    agent reads fewer tokens, and the JSON is built in half the time. A chain keeps them.
    """
    if len(hit.relations) > 1:
        return hit.to_dict()
    rel = hit.relation
    return {
        "subject": (rel.subj if rel else hit.subject).to_dict(),
        "relation": rel.properties() | {"label": rel.label} if rel else None,
        "object": rel.obj.to_dict() if rel else None,
        "score": hit.score,
        "text": hit.text(),
    }


def _require(arguments: Mapping[str, Any], names: tuple[str, ...], where: str) -> None:
    missing = [where + name for name in names if name not in arguments]
    if missing:
        labels = ' Every label must be given ("*" for any).' if any(m.endswith("_label") for m in missing) else ""
        raise InvalidInputError(f"missing required argument(s) {missing}.{labels}")
