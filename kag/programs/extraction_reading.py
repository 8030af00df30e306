"""Relations read from a passage's own words, beside the model's: proposed, and held against its relations.

A small model labels names far better than it pairs them. :class:`RelationReader` proposes the
relations a clause states with a verb of the relation's label or docstring between two names the
model listed (:func:`kag.programs.stated.read_relations`), marked ``by: reading``; and
:func:`check_against_reading` refuses a model's relation where the sentence it is read from writes
that relation's words between other names (``reading_disagrees``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kag.datamodels.schema import GraphSchema
from kag.programs.extraction_guards import BY, GUARD, UNSTATED, UNSUPPORTED, Extracted
from kag.programs.extraction_prompt import relation_doc
from kag.programs.extraction_report import READING_DISAGREES
from kag.programs.stated import (
    name_aliases,
    named_by_noun,
    read_relations,
    relation_cues,
    states_name,
    supporting_sentence,
)
from kag.text import normalize_text, split_identifier

__all__ = ["RelationReader", "check_against_reading"]


@dataclass(frozen=True)
class RelationReader:
    """What reading needs of a schema: each relation's cue words and end labels, each label's noun."""

    labels: tuple[str, ...]
    cues: Mapping[str, tuple[frozenset[str], frozenset[str]]]  # (forward, inverse) verb stems
    ends: Mapping[str, tuple[Sequence[str], Sequence[str]]]
    nouns: Mapping[str, str]  # a label's noun ("team" for Team), for each label of one word

    @classmethod
    def of(cls, schema: GraphSchema) -> RelationReader:
        """The reader of ``schema``'s relations."""
        label_words = [w for label in schema.entity_labels for w in split_identifier(label)]
        return cls(
            labels=tuple(schema.entity_labels),
            cues={
                label: relation_cues(label, relation_doc(spec.model), label_words)
                for label, spec in schema.relations.items()
            },
            ends={label: (spec.subj_labels, spec.obj_labels) for label, spec in schema.relations.items()},
            nouns={label.casefold(): label for label in schema.entity_labels if len(split_identifier(label)) == 1},
        )

    def propose(self, text: str, chunk_text: str, output: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Relations ``text`` states by a relation's own words between names ``output`` labelled
        (:func:`kag.programs.stated.read_relations`), as proposals marked ``by: reading``."""
        names: dict[str, tuple[str, str]] = {}
        labelled = [*output.get("entities", [])]
        for item in output.get("relations", []):
            labelled += [item.get("subject", {}), item.get("object", {})]
        aliases = name_aliases(chunk_text)
        for item in labelled:
            label, name = str(item.get("label", "")), str(item.get("name", ""))
            if label not in self.labels or not states_name(chunk_text, name):
                continue
            full = aliases.get(normalize_text(name), name)
            names.setdefault(normalize_text(full), (full, label))
        # a name written right before a label's noun ("the Safety team") has that label
        for name, label in named_by_noun(chunk_text, self.nouns).items():
            full = aliases.get(normalize_text(name), name)
            names[normalize_text(full)] = (full, label)
        for short, full in aliases.items():
            if normalize_text(full) in names:
                names.setdefault(short, names[normalize_text(full)])
        found = read_relations(text, names, self.cues, self.ends)
        return [
            {
                "label": label,
                "subject": {"label": s_label, "name": s_name},
                "object": {"label": o_label, "name": o_name},
                BY: "reading",
            }
            for label, s_name, s_label, o_name, o_label in found
        ]


def check_against_reading(extracted: Extracted, text: str, reading: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a model's relation where the reading found that relation between other names in the
    sentence it is read from (``reading_disagrees``): there the sentence's own words say which pairs
    they join."""
    aliases = name_aliases(text)

    def full(name: str) -> str:
        return normalize_text(aliases.get(normalize_text(name), name))

    def forms(name: str) -> list[str]:
        return [name, *(short for short, full in aliases.items() if full == name)]

    read = {(r["label"], full(r["subject"]["name"]), full(r["object"]["name"])) for r in reading}
    # the sentences each relation was read from: there the reading knows which pairs the words join
    read_in = {
        (
            r["label"],
            supporting_sentence(
                text,
                forms(aliases.get(normalize_text(r["subject"]["name"]), r["subject"]["name"])),
                forms(aliases.get(normalize_text(r["object"]["name"]), r["object"]["name"])),
            ),
        )
        for r in reading
    }

    for item in extracted.relations:
        if item.get(BY) == "reading" or item[UNSTATED] or item[UNSUPPORTED]:
            continue
        key = (item["label"], full(item["subject"].name), full(item["object"].name))
        if key in read:
            continue
        sentence = supporting_sentence(text, forms(item["subject"].name), forms(item["object"].name))
        if sentence is not None and (item["label"], sentence) in read_in:
            item[GUARD] = READING_DISAGREES
            item[UNSUPPORTED] = (
                f"the sentence writes {item['label']}'s words but not between "
                f"{item['subject'].name!r} and {item['object'].name!r}"
            )
