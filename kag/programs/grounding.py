"""Answers grounded by construction: the names an answer may give are the names it was shown.

A ``Generator`` that answers from retrieved facts gets, per call, a copy of its output
schema (:func:`kag.lm.guards.grounded_schema`) in which every list-of-names field
(``list[str]``) may only hold the names (and property values) this module finds in those
facts: a dynamic enum, like the labels of a triplet search. A model sampling under that
schema (a grammar) cannot name an entity it did not retrieve, and any
other model's answer that does is refused and repaired. With no facts the list must stay
empty: the answer is "not found", never a guess. An integer field (``int`` or ``int | None``)
likewise may only hold a number the facts state (a counting search's count, an integer
property) or ``null``: a small model cannot write a number it was not shown. For such a model
(``whole_answers``) a free-text field is one of the answers the facts give (:func:`answer_texts`)
or "Not found in the knowledge graph.": its own sentence is where a small model invents.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = [
    "answer_texts",
    "asked_names",
    "asks_value",
    "carries_facts",
    "counted",
    "fact_names",
    "fact_numbers",
    "name_fields",
    "named_values",
    "number_fields",
    "text_fields",
]


def name_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` that hold a list of names (annotated ``list[str]``)."""
    return [
        name
        for name, info in model.model_fields.items()
        if typing.get_origin(info.annotation) is list and typing.get_args(info.annotation) == (str,)
    ]


def text_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` that hold free text (annotated ``str`` or ``str | None``)."""
    fields = []
    for name, info in model.model_fields.items():
        union = typing.get_origin(info.annotation) in (typing.Union, types.UnionType)
        args = set(typing.get_args(info.annotation)) if union else {info.annotation}
        if str in args and args <= {str, type(None)}:
            fields.append(name)
    return fields


_LISTED = 10  # names written out in a text answer; the rest are counted


def answer_texts(inputs: Iterable[Any]) -> list[str]:
    """The free-text answers the facts of ``inputs`` give: the count of a counting search; else the
    names on the side the search asked for (the first ten, then how many more) and the values
    stated about the named entity ("What is the population of Tokyo?" searches Tokyo's country).
    Empty when the facts give none (the answer is "not found")."""
    items = list(inputs)
    count = counted(items)
    if count is not None:
        return [str(count)]
    values = named_values(items, asked_fields=True)[:_LISTED]
    # a number the question states ("more than 5 million") makes the field a condition, not the answer
    if values and not any(re.search(r"(?<![A-Za-z])\d", t) for t in _questions(items)):
        # the question names a field of the entity it names ("What is the population of Tokyo?"):
        # that value is the answer, not the name the search reached on its way (Japan)
        return values
    texts = []
    asked = asked_names(items)
    if asked:
        shown = ", ".join(asked[:_LISTED])
        texts.append(shown if len(asked) <= _LISTED else f"{shown} and {len(asked) - _LISTED} more")
    return texts + values


# text a retriever adds to its inputs: not the question's words ("n0_id" is no number the question states)
_RETRIEVED_TEXT = frozenset({"cypher"})


def _own_texts(data: Mapping[str, Any]) -> list[str]:
    """An input's own text fields (the question), not what a retriever added (its Cypher)."""
    return [v for k, v in data.items() if isinstance(v, str) and k not in _RETRIEVED_TEXT]


def _questions(items: Iterable[Any]) -> list[str]:
    """The inputs' own text fields (the question), not their facts."""
    out: list[str] = []
    for item in items:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        if isinstance(data, Mapping):
            out.extend(_own_texts(data))
    return out


def _entity_name(entity: Any) -> str | None:
    if isinstance(entity, Mapping):
        name = entity.get("name")
        if isinstance(name, str) and name.strip():
            return name
    return None


def _answering(inputs: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    """The inputs that carry retrieved ``facts``, as JSON dicts (models dumped)."""
    for item in inputs:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        if isinstance(data, Mapping) and "facts" in data:
            yield data


def carries_facts(inputs: Iterable[Any]) -> bool:
    """Whether any input carries retrieved ``facts`` (what a retriever returns, even when empty)."""
    return any(True for _ in _answering(inputs))


def fact_names(inputs: Iterable[Any]) -> list[str] | None:
    """The entity names in the ``facts`` of ``inputs`` (models or dicts), in order, once each, the
    ``count`` of a counting search, and the property values the facts' entities hold.

    When the input also carries the one-pattern ``search`` that found the facts and that search
    names one side and asks for the other (``"*"``), or a chain that names only its start, the
    names are those of the asked side (the chain's end), then
    the values stated about the named side: "What is the capital of Peru?" is answered by the
    cities found (or Peru's population), never by Peru. (A
    ``bidirectional`` search may find the named entity on either side; it is left out by name.)

    ``None`` when no input carries a ``facts`` field: the call does not answer from facts.
    """
    names: dict[str, None] = {}
    seen_facts = False
    for data in _answering(inputs):
        seen_facts = True
        if isinstance(data.get("count"), int):  # a counting search's number is a value it was shown
            names.setdefault(str(data["count"]), None)
        facts = [f for f in data.get("facts") or () if isinstance(f, Mapping)]
        asked = _asked_names(data.get("search"), facts)
        if asked:  # then the values the facts state about the named entity ("population of X?")
            for given in [*asked, *named_values([data])]:
                names.setdefault(given, None)
            continue
        for fact in facts:
            entities = [fact.get("subject"), fact.get("object"), *(fact.get("path") or ())]
            for entity in entities:
                name = _entity_name(entity)
                if name is not None:
                    names.setdefault(name, None)
            for entity in entities:  # then the values the facts state ("What is the population of X?")
                for value in _values(entity):
                    names.setdefault(value, None)
    return list(names) if seen_facts else None


def asked_names(inputs: Iterable[Any]) -> list[str] | None:
    """The names on the asked side of the facts, when every input with ``facts`` says which side
    its one-pattern ``search`` asked for (``None`` otherwise, or when no input carries facts)."""
    names: dict[str, None] = {}
    seen = False
    for data in _answering(inputs):
        seen = True
        facts = [f for f in data.get("facts") or () if isinstance(f, Mapping)]
        if not _asks_one_side(data.get("search")):
            return None
        for name in _asked_names(data.get("search"), facts):
            names.setdefault(name, None)
    return list(names) if seen else None


def named_values(inputs: Iterable[Any], *, asked_fields: bool = False) -> list[str]:
    """The property values (as text) of the entities on the named side of each input's asking search.

    "What is the population of Tokyo?" searches from Tokyo to its country: the answer is a value
    the facts state about Tokyo, not a name on the asked side. ``asked_fields``: only the values
    of the fields the input's own text names ("population"), not every value the entity holds.
    """
    values: dict[str, None] = {}
    for item in inputs:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        if not isinstance(data, Mapping):
            continue
        search = _single(data.get("search"))
        if not isinstance(search, Mapping) or _asks_end(search) or not _asks_one_side(search):
            continue
        if search.get("bidirectional"):
            continue
        named = "object" if search["subject_similarity_search"] == "*" else "subject"
        said = _said_words(data) if asked_fields else None
        for fact in data.get("facts") or ():
            if isinstance(fact, Mapping):
                for value in _values(fact.get(named), said):
                    values.setdefault(value, None)
    return list(values)


def _said_words(data: Mapping[str, Any]) -> set[str]:
    """The lowercase words of an input's own text fields (the question), not of its facts."""
    return {w for v in _own_texts(data) for w in re.findall(r"[a-z0-9]+", v.casefold())}


def _single(search: Any) -> Any:
    """A chain of one pattern as that pattern (what a retriever that may chain writes); else ``search``."""
    hops = search.get("hops") if isinstance(search, Mapping) else None
    if isinstance(hops, list) and len(hops) == 1 and isinstance(hops[0], Mapping):
        return hops[0]
    return search


def _asks_end(search: Any) -> bool:
    """A chain of two or more patterns that names only its first subject and asks for its last
    object ("Which continent is Lima in?": Lima -> Country -> Continent)."""
    hops = search.get("hops") if isinstance(search, Mapping) else None
    if not isinstance(hops, list) or len(hops) < 2 or not all(isinstance(h, Mapping) for h in hops):
        return False
    if any(h.get("negated") or h.get("bidirectional") or h.get("count") for h in hops):
        return False
    first = hops[0].get("subject_similarity_search")
    others = [h.get("object_similarity_search", "*") for h in hops]
    others += [h.get("subject_similarity_search", "*") for h in hops[1:]]
    return isinstance(first, str) and first != "*" and all(t == "*" for t in others)


def _asks_one_side(search: Any) -> bool:
    if _asks_end(search):
        return True
    search = _single(search)
    if not isinstance(search, Mapping) or "hops" in search or search.get("negated"):
        return False
    subject, obj = search.get("subject_similarity_search"), search.get("object_similarity_search")
    return isinstance(subject, str) and isinstance(obj, str) and (subject == "*") != (obj == "*")


def _asked_names(search: Any, facts: list[Mapping[str, Any]]) -> list[str]:
    """The names on the side a one-pattern search asks for, or at the end of a chain that names
    its start (empty: no single asked side)."""
    if not _asks_one_side(search):
        return []
    if _asks_end(search):  # a chain's fact holds its whole path: the last entity is the one asked for
        ends = [_entity_name(f["path"][-1]) for f in facts if isinstance(f.get("path"), list) and f["path"]]
        return list(dict.fromkeys(name for name in ends if name is not None))
    search = _single(search)
    subject, obj = search["subject_similarity_search"], search["object_similarity_search"]
    side, named = ("subject", obj) if subject == "*" else ("object", subject)
    other = "object" if side == "subject" else "subject"
    folded = named.casefold()
    found: dict[str, None] = {}
    for fact in facts:
        asked, given = _entity_name(fact.get(side)), _entity_name(fact.get(other))
        if search.get("bidirectional"):  # the named entity may be on either side: left out by name
            names = [n for n in (asked, given) if n is not None and n.casefold() != folded]
        elif asked is not None and asked.casefold() == folded and given is not None and given.casefold() != folded:
            names = [given]  # a symmetric relation's fact, stored the other way round
        else:
            names = [asked] if asked is not None else []
        for name in names:
            found.setdefault(name, None)
    return list(found)


def number_fields(model: type[BaseModel]) -> list[str]:
    """The fields of ``model`` that hold one integer (annotated ``int`` or ``int | None``)."""
    fields = []
    for name, info in model.model_fields.items():
        args = set(typing.get_args(info.annotation)) or {info.annotation}
        if int in args and args <= {int, type(None)} and bool not in args:
            fields.append(name)
    return fields


def fact_numbers(inputs: Iterable[Any]) -> list[int] | None:
    """The integers the retrieved facts state that the question asks for: the ``count`` of a
    counting search, then the integer values of the fields the question's own words name ("What is
    the population of Tokyo?"), not every number the entities hold (a country asked for gets no
    population). ``None``: no input carries ``facts``."""
    numbers: dict[int, None] = {}
    seen_facts = False
    for data in _answering(inputs):
        seen_facts = True
        if isinstance(data.get("count"), int) and not isinstance(data.get("count"), bool):
            numbers.setdefault(data["count"], None)
        said = _said_words(data)
        found: list[tuple[Mapping[str, Any], str, int]] = []
        for fact in data.get("facts") or ():
            if not isinstance(fact, Mapping):
                continue
            for entity in [fact.get("subject"), fact.get("object"), *(fact.get("path") or ())]:
                if isinstance(entity, Mapping):
                    for key, value in entity.items():
                        if key in _NOT_VALUES or not isinstance(value, int) or isinstance(value, bool):
                            continue
                        if set(key.casefold().split("_")) <= said:
                            found.append((entity, key, value))
        # "the population of Tokyo": Tokyo's population, not that of the country the search reached
        owned = [value for entity, key, value in found if _says_field_of(_own_texts(data), key, entity)]
        for value in owned or [value for _, _, value in found]:
            numbers.setdefault(value, None)
    return list(numbers) if seen_facts else None


def asks_value(inputs: Iterable[Any]) -> bool:
    """Whether a question asks for a value a fact states of an entity it names ("What is the
    population of Tokyo?"): then no name answers it, whatever side the search asked for."""
    for data in _answering(inputs):
        texts = _own_texts(data)
        for fact in data.get("facts") or ():
            if not isinstance(fact, Mapping):
                continue
            for entity in [fact.get("subject"), fact.get("object")]:
                if isinstance(entity, Mapping) and any(
                    key not in _NOT_VALUES and _says_field_of(texts, key, entity) for key in entity
                ):
                    return True
    return False


def _says_field_of(texts: Iterable[str], key: str, entity: Mapping[str, Any]) -> bool:
    """Whether a text says "<field> of <the entity's name>" ("the population of Tokyo")."""
    name = _entity_name(entity)
    if name is None:
        return False
    field = r"\s+".join(re.escape(w) for w in key.casefold().split("_"))
    pattern = re.compile(rf"\b{field}\s+of\s+(?:the\s+)?{re.escape(name.casefold())}\b")
    return any(pattern.search(text.casefold()) for text in texts)


def counted(inputs: Iterable[Any]) -> int | None:
    """The count that answers, when every input with ``facts`` comes from a counting search and
    they state one count ("How many cities are in Japan?": the count is the answer, 0 included);
    ``None`` otherwise."""
    counts = set()
    for data in _answering(inputs):
        count = data.get("count")
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        counts.add(count)
    return counts.pop() if len(counts) == 1 else None


_NOT_VALUES = frozenset({"name", "label", "id", "_id", "embedding", "sources"})


def _values(entity: Any, said: set[str] | None = None) -> list[str]:
    """An entity's scalar property values as text (a number as the graph stores it); with
    ``said``, only those of fields whose name is among those words."""
    if not isinstance(entity, Mapping):
        return []
    out = []
    for key, value in entity.items():
        if key in _NOT_VALUES or isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        if said is not None and not set(key.casefold().split("_")) <= said:
            continue
        text = str(value).strip()
        if text and len(text) <= 64:
            out.append(text)
    return out
