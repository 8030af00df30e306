"""The ``kag`` command line on a store of the user's own models (an org chart), as a newcomer runs it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

import kag
from kag.cli import build_parser, main
from kag.errors import UsageError
from kag.knowledge.mentions import EntityMatcher
from kag.server.service import Service

MODELS = '''
from typing import Literal

import kag


class Person(kag.Entity):
    """A person who works at the company."""

    label: Literal["Person"] = "Person"
    name: str


class Team(kag.Entity):
    """A team of the company."""

    label: Literal["Team"] = "Team"
    name: str


class Leads(kag.Relation):
    """The person leads the team."""

    subj: Person
    label: Literal["Leads"] = "Leads"
    obj: Team


ENTITY_MODELS = [Person, Team]
RELATION_MODELS = [Leads]
'''


@pytest.fixture
def org(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A saved memory store of the org chart, written with the models of ``orgchart_models`` (in the cwd)."""
    monkeypatch.delenv("KAG_KB", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "orgchart_models.py").write_text(MODELS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "orgchart_models", raising=False)
    import orgchart_models as m

    uri = f"memory://{tmp_path / 'org.json'}"

    async def build() -> None:
        kb = kag.KnowledgeBase(uri, entity_models=m.ENTITY_MODELS, relation_models=m.RELATION_MODELS)
        await kb.upsert(
            [
                m.Leads(subj=m.Person(name="Ada Brook"), obj=m.Team(name="Firmware team")),
                m.Leads(subj=m.Person(name="Ben Cole"), obj=m.Team(name="Cloud team")),
            ]
        )
        await kb.save()
        await kb.aclose()

    asyncio.run(build())
    return uri


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_query_and_search_refuse_a_store_of_other_models_the_same_way(
    capsys: pytest.CaptureFixture[str], org: str
) -> None:
    # no --schema: the default world models know none of the store's labels
    query = run(capsys, "query", "Who leads the firmware team?", "--kb", org)
    search = run(capsys, "search", "firmware", "--kb", org)
    for command, (code, out, err) in (("query", query), ("search", search)):
        assert code == 2 and out == ""
        assert err.startswith(f"kag {command}: error: the knowledge base holds 4 entities and none has a label")
        assert "allowed labels: Continent, Country, City" in err and "Person, Team" in err and "--schema" in err
    assert query[2].split(": error: ")[1] == search[2].split(": error: ")[1]
    # with the models it was written with, the same question is answered
    code, out, err = run(capsys, "query", "Who leads the firmware team?", "--kb", org, "--schema", "orgchart_models")
    assert code == 0, err
    assert "answer : Ada Brook" in out


def test_an_empty_store_or_a_fitting_schema_is_not_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "search", "Paris", "--kb", f"memory://{tmp_path / 'empty.json'}")
    assert code == 0 and out.strip() == "no results"
    code, out, _ = run(capsys, "query", "What is the capital of France?", "--example", "world")
    assert code == 0 and "answer : Paris" in out


def test_search_finds_a_fact_by_one_word_of_a_name(capsys: pytest.CaptureFixture[str], org: str) -> None:
    code, out, err = run(capsys, "search", "firmware", "--kb", org, "--schema", "orgchart_models")
    assert code == 0, err
    assert out.splitlines()[0].endswith("Ada Brook -[Leads]-> Firmware team")
    code, out, _ = run(capsys, "search", "team", "--kb", org, "--schema", "orgchart_models", "--json")
    assert code == 0 and out.count('"kind": "fact"') == 2  # both teams' facts
    code, out, _ = run(capsys, "search", "who leads firmware", "--kb", org, "--schema", "orgchart_models")
    assert code == 0 and out.strip() == "no results"  # a sentence names no entity in part


def test_find_in_names_needs_every_word_in_one_name() -> None:
    matcher = EntityMatcher(
        [("t1", "Team", ["Firmware team"]), ("t2", "Team", ["Cloud team"]), ("p1", "Person", ["Ada Brook", "Ada"])]
    )
    assert [m.id for m in matcher.find("firmware")] == []  # not a whole name
    assert [(m.id, m.text) for m in matcher.find_in_names("Firmware")] == [("t1", "Firmware team")]
    assert [m.id for m in matcher.find_in_names("team")] == ["t1", "t2"]
    assert [m.id for m in matcher.find_in_names("team firmware")] == ["t1"]
    assert matcher.find_in_names("firmware cloud") == [] and matcher.find_in_names("...") == []
    matcher.remove("t1")
    assert [m.id for m in matcher.find_in_names("team")] == ["t2"] and matcher.find_in_names("firmware") == []


def test_the_lm_help_lists_every_kind_of_model(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("query", "ingest", "serve"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for kind in ("lexical", "local", "llama:PATH.gguf", "openai:MODEL[@BASE_URL]", "ollama:MODEL[@BASE_URL]"):
            assert kind in text, (command, kind)


def test_extract_with_the_offline_model_points_to_the_local_model_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "ingest", "--text", "Ada Brook leads the firmware team.", "--extract")
    assert code == 0
    assert "--lm local --examples FILE" in err


def test_a_missing_openai_key_is_said_before_any_connection(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sent: list[httpx.Request] = []

    async def send(self: httpx.AsyncClient, request: httpx.Request, **kwargs: object) -> httpx.Response:
        sent.append(request)
        raise httpx.ConnectError("no network in tests", request=request)

    monkeypatch.setattr(httpx.AsyncClient, "send", send)
    code, out, err = run(
        capsys, "ingest", "--text", "Ada leads the firmware team.", "--extract", "--lm", "openai:gpt-4o-mini"
    )
    assert code == 2 and out == "" and sent == []
    assert "OPENAI_API_KEY is not set" in err and "--lm local" in err
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        Service.open("memory://", lm="openai:gpt-4o-mini@https://api.openai.com/v1")
    # a server of one's own may need no key; with the key set, api.openai.com is fine too
    Service.open("memory://", lm="openai:qwen@http://127.0.0.1:8080/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    Service.open("memory://", lm="openai:gpt-4o-mini")


def test_main_runs_inside_a_running_event_loop(capsys: pytest.CaptureFixture[str], org: str) -> None:
    async def in_a_notebook_cell() -> int:
        return main(["search", "firmware", "--kb", org, "--schema", "orgchart_models"])

    assert asyncio.run(in_a_notebook_cell()) == 0
    assert "Firmware team" in capsys.readouterr().out
