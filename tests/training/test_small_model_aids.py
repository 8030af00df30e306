"""What a trained program gives a model that decodes under a grammar: demos chosen by how a
question is asked, a search schema narrowed to the patterns those demos show, and answers whose
sets the search decided."""

from __future__ import annotations

from typing import Any, Literal

import pytest

import kag
from kag.lm import ScriptedLM
from kag.lm.base import ModelCapabilities
from kag.lm.guards import NOT_FOUND_TEXT
from kag.programs.skeleton import MASK, skeleton
from kag.training import Demo, Variable

from .conftest import Query, _search, build_program

# what LlamaCppLM declares: sampling under a grammar, demos narrowed, the scope gate on
LLAMA_LIKE = ModelCapabilities(grammar=True, narrow_to_demos=True, scope_gate=True)


class ConstrainedScript(ScriptedLM):
    capabilities = LLAMA_LIKE  # as LlamaCppLM: narrowed schemas are what it samples under


def test_a_skeleton_masks_names_and_keeps_how_the_question_is_asked() -> None:
    assert skeleton("What is the capital of South Korea?") == f"what is the capital of {MASK}"
    assert skeleton("What's Ghana's capital?") == f"what's {MASK} capital"
    assert skeleton("Bayanhongor is a province of which country?") == f"{MASK} is a province of which country"
    assert skeleton("How many cities have 120000 people?") == f"how many cities have {MASK} people"
    # a demo's own quoted names are masked even when they are not capitalized
    assert skeleton("which packages depend on numpy", ["numpy"]) == f"which packages depend on {MASK}"


async def test_nearest_demos_are_the_questions_asked_the_same_way_most_similar_last(capitals_kb) -> None:
    program = build_program(capitals_kb, ConstrainedScript([]))
    retriever = program.modules["retriever"]
    demos = [
        Demo({"query": "Which country has the capital Brask?"}, _search("City", "Brask", "Country", "*")),
        Demo({"query": "What is the capital of Tovania?"}, _search("City", "*", "Country", "Tovania")),
        Demo({"query": "What is the capital city of Marisol?"}, _search("City", "*", "Country", "Marisol")),
    ]
    retriever.set_variable(Variable(demos=demos, nearest=2))
    # the raw words favour the demo naming Brask; the skeleton favours the capital-of questions
    shown = await retriever.demos_for(Query(query="What is the capital of Brask?"))
    assert [d.input["query"] for d in shown] == [
        "What is the capital city of Marisol?",
        "What is the capital of Tovania?",  # the nearest comes last, next to the question
    ]


async def test_equal_skeletons_are_ranked_by_their_words() -> None:
    class Words:
        async def embed(self, texts: list[str]) -> Any:
            vocabulary = sorted({w for t in texts for w in t.lower().split()} | {"elandor", "zorvik", "name"})
            return [[float(w in t.lower().split()) for w in vocabulary] for t in texts]

    variable = Variable(
        demos=[Demo({"q": "capital of Zorvik"}, {}), Demo({"q": "capital of Elandor"}, {})],
        nearest=1,
    )
    chosen = await variable.demos_for(
        "capital of NAME",
        Words(),
        lambda d: "capital of NAME",
        tiebreak=("capital of Elandor", lambda d: d.input["q"]),
    )
    assert [d.input["q"] for d in chosen] == ["capital of Elandor"]


async def test_a_constrained_model_shown_nearest_demos_may_only_follow_their_patterns(capitals_kb) -> None:
    asked = _search("City", "*", "Country", "Elandor")
    lm = ConstrainedScript([asked])
    program = build_program(capitals_kb, lm)
    retriever = program.modules["retriever"]
    demos = [
        Demo({"query": "What is the capital of Tovania?"}, _search("City", "*", "Country", "Tovania")),
        Demo({"query": "What is the capital of Marisol?"}, _search("City", "*", "Country", "Marisol")),
        Demo({"query": "Which country has the capital Brask?"}, _search("City", "Brask", "Country", "*")),
    ]
    retriever.set_variable(Variable(demos=demos, nearest=2))
    answer = await program(Query(query="What is the capital of Elandor?"))
    assert answer.entities == ["Zorvik"]
    schema = lm.calls[0]["schema"]
    variants = schema["anyOf"]
    assert {v["properties"]["relation_label"]["enum"][0] for v in variants} == {"IsCapitalOf"}  # not IsCityOf
    assert all(v["properties"]["subject_label"]["enum"] == ["City"] for v in variants)
    assert all(v["properties"]["count"]["enum"] == [False] for v in variants)
    # both shown demos ask for the subject and name the object: so must this search
    assert all(v["properties"]["subject_similarity_search"]["enum"] == ["*"] for v in variants)
    assert all("*" not in v["properties"]["object_similarity_search"]["enum"] for v in variants)
    assert "Elandor" in variants[0]["properties"]["object_similarity_search"]["enum"]


def relations(schema: dict[str, Any]) -> set[str]:
    return {r for v in schema["anyOf"] for r in v["properties"]["relation_label"]["enum"]}


async def test_demo_choices_are_off_without_nearest_demos_and_can_be_set(capitals_kb) -> None:
    asked = _search("City", "*", "Country", "Elandor")
    demos = [Demo({"query": "What is the capital of Tovania?"}, _search("City", "*", "Country", "Tovania"))]
    fixed = ConstrainedScript([asked])
    program = build_program(capitals_kb, fixed)
    program.modules["retriever"].set_variable(Variable(demos=demos))  # every demo shown: no narrowing
    await program(Query(query="What is the capital of Elandor?"))
    assert "IsCityOf" in relations(fixed.calls[0]["schema"])
    forced = ConstrainedScript([asked])
    program = build_program(capitals_kb, forced, demo_choices=True)
    program.modules["retriever"].set_variable(Variable(demos=demos))
    await program(Query(query="What is the capital of Elandor?"))
    assert relations(forced.calls[0]["schema"]) == {"IsCapitalOf"}
    assert program.modules["retriever"].get_config()["demo_choices"] is True
    with pytest.raises(kag.errors.ConfigError, match="demo_choices"):
        build_program(capitals_kb, forced, demo_choices="on")


class Answer(kag.DataModel):
    answer: str = kag.Field(description="The answer")
    entities: list[str] = kag.Field(description="The names that answer")
    number: int | None = kag.Field(description="A count, else null")


class Retrieved(kag.DataModel):
    query: str
    search: dict[str, Any] | None = None
    facts: list[dict[str, Any]]
    count: int | None = None


def fact(city: str, country: str, population: int) -> dict[str, Any]:
    return {
        "text": f"{city} -[IsCityOf]-> {country}",
        "score": 1.0,
        "subject": {"label": "City", "name": city, "population": population},
        "object": {"label": "Country", "name": country},
    }


CITIES = Retrieved(
    query="Which cities are in Elandor?",
    search=_search("City", "*", "Country", "Elandor") | {"relation_label": "IsCityOf"},
    facts=[fact("Zorvik", "Elandor", 120000), fact("Quenta", "Elandor", 80000)],
)


async def test_a_constrained_answer_lists_every_name_the_search_asked_for_and_found() -> None:
    lm = ConstrainedScript(
        [
            {"answer": "Zorvik", "entities": ["Zorvik"], "number": None},
            {"answer": "Zorvik, Quenta", "entities": ["Zorvik", "Quenta"], "number": None},
        ]
    )
    generator = kag.Generator(data_model=Answer, language_model=lm)
    result = await generator(CITIES)
    assert result.entities == ["Zorvik", "Quenta"]  # the partial list was refused and repaired
    # the free text too is the answer the facts give: never the model's own sentence, and not "not
    # found" once the search found the side it asked for (abstaining is the retriever's call)
    assert lm.calls[0]["schema"]["properties"]["answer"]["enum"] == ["Zorvik, Quenta"]
    assert result.answer == "Zorvik, Quenta"
    entities = lm.calls[0]["schema"]["properties"]["entities"]
    assert entities["enum"] == [["Zorvik", "Quenta"]]  # never Elandor, the name it asked about
    # no number was asked ("Which cities ...?"): the populations the facts state are not offered, the
    # number can only be null
    number = lm.calls[0]["schema"]["properties"]["number"]
    assert [o for o in number["anyOf"] if o.get("type") == "integer"] == []
    populations = Retrieved(
        query="What is the population of the cities in Elandor?", search=CITIES.search, facts=CITIES.facts
    )
    lm = ConstrainedScript([{"answer": "Zorvik, Quenta", "entities": ["Zorvik", "Quenta"], "number": None}])
    await kag.Generator(data_model=Answer, language_model=lm)(populations)
    number = lm.calls[0]["schema"]["properties"]["number"]
    assert [o.get("enum") for o in number["anyOf"] if o.get("type") == "integer"] == [[120000, 80000]]
    # nothing found on the asked side: "not found" is the only answer
    empty = Retrieved(query="Which cities are in Elandor?", search=CITIES.search, facts=[])
    lm = ConstrainedScript([{"answer": NOT_FOUND_TEXT, "entities": [], "number": None}])
    result = await kag.Generator(data_model=Answer, language_model=lm)(empty)
    assert result.entities == [] and result.answer == NOT_FOUND_TEXT
    assert lm.calls[0]["schema"]["properties"]["answer"]["enum"] == [NOT_FOUND_TEXT]


async def test_whole_answers_can_be_turned_off_and_then_names_are_picked_from_the_asked_side() -> None:
    lm = ConstrainedScript([{"answer": "Zorvik", "entities": ["Zorvik"], "number": None}])
    generator = kag.Generator(data_model=Answer, language_model=lm, whole_answers=False)
    assert (await generator(CITIES)).entities == ["Zorvik"]
    assert lm.calls[0]["schema"]["properties"]["entities"]["items"]["enum"] == ["Zorvik", "Quenta"]
    assert generator.get_config()["whole_answers"] is False
    with pytest.raises(kag.errors.ConfigError, match="whole_answers"):
        kag.Generator(data_model=Answer, language_model=lm, whole_answers=1)


async def test_a_model_without_a_grammar_keeps_picking_names_and_numbers_stay_grounded() -> None:
    lm = ScriptedLM(
        [
            {"answer": "2", "entities": [], "number": 7},  # a number the facts never stated
            {"answer": "2", "entities": [], "number": 2},
        ]
    )
    counted = Retrieved(query="How many cities are in Elandor?", search=CITIES.search, facts=[], count=2)
    result = await kag.Generator(data_model=Answer, language_model=lm)(counted)
    assert result.number == 2 and len(lm.calls) == 2
    assert "enum" in lm.calls[0]["schema"]["properties"]["entities"].get("items", {})


async def test_after_a_counting_search_a_constrained_answer_gives_the_count_never_null() -> None:
    lm = ConstrainedScript(
        [
            {"answer": "not found", "entities": [], "number": None},  # what a small model often writes
            {"answer": "0", "entities": [], "number": 0},
        ]
    )
    search = _search("City", "*", "Country", "Elandor") | {"relation_label": "IsCityOf", "count": True}
    none = Retrieved(query="How many cities are in Elandor?", search=search, facts=[], count=0)
    result = await kag.Generator(data_model=Answer, language_model=lm)(none)
    assert result.number == 0 and len(lm.calls) == 2  # null was refused: zero found is an answer
    assert lm.calls[0]["schema"]["properties"]["number"]["anyOf"] == [{"type": "integer", "enum": [0]}]
    assert lm.calls[0]["schema"]["properties"]["answer"]["enum"] == ["0"]  # the count answers, as text too
    # a count is no name: with a number field to hold it, the names stay empty (the demo printed ['5'])
    assert lm.calls[0]["schema"]["properties"]["entities"]["enum"] == [[]]
    # facts that are not a count leave null allowed (the number is not what was asked)
    lm = ConstrainedScript([{"answer": "Zorvik, Quenta", "entities": ["Zorvik", "Quenta"], "number": None}])
    assert (await kag.Generator(data_model=Answer, language_model=lm)(CITIES)).number is None


class Town(kag.Entity):
    label: Literal["Town"] = "Town"
    name: str = kag.Field(description="The town's name")


class Land(kag.Entity):
    label: Literal["Land"] = "Land"
    name: str = kag.Field(description="The land's name")


class Region(kag.Entity):
    label: Literal["Region"] = "Region"
    name: str = kag.Field(description="The region's name")


class LiesIn(kag.Relation):
    subj: Town
    label: Literal["LiesIn"] = "LiesIn"
    obj: Land


class PartOf(kag.Relation):
    subj: Land
    label: Literal["PartOf"] = "PartOf"
    obj: Region


def hop(subject: str, text: str, relation: str, obj: str) -> dict[str, Any]:
    return _search(subject, text, obj, "*") | {"relation_label": relation}


async def test_a_chain_demo_fixes_each_pattern_of_the_chain_in_its_place() -> None:
    kb = kag.KnowledgeBase("memory://", entity_models=[Town, Land, Region], relation_models=[LiesIn, PartOf])
    await kb.upsert([LiesIn(subj=Town(name="Zorvik"), obj=Land(name="Elandor"))])
    await kb.upsert([PartOf(subj=Land(name="Elandor"), obj=Region(name="Nordra"))])
    chain = {"hops": [hop("Town", "Zorvik", "LiesIn", "Land"), hop("Land", "*", "PartOf", "Region")]}
    lm = ConstrainedScript([chain])
    program = build_program(kb, lm, max_hops=2)
    demo = Demo(
        {"query": "Which region is Quenta in?"},
        {"hops": [hop("Town", "Quenta", "LiesIn", "Land"), hop("Land", "*", "PartOf", "Region")]},
    )
    program.modules["retriever"].set_variable(Variable(demos=[demo], nearest=1))
    answer = await program(Query(query="Which region is Zorvik in?"))
    assert answer.entities == ["Nordra"]
    hops = lm.calls[0]["schema"]["properties"]["hops"]
    assert hops["minItems"] == hops["maxItems"] == 2 and "items" not in hops
    first, then = hops["prefixItems"]
    assert relations(first) == {"LiesIn"} and relations(then) == {"PartOf"}  # each pattern in its place
    assert all(v["properties"]["subject_similarity_search"]["enum"] == ["*"] for v in then["anyOf"])
    quoted = first["anyOf"][0]["properties"]["subject_similarity_search"]["enum"]
    assert "Zorvik" in quoted and "*" not in quoted
    # the answer checker holds the same order: the patterns swapped are refused
    from kag.lm.jsonschema_check import validate_json_schema

    with pytest.raises(kag.errors.JSONSchemaValidationError):
        validate_json_schema({"hops": chain["hops"][::-1]}, lm.calls[0]["schema"])
    validate_json_schema(chain, lm.calls[0]["schema"])


def flags(schema: dict[str, Any], name: str) -> set[Any]:
    """The values the ``name`` flag may take across the schema's variants (any boolean when unconstrained)."""
    out: set[Any] = set()
    for variant in schema.get("anyOf", [schema]):
        prop = variant["properties"][name]
        out.update(prop.get("enum", [False, True]))
    return out


async def test_a_model_under_a_grammar_negates_or_counts_only_where_the_question_says_so(capitals_kb) -> None:
    # untrained: no demo; "Who maintains X?"-like questions were searched negated by the packaged model
    plain = ConstrainedScript([_search("City", "*", "Country", "Elandor")])
    await build_program(capitals_kb, plain)(Query(query="What is the capital of Elandor?"))
    assert flags(plain.calls[0]["schema"], "negated") == {False}
    assert flags(plain.calls[0]["schema"], "count") == {False}
    negated = ConstrainedScript([{**_search("City", "*", "Country", "Elandor"), "negated": True}])
    await build_program(capitals_kb, negated)(Query(query="Which cities are not in Elandor?"))
    assert flags(negated.calls[0]["schema"], "negated") == {False, True}
    counted = ConstrainedScript([{**_search("City", "*", "Country", "Elandor"), "count": True}])
    await build_program(capitals_kb, counted)(Query(query="How many cities does Elandor have?"))
    assert flags(counted.calls[0]["schema"], "count") == {False, True}
    # a shown demo that negates a question without a negation word still lets the model negate
    taught = ConstrainedScript([{**_search("City", "*", "Country", "Elandor"), "negated": True}])
    program = build_program(capitals_kb, taught)
    demo = Demo(
        {"query": "Which cities lie beyond Tovania?"}, {**_search("City", "*", "Country", "Tovania"), "negated": True}
    )
    program.modules["retriever"].set_variable(Variable(demos=[demo]))
    await program(Query(query="Which cities lie beyond Elandor?"))
    assert flags(taught.calls[0]["schema"], "negated") == {False, True}
