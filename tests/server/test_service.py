"""``--schema`` / ``--kb`` / ``--lm`` parsing and the Service helpers."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from kag.errors import UsageError
from kag.examples import seed, world
from kag.lm.lexical import LexicalLM
from kag.lm.ollama import OllamaLM
from kag.lm.openai import OpenAICompatibleLM
from kag.server.service import Service, redact_params
from kag.server.specs import LMSpec, build_language_model, check_kb_uri, load_schema, parse_lm_spec, public_uri

MODULE = """
from typing import Literal
import kag

class Planet(kag.Entity):
    label: Literal["Planet"] = "Planet"
    name: str

class Moon(kag.Entity):
    label: Literal["Moon"] = "Moon"
    name: str

class Orbits(kag.Relation):
    subj: Moon
    label: Literal["Orbits"] = "Orbits"
    obj: Planet

MODELS = [Planet, Moon, Orbits]
ONE = Planet
SCHEMA = kag.GraphSchema([Planet, Moon], [Orbits])
NOT_MODELS = [1, 2]
NUMBER = 3
"""


@pytest.fixture
def astro(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"astro_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # like `kag --schema astro:MODELS` run next to astro.py
    yield name
    sys.modules.pop(name, None)


def test_schema_default_module_and_attr_forms(astro: str) -> None:
    default = load_schema(None)
    assert default.entity_models == world.ENTITY_MODELS and default.relation_models == world.RELATION_MODELS
    assert load_schema("kag.examples.seed").graph_schema.entity_labels == ("Country", "City")
    assert load_schema("kag.examples.seed").relation_models == tuple(seed.RELATION_MODELS)

    listed = load_schema(f"{astro}:MODELS")
    assert [m.__name__ for m in listed.entity_models] == ["Planet", "Moon"]
    assert [m.__name__ for m in listed.relation_models] == ["Orbits"]
    assert [m.__name__ for m in load_schema(f"{astro}:ONE").entity_models] == ["Planet"]
    assert load_schema(f"{astro}:SCHEMA").graph_schema.relation_labels == ("Orbits",)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:M", "cannot import module"),
        ("{astro}:MISSING", "has no attribute"),
        ("{astro}:NOT_MODELS", "not an Entity or Relation class"),
        ("{astro}:NUMBER", "expected a list"),
        ("{astro}", "neither ENTITY_MODELS nor RELATION_MODELS"),
        ("a:b:c", "must be"),
        ("kag.examples.seed:", "must be"),
    ],
)
def test_schema_errors(astro: str, spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_schema(spec.format(astro=astro))


def test_kb_uri_and_public_uri(tmp_path: Path) -> None:
    assert check_kb_uri("memory://") == "memory://"
    assert check_kb_uri(f"memory://{tmp_path}/kb.json").endswith("kb.json")
    assert check_kb_uri("neo4j://127.0.0.1:7687") == "neo4j://127.0.0.1:7687"
    for bad in ("", "redis://x.db", f"sqlite://{tmp_path}", "neo4j://", f"memory://{tmp_path}"):
        with pytest.raises(UsageError):
            check_kb_uri(bad)
    assert public_uri("neo4j://neo4j:s3cret@db.local:7687") == "neo4j://db.local:7687"


def test_lm_specs() -> None:
    assert parse_lm_spec(None) == LMSpec("lexical")
    assert parse_lm_spec("openai:gpt-4o-mini") == LMSpec("openai", "gpt-4o-mini")
    assert parse_lm_spec("ollama:llama3.1:8b@http://127.0.0.1:11434") == LMSpec(
        "ollama", "llama3.1:8b", "http://127.0.0.1:11434"
    )
    for bad in ("gpt4", "anthropic:claude", "openai:", "openai:m@"):
        with pytest.raises(UsageError):
            parse_lm_spec(bad)
    service = Service.open("memory://", "kag.examples.seed")
    assert isinstance(build_language_model("lexical", service.kb), LexicalLM)
    lm = build_language_model("openai:m@http://127.0.0.1:9/v1", service.kb)
    assert isinstance(lm, OpenAICompatibleLM) and lm.base_url == "http://127.0.0.1:9/v1"
    assert isinstance(build_language_model("ollama:llama3.1:8b", service.kb), OllamaLM)
    with pytest.raises(UsageError):
        build_language_model("openai:m@ftp://host", service.kb)


def test_redact_params() -> None:
    params = {"k": 3, "threshold": 0.5, "v1_0": [0.1] * 384, "name": "x"}
    assert redact_params(params) == {"k": 3, "threshold": 0.5, "v1_0": "<vector: 384 floats>", "name": "x"}
    assert redact_params(params, include_vectors=True)["v1_0"] == [0.1] * 384
