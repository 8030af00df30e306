"""The ``kag`` command line, run in-process with ``main([...])``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kag.cli import main
from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply

SEED = ["--schema", "kag.examples.seed"]


@pytest.fixture(autouse=True)
def _no_env_kb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAG_KB", raising=False)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "france.md").write_text(
        "# France\n\nParis is the capital of France. Lyon is famous for its cuisine.\n", encoding="utf-8"
    )
    (folder / "japan.txt").write_text("Tokyo is the capital of Japan. Osaka has a big castle.\n", encoding="utf-8")
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def kb_args(tmp_path: Path) -> list[str]:
    return ["--kb", f"memory://{tmp_path / 'kb.json'}", *SEED]


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "What is the capital of France?")
    assert code == 0
    assert "Q: What is the capital of France?" in out and "A: Paris" in out


def test_ingest_files_and_example_then_stats(capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path) -> None:
    code, out, err = run(capsys, "ingest", str(docs), "--example", "seed", *kb_args(tmp_path), "--chunk-size", "200")
    assert code == 0, err
    assert "passages  : 2 document(s)" in out and "saved" in out
    assert "counts    : 17 nodes, 17 relations" in out
    assert (tmp_path / "kb.json").exists() and (tmp_path / "kb.json.passages.json").exists()

    code, out, _ = run(capsys, "ingest", str(docs / "france.md"), *kb_args(tmp_path), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["passages"]["skipped"] == 1 and report["passages"]["documents"] == 0

    code, out, _ = run(capsys, "stats", *kb_args(tmp_path))
    assert code == 0 and "(memory)" in out and "IsCapitalOf  5" in out
    code, out, _ = run(capsys, "stats", *kb_args(tmp_path), "--json")
    assert json.loads(out)["counts"]["City"] == 12


def test_ingest_inline_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "ingest", "--text", "Madrid has the Prado museum.", *kb_args(tmp_path), "--json")
    assert code == 0 and json.loads(out)["passages"]["chunks"] == 1


def test_search_and_query(capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path) -> None:
    assert run(capsys, "ingest", str(docs), "--example", "seed", *kb_args(tmp_path))[0] == 0

    code, out, _ = run(capsys, "search", "capital of Japan", *kb_args(tmp_path), "--k", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].endswith("Tokyo -[IsCapitalOf]-> Japan") and "[fact" in lines[0]
    assert any("[passage" in line and "japan.txt" in line for line in lines)

    code, out, _ = run(capsys, "search", "Osaka", "--label", "City", "--k", "1", *kb_args(tmp_path), "--json")
    hits = json.loads(out)
    assert code == 0 and hits[0]["entity"]["name"] == "Osaka" and hits[0]["kind"] == "entity"

    where = json.dumps({"source": str(docs / "france.md")})
    code, out, _ = run(capsys, "search", "capital", "--where", where, *kb_args(tmp_path), "--json")
    passages = [h for h in json.loads(out) if h["kind"] == "passage"]
    assert code == 0 and passages and all(h["source"].endswith("france.md") for h in passages)

    code, out, _ = run(capsys, "query", "What is the capital of Japan?", *kb_args(tmp_path))
    assert code == 0
    assert 'search : (City "*")-[IsCapitalOf]->(Country "Japan")' in out
    assert "MATCH" in out and "Tokyo -[IsCapitalOf]-> Japan" in out and "answer : Tokyo" in out

    code, out, _ = run(capsys, "query", "How many cities are in France?", *kb_args(tmp_path), "--json")
    result = json.loads(out)
    assert code == 0 and result["count"] == 3 and result["cypher"].startswith("MATCH")

    code, out, _ = run(capsys, "query", "What is the capital of France?", "--mode", "rag", *kb_args(tmp_path))
    assert code == 0 and "answer : " in out and "cited  : knowledge:1" in out and "Paris" in out


def test_query_default_world_schema_with_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "query", "Which country is Nairobi in?", "--example", "world")
    assert code == 0, err
    assert "answer : Kenya" in out and "loaded example 'world'" in err


def test_ingest_extract_with_an_openai_compatible_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path
) -> None:
    extraction = {
        "entities": [{"label": "City", "name": "Paris", "population": None}, {"label": "Country", "name": "France"}],
        "relations": [
            {  # "Paris is the capital of France.": one sentence names both ends
                "label": "IsCapitalOf",
                "subject": {"label": "City", "name": "Paris"},
                "object": {"label": "Country", "name": "France"},
            },
            {  # Lyon and France never share a sentence of the passage: reported, not stored
                "label": "IsCityOf",
                "subject": {"label": "City", "name": "Lyon"},
                "object": {"label": "Country", "name": "France"},
            },
        ],
    }

    def complete(request: RecordedRequest) -> Any:
        assert request.json()["response_format"]["type"] == "json_schema"
        message = {"role": "assistant", "content": json.dumps(extraction)}
        return Reply.json({"choices": [{"message": message, "finish_reason": "stop"}]})

    with LocalHTTPServer() as server:
        server.route("POST", "/v1/chat/completions", complete)
        code, out, err = run(
            capsys,
            "ingest",
            str(docs / "france.md"),
            "--extract",
            "--lm",
            f"openai:fake-model@{server.url}/v1",
            *kb_args(tmp_path),
            "--json",
        )
    assert code == 0, err
    report = json.loads(out)
    assert report["extraction"]["entities"] == 2 and report["extraction"]["relations"] == 1
    assert report["counts"]["IsCapitalOf"] == 1 and report["extraction"]["model"].endswith("fake-model")
    assert report["counts"].get("IsCityOf", 0) == 0

    code, out, _ = run(capsys, "search", "Paris", "--label", "City", *kb_args(tmp_path), "--json")
    assert json.loads(out)[0]["entity"]["name"] == "Paris"


def _labelled(text: str, city: str, country: str) -> dict[str, Any]:
    subject, obj = {"label": "City", "name": city}, {"label": "Country", "name": country}
    relation = {"label": "IsCapitalOf", "subject": subject, "object": obj}
    return {"x": {"text": text}, "y": {"entities": [subject, obj], "relations": [relation]}}


def test_ingest_extract_shows_the_nearest_labelled_passages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path
) -> None:
    examples = tmp_path / "labelled.jsonl"
    rows = [
        _labelled("The capital of Chile is Santiago.", "Santiago", "Chile"),
        _labelled("Quito is the capital of Ecuador.", "Quito", "Ecuador"),
    ]
    examples.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    answer = {"entities": [{"label": "City", "name": "Paris", "population": None}], "relations": []}
    shown: list[str] = []

    def complete(request: RecordedRequest) -> Any:
        shown.append(json.dumps(request.json()["messages"]))
        message = {"role": "assistant", "content": json.dumps(answer)}
        return Reply.json({"choices": [{"message": message, "finish_reason": "stop"}]})

    lm = ["--lm", "openai:fake-model@{url}/v1"]
    with LocalHTTPServer() as server:
        server.route("POST", "/v1/chat/completions", complete)
        argv = [str(docs / "france.md"), "--extract", "--examples", str(examples), "--nearest", "1"]
        code, out, err = run(capsys, "ingest", *argv, lm[0], lm[1].format(url=server.url), *kb_args(tmp_path), "--json")
    assert code == 0, err
    # "Paris is the capital of France." is written like the Quito passage: only that one is shown
    assert len(shown) == 1 and "Quito" in shown[0] and "Santiago" not in shown[0]
    assert json.loads(out)["extraction"]["entities"] == 1


def test_ingest_refuses_bad_labelled_passages_before_writing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path
) -> None:
    examples = tmp_path / "labelled.jsonl"
    source = str(docs / "france.md")
    code, _, err = run(capsys, "ingest", source, "--examples", str(examples), *kb_args(tmp_path))
    assert code == 2 and "--examples and --nearest are for --extract" in err
    examples.write_text('{"x": {"text": "Quito"}, "y": []}\n', encoding="utf-8")
    code, _, err = run(capsys, "ingest", source, "--extract", "--examples", str(examples), *kb_args(tmp_path))
    assert code == 2 and "labelled.jsonl:1" in err
    # a labelled extraction its passage does not support: refused, and nothing was ingested
    wrong = _labelled("Quito is the capital of Ecuador.", "Lima", "Ecuador")
    examples.write_text(json.dumps(wrong) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "ingest", source, "--extract", "--examples", str(examples), *kb_args(tmp_path))
    assert code != 0 and "examples[0]" in err
    assert not (tmp_path / "kb.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required"),
        (["frobnicate"], "invalid choice"),
        (["stats", "--schema", "no_such_module_xyz:M"], "cannot import module"),
        (["stats", "--schema", "kag.examples.seed:CAPITALS"], "expected a list"),
        (["stats", "--schema", "kag.errors"], "neither ENTITY_MODELS"),
        (["stats", "--kb", "redis://kb.db"], "unsupported --kb URI"),
        (["search", "x", "--label", "Planet", *SEED], "allowed labels: Country, City"),
        (["ingest", "missing-file.md", *SEED], "source not found"),
        (["ingest", *SEED], "nothing to ingest"),
        (["query", "q?", "--lm", "gpt-5"], "--lm must be"),
        (["query", "q?", "--k", "0"], "expected an integer >= 1"),
        (["query", "q?", "--threshold", "2"], "in [0, 1]"),
        (["search", "x", "--where", "[1]"], "expected a JSON object"),
        (["search", "x", "--label", "City", "--where", "{}", *SEED], "cannot be combined"),
        (["serve", "--port", "70000"], "port must be"),
        (["query", ""], "QUESTION must not be empty"),
        (["query", "   "], "QUESTION must not be empty"),
        (["search", ""], "TEXT must not be empty"),
        (["search", "x", "--label", "City", "--mode", "vector", *SEED], "cannot be combined"),
        (["stats", "--kb", "memory:///nonexistent_dir_kag/kb.json"], "does not exist"),
        (["demo", "--kb", "memory:///nonexistent_dir_kag/kb.json"], "does not exist"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "error:" in err and message in err
    assert "Traceback" not in err


def test_runtime_errors_exit_1_without_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{ this is not a kag store", encoding="utf-8")
    code, _, err = run(capsys, "stats", "--kb", f"memory://{broken}", *SEED)
    assert code == 1
    assert err.startswith("error: ") and "Traceback" not in err

    empty = tmp_path / "empty.md"
    empty.write_text("   \n", encoding="utf-8")
    code, _, err = run(capsys, "ingest", str(empty), *kb_args(tmp_path))
    assert code == 1 and "error: could not load" in err


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version")[1].startswith("kag ")
    code, out, _ = run(capsys, "serve", "--help")
    assert code == 0 and "--mcp-stdio" in out and "--max-body" in out


def test_a_missing_kb_directory_is_not_created(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "absent" / "kb.json"
    code, _, err = run(capsys, "ingest", "--text", "Madrid has the Prado.", "--kb", f"memory://{target}", *SEED)
    assert code == 2 and "does not exist" in err
    assert not target.parent.exists()


def test_stats_counts_documents_and_chunks(capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path) -> None:
    code, _, err = run(capsys, "ingest", str(docs), *kb_args(tmp_path), "--chunk-size", "200")
    assert code == 0, err
    code, out, _ = run(capsys, "stats", *kb_args(tmp_path), "--json")
    counts = json.loads(out)["counts"]
    assert counts["documents"] == 2 and counts["chunks"] >= 2
    code, out, _ = run(capsys, "stats", *kb_args(tmp_path))
    assert re.search(r"^\s+documents\s+2$", out, re.M), out


def test_a_failed_ingest_does_not_print_the_success_banner(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("   \n", encoding="utf-8")
    code, out, err = run(capsys, "ingest", str(empty), *kb_args(tmp_path))
    assert code == 1
    assert "ingested into" not in out
    assert "failed for 1 source(s); 0 document(s) written" in out
    assert "error: could not load" in err


class _Terminal:
    """A stderr that says it is a terminal, to see what a person at one sees."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_ingest_shows_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code = main(["ingest", str(docs), *kb_args(tmp_path)])
    assert code == 0
    shown = "".join(terminal.parts)
    assert "\rindexing: 2/2 document(s)\n" in shown
    # not on a pipe (capsys is not a terminal): the output stays clean for scripts
    run(capsys, "ingest", "--text", "Rome has the Colosseum.", *kb_args(tmp_path))
    assert "indexing:" not in capsys.readouterr().err


def test_search_mode_changes_the_passage_ranking(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, docs: Path
) -> None:
    run(capsys, "ingest", str(docs), *kb_args(tmp_path), "--chunk-size", "200")
    results = {}
    for mode in ("keyword", "vector", "hybrid"):
        code, out, err = run(capsys, "search", "Osaka castle", *kb_args(tmp_path), "--mode", mode, "--json")
        assert code == 0, err
        hits = [h for h in json.loads(out) if h["kind"] == "passage"]
        assert hits and "Osaka" in hits[0]["text"]
        results[mode] = [round(h["score"], 6) for h in hits]
    # BM25 scores are not similarities: keyword ranking really is another ranking
    assert results["keyword"] != results["vector"]


def test_demo_runs_on_a_named_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "world.json"
    code, out, _ = run(capsys, "demo", "--kb", f"memory://{target}", "What is the capital of France?")
    assert code == 0 and "A: Paris" in out and f"memory://{target}" in out
    assert target.exists()
