"""A model's extraction checked against its passage: what the passage writes, states and supports.

:func:`validate_extraction` reads the model's answer as entities and relations: a name the passage
does not write is refused (the model is asked to repair it), a value it does not state is dropped,
and an entity or relation listed again is listed once. Each relation is then held to the sentence it
is read from (:func:`supported_label`); what a guard refuses is kept on the relation under the
internal keys below, reported when the chunk is written, never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kag.datamodels.base import Entity
from kag.datamodels.schema import GraphSchema
from kag.errors import InvalidInputError, SchemaError
from kag.programs.extraction_report import NO_SHARED_SENTENCE, SAME_ENTITY, UNSTATED_NAME, EntityRef
from kag.programs.stated import is_stated, name_aliases, names_relation, states_name, supporting_sentence
from kag.text import normalize_text

__all__ = ["Extracted", "supported_label", "validate_extraction"]

# the keys a validated relation carries besides its own fields (never written, never shown to the model)
UNSTATED = "_unstated"  # a validated relation's endpoints that its passage does not name
UNSUPPORTED = "_unsupported"  # why no sentence of the passage supports a validated relation (or None)
GUARD = "_guard"  # the guard that refused a validated relation (or None)
PROPOSED = "_proposed"  # (label, subject, object) as the model proposed them
BY = "_by"  # who proposed a relation: "model", or "reading" (a verb of the relation between two names)
INTERNAL = (UNSTATED, UNSUPPORTED, GUARD, PROPOSED, BY)


@dataclass
class Extracted:
    """One chunk's validated model output."""

    chunk_id: str
    entities: list[Entity]
    relations: list[dict[str, Any]]
    units: int = 0  # model calls made for it (0: an output forced by training)


def validate_extraction(schema: GraphSchema, output: Mapping[str, Any], text: str) -> Extracted:
    """The model's answer for the passage ``text`` as entities and relations; a name the
    passage does not write is refused (repaired), a value it does not state is dropped, and
    an entity or relation listed again is listed once. A short name the passage uses for a
    full name it writes ("Tomasz" for "Tomasz Wiśniewski") is read as the full name."""
    aliases = name_aliases(text)
    entities: list[Entity] = []
    seen: set[tuple[str, str]] = set()
    for item in output.get("entities", []):
        model = schema.entity_model(item.get("label", ""))  # SchemaError is a ValueError: repaired
        name = str(item.get("name", ""))
        if not states_name(text, name):
            raise InvalidInputError(f"{item.get('label')} {name!r} is not a name the passage writes.")
        name = aliases.get(normalize_text(name), name)
        key = (model.model_fields["label"].default, normalize_text(name))
        if key in seen:
            continue
        seen.add(key)
        stated = {k: v for k, v in item.items() if v is not None and (k in ("label", "name") or is_stated(text, v))}
        entities.append(model.model_validate({**stated, "name": name}))
    relations = []
    listed: set[tuple[str, str, str, str, str]] = set()
    for item in output.get("relations", []):
        spec = schema.relation_spec(item.get("label", ""))
        proposed_subj = EntityRef.model_validate(item["subject"])
        proposed_obj = EntityRef.model_validate(item["object"])
        if proposed_subj.label not in spec.subj_labels or proposed_obj.label not in spec.obj_labels:
            raise SchemaError(
                f"{spec.label} links {'|'.join(spec.subj_labels)} -> {'|'.join(spec.obj_labels)}, "
                f"not {proposed_subj.label} -> {proposed_obj.label}."
            )
        # an endpoint the passage does not name is reported as unresolved, not stored
        unstated = [ref for ref in (proposed_subj, proposed_obj) if not states_name(text, ref.name)]
        subj, obj = (
            EntityRef(label=ref.label, name=aliases.get(normalize_text(ref.name), ref.name))
            for ref in (proposed_subj, proposed_obj)
        )
        label, unsupported, guard = spec.label, None, UNSTATED_NAME if unstated else None
        if not unstated:
            label, unsupported, guard = supported_label(schema, text, spec.label, subj, obj, aliases)
        triple = (label, subj.label, normalize_text(subj.name), obj.label, normalize_text(obj.name))
        if triple in listed:
            continue
        listed.add(triple)
        props = {k: v for k, v in item.items() if k in ("label", "subject", "object") or is_stated(text, v)}
        relations.append(
            {
                **props,
                "label": label,
                "subject": subj,
                "object": obj,
                UNSTATED: unstated,
                UNSUPPORTED: unsupported,
                GUARD: guard,
                PROPOSED: (spec.label, proposed_subj, proposed_obj),
                BY: item.get(BY, "model"),
            }
        )
    return Extracted("", entities, relations)


def supported_label(
    schema: GraphSchema,
    text: str,
    label: str,
    subj: EntityRef,
    obj: EntityRef,
    aliases: Mapping[str, str] | None = None,
) -> tuple[str, str | None, str | None]:
    """The relation label one sentence of ``text`` supports, why none does (or None), and the
    guard that refused it (or None).

    A relation is read from a sentence that names both its ends (two different names; a
    short name the passage uses for a full one counts), or that names one and refers to the
    other by a pronoun, named in the sentence before. Ends that never share a sentence, or
    one name on both sides, are reported, not stored. Where that sentence writes a word of
    another relation between the same kinds of entity and none of this one's ("Munich is a
    city in Germany" written as ``IsCapitalOf``), it is read as the relation the sentence
    names: a small model confuses relations that link the same labels far more often than it
    misreads the sentence's names.
    """
    if normalize_text(subj.name) == normalize_text(obj.name):
        return label, f"{subj.name!r} is on both sides of {label}", SAME_ENTITY
    shorts = aliases if aliases is not None else name_aliases(text)

    def forms(name: str) -> list[str]:
        return [name, *(short for short, full in shorts.items() if full == name)]

    sentence = supporting_sentence(text, forms(subj.name), forms(obj.name))
    if sentence is None:
        return (
            label,
            f"no sentence of the passage names both {subj.name!r} and {obj.name!r}",
            NO_SHARED_SENTENCE,
        )
    if names_relation(sentence, label):
        return label, None, None
    named = [
        other
        for other, spec in schema.relations.items()
        if other != label
        and subj.label in spec.subj_labels
        and obj.label in spec.obj_labels
        and names_relation(sentence, other)
    ]
    return (named[0] if len(named) == 1 else label), None, None
