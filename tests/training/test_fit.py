"""compile / fit / evaluate / predict on a small invented graph with a demo-sensitive model."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import kag
from kag.errors import InvalidInputError, RewardError, TrainingError
from kag.lm.base import ModelCapabilities
from kag.training import BootstrapFewShot, KNNFewShot, LambdaCallback, RandomFewShot
from tests.training.conftest import Answer, DemoCopyLM, Query, _search, build_program, questions

pytestmark = pytest.mark.timeout(120)


# what LlamaCppLM declares: sampling under a grammar, demos narrowed, the scope gate on
LLAMA_LIKE = ModelCapabilities(grammar=True, narrow_to_demos=True, scope_gate=True)


def split() -> tuple[tuple[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    x, y = questions()
    return (x[:16], y[:16]), (x[16:], y[16:])


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda: RandomFewShot(max_demos=2, num_candidates=6, seed=3),
        lambda: BootstrapFewShot(max_demos=2, num_candidates=4, seed=0),
        lambda: KNNFewShot(k=1),
    ],
    ids=["random", "bootstrap", "knn"],
)
async def test_fit_raises_the_validation_reward_over_the_untrained_program(capitals_kb, optimizer) -> None:
    (x, y), (x_val, y_val) = split()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=optimizer(), metrics=["accuracy"])
    before = await program.evaluate(x_val, y_val)
    history = await program.fit(x, y, epochs=2, batch_size=4, validation_data=(x_val, y_val), verbose=0)
    after = await program.evaluate(x_val, y_val)
    assert before["reward"] < 1.0
    assert after["reward"] > before["reward"]
    assert after["reward"] == 1.0
    assert history.history["val_reward"][-1] == after["reward"]
    assert set(history.history) >= {"reward", "accuracy", "errors", "val_reward", "val_accuracy", "val_errors"}
    assert len(history.epoch) == 2
    demos = program.get_variables()["retriever"]["demos"]
    assert demos and all(d["reward"] == 1.0 for d in demos)


async def test_knn_shows_each_call_only_its_nearest_demos(capitals_kb) -> None:
    (x, y), (x_val, y_val) = split()
    lm = DemoCopyLM()
    program = build_program(capitals_kb, lm)
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    await program.fit(x, y, epochs=1, validation_data=(x_val, y_val), verbose=0)
    retriever = program.modules["retriever"]
    assert retriever.variable.nearest == 1 and len(retriever.variable.demos) > 1
    shown = await retriever.demos_for(kag.programs.module.as_model(x_val[0], retriever_input(program)))
    assert len(shown) == 1
    assert "capital of" in shown[0].input["query"]  # the same kind of question as x_val[0]


def retriever_input(program: kag.Program) -> type[kag.DataModel]:
    return program.inputs[0].data_model


async def test_bootstrap_gives_every_module_of_a_successful_run_a_demo(capitals_kb) -> None:
    (x, y), (x_val, y_val) = split()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=BootstrapFewShot(max_demos=2, seed=0))
    await program.fit(x, y, epochs=1, validation_data=(x_val, y_val), verbose=0)
    variables = program.get_variables()
    retriever_questions = [d["input"]["query"] for d in variables["retriever"]["demos"]]
    answerer_questions = [d["input"]["query"] for d in variables["answerer"]["demos"]]
    assert retriever_questions and retriever_questions == answerer_questions  # same runs, both modules
    for demo in variables["answerer"]["demos"]:
        assert demo["input"]["facts"], "the answerer's demo input holds the facts it was given"
        Answer.model_validate(demo["output"])


async def test_seeded_runs_give_identical_programs(capitals_kb) -> None:
    (x, y), (x_val, y_val) = split()
    trained = []
    for _ in range(2):
        program = build_program(capitals_kb, DemoCopyLM())
        program.compile(reward="f1", optimizer=RandomFewShot(max_demos=3, num_candidates=3, seed=11))
        await program.fit(x, y, epochs=2, batch_size=3, validation_data=(x_val, y_val), seed=5, verbose=0)
        trained.append(program.get_variables())
    assert trained[0] == trained[1]
    other = build_program(capitals_kb, DemoCopyLM())
    other.compile(reward="f1", optimizer=RandomFewShot(max_demos=3, num_candidates=3, seed=12))
    await other.fit(x, y, epochs=2, batch_size=3, validation_data=(x_val, y_val), seed=5, verbose=0)
    assert other.get_variables() != trained[0]  # the seed matters


async def test_model_calls_run_concurrently_up_to_the_bound(capitals_kb) -> None:
    x, y = questions()
    lm = DemoCopyLM(delay=0.02)
    program = build_program(capitals_kb, lm)
    program.compile(reward="f1", optimizer=BootstrapFewShot(seed=0), concurrency=3)
    await program.evaluate(x, y)
    assert lm.max_in_flight == 3
    lm.max_in_flight = 0
    await program.evaluate(x, y, concurrency=1)
    assert lm.max_in_flight == 1


async def test_evaluate_reports_groups_and_details(capitals_kb) -> None:
    x, y = questions()
    groups = ["capital" if "capital of" in q["query"] else "country" for q in x]
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    result = await program.evaluate(x, y, groups=groups, return_details=True)
    assert set(result) == {"reward", "errors", "reward/capital", "reward/country", "details"}
    assert len(result["details"]) == len(x)
    expected = {
        g: sum(d["reward"] for d, gg in zip(result["details"], groups, strict=True) if gg == g) / groups.count(g)
        for g in ("capital", "country")
    }
    assert result["reward/capital"] == expected["capital"]
    assert result["reward/country"] == expected["country"]


async def test_predict_returns_outputs_in_input_order(capitals_kb) -> None:
    x, _ = questions()
    program = build_program(capitals_kb, DemoCopyLM(delay=0.005))
    outputs = await program.predict(x[:6], concurrency=4)
    direct = [await program(item) for item in x[:6]]
    assert [o.model_dump() for o in outputs] == [d.model_dump() for d in direct]


async def test_failed_predictions_score_zero_and_training_goes_on(capitals_kb) -> None:
    class Flaky(DemoCopyLM):
        async def _complete(self, messages: Any, json_schema: Any, schema_name: str) -> str:
            if "Brask" in messages[-1]["content"]:
                return "not json"
            return await super()._complete(messages, json_schema, schema_name)

    x, y = questions()
    program = build_program(capitals_kb, Flaky())
    program.compile(reward="f1")
    history = await program.fit(x, y, epochs=1, verbose=0)
    assert history.history["errors"] == [1]
    result = await program.evaluate(x, y, return_details=True)
    failed = [d for d in result["details"] if d["error"]]
    assert len(failed) == 1 and failed[0]["reward"] == 0.0 and "GenerationError" in failed[0]["error"]


async def test_the_sync_facade_fits_outside_an_event_loop(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    with pytest.raises(kag.errors.SyncInEventLoopError):
        program.sync.evaluate(*questions())


def test_fit_through_the_sync_facade() -> None:
    import asyncio

    from kag.examples.world import City, Country, IsCapitalOf, IsCityOf
    from tests.training.conftest import PAIRS

    kb = kag.KnowledgeBase("memory://", entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf])
    asyncio.run(kb.upsert([IsCapitalOf(subj=City(name=c), obj=Country(name=k)) for c, k in PAIRS]))
    program = build_program(kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    (x, y), (x_val, y_val) = split()
    history = program.sync.fit(x, y, validation_data=(x_val, y_val), verbose=0)
    assert history.history["val_reward"] == [1.0]
    assert program.sync.evaluate(x_val, y_val)["reward"] == 1.0


# -- bad input ------------------------------------------------------------------------------


async def test_fit_before_compile_says_to_compile(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    with pytest.raises(TrainingError, match=r"compile\("):
        await program.fit(*questions(), verbose=0)
    with pytest.raises(TrainingError, match=r"compile\("):
        await program.evaluate(*questions())


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([], [], "empty"),
        ("What is the capital of Elandor?", [{"entities": []}], "list of inputs"),
        ([{"query": "q"}], [{"entities": ["A"]}, {"entities": ["B"]}], "1 inputs but y has 2"),
        ([{"query": "q"}], [{"entity": ["A"]}], "field 'entity'.*fields are"),
        ([{"query": "q"}], [{"entities": "Paris"}], "field 'entities' does not fit Answer.entities"),
        ([{"query": "q"}], [{}], "non-empty dict"),
        ([{"question": "q"}], [{"entities": []}], r"x\[0\] does not fit"),
        ([{"query": "q"}], None, "needs labels"),
    ],
)
async def test_data_that_does_not_fit_is_refused_with_the_reason(capitals_kb, x, y, match) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    with pytest.raises(TrainingError, match=match):
        await program.fit(x, y, verbose=0)


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.2, True])
async def test_validation_split_outside_0_1_is_refused(capitals_kb, fraction) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1")
    with pytest.raises(TrainingError, match="validation_split"):
        await program.fit(*questions(), validation_split=fraction, verbose=0)


async def test_validation_split_holds_out_that_fraction(capitals_kb) -> None:
    seen: list[int] = []
    x, y = questions()
    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=KNNFewShot(k=1))
    callback = LambdaCallback(on_train_begin=lambda logs: seen.append(program_params(callback)))
    await program.fit(x, y, validation_split=0.25, verbose=0, callbacks=[callback])
    assert seen == [18]


def program_params(callback: Any) -> int:
    return int(callback.params["samples"])


@pytest.mark.parametrize("value", [math.nan, 1.5, -0.1, "good"])
async def test_a_reward_outside_0_1_stops_training_with_its_name(capitals_kb, value) -> None:
    def shaky(y_true: Any, y_pred: Any) -> Any:
        return value

    program = build_program(capitals_kb, DemoCopyLM())
    program.compile(reward=shaky)
    with pytest.raises(RewardError, match="'shaky'"):
        await program.fit(*questions(), verbose=0)


async def test_compile_refuses_bad_settings(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    with pytest.raises(kag.errors.ConfigError, match="optimizer"):
        program.compile(optimizer="adam")
    with pytest.raises(kag.errors.ConfigError, match="unknown reward"):
        program.compile(reward="bleu")
    with pytest.raises(kag.errors.ConfigError, match="concurrency"):
        program.compile(concurrency=0)
    with pytest.raises(kag.errors.ConfigError, match="distinct names"):
        program.compile(reward="f1", metrics=["f1"])


async def test_input_checks_still_apply_when_predicting(capitals_kb) -> None:
    program = build_program(capitals_kb, DemoCopyLM())
    with pytest.raises(TrainingError, match="does not fit"):
        await program.predict([{"nope": 1}])
    with pytest.raises(InvalidInputError):
        await program({"nope": 1})


def test_the_sync_facade_runs_the_program() -> None:
    import asyncio

    from kag.examples.world import City, Country, IsCapitalOf, IsCityOf
    from tests.training.conftest import PAIRS

    kb = kag.KnowledgeBase("memory://", entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf])
    asyncio.run(kb.upsert([IsCapitalOf(subj=City(name=c), obj=Country(name=k)) for c, k in PAIRS]))
    program = build_program(kb, DemoCopyLM())
    answer = program.sync({"query": "Which country has the capital Brask?"})
    assert answer.entities == ["Tovania"]


async def test_a_teacher_makes_the_training_runs_and_the_student_keeps_what_helps_it(capitals_kb) -> None:
    (x, y), (x_val, y_val) = split()
    student = DemoCopyLM()
    teacher = kag.LexicalLM(knowledge_base=capitals_kb)
    program = build_program(capitals_kb, student)
    program.compile(reward="f1", optimizer=KNNFewShot(k=1, explore=0, teacher=teacher))
    before = await program.evaluate(x_val, y_val)
    calls = student.calls
    await program.fit(x, y, validation_data=(x_val, y_val), verbose=0)
    # the training batches ran on the teacher; the student only ran to score the two candidates
    assert student.calls - calls == 2 * len(x_val)
    assert program.modules["retriever"].language_model is student
    demos = program.get_variables()["retriever"]["demos"]
    assert len(demos) == len(x)  # the teacher answered every training question
    after = await program.evaluate(x_val, y_val)
    assert before["reward"] < after["reward"] == 1.0


def test_a_teacher_must_be_a_language_model() -> None:
    with pytest.raises(kag.errors.ConfigError, match="teacher must be a language model"):
        KNNFewShot(teacher="lexical")


async def test_each_model_gets_the_search_schema_it_can_fill_and_demos_read_like_its_own(capitals_kb) -> None:
    from kag.training import Demo, Variable

    class Constrained(kag.LexicalLM):
        capabilities = LLAMA_LIKE  # as LlamaCppLM: gets the endpoint-typed schema, no extended fields

    program = build_program(capitals_kb, Constrained(knowledge_base=capitals_kb), max_hops=2)
    retriever = program.modules["retriever"]
    typed = retriever.search_schema
    assert "subject_where" not in str(typed)
    retriever.language_model = kag.LexicalLM(knowledge_base=capitals_kb)  # what a teacher does
    assert "subject_where" in str(retriever.search_schema)
    retriever.language_model = program.modules["answerer"].language_model = Constrained(knowledge_base=capitals_kb)
    assert retriever.search_schema is typed
    pinned = kag.triplet_search_schema(retriever.graph_schema)
    retriever.search_schema = pinned  # a user's own schema holds for every model until unpinned
    assert retriever.search_schema is pinned
    retriever.search_schema = None
    assert retriever.search_schema is typed
    with pytest.raises(kag.errors.ConfigError, match="search_schema must be"):
        retriever.search_schema = "plain"  # type: ignore[assignment]
    hop = _search("City", "*", "Country", "France")
    defaults = {"subject_where": [], "object_where": [], "order_by": None, "limit": None}
    kept = {"subject_from": "first_subject"}  # not its default: kept, though the model cannot write it
    retriever.set_variable(Variable(demos=[Demo({"query": "q"}, {"hops": [{**hop, **defaults, **kept}]}, 1.0)]))
    assert retriever.variable.demos[0].output == {"hops": [{**hop, **kept}]}


async def test_a_constrained_model_may_only_quote_the_question_in_its_search(capitals_kb) -> None:
    from kag.lm import ScriptedLM

    class ConstrainedScript(ScriptedLM):
        capabilities = LLAMA_LIKE  # as LlamaCppLM

    guessed = {**_search("City", "Zorvik", "Country", "*")}  # the answer it guessed, not a name the question holds
    quoted = {**_search("City", "*", "Country", "Elandor")}
    lm = ConstrainedScript([guessed, quoted])
    program = build_program(capitals_kb, lm)
    answer = await program(Query(query="What is the capital of Elandor?"))
    assert answer.entities == ["Zorvik"]
    first = lm.calls[0]["schema"]
    # only a span the graph links to an entity of the side's label: "Elandor" names a Country; "capital"
    # (a word, not a name) and "What", "is the" name nothing
    assert '"enum": ["*", "Elandor"]' in json.dumps(first)
    assert '"capital"' not in json.dumps(first)
    assert '"Zorvik"' not in json.dumps(first) and '"Elandor"' in json.dumps(first)
    assert len(lm.calls) == 2  # the guess was refused and repaired
    plain = build_program(capitals_kb, ScriptedLM([guessed]), quote_names=False)
    await plain(Query(query="What is the capital of Elandor?"))
    with pytest.raises(kag.errors.ConfigError, match="quote_names"):
        build_program(capitals_kb, lm, quote_names="yes")
