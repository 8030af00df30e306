"""Program configs: JSON round-trips that never carry credentials, and runtime objects on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.demo import Answer, Query, build_program
from kag.errors import ConfigError
from kag.examples.world import City, Country, IsCapitalOf, world_knowledge_base
from kag.lm import OpenAICompatibleLM, ScriptedLM
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.programs.module import safe_uri, scrub_secrets

SECRET = "sk-test-SECRET-0123456789"


def openai_program(kb: object) -> Program:
    lm = OpenAICompatibleLM(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=SECRET)
    inputs = Input(data_model=Query, name="question")
    x = KnowledgeRetriever(
        knowledge_base=kb,  # type: ignore[arg-type]
        language_model=lm,
        entity_models=[Country, City],
        relation_models=[IsCapitalOf],
        k=5,
        threshold=0.8,
        name="retriever",
    )(inputs)
    out = Generator(
        data_model=Answer,
        language_model=lm,
        instructions="Be brief.",
        prompt_template="Q: {{ query }}\n{% for f in facts %}- {{ f.text }}\n{% endfor %}",
        examples=[({"query": "q"}, {"answer": "a"})],
        name="answerer",
    )(x)
    return Program(inputs=inputs, outputs=out, name="qa", description="test")


def test_config_has_no_secrets_even_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    program = openai_program(world_knowledge_base())
    text = json.dumps(program.get_config())
    assert SECRET not in text
    assert "api_key" not in text and "Authorization" not in text
    config = program.get_config()
    lm_config = config["modules"]["answerer"]["config"]["language_model"]
    assert lm_config["type"] == "openai" and lm_config["model"] == "gpt-4o-mini"
    kb_config = config["modules"]["retriever"]["config"]["knowledge_base"]
    assert kb_config["uri"] == "memory://"
    assert kb_config["entity_models"][0] == "kag.examples.world:Continent"


def test_round_trip_through_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    kb = world_knowledge_base()
    program = openai_program(kb)
    path = program.save(tmp_path / "program.json")
    assert SECRET not in path.read_text()
    loaded = Program.load(path, knowledge_base=kb)  # memory:// cannot be reopened: passed in
    assert loaded.get_config() == program.get_config()
    assert loaded.summary() == program.summary()
    retriever = loaded.modules["retriever"]
    assert isinstance(retriever, KnowledgeRetriever) and retriever.knowledge_base is kb
    assert (retriever.k, retriever.threshold) == (5, 0.8)
    lm = retriever.language_model
    assert isinstance(lm, OpenAICompatibleLM) and lm.model == "gpt-4o-mini"
    gen = loaded.modules["answerer"]
    assert isinstance(gen, Generator) and gen.examples == [({"query": "q"}, {"answer": "a"})]


def test_loading_needs_runtime_objects_it_cannot_rebuild(tmp_path: Path) -> None:
    kb = world_knowledge_base()
    program = build_program(kb, ScriptedLM([]))
    config = program.get_config()
    with pytest.raises(ConfigError, match="knowledge_base"):
        Program.from_config(config, language_model=ScriptedLM([]))
    with pytest.raises(ConfigError, match="language_model"):
        Program.from_config(config, knowledge_base=kb)
    scripted = ScriptedLM([])
    loaded = Program.from_config(
        config, knowledge_base=kb, language_model={"retriever": scripted, "answerer": scripted}
    )
    assert loaded.modules["answerer"].language_model is scripted  # type: ignore[attr-defined]


async def test_lexical_program_round_trip_with_a_persistent_store(tmp_path: Path) -> None:
    from kag.examples.world import load_world

    uri = f"memory://{tmp_path / 'world.json'}"
    kb = world_knowledge_base(uri)
    await load_world(kb)
    await kb.save()
    program = build_program(kb, LexicalLM(knowledge_base=kb))
    config = program.get_config()
    assert config["modules"]["retriever"]["config"]["language_model"]["type"] == "lexical"
    loaded = Program.from_config(json.loads(json.dumps(config)))  # everything rebuilt from the config
    answer = await loaded(Query(query="What is the capital of France?"))
    assert "Paris" in answer.answer  # type: ignore[attr-defined]
    retriever = loaded.modules["retriever"]
    generator = loaded.modules["answerer"]
    assert retriever.knowledge_base is generator.language_model.knowledge_base  # type: ignore[attr-defined]


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ConfigError):
        Program.from_config({"format": "other"})
    program = build_program(world_knowledge_base(), ScriptedLM([]))
    config = program.get_config()
    config["modules"]["answerer"]["class"] = "os:system"
    with pytest.raises(ConfigError, match="not a Module subclass"):
        Program.from_config(config, language_model=ScriptedLM([]), knowledge_base=world_knowledge_base())


def test_local_models_cannot_be_saved() -> None:
    from kag.datamodels.base import DataModel

    class Local(DataModel):
        query: str

    inputs = Input(data_model=Local)
    out = Generator(data_model=Answer, language_model=ScriptedLM([]))(inputs)
    with pytest.raises(ConfigError, match="module level"):
        Program(inputs=inputs, outputs=out).get_config()


def test_scrub_helpers() -> None:
    assert scrub_secrets(
        {
            "api_key": 1,
            "max_tokens": 2,
            "headers": {"Authorization": "x", "X-Trace": "y"},
            "access_token": 3,
            "nested": [{"password": 4, "model": "m"}],
        }
    ) == {"max_tokens": 2, "headers": {"X-Trace": "y"}, "nested": [{"model": "m"}]}
    assert safe_uri("neo4j://user:pw@db.example:7687/x?password=p&database=kg") == (
        "neo4j://db.example:7687/x?database=kg"
    )
