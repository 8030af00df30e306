"""Extraction grounded in its passage: names it writes, values it states, each item once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kag
from kag.errors import ConfigError, JSONSchemaValidationError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City
from kag.lm import ScriptedLM
from kag.lm.base import ModelCapabilities
from kag.lm.jsonschema_check import validate_json_schema
from kag.programs.extractor import KnowledgeExtractor, extraction_schema
from kag.programs.stated import (
    is_stated,
    name_spans,
    sentence_of,
    sentences,
    stated_numbers,
    stated_schema,
    states_name,
)

PASSAGE = "Lima is the capital of Peru. Arequipa is a city in Peru and has 1,008,290 inhabitants."


# what LlamaCppLM declares: sampling under a grammar, demos narrowed, the scope gate on
LLAMA_LIKE = ModelCapabilities(grammar=True, narrow_to_demos=True, scope_gate=True)


def rel(label: str, subject: str, obj: str) -> dict[str, Any]:
    """An extracted relation from a City to a Country."""
    return {"label": label, "subject": {"label": "City", "name": subject}, "object": {"label": "Country", "name": obj}}


class Constrained(ScriptedLM):
    capabilities = LLAMA_LIKE  # as LlamaCppLM: it samples under the per-passage schema


@pytest.fixture
def kb() -> kag.KnowledgeBase:
    return kag.KnowledgeBase(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)


def test_names_are_runs_of_capitalized_words_within_a_sentence() -> None:
    assert name_spans(PASSAGE) == ["Lima", "Peru", "Arequipa"]  # never "Peru Arequipa" across the full stop
    assert "Republic of the Congo" in name_spans("The Republic of the Congo borders Gabon.")
    assert "numpy" in name_spans("scipy depends on numpy.")  # names written in lowercase: every run
    assert states_name(PASSAGE, "lima") and not states_name(PASSAGE, "Cusco")


def test_stated_numbers_and_values() -> None:
    assert stated_numbers(PASSAGE) == [1008290]
    assert stated_numbers("It has 2.1 million inhabitants and 3 rivers.") == [2.1, 2100000, 3]
    assert is_stated(PASSAGE, 1008290) and is_stated(PASSAGE, 1008290.0) and not is_stated(PASSAGE, 1000000)
    assert is_stated(PASSAGE, "the capital") and not is_stated(PASSAGE, "PE") and not is_stated(PASSAGE, True)


def test_the_passage_schema_allows_only_its_names_and_numbers() -> None:
    from kag.lm.llamacpp import schema_grammar

    schema = stated_schema(extraction_schema(kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)), PASSAGE)
    ok = {"entities": [{"label": "City", "name": "Arequipa", "population": 1008290}], "relations": []}
    validate_json_schema(ok, schema)
    for wrong in (
        {"entities": [{"label": "City", "name": "Cusco", "population": None}], "relations": []},
        {"entities": [{"label": "City", "name": "Lima", "population": 1000000}], "relations": []},
    ):
        with pytest.raises(JSONSchemaValidationError):
            validate_json_schema(wrong, schema)
    no_numbers = stated_schema(extraction_schema(kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)), "Lima is in Peru.")
    city = next(
        v
        for v in no_numbers["properties"]["entities"]["items"]["anyOf"]
        if v["properties"]["label"]["enum"] == ["City"]
    )
    # nothing to state: the property is left out (the model cannot write it, the entity keeps its default)
    assert "population" not in city["properties"] and "population" not in city.get("required", [])
    assert "Lima" in schema_grammar(schema)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Zorvik", "lies", "in", "Elandor", "the", "Quenta", "River", "of", "42", "."]),
        min_size=1,
        max_size=14,
    )
)
def test_every_name_the_schema_allows_is_written_in_the_passage(words: list[str]) -> None:
    text = " ".join(words)
    schema = stated_schema(extraction_schema(kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS)), text)
    for variant in schema["properties"]["entities"]["items"]["anyOf"]:
        assert all(states_name(text, name) for name in variant["properties"]["name"]["enum"])


async def test_a_constrained_model_fills_the_passage_schema(kb: kag.KnowledgeBase) -> None:
    answer = {
        "entities": [
            {"label": "City", "name": "Arequipa", "population": 1008290},
            {"label": "Country", "name": "Peru"},
        ],
        "relations": [
            {
                "label": "IsCityOf",
                "subject": {"label": "City", "name": "Arequipa"},
                "object": {"label": "Country", "name": "Peru"},
            }
        ],
    }
    lm = Constrained([answer])
    report = await KnowledgeExtractor(kb, lm).ingest([PASSAGE])
    assert report.relations == 1 and not report.failed_chunks
    names = lm.calls[0]["schema"]["properties"]["entities"]["items"]["anyOf"][1]["properties"]["name"]["enum"]
    assert names == ["Lima", "Peru", "Arequipa"]


async def test_any_model_gets_unstated_values_dropped_and_invented_names_repaired(kb: kag.KnowledgeBase) -> None:
    invented = {"entities": [{"label": "City", "name": "Cusco", "population": None}], "relations": []}
    answer = {
        "entities": [
            {"label": "City", "name": "Lima", "population": 1000000},  # a population the passage never states
            {"label": "City", "name": "lima", "population": None},  # the same entity again
            {"label": "Country", "name": "Peru"},
        ],
        "relations": [
            {
                "label": "IsCapitalOf",
                "subject": {"label": "City", "name": "Lima"},
                "object": {"label": "Country", "name": "Peru"},
            },
            {
                "label": "IsCapitalOf",
                "subject": {"label": "City", "name": "Lima"},
                "object": {"label": "Country", "name": "Peru"},
            },
            {
                "label": "IsCityOf",
                "subject": {"label": "City", "name": "Cusco"},
                "object": {"label": "Country", "name": "Peru"},
            },
        ],
    }
    lm = ScriptedLM([invented, answer])
    report = await KnowledgeExtractor(kb, lm).ingest([PASSAGE])
    assert len(lm.calls) == 2  # "Cusco" is no name the passage writes: asked again
    lima = await kb.get(City(name="Lima"))
    assert lima is not None and lima.population is None  # dropped, never stored
    assert report.entities == 2 and report.relations == 1
    assert [u.reason for u in report.unresolved] == ["City 'Cusco' is not a name the passage writes"]


def test_examples_are_shown_before_the_passage_and_saved(kb: kag.KnowledgeBase) -> None:
    capital = {"label": "IsCapitalOf", "subject": {"label": "City", "name": "Quito"}}
    capital["object"] = {"label": "Country", "name": "Ecuador"}
    quito = {"label": "City", "name": "Quito", "population": None}
    demo = (
        "Quito is the capital of Ecuador.",
        {"entities": [quito, {"label": "Country", "name": "Ecuador"}], "relations": [capital]},
    )
    extractor = KnowledgeExtractor(kb, ScriptedLM([]), examples=[demo])
    chunk = kag.Chunk(id="c0", document_id="d", index=0, text=PASSAGE, start=0, end=len(PASSAGE))
    roles = [m["role"] for m in extractor.messages(chunk)]
    assert roles == ["system", "user", "assistant", "user"]
    assert "Quito" in extractor.messages(chunk)[2]["content"]
    rebuilt = KnowledgeExtractor.from_config(extractor.get_config(), knowledge_base=kb, language_model=ScriptedLM([]))
    assert rebuilt.examples == extractor.examples
    bad: tuple[str, dict[str, Any]] = (
        "Quito is a city.",
        {"entities": [{"label": "City", "name": "Lima"}], "relations": []},
    )
    with pytest.raises(ConfigError, match="examples\\[0\\]"):
        KnowledgeExtractor(kb, ScriptedLM([]), examples=[bad])


def _capital_demo(text: str, city: str, country: str) -> tuple[str, dict[str, Any]]:
    entities = [{"label": "City", "name": city, "population": None}, {"label": "Country", "name": country}]
    return text, {"entities": entities, "relations": [rel("IsCapitalOf", city, country)]}


async def test_nearest_shows_each_passage_the_examples_written_like_it(kb: kag.KnowledgeBase) -> None:
    # two ways of writing the same fact; a chunk is shown the example written its way, names aside
    examples = [
        _capital_demo("Quito is the capital of Ecuador.", "Quito", "Ecuador"),
        _capital_demo("The capital of Chile is Santiago.", "Santiago", "Chile"),
        _capital_demo("Bogota is the capital of Colombia.", "Bogota", "Colombia"),
    ]
    answer = {"entities": [{"label": "City", "name": "Lima", "population": None}], "relations": []}
    lm = ScriptedLM([answer, answer])
    extractor = KnowledgeExtractor(kb, lm, examples=examples, nearest=1, progress=False)
    chunk = kag.Chunk(id="c0", document_id="d", index=0, text="The capital of Peru is Lima.", start=0, end=28)
    assert [t for t, _ in await extractor.examples_for(chunk)] == ["The capital of Chile is Santiago."]
    other = "Lima is the capital of Peru."
    shown = await extractor.examples_for(kag.Chunk(id="c1", document_id="d", index=1, text=other, start=0, end=28))
    assert [t for t, _ in shown] == ["Quito is the capital of Ecuador."]  # a tie: the earlier example
    # the model sees exactly the chosen example, then the passage
    await extractor.ingest([chunk])
    sent = lm.calls[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "Santiago" in sent[1]["content"] and "Quito" not in json.dumps(sent)
    # two nearest: the most similar last, next to the passage
    two = KnowledgeExtractor(kb, lm, examples=examples, nearest=2)
    assert [t for t, _ in await two.examples_for(chunk)][-1] == "The capital of Chile is Santiago."
    rebuilt = KnowledgeExtractor.from_config(extractor.get_config(), knowledge_base=kb, language_model=lm)
    assert rebuilt.nearest == 1 and rebuilt.examples == extractor.examples
    assert KnowledgeExtractor(kb, lm, examples=examples).nearest is None  # default: every example
    with pytest.raises(ConfigError, match="nearest"):
        KnowledgeExtractor(kb, lm, examples=examples, nearest=0)


async def test_an_endpoint_the_passage_names_but_the_model_did_not_list_is_stored(kb: kag.KnowledgeBase) -> None:
    answer = {
        "entities": [{"label": "City", "name": "Lima", "population": None}],  # Peru is not listed
        "relations": [
            rel("IsCapitalOf", "Lima", "Peru"),
            # "Lima" as a Country disagrees with its listing as a City: reported, not guessed
            rel("IsCapitalOf", "Arequipa", "Lima"),
        ],
    }  # fmt: skip
    # reading=False: the model's relations alone (reading would add IsCityOf(Arequipa, Peru), stated too)
    report = await KnowledgeExtractor(kb, ScriptedLM([answer]), reading=False).ingest([PASSAGE])
    assert report.relations == 1 and (await kb.counts())["Country"] == 1
    assert [u.object.name for u in report.unresolved] == ["Lima"]


def test_sentences_end_at_a_stop_before_a_capital_but_not_after_an_abbreviation() -> None:
    assert sentences("Lima is in Peru. St. Louis is big! Is Mt. Fuji high? Yes.") == [
        "Lima is in Peru.",
        "St. Louis is big!",
        "Is Mt. Fuji high?",
        "Yes.",
    ]
    assert sentence_of(PASSAGE, "Arequipa", "Peru") == "Arequipa is a city in Peru and has 1,008,290 inhabitants."
    assert sentence_of(PASSAGE, "Lima", "Arequipa") is None
    assert "The" not in name_spans("The capital of Peru is Lima.")  # a sentence's first word is no name


async def test_a_relation_is_read_from_one_sentence_that_names_both_of_its_ends(kb: kag.KnowledgeBase) -> None:
    passage = "Lima is the capital of Peru. Arequipa is a city in Peru. Cusco lies in Peru. Quito is far away."
    answer = {
        "entities": [],
        "relations": [
            rel("IsCapitalOf", "Arequipa", "Peru"),  # its sentence says "city": read as IsCityOf
            rel("IsCityOf", "Quito", "Peru"),  # Quito and Peru never share a sentence: reported
            rel("IsCityOf", "Peru", "Peru"),  # one name on both sides: reported
            rel("IsCityOf", "Cusco", "Peru"),  # the sentence names no relation: kept as the model wrote it
            rel("IsCapitalOf", "Lima", "Peru"),
        ],
    }
    report = await KnowledgeExtractor(kb, ScriptedLM([answer])).ingest([passage])
    written = set()
    for rid in report.relation_ids:
        relation = await kb.get(rid)
        assert isinstance(relation, kag.Relation)
        written.add((relation.label, relation.subj.name, relation.obj.name))
    assert written == {("IsCityOf", "Arequipa", "Peru"), ("IsCityOf", "Cusco", "Peru"), ("IsCapitalOf", "Lima", "Peru")}
    reasons = sorted(u.reason for u in report.unresolved)
    assert len(reasons) == 2
    assert "'Peru' is on both sides" in reasons[0] and "no sentence of the passage names both" in reasons[1]
