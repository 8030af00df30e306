"""kag inside LangChain (``pip install 'graph-kag[langchain]'``, ``langchain-core``).

* :class:`KagRetriever`: a ``BaseRetriever`` over a :class:`~kag.Knowledge` or :class:`~kag.KnowledgeBase`.
  ``invoke(query)`` returns the hits of ``knowledge.search`` as ``Document``s (facts first, then passages),
  in the same order and with the same scores; see :func:`kag.integrations._common.hit_metadata` for the
  metadata. ``k``, ``where`` and ``mode`` are fields, and may be given per call (``invoke(q, k=3)``).
  ``ainvoke`` awaits kag directly; ``invoke`` runs on kag's blocking facade (``knowledge.sync``), on a
  worker thread when it is called inside a running event loop (Jupyter); in async code prefer ``ainvoke``.
* :func:`triplet_search_tool`: a ``BaseTool`` whose ``args_schema`` is the strict triplet-search
  schema kag sends its own models (labels and fields as enums); it returns the facts and their Cypher as
  JSON text, and the :class:`~kag.TripletResults` as the tool message's artifact.
* :func:`knowledge_tool`: kag's ``search_<name>`` tool (:class:`~kag.KnowledgeTool`) as a ``StructuredTool``.

A call an agent got wrong (a label outside the enums, a search kag cannot plan, a bad ``where``) becomes a
``ToolException`` that the tool returns to the agent as an error message (``handle_tool_error``); other
failures raise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict

from kag.errors import MissingDependencyError
from kag.integrations._common import (
    TOOL_ERRORS,
    KnowledgeSource,
    TripletSearchCore,
    as_knowledge,
    blocking_call,
    hit_metadata,
)
from kag.knowledge import Knowledge, KnowledgeTool, SearchHit, TripletResults
from kag.version import pip_install

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ImportError as exc:  # the optional extra is missing: say how to install it
    raise MissingDependencyError(
        f"kag.integrations.langchain needs langchain-core: {pip_install('langchain')}"
    ) from exc

__all__ = ["KagRetriever", "KagTripletSearchTool", "knowledge_tool", "to_document", "triplet_search_tool"]

SearchMode = Literal["hybrid", "vector", "keyword"]


def to_document(hit: SearchHit) -> Document:
    """A kag hit as a LangChain ``Document`` (``id`` is the chunk id of a passage, the relation id of a fact)."""
    return Document(page_content=hit.text, metadata=hit_metadata(hit), id=hit.id or None)


class KagRetriever(BaseRetriever):
    """LangChain retriever over kag knowledge: ``KagRetriever(kb_or_knowledge, k=5)``.

    A ``KnowledgeBase`` is wrapped in ``Knowledge(kb)``: its facts, and the passages of documents
    stored beside it. Results are exactly those of ``knowledge.search(query, k, where, mode=mode)``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    knowledge: Knowledge
    """What is searched (a ``KnowledgeBase`` given here is wrapped in ``Knowledge``)."""
    k: int | None = None
    """Facts (up to ``k``) and passages (up to ``k``) per search; ``None``: the knowledge's ``default_k``."""
    where: dict[str, Any] | None = None
    """Metadata filter on passages (within the knowledge's own scope)."""
    mode: SearchMode | None = None
    """Passage ranking: ``hybrid``, ``vector`` or ``keyword``; ``None``: the knowledge's mode."""

    def __init__(self, knowledge: KnowledgeSource, **fields: Any) -> None:
        # checked here rather than in a pydantic validator, so a wrong source raises kag's ConfigError
        super().__init__(knowledge=as_knowledge(knowledge), **fields)

    def _options(self, k: int | None, where: dict[str, Any] | None, mode: SearchMode | None) -> dict[str, Any]:
        return {
            "k": self.k if k is None else k,
            "where": self.where if where is None else where,
            "mode": self.mode if mode is None else mode,
        }

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        where: dict[str, Any] | None = None,
        mode: SearchMode | None = None,
    ) -> list[Document]:
        hits = blocking_call(self.knowledge.sync.search, query, **self._options(k, where, mode))
        return [to_document(hit) for hit in hits]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        where: dict[str, Any] | None = None,
        mode: SearchMode | None = None,
    ) -> list[Document]:
        hits = await self.knowledge.search(query, **self._options(k, where, mode))
        return [to_document(hit) for hit in hits]


class KagTripletSearchTool(BaseTool):
    """The strict triplet search as a LangChain tool (build it with :func:`triplet_search_tool`).

    A ``BaseTool`` of its own rather than a ``StructuredTool`` over a function: LangChain inspects a
    wrapped function's signature on every call, which costs more than the adapter itself.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    core: TripletSearchCore
    """The framework-free tool: schema, argument check, search, JSON text."""
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True

    def _run(self, **arguments: Any) -> tuple[str, TripletResults]:
        core = self.core
        try:
            search = core.check(arguments)
            results = blocking_call(core.kb.sync.triplet_search, search, k=core.k, threshold=core.threshold)
        except TOOL_ERRORS as exc:
            raise ToolException(core.error_text(exc)) from exc
        return core.render(results), results

    async def _arun(self, **arguments: Any) -> tuple[str, TripletResults]:
        core = self.core
        try:
            results = await core.run(arguments)
        except TOOL_ERRORS as exc:
            raise ToolException(core.error_text(exc)) from exc
        return core.render(results), results


def triplet_search_tool(
    source: KnowledgeSource,
    *,
    k: int = 10,
    threshold: float = 0.7,
    max_hops: int = 1,
    name: str = "triplet_search",
    description: str | None = None,
) -> KagTripletSearchTool:
    """The strict triplet search over ``source``'s typed graph as a LangChain tool.

    ``args_schema`` is ``provider_schema(triplet_search_schema(kb.schema))`` (the chain schema of up to
    ``max_hops`` hops when ``max_hops > 1``), byte for byte what kag's programs send a model. ``k`` and
    ``threshold`` are the tool's, not the agent's. Called with a ``ToolCall`` it answers a ``ToolMessage``
    whose ``content`` is the JSON ``{"facts", "count", "cypher"}`` and whose ``artifact`` is the
    :class:`~kag.TripletResults`.
    """
    core = TripletSearchCore(source, k=k, threshold=threshold, max_hops=max_hops, name=name, description=description)
    return KagTripletSearchTool(name=core.name, description=core.description, args_schema=core.parameters, core=core)


def knowledge_tool(
    knowledge: KnowledgeSource,
    *,
    name: str | None = None,
    description: str | None = None,
    max_k: int = 20,
) -> StructuredTool:
    """kag's ``search_<name>(query, k, where)`` tool as a LangChain tool.

    ``args_schema`` is ``KnowledgeTool.parameters`` (strict: ``where`` is JSON text or null). The tool
    returns the labelled, bounded context text kag's own agents read; a bad ``k`` or ``where`` comes back
    to the agent as an error message.
    """
    target = as_knowledge(knowledge)
    tool = KnowledgeTool(target, name=name, description=description, max_k=max_k, strict=True)

    def run(query: str, k: int | None = None, where: Any = None) -> str:
        try:
            # on the knowledge's own blocking facade, like every other sync call on it
            rendered = blocking_call(lambda: target.sync._run(tool.run(query, k, where)))
        except TOOL_ERRORS as exc:
            raise ToolException(f"Error: {exc}") from exc
        return rendered.text

    async def arun(query: str, k: int | None = None, where: Any = None) -> str:
        try:
            rendered = await tool.run(query, k, where)
        except TOOL_ERRORS as exc:
            raise ToolException(f"Error: {exc}") from exc
        return rendered.text

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=tool.name,
        description=tool.description,
        args_schema=tool.parameters,
        infer_schema=False,
        handle_tool_error=True,
    )
