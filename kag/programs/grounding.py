"""Answers grounded by construction: the names an answer may give are the names it was shown.

A ``Generator`` that answers from retrieved facts gets, per call, a copy of its output
schema (:func:`kag.lm.guards.grounded_schema`) in which every list-of-names field
(``list[str]``) may only hold the names (and property values) this module finds in those
facts: a dynamic enum, like the labels of a triplet search. A model sampling under that
schema (a grammar) cannot name an entity it did not retrieve, and any
other model's answer that does is refused and repaired. With no facts the list must stay
empty: the answer is "not found", never a guess.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["fact_names", "name_fields"]


def name_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` that hold a list of names (annotated ``list[str]``)."""
    return [
        name
        for name, info in model.model_fields.items()
        if typing.get_origin(info.annotation) is list and typing.get_args(info.annotation) == (str,)
    ]


def _entity_name(entity: Any) -> str | None:
    if isinstance(entity, Mapping):
        name = entity.get("name")
        if isinstance(name, str) and name.strip():
            return name
    return None


def fact_names(inputs: Iterable[Any]) -> list[str] | None:
    """The entity names in the ``facts`` of ``inputs`` (models or dicts), in order, once each, the
    ``count`` of a counting search, and the property values the facts' entities hold.

    ``None`` when no input carries a ``facts`` field: the call does not answer from facts.
    """
    names: dict[str, None] = {}
    seen_facts = False
    for item in inputs:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        if not isinstance(data, Mapping) or "facts" not in data:
            continue
        seen_facts = True
        if isinstance(data.get("count"), int):  # a counting search's number is a value it was shown
            names.setdefault(str(data["count"]), None)
        for fact in data.get("facts") or ():
            if not isinstance(fact, Mapping):
                continue
            entities = [fact.get("subject"), fact.get("object"), *(fact.get("path") or ())]
            for entity in entities:
                name = _entity_name(entity)
                if name is not None:
                    names.setdefault(name, None)
            for entity in entities:  # then the values the facts state ("What is the population of X?")
                for value in _values(entity):
                    names.setdefault(value, None)
    return list(names) if seen_facts else None


_NOT_VALUES = frozenset({"name", "label", "id", "_id", "embedding", "sources"})


def _values(entity: Any) -> list[str]:
    """An entity's scalar property values as text (a number as the graph stores it)."""
    if not isinstance(entity, Mapping):
        return []
    out = []
    for key, value in entity.items():
        if key in _NOT_VALUES or isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        text = str(value).strip()
        if text and len(text) <= 64:
            out.append(text)
    return out
