"""Malformed, truncated and hostile language-model output: typed errors, nothing written.

Two small flows stand for what the programs do with a model's answer:

* retrieval: the model fills a ``TripletSearch`` (strict schema with label
  enums); ``kb.plan`` is the validation hook, so a schema-breaking answer is
  repaired or refused before anything runs;
* extraction: the model lists facts, which are upserted only when the whole
  answer is valid — a ``GenerationError`` leaves the knowledge base untouched.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kag
from kag.datamodels.schema import provider_schema
from kag.errors import GenerationError, LanguageModelError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf
from kag.lm.base import Message
from kag.lm.scripted import ScriptedLM, ScriptedResponse

SCHEMA = kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)
SEARCH_SCHEMA = kag.triplet_search_schema(SCHEMA)
VALID = {
    "subject_label": "City",
    "subject_similarity_search": "Paris",
    "relation_label": "IsCapitalOf",
    "object_label": "Country",
    "object_similarity_search": "*",
    "negated": False,
    "bidirectional": False,
    "count": False,
    # strict schemas require every field, also those whose defaults keep the old meaning
    "subject_from": "previous_object",
    "subject_where": [],
    "object_where": [],
    "order_by": None,
    "limit": None,
}
VALID_TEXT = json.dumps(VALID)
ASK: list[Message] = [{"role": "user", "content": "What is the capital of France?"}]


class CapitalFact(pydantic.BaseModel):
    """One extracted fact."""

    model_config = pydantic.ConfigDict(extra="forbid")
    city: str = pydantic.Field(min_length=1, max_length=200)
    country: str = pydantic.Field(min_length=1, max_length=200)


class Facts(pydantic.BaseModel):
    """What the extraction model must answer."""

    model_config = pydantic.ConfigDict(extra="forbid")
    facts: list[CapitalFact]


async def new_kb() -> kag.KnowledgeBase:
    kb = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    await kb.upsert([IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))])
    return kb


async def retrieve(lm: ScriptedLM, kb: kag.KnowledgeBase) -> kag.TripletResults:
    """The model fills a TripletSearch; kb.plan validates it (SchemaError is a ValueError: repaired)."""
    answer = await lm.generate(ASK, SEARCH_SCHEMA, validate=kb.plan, schema_name="TripletSearch")
    return await kb.triplet_search(answer, k=5, threshold=0.6)


async def extract(lm: ScriptedLM, kb: kag.KnowledgeBase) -> dict[str, int]:
    """The model lists facts; they are written only if the whole answer is valid."""
    answer = await lm.generate(ASK, Facts, schema_name="Facts")
    facts = Facts.model_validate(answer).facts
    return await kb.upsert([IsCapitalOf(subj=City(name=f.city), obj=Country(name=f.country)) for f in facts])


MALFORMED = [
    "",
    "   \n",
    "null",
    "[]",
    "42",
    '"City"',
    "true",
    "NaN",
    "Infinity",
    "1e999",
    "{",
    "}",
    "{'subject_label': 'City'}",
    VALID_TEXT + " trailing words",
    VALID_TEXT + VALID_TEXT,
    "Sure! Here is the JSON: " + VALID_TEXT,
    "```json\n" + VALID_TEXT,  # fence never closed
    "```json\n" + VALID_TEXT + "\n```\nand a second one ```" + VALID_TEXT + "```",
    "\ufeff" + VALID_TEXT[:-1],
    VALID_TEXT.replace('"City"', '"Pwned"'),
    VALID_TEXT.replace('"IsCapitalOf"', '"DETACH DELETE"'),
    VALID_TEXT.replace('"City"', '"City`) DETACH DELETE n //"'),
    VALID_TEXT.replace("false", '"false"'),
    VALID_TEXT.replace("false", "0"),
    VALID_TEXT.replace('"Paris"', "null"),
    VALID_TEXT.replace('"Paris"', '["Paris"]'),
    VALID_TEXT.replace('"Paris"', '{"$ne": null}'),
    VALID_TEXT[:-1] + ', "cypher": "MATCH (n) DETACH DELETE n"}',
    json.dumps({k: v for k, v in VALID.items() if k != "relation_label"}),
    json.dumps({**VALID, "subject_label": "Country"}),  # enum-valid, but IsCapitalOf is City -> Country
    json.dumps({**VALID, "subject_similarity_search": ""}),  # schema-valid, refused by kb.plan
    json.dumps({**VALID, "subject_similarity_search": "x" * 5000}),  # over MAX_TEXT
    "\x00" * 100,
    "A" * 1_000_000,
    '{"subject_label": "' + "\\u0000" * 10_000,
]


@pytest.mark.parametrize("raw", MALFORMED, ids=lambda r: repr(r[:40]))
async def test_malformed_search_answers_raise_generation_error(raw: str) -> None:
    kb = await new_kb()
    before = await kb.counts()
    lm = ScriptedLM([raw, raw, raw], max_repairs=2)
    with pytest.raises(GenerationError) as info:
        await retrieve(lm, kb)
    assert lm.remaining == 0 and len(lm.calls) == 3  # the repair loop asked twice more, then gave up
    assert len(str(info.value)) < 3_000  # the huge answers are cut in the message
    assert await kb.counts() == before


async def test_every_truncation_of_a_valid_answer_is_refused() -> None:
    kb = await new_kb()
    for cut in range(len(VALID_TEXT)):
        lm = ScriptedLM([VALID_TEXT[:cut]], max_repairs=0)
        with pytest.raises(GenerationError):
            await retrieve(lm, kb)
    hits = await retrieve(ScriptedLM([VALID_TEXT], max_repairs=0), kb)  # the full answer works
    assert [h.subject.id for h in hits] == [City(name="Paris").id]


async def test_repair_after_truncation_recovers_and_shows_the_error() -> None:
    kb = await new_kb()
    lm = ScriptedLM([VALID_TEXT[:25], json.dumps({**VALID, "relation_label": "Pwned"}), VALID_TEXT])
    hits = await retrieve(lm, kb)
    assert [h.object.name for h in hits] == ["France"]  # type: ignore[union-attr]
    repair = lm.calls[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": VALID_TEXT[:25]}
    assert "not valid JSON" in repair[-1]["content"]
    assert "Pwned" in lm.calls[2]["messages"][-2]["content"]


@pytest.mark.parametrize("raw", ["[" * 100_000, '{"a":' * 100_000], ids=["arrays", "objects"])
async def test_deeply_nested_output_is_a_generation_error(raw: str) -> None:
    kb = await new_kb()
    with pytest.raises(GenerationError):
        await retrieve(ScriptedLM([raw], max_repairs=0), kb)


async def test_transport_failures_are_not_repaired_and_write_nothing() -> None:
    kb = await new_kb()
    before = await kb.counts()
    lm = ScriptedLM([LanguageModelError("connection reset"), VALID_TEXT])
    with pytest.raises(LanguageModelError) as info:
        await extract(lm, kb)
    assert not isinstance(info.value, GenerationError)
    assert lm.remaining == 1
    assert await kb.counts() == before


@pytest.mark.parametrize(
    "raw",
    [
        '{"facts": [{"city": "Berlin", "country": "Germany"}, {"city": "Rome"',  # truncated mid-list
        '{"facts": [{"city": "Berlin", "country": "Germany"}, {"city": "", "country": "Italy"}]}',
        '{"facts": [{"city": "Berlin", "country": "Germany", "label": "Pwned"}]}',
        '{"facts": [{"city": "Berlin", "country": "Germany"}], "cypher": "MATCH (n) DETACH DELETE n"}',
        '{"facts": {"city": "Berlin", "country": "Germany"}}',
        '{"facts": [{"city": ' + "1" * 5000 + ', "country": "Germany"}]}',
        '{"facts": [' + '{"city": "A", "country": "B"},' * 50 + "]}",  # trailing comma
    ],
    ids=["truncated", "empty-field", "extra-field", "extra-key", "not-a-list", "number", "trailing-comma"],
)
async def test_invalid_extractions_write_nothing(raw: str) -> None:
    kb = await new_kb()
    before = await kb.counts()
    with pytest.raises(GenerationError):
        await extract(ScriptedLM([raw, raw], max_repairs=1), kb)
    assert await kb.counts() == before
    # a valid answer afterwards is written whole
    ok = '{"facts": [{"city": "Berlin", "country": "Germany"}, {"city": "Rome", "country": "Italy"}]}'
    assert await extract(ScriptedLM([ok]), kb) == {"entities": 4, "relations": 2}
    assert (await kb.counts())["relations"] == before["relations"] + 2


async def test_callable_responses_see_copies_and_cannot_corrupt_the_record() -> None:
    seen: list[list[Message]] = []

    def answer(messages: list[Message], schema: dict[str, Any]) -> str:
        seen.append(messages)
        messages.clear()  # hostile mutation of what it was given
        schema.clear()
        return VALID_TEXT[:10]

    script: list[ScriptedResponse] = [answer, VALID_TEXT]
    lm = ScriptedLM(script)
    kb = await new_kb()
    await retrieve(lm, kb)
    assert lm.calls[0]["messages"] == ASK and lm.calls[0]["schema"] == provider_schema(SEARCH_SCHEMA)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.one_of(
        st.text(max_size=300),
        st.builds(lambda n: VALID_TEXT[:n], st.integers(min_value=0, max_value=len(VALID_TEXT) - 1)),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
            max_leaves=10,
        ).map(json.dumps),
    )
)
async def test_property_any_output_is_a_valid_search_or_a_generation_error(raw: str) -> None:
    kb = await new_kb()
    lm = ScriptedLM([raw], max_repairs=0)
    try:
        answer = await lm.generate(ASK, SEARCH_SCHEMA, validate=kb.plan)
    except GenerationError:
        return
    kb.plan(answer)  # whatever got through is a plannable search
