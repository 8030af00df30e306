"""kag in LlamaIndex: the retriever and the tools give exactly what kag gives directly, on memory and Neo4j.

The query engine runs with llama-index's own ``MockLLM`` (it answers with the prompt it was given, so the
answer shows the context kag retrieved) and its default tokenizer, read from the files llama-index-core
ships; the conftest refuses any connection that is not to loopback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.tools.calling import acall_tool, call_tool

import kag
from kag.integrations.llamaindex import KagRetriever, knowledge_tool, triplet_search_tool
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


def assert_same(nodes: Sequence[NodeWithScore], hits: Sequence[SearchHit]) -> None:
    assert hits, "the comparison needs results"
    assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
    assert [n.score for n in nodes] == [h.score for h in hits]
    assert [n.node.node_id for n in nodes] == [h.id for h in hits]
    assert [(n.node.metadata["kind"], n.node.metadata["ids"], n.node.metadata["rank"]) for n in nodes] == [
        (h.kind, list(h.ids), h.rank) for h in hits
    ]
    for node, hit in zip(nodes, hits, strict=True):
        if hit.kind == "fact":
            assert node.node.metadata["triplet"]["object"] == hit.metadata["object"]
        else:
            assert node.node.ref_doc_id == hit.document_id and node.node.metadata["source"] == hit.source


async def test_the_retriever_returns_what_knowledge_search_returns(world: kag.Knowledge) -> None:
    kinds = set()
    for query, options in QUERIES:
        retriever = KagRetriever(world, **options)
        assert isinstance(retriever, BaseRetriever)
        expected = await world.search(query, **options)
        assert_same(await retriever.aretrieve(query), expected)
        kinds |= {h.kind for h in expected}
    assert kinds == {"fact", "passage"}


def test_the_blocking_retriever_gives_the_same(memory_world: kag.Knowledge) -> None:
    retriever = KagRetriever(memory_world.kb, k=3)  # a KnowledgeBase is searched as Knowledge(kb)
    direct = kag.Knowledge(memory_world.kb)
    for query, _ in QUERIES[:3]:
        assert_same(retriever.retrieve(query), direct.sync.search(query, k=3))


def test_what_an_llm_reads_of_a_node(memory_world: kag.Knowledge) -> None:
    nodes = KagRetriever(memory_world, k=1).retrieve("capital of France")
    fact, passage = nodes
    text = fact.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "source: graph" in text and text.endswith(fact.node.get_content()) and "triplet" not in text
    text = passage.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "source: paris.txt" in text and "lang: en" in text and "chunk_id" not in text


async def test_a_query_engine_answers_from_kag(memory_world: kag.Knowledge) -> None:
    retriever = KagRetriever(memory_world, k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    question = "What is the capital of France?"
    expected = await memory_world.search(question, k=2)
    # the blocking query runs inside this test's event loop, as in Jupyter: the adapter moves it to a worker thread
    for response in (engine.query(question), await engine.aquery(question)):
        assert_same(response.source_nodes, expected)
        answer = str(response)  # MockLLM answers with its prompt: the context kag retrieved, then the question
        for hit in expected:
            assert hit.text in answer
        assert answer.index("Paris -[IsCapitalOf]-> France") < answer.index(question)


async def test_the_tool_schema_is_byte_for_byte_what_kag_sends_its_models(memory_world: kag.Knowledge) -> None:
    for hops in (1, 2):
        sent = await schema_kag_sends(memory_world.kb, max_hops=hops)
        tool = triplet_search_tool(memory_world, max_hops=hops)
        assert isinstance(tool, FunctionTool)
        assert json.dumps(tool.metadata.get_parameters_dict()) == json.dumps(sent)
        function = tool.metadata.to_openai_tool()["function"]
        assert json.dumps(function["parameters"]) == json.dumps(sent)
        assert (function["name"], function["description"]) == ("triplet_search", tool.metadata.description)
        assert tool.metadata.fn_schema_str == json.dumps(sent, ensure_ascii=False)


async def test_the_triplet_tool_returns_what_triplet_search_returns(world: kag.Knowledge) -> None:
    tool = triplet_search_tool(world.kb, k=5, threshold=0.8)
    for search in SEARCHES:
        direct = await world.kb.triplet_search(search, k=5, threshold=0.8)
        output = await tool.acall(**search)
        assert isinstance(output, ToolOutput) and not output.is_error
        answer = json.loads(output.content)
        assert answer["facts"] == expected_facts(direct)
        assert answer["count"] == direct.count and answer["cypher"] == direct.query.text
        assert isinstance(output.raw_output, TripletResults)
        assert [h.ids for h in output.raw_output] == [h.ids for h in direct]
    chain = triplet_search_tool(world, max_hops=2)
    direct = await world.kb.triplet_search(LIMA_TO_ITS_CONTINENT)
    answer = json.loads((await chain.acall(**LIMA_TO_ITS_CONTINENT)).content)
    assert answer["facts"] == [hit.to_dict() for hit in direct] and len(answer["facts"][0]["path"]) == 3


def test_the_blocking_triplet_tool_gives_the_same(memory_world: kag.Knowledge) -> None:
    tool = triplet_search_tool(memory_world)
    direct = memory_world.kb.sync.triplet_search(CAPITAL_OF_FRANCE)
    output = tool.call(**CAPITAL_OF_FRANCE)
    assert json.loads(output.content)["facts"] == expected_facts(direct) and not output.is_error
    assert json.loads(tool(**CAPITAL_OF_FRANCE).content) == json.loads(output.content)


@pytest.mark.parametrize(("arguments", "message"), BAD_CALLS)
async def test_a_bad_call_is_an_error_output(
    memory_world: kag.Knowledge, arguments: dict[str, Any], message: str
) -> None:
    tool = triplet_search_tool(memory_world)
    # the tool's own call, and the helper LlamaIndex agents call tools through
    for output in (await tool.acall(**arguments), await acall_tool(tool, arguments)):
        assert output.is_error and output.tool_name == "triplet_search"
        assert output.content.startswith("Error: ") and output.content.endswith("Fix the arguments and call again.")
        assert re.search(message, output.content), output.content


@pytest.mark.parametrize(("arguments", "message"), BAD_CALLS)
def test_a_bad_blocking_call_is_an_error_output(
    memory_world: kag.Knowledge, arguments: dict[str, Any], message: str
) -> None:
    output = call_tool(triplet_search_tool(memory_world), arguments)
    assert output.is_error and re.search(message, output.content), output.content


async def test_the_knowledge_tool_is_kags_search_tool(world: kag.Knowledge) -> None:
    native = kag.KnowledgeTool(world)
    tool = knowledge_tool(world)
    assert tool.metadata.name == native.name == "search_world" and tool.metadata.description == native.description
    assert json.dumps(tool.metadata.to_openai_tool()["function"]["parameters"]) == json.dumps(native.parameters)
    args = {"query": "capital", "k": 3, "where": '{"lang": "en"}'}
    output = await tool.acall(**args)
    assert output.content == await native(**args) and "[world:1]" in output.content and not output.is_error
    bad = await tool.acall(**{**args, "k": "three"})
    assert bad.is_error and bad.content == "Error: k must be an integer or null, got 'three'."


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (CAPITAL_OF_FRANCE, "Paris -[IsCapitalOf]-> France"),
        ({**CAPITAL_OF_FRANCE, "subject_label": "Planet"}, "Error: unknown entity label 'Planet'"),
    ],
)
async def test_a_function_agent_calls_the_tool(memory_world: kag.Knowledge, arguments: dict, expected: str) -> None:
    """A LlamaIndex ``FunctionAgent`` run offline: a scripted function-calling LLM calls the tool, then answers
    with what the tool returned (its result, or its error: the agent goes on either way)."""
    tool = triplet_search_tool(memory_world)
    seen: list[Any] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if results:  # second turn: answer with the tool's output
            return ChatMessage(role=MessageRole.ASSISTANT, content=results[-1].content)
        seen.extend(kwargs.get("tools") or [])
        call = ToolCallBlock(tool_call_id="call_1", tool_name="triplet_search", tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])

    agent = FunctionAgent(tools=[tool], llm=MockFunctionCallingLLM(response_generator=respond))
    answer = str(await agent.run("What is the capital of France?"))
    assert expected in answer
    assert [t.metadata.get_parameters_dict() for t in seen] == [tool.metadata.get_parameters_dict()]
