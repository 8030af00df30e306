"""Searches found from an answer alone: each family of the triplet language, the budget, aliases.

The graph is a small invented software ecosystem (packages, maintainers, licenses, languages), no
geography: ``DependsOn`` is stored one way and asked both ways, two conditions on a package join on
it, a chain goes through a package, counts and numeric conditions apply. The program's own model
writes a wrong search every time (``WrongLM``), so every demo training keeps was found from the label.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

import kag
from kag.errors import TrainingError
from kag.lm.base import BaseLanguageModel, Message
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import BootstrapFewShot, KNNFewShot
from kag.training.explore import SearchBudget


class Package(kag.Entity):
    """A software package."""

    label: Literal["Package"] = "Package"
    name: str
    stars: int = 0


class Person(kag.Entity):
    """A person who maintains packages."""

    label: Literal["Person"] = "Person"
    name: str


class License(kag.Entity):
    """A software license."""

    label: Literal["License"] = "License"
    name: str


class Language(kag.Entity):
    """A programming language."""

    label: Literal["Language"] = "Language"
    name: str


class DependsOn(kag.Relation):
    """The subject package depends on (imports) the object package."""

    label: Literal["DependsOn"] = "DependsOn"
    subj: Package
    obj: Package


class MaintainedBy(kag.Relation):
    """The package is maintained by the person."""

    label: Literal["MaintainedBy"] = "MaintainedBy"
    subj: Package
    obj: Person


class LicensedUnder(kag.Relation):
    """The package is released under the license."""

    label: Literal["LicensedUnder"] = "LicensedUnder"
    subj: Package
    obj: License


class WrittenIn(kag.Relation):
    """The package is written in the language."""

    label: Literal["WrittenIn"] = "WrittenIn"
    subj: Package
    obj: Language


ENTITIES = [Package, Person, License, Language]
RELATIONS = [DependsOn, MaintainedBy, LicensedUnder, WrittenIn]
STARS = {"Quill": 120, "Marrow": 400, "Tessel": 50, "Brindle": 900, "Oakum": 30}
FACTS = {
    "DependsOn": [("Quill", "Marrow"), ("Tessel", "Marrow"), ("Brindle", "Quill"), ("Oakum", "Quill")],
    "MaintainedBy": [
        ("Quill", "Ada Byrne"),
        ("Marrow", "Ada Byrne"),
        ("Tessel", "Tomas Reyes"),
        ("Brindle", "Tomas Reyes"),
        ("Oakum", "Ada Byrne"),
    ],
    "LicensedUnder": [("Quill", "MIT"), ("Marrow", "MIT"), ("Tessel", "GPL"), ("Brindle", "GPL"), ("Oakum", "MIT")],
    "WrittenIn": [("Quill", "Rust"), ("Marrow", "Go"), ("Tessel", "Rust"), ("Brindle", "Go"), ("Oakum", "Rust")],
}


@pytest.fixture
async def eco() -> kag.KnowledgeBase:
    return await fill(kag.KnowledgeBase("memory://", entity_models=ENTITIES, relation_models=RELATIONS))


async def fill(kb: kag.KnowledgeBase) -> kag.KnowledgeBase:
    """The ecosystem's entities and facts, written into ``kb`` (memory here; Neo4j in tests/neo4j)."""
    packages = {name: Package(name=name, stars=stars) for name, stars in STARS.items()}
    people = {n: Person(name=n) for n in ("Ada Byrne", "Tomas Reyes")}
    licenses = {n: License(name=n) for n in ("MIT", "GPL")}
    languages = {n: Language(name=n) for n in ("Rust", "Go")}
    ends: dict[str, tuple[dict[str, Any], type[kag.Relation]]] = {
        "DependsOn": (packages, DependsOn),
        "MaintainedBy": (people, MaintainedBy),
        "LicensedUnder": (licenses, LicensedUnder),
        "WrittenIn": (languages, WrittenIn),
    }
    relations = []
    for label, pairs in FACTS.items():
        objects, model = ends[label]
        relations += [model(subj=packages[s], obj=objects[o]) for s, o in pairs]
    await kb.upsert([*packages.values(), *people.values(), *licenses.values(), *languages.values(), *relations])
    return kb


class Query(kag.DataModel):
    query: str = kag.Field(description="The user's question")


class Reply(kag.DataModel):
    entities: list[str] = kag.Field(description="The names that answer the question")
    number: int | None = kag.Field(default=None, description="The number asked for, if any")


class WrongLM(BaseLanguageModel):
    """Always searches who maintains Quill: no question of these tests is answered by it."""

    def __init__(self) -> None:
        super().__init__(max_repairs=0)
        self.calls = 0

    @property
    def name(self) -> str:
        return "wrong"

    def get_config(self) -> dict[str, Any]:
        return {"type": "wrong"}

    async def _complete(self, messages: list[Message], json_schema: dict[str, Any], schema_name: str) -> str:
        self.calls += 1
        hop = {
            "subject_label": "Package",
            "subject_similarity_search": "Quill",
            "relation_label": "MaintainedBy",
            "object_label": "Person",
            "object_similarity_search": "*",
            "negated": False,
            "bidirectional": False,
            "count": False,
        }
        return json.dumps({"hops": [hop]} if "hops" in (json_schema.get("properties") or {}) else hop)


def retriever(kb: kag.KnowledgeBase, max_hops: int = 2) -> KnowledgeRetriever:
    return KnowledgeRetriever(kb, WrongLM(), max_hops=max_hops, abstain=False)


def hops(search: dict[str, Any]) -> list[dict[str, Any]]:
    return list(search.get("hops", [search]))


async def found(kb: kag.KnowledgeBase, question: str, label: dict[str, Any], **budget: Any) -> Any:
    module = retriever(kb)
    return await module.outputs_for_answer({"query": question}, label, SearchBudget(**budget))


async def test_a_relation_stored_one_way_is_found_asked_the_other_way(eco: kag.KnowledgeBase) -> None:
    forward = await found(eco, "What does Quill depend on?", {"entities": ["Marrow"]})
    first = hops(forward.outputs[0])
    assert len(first) == 1 and first[0]["relation_label"] == "DependsOn"
    assert first[0]["subject_similarity_search"] == "Quill" and first[0]["object_similarity_search"] == "*"

    backward = await found(eco, "Which packages depend on Marrow?", {"entities": ["Quill", "Tessel"]})
    first = hops(backward.outputs[0])
    assert len(first) == 1 and first[0]["relation_label"] == "DependsOn"
    assert first[0]["object_similarity_search"] == "Marrow" and first[0]["subject_similarity_search"] == "*"
    assert backward.searches >= 1 and backward.exhausted is None


async def test_a_count_is_found_from_a_number(eco: kag.KnowledgeBase) -> None:
    result = await found(eco, "How many packages does Ada Byrne maintain?", {"number": 3})
    hop = hops(result.outputs[0])[0]
    assert hop["count"] is True and hop["relation_label"] == "MaintainedBy"
    assert hop["object_similarity_search"] == "Ada Byrne"


async def test_a_conjunction_with_its_second_condition_negated_is_found(eco: kag.KnowledgeBase) -> None:
    # Rust packages: Quill, Tessel, Oakum; of those, not under MIT: Tessel alone
    result = await found(eco, "Which Rust packages are not licensed under MIT?", {"entities": ["Tessel"]})
    chain = hops(result.outputs[0])
    assert len(chain) == 2
    assert {h["relation_label"] for h in chain} == {"WrittenIn", "LicensedUnder"}
    negated = [h for h in chain if h["negated"]]
    assert len(negated) == 1 and negated[0]["object_similarity_search"] == "MIT"
    assert chain[1]["subject_from"] == "first_subject"


async def test_a_two_hop_chain_is_found(eco: kag.KnowledgeBase) -> None:
    # the packages depending on Marrow are Quill (MIT) and Tessel (GPL)
    result = await found(eco, "Which licenses do the packages that depend on Marrow use?", {"entities": ["MIT", "GPL"]})
    chain = hops(result.outputs[0])
    assert [h["relation_label"] for h in chain] == ["DependsOn", "LicensedUnder"]


async def test_an_alias_the_graph_lacks_is_found_and_returned_as_learned(eco: kag.KnowledgeBase) -> None:
    result = await found(eco, "Which packages are written in Golang?", {"entities": ["Marrow", "Brindle"]})
    assert result.outputs, "the alias search found nothing"
    hop = hops(result.outputs[0])[0]
    assert hop["relation_label"] == "WrittenIn" and hop["object_label"] == "Language"
    assert result.learned[0] == {"aliases": {"golang": {"label": "Language", "name": "go"}}}


async def test_a_spent_budget_is_reported_not_raised(eco: kag.KnowledgeBase) -> None:
    result = await found(
        eco, "Which licenses do the packages that depend on Marrow use?", {"entities": ["MIT", "GPL"]}, max_searches=2
    )
    assert result.searches == 2 and result.exhausted == "max_searches"
    assert result.outputs == []  # the chain lies beyond the first two searches


async def test_an_answer_no_search_reproduces_finds_nothing(eco: kag.KnowledgeBase) -> None:
    result = await found(eco, "Who founded Quill?", {"entities": ["Linus Pauling"]})
    assert result.outputs == [] and result.searches > 0
    nothing = await found(eco, "Who is the mayor of Quill?", {"entities": ["Not found in the knowledge graph"]})
    assert nothing.outputs == []


def program(kb: kag.KnowledgeBase) -> Program:
    inp = Input(Query)
    facts = KnowledgeRetriever(kb, WrongLM(), max_hops=2, abstain=False, name="retriever")(inp)
    reply = Generator(data_model=Reply, language_model=kag.LexicalLM(kb), name="answer", trainable=False)(facts)
    return Program(inp, reply, name="eco")


QUESTIONS = [
    ("Which packages depend on Marrow?", {"entities": ["Quill", "Tessel"]}),
    ("Which packages depend on Quill?", {"entities": ["Brindle", "Oakum"]}),
    ("Which Rust packages are not licensed under MIT?", {"entities": ["Tessel"]}),
    ("Which packages are written in Golang?", {"entities": ["Marrow", "Brindle"]}),
]


def set_reward(y_true: dict[str, Any], y_pred: dict[str, Any] | None) -> float:
    if y_pred is None:
        return 0.0
    return float(sorted(y_true["entities"]) == sorted(y_pred.get("entities") or []))


@pytest.mark.parametrize("optimizer", ["bootstrap", "knn"])
async def test_fit_turns_labels_no_model_answers_into_demos(eco: kag.KnowledgeBase, optimizer: str) -> None:
    prog = program(eco)
    x = [{"query": q} for q, _ in QUESTIONS]
    y = [label for _, label in QUESTIONS]
    chosen = BootstrapFewShot(max_demos=4, num_candidates=1) if optimizer == "bootstrap" else KNNFewShot(k=1)
    prog.compile(reward=kag.training.FunctionReward(set_reward), optimizer=chosen)
    before = await prog.evaluate(x, y)
    assert before["reward"] == 0.0
    history = await prog.fit(x, y, epochs=1, verbose=0, seed=0)
    logs = history.history
    assert logs["found_from_answer"][-1] == 4 and logs["searches"][-1] > 0
    variable = prog.modules["retriever"].variable
    assert variable.aliases == {"golang": {"label": "Language", "name": "go"}}
    assert len(variable.demos) == 4


async def test_learned_aliases_are_saved_loaded_and_used_by_every_search(eco: kag.KnowledgeBase, tmp_path) -> None:
    prog = program(eco)
    retr = prog.modules["retriever"]
    retr.variable.aliases = {"golang": {"label": "Language", "name": "go"}}
    path = prog.save_variables(tmp_path / "vars.json")
    saved = json.loads(path.read_text())["variables"]["retriever"]["aliases"]
    assert saved == {"golang": {"label": "Language", "name": "go"}}
    again = program(eco)
    again.load_variables(path)
    ran = again.modules["retriever"].with_aliases(
        {
            "subject_label": "Package",
            "subject_similarity_search": "*",
            "relation_label": "WrittenIn",
            "object_label": "Language",
            "object_similarity_search": "Golang",
        }
    )
    assert ran["object_similarity_search"] == "go"


async def test_an_alias_that_is_another_entitys_name_is_refused(eco: kag.KnowledgeBase) -> None:
    module = retriever(eco)
    with pytest.raises(TrainingError, match="already the name of entity"):
        await module.check_aliases({"rust": {"label": "Language", "name": "go"}})
    with pytest.raises(TrainingError, match="does not search"):
        await module.check_aliases({"golang": {"label": "Planet", "name": "go"}})
    await module.check_aliases({"golang": {"label": "Language", "name": "go"}})  # a free name is fine
