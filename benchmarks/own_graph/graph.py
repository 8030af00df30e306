"""The plain data behind a held-out graph, and its labelled questions.

A graph is kept twice: as rows (``entities``: label -> name -> properties, ``edges``: relation
label, subject name, object name) from which every gold answer is computed in plain Python, and as
the user's pydantic models (:meth:`OwnGraph.items`) that go into a ``KnowledgeBase``. Names are
unique across labels within a graph. Other names (``aliases``) are never written into the graph:
only a question and its label know them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.datamodels.base import Entity, Relation

KINDS = ("lookup", "inverse", "count", "conjunction", "negation", "two_hop", "alias", "comparison")
OUTSIDE = "outside"
TRAIN_PER_KIND = 5

Answer = list[str] | int
Pick = Callable[..., Answer | None]


@dataclass
class OwnGraph:
    """One held-out graph: its models, its rows and the other names its questions may use."""

    name: str
    entity_models: dict[str, type[Entity]]
    relation_models: dict[str, type[Relation]]
    entities: dict[str, dict[str, dict[str, Any]]]
    edges: list[tuple[str, str, str]]
    aliases: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for label, rows in self.entities.items():
            for name in rows:
                if name in seen:
                    raise ValueError(f"{self.name}: {name!r} is both a {seen[name]} and a {label}")
                seen[name] = label
        self.label_of = seen
        for rel, subj, obj in self.edges:
            model = self.relation_models[rel]
            for side, name in (("subj", subj), ("obj", obj)):
                want = model.model_fields[side].annotation
                if want is not self.entity_models[seen[name]]:
                    raise ValueError(f"{self.name}: {rel} {side} {name!r} is a {seen[name]}")
        for name, others in self.aliases.items():
            if name not in seen or any(o in seen for o in others):
                raise ValueError(f"{self.name}: alias row {name!r} -> {others} is not another name")

    # ---- reading the rows ----
    def names(self, label: str) -> list[str]:
        return sorted(self.entities[label])

    def prop(self, name: str, key: str) -> Any:
        return self.entities[self.label_of[name]][name].get(key)

    def out(self, rel: str, subj: str | Sequence[str]) -> list[str]:
        """The objects of ``rel`` from ``subj`` (one name or several)."""
        subjects = {subj} if isinstance(subj, str) else set(subj)
        return sorted({o for r, s, o in self.edges if r == rel and s in subjects})

    def into(self, rel: str, obj: str | Sequence[str]) -> list[str]:
        """The subjects of ``rel`` that reach ``obj`` (one name or several)."""
        objects = {obj} if isinstance(obj, str) else set(obj)
        return sorted({s for r, s, o in self.edges if r == rel and o in objects})

    def items(self) -> list[Entity | Relation]:
        """The graph as the user's models: every entity, then every relation."""
        made: dict[str, Entity] = {}
        for label, rows in self.entities.items():
            for name, props in rows.items():
                entity: Any = self.entity_models[label]
                made[name] = entity(name=name, **props)
        models: dict[str, Any] = dict(self.relation_models)
        relations: list[Entity | Relation] = [models[rel](subj=made[s], obj=made[o]) for rel, s, o in self.edges]
        return [*made.values(), *relations]


@dataclass(frozen=True)
class Template:
    """One hand-written phrasing: ``text`` with ``{a}``/``{b}`` slots filled from ``slots`` (labels, or
    literal values), and ``gold`` computing the answer from the graph (``None``: skip this filling)."""

    text: str
    slots: tuple[Any, ...]
    gold: Pick
    times: int | None = None  # fillings of this template (default: ``per_template``)


def _fillings(graph: OwnGraph, slots: tuple[Any, ...], rng: random.Random) -> list[tuple[Any, ...]]:
    if not slots:
        return [()]
    pools: list[list[Any]] = []
    for slot in slots:
        pool = list(graph.names(slot)) if isinstance(slot, str) else list(slot)
        rng.shuffle(pool)
        pools.append(pool)
    if len(pools) == 1:
        return [(a,) for a in pools[0]]
    out = [(a, b) for a in pools[0] for b in pools[1] if a != b]
    rng.shuffle(out)
    return out


def _valid(answer: Answer | None, max_names: int) -> bool:
    if answer is None:
        return False
    if isinstance(answer, list):
        return 0 < len(answer) <= max_names
    return answer > 0


def make_questions(
    graph: OwnGraph,
    templates: dict[str, list[Template]],
    outside: list[tuple[str, str]],
    *,
    per_template: int = 2,
    seed: int = 0,
    max_names: int = 10,
) -> list[dict[str, Any]]:
    """The labelled questions: ``per_template`` fillings of each template (gold from the rows),
    ``TRAIN_PER_KIND`` of each kind drawn for ``train``, the rest ``test``; then the questions
    outside the schema (answer ``[]``), split the same way."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for kind in KINDS:
        made: list[dict[str, Any]] = []
        asked: set[str] = set()
        for template in templates[kind]:
            n, want = 0, template.times or per_template
            for filling in _fillings(graph, template.slots, rng):
                answer = template.gold(*filling)
                if not _valid(answer, max_names):
                    continue
                text = template.text.format(**{k: v for k, v in zip("ab", filling, strict=False)})
                if text in asked:
                    continue
                asked.add(text)
                made.append({"question": text, "kind": kind, "answer": answer})
                n += 1
                if n == want:
                    break
            if n < want:
                raise ValueError(f"{graph.name}: template {template.text!r} has {n} fillings")
        rows += _split(made, rng)
    out_rows = []
    for text, slot in outside:
        name = rng.choice(graph.names(slot))
        out_rows.append({"question": text.format(a=name), "kind": OUTSIDE, "answer": []})
    rows += _split(out_rows, rng)
    return rows


def _split(rows: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    order = list(range(len(rows)))
    rng.shuffle(order)
    train = set(order[:TRAIN_PER_KIND])
    return [{**row, "split": "train" if i in train else "test"} for i, row in enumerate(rows)]
