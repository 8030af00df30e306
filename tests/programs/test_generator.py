"""Generator: structured messages, validation into the data model, few-shot examples."""

from __future__ import annotations

import pytest

import kag
from kag.errors import ConfigError, GenerationError, UnsafeTemplateError
from kag.lm import ScriptedLM
from kag.programs import Generator, Input, Program


class Query(kag.DataModel):
    query: str


class Answer(kag.DataModel):
    answer: str = kag.Field(description="The final answer")
    confidence: float = kag.Field(ge=0, le=1, description="How sure")


async def test_messages_and_validated_output() -> None:
    lm = ScriptedLM([{"answer": "Paris", "confidence": 0.9}])
    gen = Generator(data_model=Answer, language_model=lm, instructions="Answer briefly.")
    out = await gen(Query(query="What is the capital of France?"))
    assert out == Answer(answer="Paris", confidence=0.9)
    (call,) = lm.calls
    messages = call["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert system.startswith("Answer briefly.")
    assert "- answer (string, required): The final answer" in system
    assert messages[1]["content"] == "query: What is the capital of France?"
    assert call["schema_name"] == "Answer"
    assert call["schema"]["properties"]["answer"]["type"] == "string"


async def test_custom_template_and_examples() -> None:
    lm = ScriptedLM([{"answer": "Berlin", "confidence": 1.0}])
    gen = Generator(
        data_model=Answer,
        language_model=lm,
        prompt_template="Question: {{ query }}\nAnswer in one word.",
        examples=[(Query(query="Capital of Italy?"), Answer(answer="Rome", confidence=1.0))],
    )
    await gen(Query(query="Capital of Germany?"))
    messages = lm.calls[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == "Question: Capital of Italy?\nAnswer in one word."
    assert messages[2]["content"] == '{"answer": "Rome", "confidence": 1.0}'
    assert messages[3]["content"] == "Question: Capital of Germany?\nAnswer in one word."


async def test_invalid_answer_is_repaired_then_fails() -> None:
    lm = ScriptedLM([{"answer": "x", "confidence": 7}, {"answer": "x", "confidence": 0.5}])
    gen = Generator(data_model=Answer, language_model=lm)
    assert (await gen(Query(query="q"))).confidence == 0.5
    assert "confidence" in lm.calls[1]["messages"][-1]["content"]
    bad = ScriptedLM(["not json"] * 3)
    with pytest.raises(GenerationError):
        await Generator(data_model=Answer, language_model=bad)(Query(query="q"))


async def test_return_inputs_concatenates_fields() -> None:
    lm = ScriptedLM([{"answer": "A", "confidence": 0.1}])
    inputs = Input(data_model=Query)
    out = Generator(data_model=Answer, language_model=lm, return_inputs=True)(inputs)
    assert out.fields == ("query", "answer", "confidence")
    result = await Program(inputs=inputs, outputs=out)(Query(query="q"))
    assert (result.query, result.answer) == ("q", "A")


def test_field_clash_is_refused() -> None:
    class Clash(kag.DataModel):
        query: str

    inputs = Input(data_model=Query)
    with pytest.raises(ConfigError, match="query"):
        Generator(data_model=Clash, language_model=ScriptedLM([]), return_inputs=True)(inputs)


async def test_unsafe_template_raises_kag_error_before_the_model_is_called() -> None:
    lm = ScriptedLM([])
    gen = Generator(data_model=Answer, language_model=lm, prompt_template="{{ ''.__class__ }}")
    with pytest.raises(UnsafeTemplateError):
        await gen(Query(query="q"))
    assert lm.calls == []
