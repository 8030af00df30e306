"""Finding known entities in text: the names an entity goes by, and a whole-word matcher.

:class:`EntityMatcher` matches the normalized key-field text of each entity
(``Entity.search_text()``, plus every string of an ``aliases: list[str]`` field when
the model has one) as whole words in normalized text (:func:`kag.text.normalize_text`:
casefolded, accents stripped). Matching is leftmost-longest and non-overlapping, so
"New York" inside a chunk links ``New York`` and not also ``York``. Passages use it to
link ``MENTIONS``; ``Knowledge`` uses it to find the entities a question names.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from kag.datamodels.base import Entity
from kag.datamodels.schema import GraphSchema
from kag.errors import SchemaError
from kag.graph.base import unflatten
from kag.graph.passages import PassageStore
from kag.text import normalize_text, words

MIN_NAME_CHARS = 2


def entity_names(schema: GraphSchema, label: str, props: Mapping[str, Any]) -> list[str]:
    """Names an entity is recognized by: its ``search_text()`` plus its ``aliases``, if any.

    Entities whose label the schema does not declare fall back to a ``name``
    property.
    """
    try:
        model = schema.entity_model(label)
    except SchemaError:
        name = props.get("name")
        return [name] if isinstance(name, str) else []
    try:
        entity = model.model_validate(unflatten(model, dict(props)))
    except pydantic.ValidationError:
        return []
    return names_of(entity)


def names_of(entity: Entity) -> list[str]:
    """``entity.search_text()`` first, then its aliases (see :meth:`kag.Entity.names`)."""
    return entity.names()


@dataclass(frozen=True)
class EntityMention:
    """An entity found in text: id, label, the normalized name that matched, and its key text."""

    id: str
    label: str
    name: str
    text: str


class EntityMatcher:
    """Whole-word, leftmost-longest matching of known entity names in text.

    ``entries`` are ``(entity_id, label, names)``; the first name is the
    entity's key text (``search_text()``), the others aliases.
    """

    def __init__(self, entries: Iterable[tuple[str, str, Sequence[str]]] = ()) -> None:
        # first word -> {word tuple -> [(entity id, label, normalized name, key text)], sorted by id}
        self._index: dict[str, dict[tuple[str, ...], list[tuple[str, str, str, str]]]] = {}
        self._names_of: dict[str, list[tuple[str, ...]]] = {}  # entity id -> the word tuples it is found by
        self._by_word: dict[str, set[str]] = {}  # word -> ids of the entities with a name holding it
        self._max_words = 0
        self._size = 0
        for entity_id, label, names in entries:
            for name in names:
                self.add(entity_id, label, name, names[0])

    def __len__(self) -> int:
        """Number of (entity, name) pairs."""
        return self._size

    @property
    def entities(self) -> int:
        """Number of entities recognized by at least one name."""
        return len(self._names_of)

    def add(self, entity_id: str, label: str, name: str, text: str | None = None) -> None:
        """Recognize ``name`` as entity ``entity_id`` (names under 2 characters are ignored)."""
        norm = normalize_text(name)
        tokens = tuple(words(norm))
        if len(norm) < MIN_NAME_CHARS or not tokens:
            return
        bucket = self._index.setdefault(tokens[0], {}).setdefault(tokens, [])
        if any(e[0] == entity_id for e in bucket):
            return
        # by id: the same order however the matcher was built (at once or refreshed entity by entity)
        bisect.insort(bucket, (entity_id, label, norm, name if text is None else text))
        self._names_of.setdefault(entity_id, []).append(tokens)
        for word in tokens:
            self._by_word.setdefault(word, set()).add(entity_id)
        self._max_words = max(self._max_words, len(tokens))
        self._size += 1

    def remove(self, entity_id: str) -> None:
        """Stop recognizing an entity (nothing when it is not known)."""
        for tokens in self._names_of.pop(entity_id, ()):
            for word in tokens:
                ids = self._by_word.get(word)
                if ids is not None:
                    ids.discard(entity_id)
                    if not ids:
                        del self._by_word[word]
            by_tokens = self._index[tokens[0]]
            bucket = [e for e in by_tokens[tokens] if e[0] != entity_id]
            self._size -= len(by_tokens[tokens]) - len(bucket)
            if bucket:
                by_tokens[tokens] = bucket
            else:
                del by_tokens[tokens]
                if not by_tokens:
                    del self._index[tokens[0]]

    def find(self, text: str) -> list[EntityMention]:
        """Entities named in ``text``, in order of first occurrence (each once)."""
        if not self._size:
            return []
        norm = normalize_text(text)
        tokens = words(norm)
        found: dict[str, EntityMention] = {}
        i = 0
        while i < len(tokens):
            options = self._index.get(tokens[i])
            matched = 0
            if options:
                for n in range(min(self._max_words, len(tokens) - i), 0, -1):
                    entries = options.get(tuple(tokens[i : i + n]))
                    if not entries:
                        continue
                    hits = [e for e in entries if _confirm(e[2], norm)]
                    if hits:
                        for entity_id, label, name, key_text in hits:
                            found.setdefault(entity_id, EntityMention(entity_id, label, name, key_text))
                        matched = n
                        break
            i += matched or 1
        return list(found.values())

    def find_in_names(self, text: str) -> list[EntityMention]:
        """Entities with a name that holds every word of ``text`` (``firmware`` in ``Firmware team``), by id.

        For a search of a word or two that names no entity whole (:meth:`find` finds nothing there):
        every word must be a whole word of one name, so a sentence matches nothing.
        """
        query = set(words(normalize_text(text)))
        if not query or not self._size:
            return []
        ids = set.intersection(*(self._by_word.get(word, set()) for word in query))
        found = []
        for entity_id in sorted(ids):
            for tokens in self._names_of[entity_id]:
                if query <= set(tokens):
                    entry = next(e for e in self._index[tokens[0]][tokens] if e[0] == entity_id)
                    found.append(EntityMention(entity_id, entry[1], entry[2], entry[3]))
                    break
        return found

    def entity_ids(self, text: str) -> list[str]:
        """Ids of the entities named in ``text``."""
        return [ref.id for ref in self.find(text)]


def _confirm(name: str, norm_text: str) -> bool:
    """Names with punctuation ("C++", "U.S.") must also occur verbatim, on word boundaries."""
    if " ".join(words(name)) == name:
        return True
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", norm_text) is not None


async def build_matcher(store: PassageStore, schema: GraphSchema) -> EntityMatcher:
    """A matcher over every entity in the graph."""
    rows = await store.entities()
    return EntityMatcher((eid, label, entity_names(schema, label, props)) for eid, label, props in rows)


async def refresh_matcher(matcher: EntityMatcher, store: PassageStore, schema: GraphSchema, ids: Iterable[str]) -> None:
    """Bring ``matcher`` up to date for the entities ``ids`` (written or deleted since it was built)."""
    ids = sorted(set(ids))
    rows = await store.entities(ids) if ids else []
    for entity_id in ids:
        matcher.remove(entity_id)
    for eid, label, props in rows:
        names = entity_names(schema, label, props)
        for name in names:
            matcher.add(eid, label, name, names[0])
