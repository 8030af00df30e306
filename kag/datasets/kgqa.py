"""The KGQA questions: 722 labelled questions over the countries graph, to train and evaluate programs.

Each question has a type (``lookup``, ``inverse``, ``count``, ``two_hop``, ``negation``,
``negation_chain``, ``intersection``, ``symmetric``, ``comparison``, ``superlative``, ``variant``),
the expected answer (entity names, or a number for "how many" questions) and the gold triplet
search that answers it. They were generated from the graph's data (``benchmarks/kgqa``), so every
answer is what the graph holds.

``load_kgqa()`` splits them by seed, stratified by type, into ``(x_train, y_train), (x_test,
y_test)``: ``x`` are ``{"query": question}`` dicts (a :class:`Query`), ``y`` the answers as
``{"entities": [...]}`` or ``{"number": n}`` (fields of :class:`Answer`). ``load_kgqa_graph()``
builds the knowledge base they are asked over.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from kag.datamodels.base import DataModel, Field
from kag.errors import ConfigError
from kag.examples.countries import countries_knowledge_base, load_countries
from kag.knowledge.base import KnowledgeBase
from kag.validation import check_int

__all__ = ["TYPES", "Answer", "Query", "kgqa_records", "load_kgqa", "load_kgqa_graph"]

TYPES = (
    "lookup",
    "inverse",
    "count",
    "two_hop",
    "negation",
    "negation_chain",
    "intersection",
    "symmetric",
    "comparison",
    "superlative",
    "variant",
)


class Query(DataModel):
    """A user question."""

    query: str = Field(description="The user's question")


class Answer(DataModel):
    """An answer grounded in the retrieved facts (the shape the KGQA labels fit)."""

    answer: str = Field(description="The answer, using only the retrieved facts")
    entities: list[str] = Field(description="The names of the entities that answer the question")
    number: int | None = Field(
        description="The number the question asks for (a 'how many' count or a numeric value), else null"
    )


@cache
def _rows() -> tuple[dict[str, Any], ...]:
    text = resources.files("kag").joinpath("data/kgqa.jsonl").read_text(encoding="utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def kgqa_records(types: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every question as a record: ``id``, ``type``, ``subtype``, ``question``, ``answer``, ``gold_search``."""
    wanted = _check_types(types)
    return [json.loads(json.dumps(row)) for row in _rows() if row["type"] in wanted]


def _check_types(types: Iterable[str] | None) -> set[str]:
    if types is None:
        return set(TYPES)
    chosen = [types] if isinstance(types, str) else list(types)
    unknown = sorted(set(chosen) - set(TYPES))
    if unknown or not chosen:
        raise ConfigError(f"unknown KGQA question type(s) {unknown or chosen}; the types are {list(TYPES)}.")
    return set(chosen)


def label_of(record: dict[str, Any]) -> dict[str, Any]:
    """The ``y`` of a record: ``{"number": n}`` for counts, else ``{"entities": names}``."""
    answer = record["answer"]
    if answer["kind"] == "count":
        return {"number": int(answer["value"])}
    return {"entities": list(answer["names"])}


def load_kgqa(
    *,
    types: Iterable[str] | None = None,
    train_size: int | float = 0.5,
    per_type: int | None = None,
    seed: int = 0,
    return_types: bool = False,
) -> tuple[tuple[list[Any], ...], tuple[list[Any], ...]]:
    """The KGQA questions split into ``(x_train, y_train), (x_test, y_test)``.

    Args:
        types: the question types to keep (default: all of :data:`TYPES`).
        train_size: the fraction of each type in the training split, or a total number of
            training questions (spread over the types, then the rest is the test split).
        per_type: keep at most this many questions of each type (chosen by ``seed``) before splitting.
        seed: the seed of the choice and the split; the same seed gives the same split.
        return_types: also return each question's type, as a third list in each split
            (``evaluate(..., groups=types)`` reports the reward per type).
    """
    check_int(seed, name="seed", minimum=None)
    if per_type is not None:
        check_int(per_type, name="per_type (one for each split)", minimum=2)
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in kgqa_records(types):
        groups.setdefault(row["type"], []).append(row)
    for rows in groups.values():
        rng.shuffle(rows)
        if per_type is not None:
            del rows[per_type:]
    total = sum(len(rows) for rows in groups.values())
    quota = _quotas(groups, train_size, total)
    train: list[dict[str, Any]] = []
    test: list[dict[str, Any]] = []
    for name in sorted(groups):
        train.extend(groups[name][: quota[name]])
        test.extend(groups[name][quota[name] :])
    rng.shuffle(train)
    rng.shuffle(test)
    return _columns(train, return_types), _columns(test, return_types)


def _quotas(groups: dict[str, list[dict[str, Any]]], train_size: int | float, total: int) -> dict[str, int]:
    if isinstance(train_size, bool) or not isinstance(train_size, int | float):
        raise ConfigError(f"train_size must be a fraction in (0, 1) or a number of questions, got {train_size!r}.")
    if isinstance(train_size, float) or train_size < 1:
        if not 0.0 < train_size < 1.0:
            raise ConfigError(f"train_size must be a fraction in (0, 1) or a number of questions, got {train_size!r}.")
        return {name: max(1, min(len(rows) - 1, round(len(rows) * train_size))) for name, rows in groups.items()}
    if not len(groups) <= train_size < total:
        raise ConfigError(
            f"train_size={train_size} must leave at least one question of each type on both sides "
            f"({len(groups)} <= train_size < {total})."
        )
    quota = {name: 1 for name in groups}
    names = sorted(groups)
    i = 0
    while sum(quota.values()) < train_size:  # round-robin over the types, as far as each type allows
        name = names[i % len(names)]
        if quota[name] < len(groups[name]) - 1:
            quota[name] += 1
        i += 1
    return quota


def _columns(rows: Sequence[dict[str, Any]], return_types: bool) -> tuple[list[Any], ...]:
    x = [{"query": row["question"]} for row in rows]
    y = [label_of(row) for row in rows]
    return (x, y, [row["type"] for row in rows]) if return_types else (x, y)


async def load_kgqa_graph(uri: str = "memory://", **options: Any) -> KnowledgeBase:
    """The countries knowledge base the questions are asked over, filled (``uri``: any kag store)."""
    kb = countries_knowledge_base(uri, **options)
    await load_countries(kb)
    return kb
