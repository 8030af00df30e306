"""The validation + repair loop, exercised through ScriptedLM, and config round trips."""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic
import pytest

from kag.errors import (
    ConfigError,
    GenerationError,
    InvalidInputError,
    LanguageModelError,
    SchemaError,
)
from kag.lm import (
    BaseLanguageModel,
    LanguageModel,
    Message,
    OllamaLM,
    OpenAICompatibleLM,
    ScriptedLM,
    language_model_from_config,
)
from kag.lm.base import parse_json_object
from kag.lm.scripted import ScriptedCall


class Capital(pydantic.BaseModel):
    city: str
    country: str
    kind: Literal["capital", "other"] = "capital"


DICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"enum": ["City", "Country"]}, "name": {"type": "string"}},
    "required": ["label", "name"],
    "additionalProperties": False,
}

ASK: list[Message] = [
    {"role": "system", "content": "Answer in JSON."},
    {"role": "user", "content": "Capital of France?"},
]


def last_user(call: ScriptedCall) -> str:
    content = call["messages"][-1]["content"]
    assert call["messages"][-1]["role"] == "user"
    assert isinstance(content, str)
    return content


async def test_pydantic_schema_happy_path() -> None:
    lm = ScriptedLM([{"city": "Paris", "country": "France"}])
    out = await lm.generate(ASK, Capital)
    assert out == {"city": "Paris", "country": "France", "kind": "capital"}  # model_dump
    assert len(lm.calls) == 1
    assert lm.calls[0]["schema"] == Capital.model_json_schema()
    assert lm.calls[0]["messages"] == ASK
    assert lm.calls[0]["schema_name"] == "output"


async def test_dict_schema_happy_path_and_schema_name() -> None:
    lm = ScriptedLM(['{"label": "City", "name": "Paris"}'])
    out = await lm.generate(ASK, DICT_SCHEMA, schema_name="triplet")
    assert out == {"label": "City", "name": "Paris"}
    assert lm.calls[0]["schema"] == DICT_SCHEMA
    assert lm.calls[0]["schema_name"] == "triplet"


@pytest.mark.parametrize(
    "raw",
    [
        '  \n{"label": "City", "name": "Paris"}\n ',
        '```json\n{"label": "City", "name": "Paris"}\n```',
        '\n```\n{"label": "City", "name": "Paris"}\n```\n',
        '```json {"label": "City", "name": "Paris"} ```',
    ],
)
async def test_whitespace_and_code_fence_tolerated(raw: str) -> None:
    lm = ScriptedLM([raw])
    assert await lm.generate(ASK, DICT_SCHEMA) == {"label": "City", "name": "Paris"}


@pytest.mark.parametrize(
    ("raw", "expected_error"),
    [
        ('{"label": "City"}', "missing required property 'name'"),
        ('{"label": "Town", "name": "Paris"}', '"Town" is not one of ["City", "Country"]'),
        ('{"label": "City", "name": "Paris", "x": 1}', "unexpected property 'x'"),
        ("Sure! Here it is: {}", "not valid JSON"),
        ('{"label": "City", "name": ', "not valid JSON"),
        ('[{"label": "City", "name": "Paris"}]', "expected a JSON object at the top level"),
        ('{"label": "City", "name": NaN}', "NaN is not valid JSON"),
        ("", "the answer was empty"),
    ],
)
async def test_invalid_answer_is_repaired(raw: str, expected_error: str) -> None:
    good = {"label": "Country", "name": "France"}
    lm = ScriptedLM([raw, good])
    assert await lm.generate(ASK, DICT_SCHEMA) == good
    assert len(lm.calls) == 2
    second = lm.calls[1]["messages"]
    assert second[: len(ASK)] == ASK
    assert second[len(ASK)] == {"role": "assistant", "content": raw}
    assert expected_error in last_user(lm.calls[1])
    assert "JSON" in last_user(lm.calls[1])


async def test_pydantic_errors_are_shown_compactly() -> None:
    lm = ScriptedLM(
        [
            {"city": "Paris"},
            {"city": "Paris", "country": "France", "kind": "x"},
            {
                "city": "Paris",
                "country": "France",
            },
        ]
    )
    out = await lm.generate(ASK, Capital)
    assert out["country"] == "France"
    first_repair = last_user(lm.calls[1])
    assert "country: Field required" in first_repair
    assert "errors.pydantic.dev" not in first_repair  # no URL noise for the model
    assert "kind: Input should be 'capital' or 'other'" in last_user(lm.calls[2])


async def test_validate_hook_marks_answers_invalid() -> None:
    seen: list[dict[str, Any]] = []

    def validate(obj: dict[str, Any]) -> str:
        seen.append(obj)
        if obj["name"] != "France":
            raise SchemaError(f"{obj['name']!r} is not a country in the graph")
        return "ignored"

    lm = ScriptedLM([{"label": "Country", "name": "Atlantis"}, {"label": "Country", "name": "France"}])
    out = await lm.generate(ASK, DICT_SCHEMA, validate=validate)
    assert out == {"label": "Country", "name": "France"}
    assert len(seen) == 2
    assert "'Atlantis' is not a country in the graph" in last_user(lm.calls[1])


async def test_validate_hook_runs_after_pydantic_validation() -> None:
    seen: list[dict[str, Any]] = []
    lm = ScriptedLM([{"city": "Paris", "country": "France"}])
    await lm.generate(ASK, Capital, validate=seen.append)
    assert seen == [{"city": "Paris", "country": "France", "kind": "capital"}]


async def test_validate_hook_pydantic_validation_error_is_repaired() -> None:
    class Strict(pydantic.BaseModel):
        name: str = pydantic.Field(min_length=3)

    lm = ScriptedLM([{"label": "City", "name": "P"}, {"label": "City", "name": "Paris"}])
    await lm.generate(ASK, DICT_SCHEMA, validate=Strict.model_validate)
    assert "at least 3 characters" in last_user(lm.calls[1])


async def test_non_value_errors_from_the_hook_propagate() -> None:
    def broken(obj: dict[str, Any]) -> None:
        raise TypeError("bug in the hook")

    lm = ScriptedLM([{"label": "City", "name": "Paris"}, {"label": "City", "name": "Paris"}])
    with pytest.raises(TypeError, match="bug in the hook"):
        await lm.generate(ASK, DICT_SCHEMA, validate=broken)
    assert len(lm.calls) == 1


async def test_always_invalid_raises_generation_error_after_1_plus_max_repairs() -> None:
    lm = ScriptedLM(['{"label": "City"}'] * 10)
    with pytest.raises(GenerationError) as info:
        await lm.generate(ASK, DICT_SCHEMA)
    assert len(lm.calls) == 3  # 1 + max_repairs (2)
    message = str(info.value)
    assert "missing required property 'name'" in message
    assert '{"label": "City"}' in message
    assert "max_repairs" in message
    assert isinstance(info.value, LanguageModelError)
    # the conversation grows by one (assistant, user) pair per repair
    assert [len(c["messages"]) for c in lm.calls] == [2, 4, 6]


@pytest.mark.parametrize("max_repairs", [0, 1, 4])
async def test_max_repairs_bounds_the_number_of_calls(max_repairs: int) -> None:
    lm = ScriptedLM(["nope"] * 10, max_repairs=max_repairs)
    with pytest.raises(GenerationError):
        await lm.generate(ASK, DICT_SCHEMA)
    assert len(lm.calls) == 1 + max_repairs


async def test_generation_error_truncates_long_output() -> None:
    lm = ScriptedLM(["x" * 5000], max_repairs=0)
    with pytest.raises(GenerationError) as info:
        await lm.generate(ASK, DICT_SCHEMA)
    assert "truncated, 5000 characters in total" in str(info.value)
    assert len(str(info.value)) < 1500


async def test_transport_errors_are_not_repaired() -> None:
    lm = ScriptedLM([LanguageModelError("connection refused"), {"label": "City", "name": "P"}])
    with pytest.raises(LanguageModelError, match="connection refused") as info:
        await lm.generate(ASK, DICT_SCHEMA)
    assert not isinstance(info.value, GenerationError)
    assert len(lm.calls) == 1
    assert lm.remaining == 1


async def test_running_out_of_responses() -> None:
    lm = ScriptedLM(["not json"])
    with pytest.raises(LanguageModelError, match="ran out of responses"):
        await lm.generate(ASK, DICT_SCHEMA)
    assert len(lm.calls) == 2


async def test_callable_responses_receive_messages_and_schema() -> None:
    received: list[tuple[list[Message], dict[str, Any]]] = []

    def respond(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        received.append((messages, schema))
        return {"label": "City", "name": messages[-1]["content"][:5]}

    lm = ScriptedLM([respond])
    assert await lm.generate(ASK, DICT_SCHEMA) == {"label": "City", "name": "Capit"}
    assert received == [(ASK, DICT_SCHEMA)]


async def test_callers_messages_are_not_mutated() -> None:
    messages = [dict(m) for m in ASK]
    lm = ScriptedLM(["bad", {"label": "City", "name": "Paris"}])
    await lm.generate(messages, DICT_SCHEMA)  # type: ignore[arg-type]
    assert messages == ASK


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "messages is empty"),
        ("hello", "sequence"),
        ([{"role": "tool", "content": "x"}], "role 'tool'"),
        ([{"role": "user", "content": 3}], "content must be a string"),
        (["hello"], r"messages\[0\] must be a dict"),
    ],
)
async def test_malformed_messages_are_rejected(messages: Any, match: str) -> None:
    lm = ScriptedLM([{"label": "City", "name": "Paris"}])
    with pytest.raises(InvalidInputError, match=match):
        await lm.generate(messages, DICT_SCHEMA)
    assert lm.calls == []


@pytest.mark.parametrize(
    ("schema", "schema_name", "match"),
    [
        ({"type": "array"}, "output", "must describe a JSON object"),
        ("not a schema", "output", "JSON-schema dict or a pydantic"),
        (DICT_SCHEMA, "has space", "schema_name"),
        (DICT_SCHEMA, "x" * 65, "schema_name"),
    ],
)
async def test_bad_schema_arguments(schema: Any, schema_name: str, match: str) -> None:
    lm = ScriptedLM([{"label": "City", "name": "Paris"}])
    with pytest.raises(InvalidInputError, match=match):
        await lm.generate(ASK, schema, schema_name=schema_name)


def test_parse_json_object_is_not_clever() -> None:
    assert parse_json_object(' {"a": 1} ') == {"a": 1}
    for raw in ['Here: {"a": 1}', '{"a": 1} trailing', "```json\n{}\n``` extra", "{'a': 1}"]:
        with pytest.raises(ValueError):
            parse_json_object(raw)


def test_max_repairs_must_be_non_negative() -> None:
    with pytest.raises(ConfigError):
        ScriptedLM([], max_repairs=-1)
    with pytest.raises(ConfigError):
        ScriptedLM("not a list")


def test_clients_satisfy_the_protocol() -> None:
    scripted = ScriptedLM([])
    openai = OpenAICompatibleLM("m", base_url="http://127.0.0.1:1/v1")
    ollama = OllamaLM("m")
    for lm in (scripted, openai, ollama):
        assert isinstance(lm, LanguageModel)
        assert isinstance(lm, BaseLanguageModel)
        json.dumps(lm.get_config())  # serializable
    assert openai.name == "openai:m"
    assert ollama.name == "ollama:m"
    assert scripted.name == "scripted"


def test_config_round_trips() -> None:
    openai = OpenAICompatibleLM(
        "gpt-x",
        base_url="http://127.0.0.1:8000/v1",
        api_key="sk-secret",
        max_tokens=64,
        strict=False,
        headers={"X-Team": "kg", "X-Api-Key": "hidden"},
        backoff_base=0.1,
    )
    config = openai.get_config()
    assert "api_key" not in config
    assert "sk-secret" not in json.dumps(config) and "hidden" not in json.dumps(config)
    assert config["headers"] == {"X-Team": "kg"}
    rebuilt = language_model_from_config(config)
    assert isinstance(rebuilt, OpenAICompatibleLM)
    assert rebuilt.get_config() == config

    ollama = OllamaLM("llama3.1:8b", options={"num_ctx": 4096}, keep_alive="5m")
    rebuilt_ollama = language_model_from_config(ollama.get_config())
    assert isinstance(rebuilt_ollama, OllamaLM)
    assert rebuilt_ollama.get_config() == ollama.get_config()


def test_secrets_stay_out_of_repr_and_config_urls() -> None:
    lm = OpenAICompatibleLM("m", base_url="http://user:pw@127.0.0.1:8000/v1", api_key="sk-xyz")
    assert "sk-xyz" not in repr(lm)
    assert "pw" not in lm.get_config()["base_url"]
    assert "pw" not in repr(lm)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"type": "scripted", "name": "s"}, "cannot be rebuilt"),
        ({"type": "anthropic", "model": "m"}, "Unknown language model type"),
        ({"model": "m"}, "Unknown language model type None"),
        ({"type": "openai", "model": "m", "api_key": "sk"}, "OPENAI_API_KEY"),
        ({"type": "ollama", "model": "m", "client": None}, "must not contain 'client'"),
        ({"type": "openai", "model": "m", "colour": "red"}, r"Unknown key\(s\) \['colour'\]"),
        ({"type": "ollama"}, "needs a 'model'"),
        ({"type": "openai", "model": "m", "base_url": "ftp://x"}, "http:// or https://"),
        ({"type": "openai", "model": "m", "timeout": 0}, r"timeout \(seconds\) must be a finite number > 0"),
        ({"type": "openai", "model": "m", "max_retries": -1}, "max_retries"),
        ("openai", "must be a dict"),
    ],
)
def test_bad_configs(config: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        language_model_from_config(config)
