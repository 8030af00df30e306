"""InstructionOptimizer: a model proposes instructions, the best on validation is kept."""

from __future__ import annotations

import json
from typing import Any

import kag
from kag.lm.base import Message
from kag.lm.scripted import ScriptedLM
from kag.training import InstructionOptimizer
from tests.training.conftest import DemoCopyLM, build_program, questions


class InstructedLM(DemoCopyLM):
    """Puts the name on the right side only when its instructions say which side to use."""

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        system = messages[0]["content"]
        if "SIDES" in system:
            question = messages[-1]["content"]
            name = question.rstrip("?").split()[-1]
            subject = "has the capital" in question
            return json.dumps(
                {
                    "subject_label": "City",
                    "subject_similarity_search": name if subject else "*",
                    "relation_label": "IsCapitalOf",
                    "object_label": "Country",
                    "object_similarity_search": "*" if subject else name,
                    "negated": False,
                    "bidirectional": False,
                    "count": False,
                }
            )
        return await super()._complete(messages, json_schema, schema_name)


async def test_the_best_proposed_instructions_are_kept(capitals_kb) -> None:
    x, y = questions()
    writer = ScriptedLM(
        [
            {"variants": ["Be brief.", "SIDES: a city asked for goes on the object side's opposite."]},
            {"variants": ["Answer with the names in the facts."]},
        ]
    )
    program = build_program(capitals_kb, InstructedLM())
    program.compile(reward="f1", optimizer=InstructionOptimizer(writer, num_candidates=2))
    before = await program.evaluate(x[16:], y[16:])
    history = await program.fit(x[:16], y[:16], validation_data=(x[16:], y[16:]), verbose=0)
    assert before["reward"] < 1.0 and history.history["val_reward"] == [1.0]
    assert "SIDES" in program.modules["retriever"].instructions
    assert program.modules["answerer"].instructions is None  # its variant scored no better
    shown = json.loads(writer.calls[0]["messages"][-1]["content"])
    assert shown["current_instructions"] == program.modules["retriever"].default_instructions
    assert shown["runs"] and {"input", "output", "reward"} <= set(shown["runs"][0])


async def test_a_writer_that_fails_leaves_the_instructions(capitals_kb) -> None:
    x, y = questions()
    writer = ScriptedLM([kag.errors.LanguageModelError("down"), kag.errors.LanguageModelError("down")])
    program = build_program(capitals_kb, InstructedLM(), instructions="Keep me.")
    program.compile(reward="f1", optimizer=InstructionOptimizer(writer))
    history = await program.fit(x, y, verbose=0)
    assert history.history["candidates"] == [1]
    assert program.modules["retriever"].instructions == "Keep me."
