"""The retriever's scope gate (``abstain``): a question no relation of the schema can answer gets the
abstention search without asking the model, and labelled demos move the boundary both ways.

The graph is invented (planets, moons and astronomers with made-up names), so no rule of the
offline matcher was written for it.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

import kag
from kag.errors import ConfigError
from kag.lm import ScriptedLM
from kag.lm.base import ModelCapabilities

pytestmark = pytest.mark.timeout(120)


# what LlamaCppLM declares: sampling under a grammar, demos narrowed, the scope gate on
LLAMA_LIKE = ModelCapabilities(grammar=True, narrow_to_demos=True, scope_gate=True)


class Planet(kag.Entity):
    """A planet of the invented system."""

    label: Literal["Planet"] = "Planet"
    name: str


class Moon(kag.Entity):
    """A moon."""

    label: Literal["Moon"] = "Moon"
    name: str


class Astronomer(kag.Entity):
    """A person who studies the sky."""

    label: Literal["Astronomer"] = "Astronomer"
    name: str


class Orbits(kag.Relation):
    """A moon goes around a planet."""

    label: Literal["Orbits"] = "Orbits"
    subj: Moon
    obj: Planet


class DiscoveredBy(kag.Relation):
    """Who first saw a moon."""

    label: Literal["DiscoveredBy"] = "DiscoveredBy"
    subj: Moon
    obj: Astronomer


class Query(kag.DataModel):
    query: str


class Constrained(ScriptedLM):
    capabilities = LLAMA_LIKE  # as LlamaCppLM: the gate is on by default for such a model


ORBITING = {
    "subject_label": "Moon",
    "subject_similarity_search": "*",
    "relation_label": "Orbits",
    "object_label": "Planet",
    "object_similarity_search": "Zorvex",
    "negated": False,
    "bidirectional": False,
    "count": False,
}


@pytest.fixture
async def kb() -> kag.KnowledgeBase:
    base = kag.KnowledgeBase(
        entity_models=[Planet, Moon, Astronomer], relation_models=[Orbits, DiscoveredBy], uri="memory://"
    )
    zorvex, quillon = Planet(name="Zorvex"), Planet(name="Quillon")
    pell, dax = Moon(name="Pell"), Moon(name="Dax")
    imbra = Astronomer(name="Imbra Tole")
    await base.upsert([zorvex, quillon, pell, dax, imbra])
    await base.upsert(
        [Orbits(subj=pell, obj=zorvex), Orbits(subj=dax, obj=quillon), DiscoveredBy(subj=pell, obj=imbra)]
    )
    return base


def retriever(kb: kag.KnowledgeBase, lm: Any, **options: Any) -> kag.KnowledgeRetriever:
    return kag.KnowledgeRetriever(kb, lm, k=10, threshold=0.7, **options)


@pytest.mark.parametrize(
    "question",
    [
        "What is the surface temperature of Zorvex?",  # nothing the schema holds
        "Who is the emperor of Zorvex?",  # what is asked for (the emperor) is nothing the schema holds
        "Which rivers flow across Quillon?",
    ],
)
async def test_a_question_outside_the_schema_never_reaches_the_model(kb, question: str) -> None:
    lm = Constrained([ORBITING])  # would answer with the only pattern it knows, were it asked
    result = await retriever(kb, lm)(Query(query=question))
    assert lm.calls == []
    assert result.facts == [] and result.count is None
    assert result.search["relation_label"] == "*"  # the abstention search: it matches nothing


async def test_a_question_the_schema_answers_goes_to_the_model(kb) -> None:
    lm = Constrained([ORBITING])
    result = await retriever(kb, lm)(Query(query="Which moons orbit Zorvex?"))
    assert len(lm.calls) == 1
    assert [f.subject["name"] for f in result.facts] == ["Pell"]


async def test_the_gate_is_off_for_a_model_that_is_not_constrained_unless_asked(kb) -> None:
    question = Query(query="Who is the emperor of Zorvex?")
    free = ScriptedLM([ORBITING])
    await retriever(kb, free)(question)
    assert len(free.calls) == 1  # a hosted model decides for itself by default
    held = ScriptedLM([ORBITING])
    result = await retriever(kb, held, abstain=True)(question)
    assert held.calls == [] and result.facts == []
    off = Constrained([ORBITING])
    await retriever(kb, off, abstain=False)(question)
    assert len(off.calls) == 1
    with pytest.raises(ConfigError, match="abstain"):
        retriever(kb, free, abstain="yes")


async def test_an_answerable_demo_brings_its_words_into_scope(kb) -> None:
    question = Query(query="What satellites circle Zorvex?")  # "satellites", "circle": no schema word
    untrained = Constrained([ORBITING])
    assert (await retriever(kb, untrained)(question)).facts == []
    assert untrained.calls == []
    demo = ({"query": "What satellites circle Quillon?"}, {**ORBITING, "object_similarity_search": "Quillon"})
    trained = Constrained([ORBITING])
    result = await retriever(kb, trained, examples=[demo])(question)
    assert len(trained.calls) == 1
    assert [f.subject["name"] for f in result.facts] == ["Pell"]


async def test_a_word_only_not_found_demos_use_puts_a_question_out_of_scope(kb) -> None:
    question = Query(query="Which moons of Zorvex are habitable?")  # asks for moons: in scope untrained
    untrained = Constrained([ORBITING])
    await retriever(kb, untrained)(question)
    assert len(untrained.calls) == 1
    not_found = {
        "subject_label": "*",
        "subject_similarity_search": "habitable",
        "relation_label": "*",
        "object_label": "Planet",
        "object_similarity_search": "Quillon",
        "negated": False,
        "bidirectional": False,
        "count": False,
    }
    answerable = ({"query": "Which moons orbit Quillon?"}, {**ORBITING, "object_similarity_search": "Quillon"})
    taught = Constrained([ORBITING])
    module = retriever(
        kb, taught, examples=[({"query": "Which moons of Quillon are habitable?"}, not_found), answerable]
    )
    result = await module(question)
    assert taught.calls == [] and result.facts == []
    assert result.search["subject_similarity_search"] == "habitable"
    # the words the answerable demo shares ("moons") stay in scope
    assert (await module.scope_search(Query(query="Which moons orbit Zorvex?"))) is None


async def test_abstain_is_saved_with_the_module(kb) -> None:
    module = retriever(kb, Constrained([]), abstain=False)
    config = module.get_config()
    assert config["abstain"] is False
    rebuilt = kag.KnowledgeRetriever.from_config(config, knowledge_base=kb, language_model=Constrained([]))
    assert rebuilt.abstain is False


async def test_a_noun_made_from_a_relation_word_or_spelt_another_way_is_in_scope(kb) -> None:
    module = retriever(kb, Constrained([]))
    for question in ("Who is the discoverer of Pell?", "Which planat does Pell orbit?"):
        assert await module.scope_search(Query(query=question)) is None, question
    assert await module.scope_search(Query(query="Who is the painter of Pell?")) is not None
