"""Trained variables round-trip on the real Neo4j: save -> load -> the same answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.examples.world import City, Country, IsCapitalOf, IsCityOf
from kag.training import BootstrapFewShot
from tests.training.conftest import PAIRS, DemoCopyLM, build_program, questions

pytestmark = [pytest.mark.neo4j, pytest.mark.timeout(180)]


async def test_variables_round_trip_on_neo4j(neo4j_kb_factory, tmp_path: Path) -> None:
    kb = await neo4j_kb_factory(entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf])
    await kb.upsert([IsCapitalOf(subj=City(name=c), obj=Country(name=k)) for c, k in PAIRS])
    x, y = questions()
    program = build_program(kb, DemoCopyLM())
    program.compile(reward="f1", optimizer=BootstrapFewShot(max_demos=2, seed=0))
    untrained = await program.evaluate(x[16:], y[16:])
    await program.fit(x[:16], y[:16], epochs=2, batch_size=4, validation_data=(x[16:], y[16:]), verbose=0)
    path = program.save_variables(tmp_path / "variables.json")

    again = await neo4j_kb_factory(entity_models=[City, Country], relation_models=[IsCapitalOf, IsCityOf])
    fresh = build_program(again, DemoCopyLM())
    fresh.load_variables(path)
    fresh.compile(reward="f1")
    trained_answers = [o.model_dump() for o in await program.predict(x[16:])]
    assert [o.model_dump() for o in await fresh.predict(x[16:])] == trained_answers
    assert (await fresh.evaluate(x[16:], y[16:]))["reward"] == 1.0 > untrained["reward"]
    assert all(len(o["entities"]) == 1 for o in trained_answers)
