"""The schema a retriever's prompt describes, bounded by the question for a small-context model.

:func:`describe_schema` writes the labels, relations and entity fields; given a ``focus`` (the
labels and relations the shown demos use, the labels the question's names link to, and the
relations touching them: :func:`prompt_focus`), only those are described in full and every other
one is named in a short line. The grammar still allows every label and relation, so the search stays
valid; the prompt stays about the same size on a schema of 6 labels or of 40.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from kag.datamodels.base import Entity
from kag.datamodels.schema import GraphSchema

__all__ = ["describe_schema", "prompt_focus"]


def describe_schema(schema: GraphSchema, focus: set[str] | None = None) -> str:
    """The labels, relations and entity fields; with ``focus``, only those named in it in full and
    every other one as a short line (a prompt bounded by the question, not by the schema)."""
    if focus is None:
        lines = [schema.describe(), "Entity fields:"]
        lines += [f"- {label}: {_fields_text(model)}" for label, model in schema.entities.items()]
        return "\n".join(lines)
    shown = [label for label in schema.entities if label in focus]
    lines = ["Entity labels:"]
    for label in shown:
        model = schema.entities[label]
        doc = (model.__doc__ or "").strip().splitlines()
        lines.append(f"- {label}" + (f": {doc[0]}" if doc and model.__doc__ != Entity.__doc__ else ""))
    rest = [label for label in schema.entities if label not in focus]
    if rest:
        lines.append("- others: " + ", ".join(rest))
    lines.append("Relation labels (subject -> object):")
    for label, spec in schema.relations.items():
        if label in focus:
            doc = (spec.model.__doc__ or "").strip().splitlines()
            lines.append(f"- {label}: {spec.arrow()}" + (f" ({doc[0]})" if doc and doc[0] else ""))
    # the others by name: the grammar keeps their endpoints right if the model picks one
    others = [label for label in schema.relations if label not in focus]
    if others:
        lines.append("- others: " + ", ".join(others))
    if shown:
        lines.append("Entity fields:")
        lines += [f"- {label}: {_fields_text(schema.entities[label])}" for label in shown]
    return "\n".join(lines)


def prompt_focus(
    schema: GraphSchema, demo_hops: Iterable[Sequence[Mapping[str, Any]]], linked: Mapping[str, Sequence[str]]
) -> set[str]:
    """The labels and relations described in full: those the demos' hops use, the labels the question's
    names link to (``linked``: label -> spans), and every relation touching those labels."""
    focus: set[str] = set(linked)
    for hops in demo_hops:
        for hop in hops:
            focus.update(str(hop.get(k)) for k in ("subject_label", "relation_label", "object_label"))
    for label, spec in schema.relations.items():
        if set(linked) & (set(spec.subj_labels) | set(spec.obj_labels)):
            focus.add(label)
    return focus


def _fields_text(model: type[BaseModel]) -> str:
    """``name (description), ...`` of an entity model's fields, ``label`` left out."""
    parts = []
    for field_name, info in model.model_fields.items():
        if field_name != "label":
            parts.append(f"{field_name} ({info.description})" if info.description else field_name)
    return ", ".join(parts)
