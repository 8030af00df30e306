"""kag inside LlamaIndex (``pip install 'graph-kag[llamaindex]'``, ``llama-index-core``).

* :class:`KagRetriever`: a ``BaseRetriever`` over a :class:`~kag.Knowledge` or :class:`~kag.KnowledgeBase`
  returning ``NodeWithScore``s: exactly the hits of ``knowledge.search`` (facts first, then passages), in
  order, with kag's scores and the metadata of :func:`kag.integrations._common.hit_metadata`. It plugs into
  a ``RetrieverQueryEngine``. ``aretrieve`` awaits kag directly; ``retrieve`` runs on kag's blocking facade
  (on a worker thread inside a running event loop, as in Jupyter).
* :func:`triplet_search_tool`: a ``FunctionTool`` whose parameters are the strict triplet-search schema kag
  sends its own models (``metadata.get_parameters_dict()`` and ``to_openai_tool()`` give it unchanged).
* :func:`knowledge_tool`: kag's ``search_<name>`` tool as a ``FunctionTool``.

A call an agent got wrong comes back as a ``ToolOutput`` with ``is_error=True`` and a message saying what
to fix (LlamaIndex's convention for tool errors); other failures raise.

Nothing here reaches the network: llama-index-core ships the NLTK data and tiktoken files it uses in its
package (``llama_index/core/_static``) and reads them from there unless ``NLTK_DATA`` or
``TIKTOKEN_CACHE_DIR`` point elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kag.errors import MissingDependencyError
from kag.integrations._common import (
    TOOL_ERRORS,
    KnowledgeSource,
    TripletSearchCore,
    as_knowledge,
    blocking_call,
    hit_metadata,
)
from kag.knowledge import Knowledge, KnowledgeTool, SearchHit
from kag.query.triplet import TripletChain, TripletSearch
from kag.version import pip_install

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
    from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
except ImportError as exc:  # the optional extra is missing: say how to install it
    raise MissingDependencyError(
        f"kag.integrations.llamaindex needs llama-index-core: {pip_install('llamaindex')}"
    ) from exc

__all__ = ["KagRetriever", "KagToolMetadata", "knowledge_tool", "to_node", "triplet_search_tool"]

SearchMode = Literal["hybrid", "vector", "keyword"]

# kag's bookkeeping: kept on the node, left out of what an LLM or an embedder reads (the source, the
# title and a document's own metadata stay visible)
_HIDDEN = [
    *("triplet", "kind", "score", "rank", "ids"),
    *("chunk_id", "document_id", "mentions", "chunk_index", "start", "end"),
]


def to_node(hit: SearchHit) -> NodeWithScore:
    """A kag hit as a ``NodeWithScore`` (node id: the chunk id of a passage, the relation id of a fact)."""
    given: dict[str, Any] = {"id_": hit.id} if hit.id else {}  # no id: LlamaIndex makes one
    if hit.document_id:
        given["relationships"] = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.document_id)}
    node = TextNode(
        text=hit.text,
        metadata=hit_metadata(hit),
        excluded_llm_metadata_keys=list(_HIDDEN),
        excluded_embed_metadata_keys=list(_HIDDEN),
        **given,
    )
    return NodeWithScore(node=node, score=hit.score)


class KagRetriever(BaseRetriever):
    """LlamaIndex retriever over kag knowledge: ``KagRetriever(kb_or_knowledge, k=5)``.

    A ``KnowledgeBase`` is wrapped in ``Knowledge(kb)``. ``k``, ``where`` and ``mode`` are those of
    ``knowledge.search`` (``None``: the knowledge's own defaults).
    """

    def __init__(
        self,
        knowledge: KnowledgeSource,
        *,
        k: int | None = None,
        where: dict[str, Any] | None = None,
        mode: SearchMode | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.knowledge: Knowledge = as_knowledge(knowledge)
        self.k = k
        self.where = dict(where) if where else None
        self.mode: SearchMode | None = mode
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        search = self.knowledge.sync.search
        hits = blocking_call(search, query_bundle.query_str, k=self.k, where=self.where, mode=self.mode)
        return [to_node(hit) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self.knowledge.search(query_bundle.query_str, k=self.k, where=self.where, mode=self.mode)
        return [to_node(hit) for hit in hits]


@dataclass
class KagToolMetadata(ToolMetadata):
    """Tool metadata whose parameters are a fixed JSON schema, given out unchanged.

    (``ToolMetadata`` derives them from a pydantic model and keeps only some keys; kag's strict schema
    must reach the model as kag wrote it.)
    """

    parameters: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        """The schema, as kag wrote it (a copy)."""
        return _copy_json(self.parameters)

    @property
    def fn_schema_str(self) -> str:
        """The schema as JSON text (what ReAct-style prompts show)."""
        return json.dumps(self.parameters, ensure_ascii=False)


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


class _KagTool(FunctionTool):
    """A ``FunctionTool`` that renders kag's result as text and turns a bad call into an error output."""

    def __init__(
        self,
        fn: Callable[..., Any],
        async_fn: Callable[..., Any],
        metadata: ToolMetadata,
        render: Callable[[Any], str],
        error_text: Callable[[Exception], str],
    ) -> None:
        super().__init__(fn=fn, async_fn=async_fn, metadata=metadata)
        self._render = render
        self._error_text = error_text

    def _output(self, kwargs: dict[str, Any], raw: Any = None, error: Exception | None = None) -> ToolOutput:
        name = self.metadata.get_name()
        raw_input = {"args": (), "kwargs": kwargs}
        if error is not None:
            return ToolOutput(
                content=self._error_text(error), tool_name=name, raw_input=raw_input, raw_output=error, is_error=True
            )
        return ToolOutput(content=self._render(raw), tool_name=name, raw_input=raw_input, raw_output=raw)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the tool; ``raw_output`` is kag's result, ``content`` the text an agent reads."""
        try:
            raw = self.fn(*args, **kwargs)
        except TOOL_ERRORS as exc:
            return self._output(kwargs, error=exc)
        return self._output(kwargs, raw)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Async :meth:`call`."""
        try:
            raw = await self.async_fn(*args, **kwargs)
        except TOOL_ERRORS as exc:
            return self._output(kwargs, error=exc)
        return self._output(kwargs, raw)


def triplet_search_tool(
    source: KnowledgeSource,
    *,
    k: int = 10,
    threshold: float = 0.7,
    max_hops: int = 1,
    name: str = "triplet_search",
    description: str | None = None,
) -> FunctionTool:
    """The strict triplet search over ``source``'s typed graph as a LlamaIndex ``FunctionTool``.

    Its parameters are ``provider_schema(triplet_search_schema(kb.schema))`` (the chain schema when
    ``max_hops > 1``), byte for byte. ``content`` is the JSON ``{"facts", "count", "cypher"}``;
    ``raw_output`` the :class:`~kag.TripletResults`.
    """
    core = TripletSearchCore(source, k=k, threshold=threshold, max_hops=max_hops, name=name, description=description)

    def run(**arguments: Any) -> Any:
        return blocking_call(core.kb.sync.triplet_search, core.check(arguments), k=core.k, threshold=core.threshold)

    async def arun(**arguments: Any) -> Any:
        return await core.run(arguments)

    metadata = KagToolMetadata(
        description=core.description,
        name=core.name,
        fn_schema=TripletSearch if max_hops == 1 else TripletChain,
        parameters=core.parameters,
    )
    return _KagTool(run, arun, metadata, core.render, core.error_text)


def knowledge_tool(
    knowledge: KnowledgeSource,
    *,
    name: str | None = None,
    description: str | None = None,
    max_k: int = 20,
) -> FunctionTool:
    """kag's ``search_<name>(query, k, where)`` tool as a LlamaIndex ``FunctionTool``.

    Parameters: ``KnowledgeTool.parameters`` (strict: ``where`` is JSON text or null). ``content`` is the
    labelled, bounded context text kag's agents read; ``raw_output`` the ``RenderedContext``.
    """
    target = as_knowledge(knowledge)
    tool = KnowledgeTool(target, name=name, description=description, max_k=max_k, strict=True)

    def run(query: str, k: int | None = None, where: Any = None) -> Any:
        # on the knowledge's own blocking facade, like every other sync call on it
        return blocking_call(lambda: target.sync._run(tool.run(query, k, where)))

    async def arun(query: str, k: int | None = None, where: Any = None) -> Any:
        return await tool.run(query, k, where)

    metadata = KagToolMetadata(description=tool.description, name=tool.name, fn_schema=None, parameters=tool.parameters)
    return _KagTool(run, arun, metadata, lambda rendered: rendered.text, lambda exc: f"Error: {exc}")
