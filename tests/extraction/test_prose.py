"""Extraction from ordinary prose: short names, pronouns, guards per chunk, units, dry runs, training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kag
from kag.cli import main
from kag.datamodels.documents import Chunk
from kag.lm import ScriptedLM
from kag.lm.base import BaseLanguageModel, Message
from kag.lm.openai import OpenAICompatibleLM
from kag.programs.extractor import (
    KnowledgeExtractor,
    LabelledPassages,
    dry_run,
    training_data,
)
from kag.programs.stated import full_names, name_aliases, supporting_sentence
from kag.training.optimizers import KNNFewShot
from kag.training.rewards import RelationF1, get_reward
from tests.extraction.org_models import ENTITY_MODELS, RELATION_MODELS, Passage, Person, ReportsTo
from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply

PROSE = (
    "Elena Petrova runs the Support team. Jamal Carter and Ines Duarte report to Elena. "
    "Felix Braun joined in May; he works closely with Jamal."
)


def ref(label: str, name: str) -> dict[str, str]:
    return {"label": label, "name": name}


def rel(label: str, subject: dict[str, str], obj: dict[str, str]) -> dict[str, Any]:
    return {"label": label, "subject": subject, "object": obj}


@pytest.fixture
def kb() -> kag.KnowledgeBase:
    return kag.KnowledgeBase(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)


def test_full_names_and_the_short_names_a_passage_uses() -> None:
    text = "At Norvale, Ingrid Larsen heads Data Engineering. The Hardware team reports to Ingrid. Akira's team grew."
    assert full_names(text) == ["Ingrid Larsen", "Data Engineering"]  # no "At Norvale", "The Hardware", "Akira's"
    aliases = name_aliases(text)
    assert aliases["ingrid"] == "Ingrid Larsen" and aliases["larsen"] == "Ingrid Larsen"
    # a first name two full names share stays ambiguous: it maps to neither
    assert "mei" not in name_aliases("Mei Chen met Mei Tanaka. Mei left.")
    # "and" joins two names, it is not inside one
    assert full_names("Omar Haddad and Grace Liu report to Tomasz.") == ["Omar Haddad", "Grace Liu"]


def test_a_relation_is_read_from_one_sentence_or_a_pronoun_after_it() -> None:
    text = "Nadia Hussein joined the Hardware team. She reports to Akira Yamamoto. Pavel Novak works in Safety."
    assert supporting_sentence(text, ["Nadia Hussein", "Nadia"], ["Akira Yamamoto"]) == "She reports to Akira Yamamoto."
    assert supporting_sentence(text, ["Nadia Hussein"], ["Pavel Novak"]) is None  # no pronoun links them


async def test_first_names_resolve_to_the_full_name_and_each_guard_is_counted(kb: kag.KnowledgeBase) -> None:
    answer = {
        "entities": [ref("Person", "Elena"), ref("Team", "Support")],
        "relations": [
            rel("Leads", ref("Person", "Elena Petrova"), ref("Team", "Support")),
            rel("ReportsTo", ref("Person", "Jamal"), ref("Person", "Elena")),  # first names: the full ones
            rel("ReportsTo", ref("Person", "Ines Duarte"), ref("Person", "Elena Petrova")),
            rel("ReportsTo", ref("Person", "Felix Braun"), ref("Person", "Elena")),  # never in one sentence
            rel("ReportsTo", ref("Person", "Jamal"), ref("Person", "Jamal Carter")),  # one person on both sides
        ],
    }
    report = await KnowledgeExtractor(kb, ScriptedLM([answer])).ingest([PROSE])
    written = sorted((r.label, r.subject.name, r.object.name) for r in report.extracted)
    assert written == [
        ("Leads", "Elena Petrova", "Support"),
        ("ReportsTo", "Ines Duarte", "Elena Petrova"),
        ("ReportsTo", "Jamal Carter", "Elena Petrova"),
    ]
    assert await kb.get(Person(name="Elena")) is None and await kb.get(Person(name="Elena Petrova")) is not None
    [chunk] = report.chunk_reports
    assert (chunk.units, chunk.proposed, chunk.resolved, chunk.written) == (1, 5, 3, 3)
    assert chunk.refused == {"no_shared_sentence": 1, "same_entity": 1}
    refused = [p for p in chunk.relations if p.status == "refused"]
    assert [(p.subject.name, p.guard) for p in refused] == [
        ("Felix Braun", "no_shared_sentence"),
        ("Jamal", "same_entity"),
    ]
    assert report.unresolved_counts() == {"no_shared_sentence": 1, "same_entity": 1}


async def test_the_prompt_gives_each_relation_its_docstring_and_inverse_reading(kb: kag.KnowledgeBase) -> None:
    extractor = KnowledgeExtractor(kb, ScriptedLM([]))
    system = extractor.messages(Chunk(id="c", document_id="d", index=0, text=PROSE, start=0, end=len(PROSE)))[0]
    doc = 'The person reports to the other person, their manager ("X manages Y" is Y ReportsTo X).'
    assert f"- ReportsTo: Person -> Person. {doc}" in system["content"]


async def test_a_long_chunk_is_read_in_sentence_units_with_names_from_the_whole_chunk(kb: kag.KnowledgeBase) -> None:
    seen: list[str] = []

    def answer(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        unit = messages[-1]["content"].split("\n", 1)[1]
        seen.append(unit)
        if "report to" in unit:  # the second unit writes first names only
            return {"entities": [], "relations": [rel("ReportsTo", ref("Person", "Jamal"), ref("Person", "Elena"))]}
        return {"entities": [ref("Person", "Elena Petrova")], "relations": []}

    extractor = KnowledgeExtractor(kb, ScriptedLM([answer] * 3), max_unit_chars=90, reading=False)
    report = await extractor.ingest([PROSE])
    assert seen == [
        "Elena Petrova runs the Support team. Jamal Carter and Ines Duarte report to Elena.",
        "Felix Braun joined in May; he works closely with Jamal.",
    ]
    assert report.chunk_reports[0].units == 2
    assert [(r.subject.name, r.object.name) for r in report.extracted] == [("Jamal Carter", "Elena Petrova")]


async def test_a_dry_run_reports_what_it_would_write_and_writes_nothing(kb: kag.KnowledgeBase) -> None:
    answer = {"entities": [], "relations": [rel("ReportsTo", ref("Person", "Ines Duarte"), ref("Person", "Elena"))]}
    extractor = KnowledgeExtractor(kb, ScriptedLM([answer, answer, answer]), reading=False)
    report = await extractor.ingest([PROSE], dry_run=True)
    assert report.dry_run and report.relations == 1 and (await kb.counts())["nodes"] == 0
    with dry_run():
        inside = await extractor({"text": PROSE})
    assert inside.dry_run and inside.extracted == report.extracted and (await kb.counts())["nodes"] == 0
    written = await extractor.ingest([PROSE])
    assert not written.dry_run and written.relation_ids == report.relation_ids
    assert await kb.get(ReportsTo(subj=Person(name="Ines Duarte"), obj=Person(name="Elena Petrova"))) is not None


async def test_relation_f1_compares_relations_by_label_and_ends() -> None:
    reward = get_reward("relation_f1")
    assert isinstance(reward, RelationF1)
    want = {"extracted": [rel("ReportsTo", ref("Person", "Jamal Carter"), ref("Person", "Elena Petrova"))]}
    swapped = {"extracted": [rel("ReportsTo", ref("Person", "Elena Petrova"), ref("Person", "Jamal Carter"))]}
    assert (
        await reward(
            want, {"extracted": [rel("ReportsTo", ref("Person", "jamal  carter"), ref("Person", "Elena Petrova"))]}
        )
        == 1.0
    )
    assert await reward(want, swapped) == 0.0
    assert await reward(want, {"extracted": [*want["extracted"], *swapped["extracted"]]}) == pytest.approx(2 / 3)
    assert await reward({"extracted": []}, {"extracted": []}) == 1.0


ORG_PASSAGES: list[tuple[str, dict[str, Any]]] = [
    (
        "Omar Haddad leads Billing. Omar manages Lucia Ferrante.",
        {
            "entities": [ref("Person", "Omar Haddad"), ref("Team", "Billing"), ref("Person", "Lucia Ferrante")],
            "relations": [
                rel("Leads", ref("Person", "Omar Haddad"), ref("Team", "Billing")),
                rel("ReportsTo", ref("Person", "Lucia Ferrante"), ref("Person", "Omar Haddad")),
            ],
        },
    ),
    (
        "Grace Liu heads Analytics. Grace manages Marco Rossi.",
        {
            "entities": [ref("Person", "Grace Liu"), ref("Team", "Analytics"), ref("Person", "Marco Rossi")],
            "relations": [
                rel("Leads", ref("Person", "Grace Liu"), ref("Team", "Analytics")),
                rel("ReportsTo", ref("Person", "Marco Rossi"), ref("Person", "Grace Liu")),
            ],
        },
    ),
]


class ShownOrNothing(BaseLanguageModel):
    """A deterministic model: it extracts a passage right only when the prompt shows a worked example."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.answers = answers

    @property
    def name(self) -> str:
        return "shown-or-nothing"

    def get_config(self) -> dict[str, Any]:
        return {"type": "shown-or-nothing"}

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        passage = messages[-1]["content"].split("\n", 1)[1]
        shown = any(m["role"] == "assistant" for m in messages)
        return json.dumps(self.answers[passage] if shown else {"entities": [], "relations": []})


async def test_fit_chooses_labelled_passages_saves_them_and_writes_nothing(
    kb: kag.KnowledgeBase, tmp_path: Path
) -> None:
    model = ShownOrNothing(dict(ORG_PASSAGES))
    extractor = KnowledgeExtractor(kb, model, name="extract")
    inputs = kag.Input(data_model=Passage)
    program = kag.Program(inputs=inputs, outputs=extractor(inputs))
    assert list(program.trainable_modules()) == ["extract"]
    program.compile(reward="relation_f1", optimizer=KNNFewShot(k=1, teacher=LabelledPassages(ORG_PASSAGES), explore=0))
    x, y = training_data(ORG_PASSAGES)
    before = await program.evaluate(x, y)
    history = await program.fit(x, y, epochs=1, verbose=0)
    after = await program.evaluate(x, y)
    # shown the other labelled passage (never itself), the model extracts every passage right
    assert before["reward"] == 0.0 and after["reward"] == 1.0 and history.history["reward"] == [1.0]
    assert extractor.nearest == 1 and [text for text, _ in extractor.examples] == [t for t, _ in ORG_PASSAGES]
    assert (await kb.counts())["nodes"] == 0  # fit and evaluate wrote nothing
    path = program.save_variables(tmp_path / "variables.json")
    fresh = KnowledgeExtractor(kb, model, name="extract")
    again = kag.Program(inputs=(i := kag.Input(data_model=Passage)), outputs=fresh(i))
    again.load_variables(path)
    assert fresh.examples == extractor.examples and fresh.nearest == 1
    report = await fresh.ingest([ORG_PASSAGES[0][0]])  # outside training: written
    assert report.relations == 2 and (await kb.counts())["nodes"] == 3


def test_a_variable_with_a_demo_its_passage_does_not_support_is_refused(kb: kag.KnowledgeBase) -> None:
    extractor = KnowledgeExtractor(kb, ScriptedLM([]))
    bad = kag.training.variables.Variable(
        demos=[kag.training.variables.Demo({"text": "Omar leads Billing."}, {"entities": [ref("Person", "Zed")]})]
    )
    with pytest.raises(kag.errors.ConfigError, match="not a valid extraction"):
        extractor.set_variable(bad)


def test_output_variants_drop_swap_and_relabel(kb: kag.KnowledgeBase) -> None:
    extractor = KnowledgeExtractor(kb, ScriptedLM([]))
    output = {"entities": [], "relations": [rel("ReportsTo", ref("Person", "A B"), ref("Person", "C D"))]}
    variants = extractor.output_variants(output)
    assert {"entities": [], "relations": []} in variants
    assert {"entities": [], "relations": [rel("ReportsTo", ref("Person", "C D"), ref("Person", "A B"))]} in variants


async def test_an_http_model_gets_the_same_pipeline(kb: kag.KnowledgeBase) -> None:
    answer = {
        "entities": [ref("Person", "Elena"), ref("Team", "Support")],
        "relations": [
            rel("Leads", ref("Person", "Elena"), ref("Team", "Support")),
            rel("ReportsTo", ref("Person", "Ines"), ref("Person", "Elena")),
            rel("ReportsTo", ref("Person", "Felix Braun"), ref("Person", "Elena")),
        ],
    }
    systems: list[str] = []

    def complete(request: RecordedRequest) -> Any:
        messages = request.json()["messages"]
        systems.append(messages[0]["content"])
        content = json.dumps(answer)
        return Reply.json(
            {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
        )

    with LocalHTTPServer() as server:
        server.route("POST", "/v1/chat/completions", complete)
        lm = OpenAICompatibleLM("fake", base_url=server.url + "/v1", backoff_base=0.0)
        report = await KnowledgeExtractor(kb, lm).ingest([PROSE])
        await lm.aclose()
    assert '("X manages Y" is Y ReportsTo X)' in systems[0]
    assert sorted((r.label, r.subject.name, r.object.name) for r in report.extracted) == [
        ("Leads", "Elena Petrova", "Support"),
        ("ReportsTo", "Ines Duarte", "Elena Petrova"),
    ]
    assert report.chunk_reports[0].refused == {"no_shared_sentence": 1}
    assert (await kb.counts())["ReportsTo"] == 1


def test_kag_train_fits_an_extraction_program_and_ingest_says_why_relations_were_not_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "labelled.jsonl"
    data.write_text("\n".join(json.dumps({"x": {"text": t}, "y": y}) for t, y in ORG_PASSAGES) + "\n", encoding="utf-8")
    answers = dict(ORG_PASSAGES)

    def complete(request: RecordedRequest) -> Any:
        messages = request.json()["messages"]
        passage = messages[-1]["content"].split("\n", 1)[1]
        shown = any(m["role"] == "assistant" for m in messages)
        content = json.dumps(
            answers.get(passage)
            if shown and passage in answers
            else {"entities": [], "relations": [rel("ReportsTo", ref("Person", "Ann Lee"), ref("Person", "Bo"))]}
        )
        return Reply.json(
            {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
        )

    with LocalHTTPServer() as server:
        server.route("POST", "/v1/chat/completions", complete)
        url = f"openai:fake@{server.url}/v1"
        kb_uri = f"memory://{tmp_path / 'kb.json'}"
        schema = ["--schema", "tests.extraction.org_models"]
        lm = OpenAICompatibleLM("fake", base_url=server.url + "/v1")
        knowledge = kag.KnowledgeBase(entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
        extractor = KnowledgeExtractor(knowledge, lm, name="extract")
        inputs = kag.Input(data_model=Passage)
        program = kag.Program(inputs=inputs, outputs=extractor(inputs))
        program.save(tmp_path / "program.json")
        argv = ["train", str(tmp_path / "program.json"), "--data", str(data), "--out", str(tmp_path / "v.json")]
        code = main(
            [
                *argv,
                "--kb",
                kb_uri,
                *schema,
                "--lm",
                url,
                "--optimizer",
                "knn_few_shot",
                "--demos",
                "1",
                "--validation-split",
                "0",
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "relation_f1 1.000" in out or "reward 1.000" in out
        saved = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))["variables"]["extract"]
        assert saved["nearest"] == 1 and len(saved["demos"]) == 2
        source = tmp_path / "team.md"
        source.write_text("Ann Lee joined in June. Bo left.\n", encoding="utf-8")
        code = main(["ingest", str(source), "--extract", "--kb", kb_uri, *schema, "--lm", url])
        out, err = capsys.readouterr()
    assert code == 0, err
    assert "not written: 1 (no_shared_sentence)" in out and "1 proposed, refused 1 by no_shared_sentence" in out


def test_a_relation_is_read_from_its_own_words_in_either_direction() -> None:
    from kag.programs.stated import read_relations, relation_cues

    cues = {
        "Leads": relation_cues("Leads", "The person leads (heads, runs, manages) the team.", ["person", "team"]),
        "ReportsTo": relation_cues(
            "ReportsTo", 'The person reports to the other person ("X manages Y" is Y ReportsTo X).', ["person"]
        ),
    }
    assert cues["ReportsTo"] == (frozenset({"report"}), frozenset({"manag"}))
    ends = {"Leads": (["Person"], ["Team"]), "ReportsTo": (["Person"], ["Person"])}
    names = {
        "carlos mendes": ("Carlos Mendes", "Person"),
        "carlos": ("Carlos Mendes", "Person"),
        "tomasz": ("Tomasz Wiśniewski", "Person"),
        "yuki tanaka": ("Yuki Tanaka", "Person"),
        "infrastructure": ("Infrastructure", "Team"),
        "pavel": ("Pavel Novak", "Person"),
    }
    text = (
        "The Infrastructure team is run by Carlos Mendes. Carlos reports to Tomasz and manages Yuki Tanaka. "
        "Yuki works with Pavel, but Pavel is not her manager and she does not report to Pavel."
    )
    assert sorted(read_relations(text, names, cues, ends)) == [
        ("Leads", "Carlos Mendes", "Person", "Infrastructure", "Team"),  # passive: "is run by"
        ("ReportsTo", "Carlos Mendes", "Person", "Tomasz Wiśniewski", "Person"),
        ("ReportsTo", "Yuki Tanaka", "Person", "Carlos Mendes", "Person"),  # inverse, coordinated: "and manages"
    ]  # nothing from the negated clause


async def test_the_reading_adds_what_a_verb_states_and_refuses_a_pair_it_contradicts(kb: kag.KnowledgeBase) -> None:
    text = "Maria Kowalski and Omar Haddad report to Tomasz Wiśniewski. Tomasz leads Architecture."
    answer = {
        "entities": [
            ref("Person", "Maria Kowalski"),
            ref("Person", "Omar Haddad"),
            ref("Person", "Tomasz Wiśniewski"),
            ref("Team", "Architecture"),
        ],
        "relations": [rel("ReportsTo", ref("Person", "Maria Kowalski"), ref("Person", "Omar Haddad"))],
    }
    report = await KnowledgeExtractor(kb, ScriptedLM([answer])).ingest([text], dry_run=True)
    assert sorted((r.label, r.subject.name, r.object.name) for r in report.extracted) == [
        ("Leads", "Tomasz Wiśniewski", "Architecture"),
        ("ReportsTo", "Maria Kowalski", "Tomasz Wiśniewski"),
        ("ReportsTo", "Omar Haddad", "Tomasz Wiśniewski"),
    ]
    [chunk] = report.chunk_reports
    assert chunk.refused == {"reading_disagrees": 1}
    assert sorted(p.by for p in chunk.relations) == ["model", "reading", "reading", "reading"]
    off = await KnowledgeExtractor(kb, ScriptedLM([answer]), reading=False).ingest([text], dry_run=True)
    assert [(r.subject.name, r.object.name) for r in off.extracted] == [("Maria Kowalski", "Omar Haddad")]


def test_a_name_before_a_label_noun_takes_that_label() -> None:
    from kag.programs.stated import named_by_noun

    text = "The Hardware team is led by Akira. Laura leads the Safety team and the Data Engineering teams."
    assert named_by_noun(text, {"team": "Team"}) == {"Hardware": "Team", "Safety": "Team", "Data Engineering": "Team"}
