"""KnowledgeExtractor: constrained extraction, entity resolution, provenance, unresolved reports."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from typing import Any

import pytest

import kag
from kag.datamodels.documents import Chunk
from kag.errors import GenerationError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf
from kag.lm import ScriptedLM
from kag.lm.base import Message
from kag.programs.extractor import KnowledgeExtractor, Progress, extraction_schema

FACTS: dict[str, dict[str, Any]] = {
    "Paris is the capital of France and has 2.1 million inhabitants.": {
        "entities": [
            {"label": "City", "name": "Paris", "population": 2_100_000},
            {"label": "Country", "name": "France"},
        ],
        "relations": [
            {
                "label": "IsCapitalOf",
                "subject": {"label": "City", "name": "Paris"},
                "object": {"label": "Country", "name": "France"},
            }
        ],
    },
    "In france, paris and Lyon are big cities.": {
        "entities": [
            {"label": "City", "name": "paris", "population": None},
            {"label": "City", "name": "Lyon", "population": None},
            {"label": "Country", "name": "france"},
        ],
        "relations": [
            {
                "label": "IsCityOf",
                "subject": {"label": "City", "name": "Lyon"},
                "object": {"label": "Country", "name": "France"},
            },
            {
                "label": "IsCityOf",
                "subject": {"label": "City", "name": "Atlantis"},
                "object": {"label": "Country", "name": "France"},
            },
        ],
    },
}


def by_passage(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
    text = messages[-1]["content"].split("\n", 1)[1]
    return FACTS[text]


def chunks() -> list[Chunk]:
    return [Chunk(id=f"c{i}", document_id="d", index=i, text=t, start=0, end=len(t)) for i, t in enumerate(FACTS)]


@pytest.fixture
def kb() -> kag.KnowledgeBase:
    return kag.KnowledgeBase(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)


def test_schema_is_strict_and_constrained() -> None:
    schema = extraction_schema(kag.GraphSchema(ENTITY_MODELS, RELATION_MODELS))
    assert "$ref" not in json.dumps(schema)
    labels = [item["properties"]["label"]["enum"] for item in schema["properties"]["entities"]["items"]["anyOf"]]
    assert labels == [["Country"], ["City"]]
    rel = schema["properties"]["relations"]["items"]["anyOf"][0]
    assert rel["properties"]["subject"]["properties"]["label"]["enum"] == ["City"]
    assert rel["additionalProperties"] is False and sorted(rel["required"]) == sorted(rel["properties"])


async def test_extracts_resolves_and_keeps_provenance(kb: kag.KnowledgeBase) -> None:
    lm = ScriptedLM([by_passage, by_passage])
    report = await KnowledgeExtractor(kb, lm, concurrency=1).ingest(chunks())
    # "paris"/"france" merged into Paris/France by normalized key; Lyon is new
    assert report.entities == 3 and report.relations == 2 and report.merged == 2
    counts = await kb.counts()
    assert counts["City"] == 2 and counts["Country"] == 1
    paris = await kb.get(City(name="Paris"))
    assert paris.population == 2_100_000  # type: ignore[union-attr]  # not erased by the second mention
    assert await kb.provenance(City(name="Paris")) == ["c0", "c1"]
    rel = IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))
    assert await kb.provenance(rel) == ["c0"]
    # the relation to an entity nobody mentioned is reported, not dropped silently
    assert [(u.chunk_id, u.subject.name) for u in report.unresolved] == [("c1", "Atlantis")]
    assert "Atlantis" in report.unresolved[0].reason


async def test_resolution_against_existing_entities_and_by_similarity(kb: kag.KnowledgeBase) -> None:
    await kb.upsert(City(name="Berlin", population=3_645_000))
    answer = {
        "entities": [
            {"label": "City", "name": "Berlin", "population": None},
            {"label": "City", "name": "Pariss", "population": None},
            {"label": "City", "name": "Paris", "population": 5},
        ],
        "relations": [],
    }
    passage = "Berlin and Pariss are cities. Paris has 5 inhabitants."
    report = await KnowledgeExtractor(kb, ScriptedLM([answer]), resolution_threshold=0.8).ingest([passage])
    assert report.merged == 2
    berlin = await kb.get(City(name="Berlin"))
    assert berlin.population == 3_645_000  # type: ignore[union-attr]
    assert (await kb.counts())["City"] == 2  # Berlin + Pariss (with Paris merged into it)
    pariss = await kb.get(City(name="Pariss"))
    assert pariss.population == 5  # type: ignore[union-attr]  # attribute merge filled the gap


async def test_invalid_label_is_repaired(kb: kag.KnowledgeBase) -> None:
    bad = {"entities": [{"label": "Planet", "name": "Mars"}], "relations": []}
    good = {"entities": [{"label": "Country", "name": "Peru"}], "relations": []}
    lm = ScriptedLM([bad, good])
    report = await KnowledgeExtractor(kb, lm).ingest(["Peru."])
    assert report.entities == 1 and len(lm.calls) == 2
    assert "Planet" in lm.calls[1]["messages"][-1]["content"]


async def test_failed_chunks_are_reported_and_others_written(kb: kag.KnowledgeBase) -> None:
    bad = {"entities": [{"label": "Planet", "name": "Mars"}], "relations": []}
    good = {"entities": [{"label": "Country", "name": "Peru"}], "relations": []}
    lm = ScriptedLM([good, bad, bad, bad])
    report = await KnowledgeExtractor(kb, lm, concurrency=1).ingest(["Peru.", "Mars."])
    assert report.entities == 1 and list(report.failed_chunks) == ["text-1"]
    assert (await kb.counts())["nodes"] == 1


async def test_truncated_output_gives_generation_error_and_writes_nothing(kb: kag.KnowledgeBase) -> None:
    lm = ScriptedLM(['{"entities": [{"label": "City", "na', '{"entities": [', "not json"] * 2)
    extractor = KnowledgeExtractor(kb, lm)
    with pytest.raises(GenerationError):
        await extractor.extract(chunks()[0])
    report = await extractor.ingest(chunks()[:1])
    assert report.failed_chunks and (await kb.counts())["nodes"] == 0


class SlowLM:
    """A real async model that tracks how many calls run at once."""

    name = "slow"

    def __init__(self) -> None:
        self.active = self.peak = 0

    async def generate(
        self, messages: Sequence[Message], schema: Any, *, validate: Any = None, schema_name: str = "output"
    ) -> dict[str, Any]:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        text = messages[-1]["content"].split("\n", 1)[1]
        return {"entities": [{"label": "Country", "name": text}], "relations": []}

    def get_config(self) -> dict[str, Any]:
        return {"type": "slow"}


async def test_concurrency_is_bounded_and_progress_shown(kb: kag.KnowledgeBase) -> None:
    lm = SlowLM()
    extractor = KnowledgeExtractor(kb, lm, concurrency=3)
    stream = io.StringIO()
    extractor.progress = True
    import kag.programs.extractor as mod

    original = mod.Progress
    mod.Progress = lambda total, enabled=None: original(total, enabled=True, stream=stream)  # type: ignore[assignment,misc]
    try:
        report = await extractor.ingest([f"Land {i}" for i in range(12)])
    finally:
        mod.Progress = original  # type: ignore[misc]
    assert lm.peak == 3 and report.entities == 12
    assert "12/12 chunks" in stream.getvalue()


def test_progress_off_when_not_a_tty() -> None:
    stream = io.StringIO()
    bar = Progress(2, stream=stream)
    bar.advance()
    bar.advance()
    assert stream.getvalue() == ""


async def test_as_a_module_on_models_with_text(kb: kag.KnowledgeBase) -> None:
    class Passage(kag.DataModel):
        text: str

    extractor = KnowledgeExtractor(kb, ScriptedLM([by_passage]))
    report = await extractor(Passage(text=next(iter(FACTS))))
    assert report.relations == 1
    inputs = kag.programs.Input(data_model=Passage)
    out = extractor(inputs)
    assert out.data_model.__name__ == "ExtractionReport"


async def test_config_roundtrip_without_secrets(kb: kag.KnowledgeBase) -> None:
    from kag.lm import OpenAICompatibleLM

    lm = OpenAICompatibleLM("gpt-x", base_url="http://127.0.0.1:9/v1", api_key="sk-secret")
    extractor = KnowledgeExtractor(kb, lm, concurrency=2, name="extract")
    config = extractor.get_config()
    assert "sk-secret" not in json.dumps(config)
    again = KnowledgeExtractor.from_config(config, knowledge_base=kb, language_model=lm)
    assert again.concurrency == 2 and again.schema.entity_labels == extractor.schema.entity_labels


async def test_an_entity_without_a_label_is_not_stored_under_a_guessed_model(kb: kag.KnowledgeBase) -> None:
    unlabelled = {"entities": [{"name": "Paris"}], "relations": []}
    labelled = {"entities": [{"label": "City", "name": "Paris"}], "relations": []}  # population omitted: defaulted
    lm = ScriptedLM([unlabelled, labelled])
    report = await KnowledgeExtractor(kb, lm).ingest(["Paris."])
    assert len(lm.calls) == 2  # the unlabelled answer was refused, not filled in
    repair = lm.calls[1]["messages"][-1]["content"]
    assert "missing required property 'label'" in repair and '"Country", "City"' in repair
    assert report.entities == 1
    assert (await kb.counts()).get("Country", 0) == 0 and (await kb.counts())["City"] == 1


async def test_with_one_entity_model_the_label_may_be_omitted() -> None:
    kb = kag.KnowledgeBase(entity_models=[City], relation_models=[])
    lm = ScriptedLM([{"entities": [{"name": "Paris"}], "relations": []}])
    report = await KnowledgeExtractor(kb, lm).ingest(["Paris."])
    assert len(lm.calls) == 1 and report.entities == 1
    assert (await kb.get(City(name="Paris"))) is not None
