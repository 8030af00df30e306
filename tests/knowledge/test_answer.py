"""knowledge.ask(): retrieval modes, grounded prompts, citations limited to shown labels."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from kag.errors import InvalidInputError, KnowledgeNotFoundError
from kag.knowledge.answer import Citation, RAGAnswer, cited_labels
from kag.lm import Message, ScriptedLM
from tests.knowledge.conftest import KnowledgeFactory, corpus_documents


async def test_always_retrieves_and_keeps_known_citations(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(name="geo", description="Cities.")
    await k.add(corpus_documents())
    lm = ScriptedLM(
        [
            {"answer": "Paris [geo:1], see [geo:3].", "citations": ["[geo:1]", "geo:3", "[geo:99]", "x"]},
            {"answer": "Paris [geo:1], see [geo:3].", "citations": ["[geo:1]", "geo:3", "x"]},
        ]
    )
    answer = await k.ask("What is the capital of France?", language_model=lm, mode="always", k=2)
    assert isinstance(answer, RAGAnswer) and str(answer) == "Paris [geo:1], see [geo:3]."
    assert answer.query == "What is the capital of France?"
    assert [c.label for c in answer.citations] == ["geo:1", "geo:3"]
    # geo:99 was never shown: the answer citing it went back to the model once, with the reason
    assert len(lm.calls) == 2 and "[geo:99], which were not shown" in lm.calls[1]["messages"][-1]["content"]
    first, third = answer.citations
    assert first == Citation("geo:1", "graph", answer.labels["geo:1"].id, "fact")
    assert third.kind == "passage" and third.source == "paris.md" and third.id.startswith("chk_")
    assert [h.kind for h in answer.hits] == ["fact", "fact", "passage", "passage"]
    call = lm.calls[0]
    system, user = call["messages"]
    assert system["role"] == "system" and "untrusted" in system["content"] and "geo" in system["content"]
    assert "Cities." in system["content"]
    assert user["role"] == "user" and user["content"].startswith("Question: What is the capital of France?")
    assert "<<<BEGIN DATA geo:3" in user["content"] and answer.context in user["content"]
    assert call["schema"]["required"] == ["answer", "citations"]


async def test_auto_skips_context_when_nothing_passes(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(name="geo", mode="vector", score_threshold=0.99)
    await k.add(corpus_documents())
    lm = ScriptedLM([{"answer": "I do not know.", "citations": []}, {"answer": "Nothing found.", "citations": []}])
    auto = await k.ask("capital of France?", language_model=lm)
    assert auto.hits == [] and auto.context == "" and auto.citations == []
    assert lm.calls[0]["messages"][1]["content"] == "Question: capital of France?"
    always = await k.ask("capital of France?", language_model=lm, mode="always")
    assert "No results in knowledge 'geo'" in lm.calls[1]["messages"][1]["content"] and always.context


async def test_required_raises_when_nothing_usable(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(name="geo")
    lm = ScriptedLM([])
    with pytest.raises(KnowledgeNotFoundError):
        await k.ask("anything at all?", language_model=lm, mode="required")
    assert lm.calls == []
    await k.add(corpus_documents())
    lm = ScriptedLM([{"answer": "Rome [geo:1]", "citations": []}])
    answer = await k.ask("Where is the Colosseum?", language_model=lm, mode="required", where={"lang": "it"})
    assert answer.citations and all(h.source in ("rome.md", "graph") for h in answer.hits)


class Capital(pydantic.BaseModel):
    city: str
    country: str
    evidence: list[str]


async def test_answer_model_and_citations_from_any_field(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory(name="geo")
    await k.add(corpus_documents())

    def reply(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        assert set(schema["properties"]) == {"city", "country", "evidence"}
        return {"city": "Tokyo", "country": "Japan", "evidence": ["see [geo:2]", "GEO:1"]}

    answer = await k.ask("capital of Japan", language_model=ScriptedLM([reply]), answer_model=Capital)
    assert isinstance(answer.output, Capital) and answer.output.city == "Tokyo"
    assert [c.label for c in answer.citations] == ["geo:2"]  # labels are case-sensitive names
    assert '"city": "Tokyo"' in answer.text
    custom = ScriptedLM([{"answer": "ok", "citations": []}])
    await k.ask("capital of Japan", language_model=custom, instructions="Be brief about {name}.")
    assert custom.calls[0]["messages"][0]["content"] == "Be brief about geo."


async def test_invalid_arguments(knowledge_factory: KnowledgeFactory) -> None:
    k = await knowledge_factory()
    lm = ScriptedLM([])
    with pytest.raises(InvalidInputError):
        await k.ask("q", language_model=lm, mode="sometimes")
    with pytest.raises(InvalidInputError):
        await k.ask(" ", language_model=lm)
    with pytest.raises(InvalidInputError):
        await k.ask("q", language_model=lm, answer_model=dict)


def test_cited_labels() -> None:
    known = {"kb:1": 1, "kb:2": 2}
    assert cited_labels("kb", {"a": ["[kb:2] and kb:1", {"b": "[ kb : 1 ]"}], "n": 3}, known) == ["kb:2", "kb:1"]
    assert cited_labels("kb", "kb:3 [other:1]", known) == []


async def test_an_answer_that_keeps_citing_unseen_results_fails(knowledge_factory: KnowledgeFactory) -> None:
    from kag.errors import GenerationError

    k = await knowledge_factory(name="geo")
    await k.add(corpus_documents())
    invented = {"answer": "Paris [geo:42].", "citations": ["geo:42"]}
    lm = ScriptedLM([invented, invented, invented])
    with pytest.raises(GenerationError, match="geo:42"):
        await k.ask("What is the capital of France?", language_model=lm, k=2)
