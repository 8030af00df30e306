"""kag in LangChain: the retriever and the tools give exactly what kag gives directly, on memory and Neo4j."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

import kag
from kag.errors import ConfigError
from kag.integrations.langchain import KagRetriever, knowledge_tool, triplet_search_tool
from kag.knowledge.hits import SearchHit, TripletResults
from tests.integrations.cases import (
    BAD_CALLS,
    CAPITAL_OF_FRANCE,
    LIMA_TO_ITS_CONTINENT,
    QUERIES,
    SEARCHES,
    expected_facts,
)
from tests.integrations.conftest import schema_kag_sends


def assert_same(docs: Sequence[Document], hits: Sequence[SearchHit]) -> None:
    assert hits, "the comparison needs results"
    assert [d.page_content for d in docs] == [h.text for h in hits]
    assert [d.metadata["score"] for d in docs] == [h.score for h in hits]
    assert [(d.metadata["kind"], d.metadata["ids"], d.metadata["rank"]) for d in docs] == [
        (h.kind, list(h.ids), h.rank) for h in hits
    ]
    assert [d.id for d in docs] == [h.id for h in hits]
    for doc, hit in zip(docs, hits, strict=True):
        if hit.kind == "fact":
            assert doc.metadata["triplet"]["subject"] == hit.metadata["subject"]
            assert doc.metadata["source"] == "graph"
        else:
            assert (doc.metadata["chunk_id"], doc.metadata["source"]) == (hit.chunk_id, hit.source)


async def test_the_retriever_returns_what_knowledge_search_returns(world: kag.Knowledge) -> None:
    retriever = KagRetriever(world)
    assert isinstance(retriever, BaseRetriever)
    kinds = set()
    for query, options in QUERIES:
        configured = KagRetriever(world, **options)
        expected = await world.search(query, **options)
        assert_same(await configured.ainvoke(query), expected)
        # the same options given per call
        assert_same(await retriever.ainvoke(query, **options), expected)
        kinds |= {h.kind for h in expected}
    assert kinds == {"fact", "passage"}
    filtered = await retriever.ainvoke("capital", where={"lang": "de"})
    assert {d.metadata["source"] for d in filtered if d.metadata["kind"] == "passage"} == {"tokyo.txt"}


def test_the_blocking_retriever_gives_the_same(memory_world: kag.Knowledge) -> None:
    retriever = KagRetriever(memory_world, k=3)
    for query, _ in QUERIES[:3]:
        assert_same(retriever.invoke(query), memory_world.sync.search(query, k=3))
    batch = retriever.batch([q for q, _ in QUERIES[:2]])
    assert [[d.page_content for d in docs] for docs in batch] == [
        [h.text for h in memory_world.sync.search(q, k=3)] for q, _ in QUERIES[:2]
    ]


async def test_a_knowledge_base_is_searched_as_knowledge(memory_world: kag.Knowledge) -> None:
    retriever = KagRetriever(memory_world.kb, k=2)
    direct = kag.Knowledge(memory_world.kb)
    query = "What is the capital of France?"
    assert_same(await retriever.ainvoke(query), await direct.search(query, k=2))
    with pytest.raises(ConfigError, match="Knowledge"):
        KagRetriever("memory://")  # type: ignore[arg-type]


async def test_the_tool_schema_is_byte_for_byte_what_kag_sends_its_models(memory_world: kag.Knowledge) -> None:
    for hops in (1, 3):
        sent = await schema_kag_sends(memory_world.kb, max_hops=hops)
        tool = triplet_search_tool(memory_world, max_hops=hops)
        assert isinstance(tool, BaseTool)
        assert json.dumps(tool.args_schema) == json.dumps(sent)
        assert '"enum": ["Continent", "Country", "City", "*"]' in json.dumps(tool.args_schema)
        # bound to a chat model, LangChain moves the schema's title and description to the function's name and
        # description (OpenAI's function format) and sends the rest unchanged, strict or not
        for strict in (None, True):
            function = convert_to_openai_tool(tool, strict=strict)["function"]
            rest = {k: v for k, v in sent.items() if k not in ("title", "description")}
            assert json.dumps(function["parameters"]) == json.dumps(rest)
            assert (function["name"], function["description"]) == ("triplet_search", tool.description)


async def test_the_triplet_tool_returns_what_triplet_search_returns(world: kag.Knowledge) -> None:
    tool = triplet_search_tool(world, k=5, threshold=0.8)
    for search in SEARCHES:
        direct = await world.kb.triplet_search(search, k=5, threshold=0.8)
        answer = json.loads(await tool.ainvoke(search))
        assert answer["facts"] == expected_facts(direct)
        assert answer["count"] == direct.count and answer["cypher"] == direct.query.text
        assert answer["facts"] or answer["count"]
    chain = triplet_search_tool(world, max_hops=2)
    direct = await world.kb.triplet_search(LIMA_TO_ITS_CONTINENT, k=10, threshold=0.7)
    answer = json.loads(await chain.ainvoke(LIMA_TO_ITS_CONTINENT))
    # a chain keeps the whole path: Lima -> Peru -> South America
    assert answer["facts"] == expected_facts(direct) == [hit.to_dict() for hit in direct]
    assert [e["name"] for e in answer["facts"][0]["path"]] == ["Lima", "Peru", "South America"]


def test_the_blocking_triplet_tool_gives_the_same(memory_world: kag.Knowledge) -> None:
    tool = triplet_search_tool(memory_world.kb)
    direct = memory_world.kb.sync.triplet_search(CAPITAL_OF_FRANCE)
    assert json.loads(tool.invoke(CAPITAL_OF_FRANCE))["facts"] == expected_facts(direct)


async def test_a_tool_call_answers_a_tool_message_with_the_results_as_artifact(world: kag.Knowledge) -> None:
    tool = triplet_search_tool(world)
    call = {"type": "tool_call", "id": "call_1", "name": "triplet_search", "args": CAPITAL_OF_FRANCE}
    message = await tool.ainvoke(call)
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call_1" and message.status == "success"
    assert isinstance(message.artifact, TripletResults)
    assert [h.text() for h in message.artifact] == ["Paris -[IsCapitalOf]-> France"]
    assert json.loads(message.content)["facts"][0]["text"] == "Paris -[IsCapitalOf]-> France"


@pytest.mark.parametrize(("arguments", "message"), BAD_CALLS)
async def test_a_bad_call_comes_back_to_the_agent_as_a_tool_error(
    memory_world: kag.Knowledge, arguments: dict[str, Any], message: str
) -> None:
    tool = triplet_search_tool(memory_world)
    call = {"type": "tool_call", "id": "call_2", "name": "triplet_search", "args": arguments}
    reply = await tool.ainvoke(call)
    assert isinstance(reply, ToolMessage) and reply.status == "error" and reply.tool_call_id == "call_2"
    assert reply.content.startswith("Error: ") and reply.content.endswith("Fix the arguments and call again.")
    assert re.search(message, reply.content), reply.content


@pytest.mark.parametrize(("arguments", "message"), BAD_CALLS)
def test_a_bad_blocking_call_is_a_tool_error_too(
    memory_world: kag.Knowledge, arguments: dict[str, Any], message: str
) -> None:
    tool = triplet_search_tool(memory_world)
    text = tool.invoke(arguments)  # a plain call: no exception escapes either
    assert text.startswith("Error: ") and re.search(message, text), text


async def test_the_knowledge_tool_is_kags_search_tool(world: kag.Knowledge) -> None:
    native = kag.KnowledgeTool(world)
    tool = knowledge_tool(world)
    assert tool.name == native.name == "search_world" and tool.description == native.description
    assert json.dumps(tool.args_schema) == json.dumps(native.parameters)
    calls = [
        {"query": "What is the capital of France?", "k": 2, "where": None},
        {"query": "capital", "k": 3, "where": '{"lang": "en"}'},
    ]
    for args in calls:
        text = await tool.ainvoke(args)
        assert text == await native(**args) and "[world:1]" in text
    bad = await tool.ainvoke({"type": "tool_call", "id": "c", "name": tool.name, "args": {**calls[1], "where": "{x"}})
    assert bad.status == "error" and "where is not valid JSON" in bad.content


def test_the_blocking_knowledge_tool_gives_the_same(memory_world: kag.Knowledge) -> None:
    tool = knowledge_tool(memory_world, max_k=3)
    args = {"query": "capital of Germany", "k": 10, "where": None}
    expected = kag.KnowledgeTool(memory_world, max_k=3)
    assert tool.invoke(args) == memory_world.sync._run(expected(**args))


async def test_blocking_calls_work_inside_a_running_event_loop(memory_world: kag.Knowledge) -> None:
    """As in Jupyter: kag's blocking facade refuses a running loop, so the adapters run it on a worker thread."""
    query = "capital of Germany"
    assert_same(KagRetriever(memory_world, k=2).invoke(query), await memory_world.search(query, k=2))
    direct = await memory_world.kb.triplet_search(CAPITAL_OF_FRANCE)
    assert json.loads(triplet_search_tool(memory_world).invoke(CAPITAL_OF_FRANCE))["facts"] == expected_facts(direct)
    args = {"query": query, "k": 2, "where": None}
    assert knowledge_tool(memory_world).invoke(args) == await kag.KnowledgeTool(memory_world)(**args)
