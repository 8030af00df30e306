"""The parts of a chunk one extraction call reads, and labelled passages cut the same way.

A chunk is read whole when it fits, else in runs of whole sentences of at most ``max_unit_chars``
characters; or one sentence at a time, a sentence that opens with a pronoun read with the name the
sentence before opens with (:func:`read_units`). A labelled passage shown beside such units is cut
into the same units, each with the relations read from it (:func:`passage_pieces`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kag.datamodels.documents import Chunk
from kag.lm.guards import text_words
from kag.programs.stated import full_names, name_aliases, name_spans, names_relation, sentences, states_name
from kag.text import normalize_text

__all__ = ["inline_chunk", "passage_pieces", "read_units"]

_SUBJECT_PRONOUNS = frozenset({"he", "she", "it", "they"})
_POSSESSIVE_PRONOUNS = frozenset({"his", "her", "its", "their"})


def inline_chunk(text: str, chunk_id: str) -> Chunk:
    """``text`` as a chunk of its own (a passage given as a string, not from a document)."""
    return Chunk(id=chunk_id, document_id="inline", index=0, text=text, start=0, end=len(text))


def read_units(chunk: Chunk, *, max_unit_chars: int, by_sentence: bool) -> list[Chunk]:
    """The parts of ``chunk`` one model call reads: its sentences (``by_sentence``; a
    sentence that opens with a pronoun is read with the name the sentence before opens with:
    "She reports to Akira." after "Nadia Hussein joined." is read "Nadia Hussein reports to
    Akira."), or runs of whole sentences of at most ``max_unit_chars`` characters (a longer
    sentence alone); the chunk itself when it fits."""
    if by_sentence:
        parts = sentences(chunk.text)
        if len(parts) > 1:
            return _sentence_units(chunk, parts)
    if len(chunk.text) <= max_unit_chars:
        return [chunk]
    groups: list[list[str]] = [[]]
    for sentence in sentences(chunk.text):
        if groups[-1] and len(" ".join([*groups[-1], sentence])) > max_unit_chars:
            groups.append([])
        groups[-1].append(sentence)
    units, cursor = [], 0
    for i, group in enumerate(g for g in groups if g):
        text = " ".join(group)
        found = chunk.text.find(group[0], cursor)
        offset = max(found, 0)
        cursor = offset + len(group[0])
        units.append(_unit(chunk, i, text, offset))
    return units


def _with_antecedent(sentence: str, before: str | None) -> str:
    """``sentence`` with an opening pronoun replaced by the name ``before`` opens with ("She reports
    to Akira." after "Nadia Hussein joined." -> "Nadia Hussein reports to Akira."); else unchanged."""
    if before is None:
        return sentence
    first = sentence.split(" ", 1)
    word = first[0].casefold()
    if len(first) < 2 or word not in _SUBJECT_PRONOUNS | _POSSESSIVE_PRONOUNS:
        return sentence
    names = name_spans(before)
    opening = next((n for n in names if before.startswith(n) or before.find(n) <= 3), None)
    full = full_names(before)
    antecedent = full[0] if full and (opening is None or full[0].startswith(opening)) else opening
    if antecedent is None:
        return sentence
    return f"{antecedent}'s {first[1]}" if word in _POSSESSIVE_PRONOUNS else f"{antecedent} {first[1]}"


def _sentence_units(chunk: Chunk, parts: Sequence[str]) -> list[Chunk]:
    """One unit per sentence of ``chunk`` (``parts``), read with its antecedent (:func:`_with_antecedent`)."""
    units, cursor = [], 0
    for i, sentence in enumerate(parts):
        text = _with_antecedent(sentence, parts[i - 1] if i else None)
        offset = max(chunk.text.find(sentence, cursor), 0)
        cursor = offset + len(sentence)
        units.append(_unit(chunk, i, text, offset))
    return units


def passage_pieces(
    text: str, output: Mapping[str, Any], units_of: Callable[[Chunk], list[Chunk]]
) -> list[tuple[str, dict[str, Any]]]:
    """A labelled passage cut into the units a chunk is read in (``units_of``), each with the relations
    read from it and the entities it names, every name as that unit writes it (a short name stays short)."""
    units = units_of(inline_chunk(text, "example"))
    if len(units) <= 1:
        return [(text, dict(output))]
    aliases = name_aliases(text)

    def written(unit: str, name: str) -> str | None:
        forms = [name, *(short for short, full in aliases.items() if full == name)]
        for form in forms:
            if states_name(unit, form):
                return name if form == name else next(w for w in text_words(unit) if normalize_text(w) == form)
        return None

    # each relation goes to the unit it is read from: the first naming both ends and a word of the
    # relation, else the first naming both ends
    home: dict[int, int] = {}
    for i, item in enumerate(output.get("relations", [])):
        naming = [
            u
            for u, unit in enumerate(units)
            if written(unit.text, str(item["subject"]["name"])) is not None
            and written(unit.text, str(item["object"]["name"])) is not None
        ]
        worded = [u for u in naming if names_relation(units[u].text, str(item.get("label", "")))]
        if naming:
            home[i] = (worded or naming)[0]
    pieces: list[tuple[str, dict[str, Any]]] = []
    for u, unit in enumerate(units):
        relations = []
        for i, item in enumerate(output.get("relations", [])):
            if home.get(i) != u:
                continue
            subj = written(unit.text, str(item["subject"]["name"])) or ""
            obj = written(unit.text, str(item["object"]["name"])) or ""
            relations.append(
                {**item, "subject": {**item["subject"], "name": subj}, "object": {**item["object"], "name": obj}}
            )
        entities = []
        for entity in output.get("entities", []):
            name = written(unit.text, str(entity.get("name", "")))
            if name is not None:
                entities.append({**entity, "name": name})
        pieces.append((unit.text, {"entities": entities, "relations": relations}))
    return pieces


def _unit(chunk: Chunk, i: int, text: str, offset: int) -> Chunk:
    """The ``i``-th read unit of ``chunk``: ``text``, found at ``offset`` in the chunk's text."""
    return Chunk(
        id=f"{chunk.id}#{i}",
        document_id=chunk.document_id,
        index=chunk.index,
        text=text,
        start=chunk.start + offset,
        end=chunk.start + offset + len(text),
    )
