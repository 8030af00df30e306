"""What the extraction model is shown and fills: the instructions, the schema described, the JSON schema.

The system message is :data:`INSTRUCTIONS` with :func:`describe_schema` (each label with its
docstring, each relation's direction and docstring, where its inverse reading is written); the
labelled passages follow as user/assistant turns, then the passage (:func:`extraction_messages`).
The answer fills :func:`extraction_schema`: labels are enums and every entity follows its model's
strict schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kag.datamodels.base import Relation
from kag.datamodels.documents import Chunk
from kag.datamodels.schema import GraphSchema, inline_refs, strict_schema
from kag.errors import SchemaError
from kag.lm.base import Message

__all__ = ["INSTRUCTIONS", "describe_schema", "extraction_messages", "extraction_schema", "relation_doc"]

INSTRUCTIONS = (
    "You extract a knowledge graph from a text passage. List the entities the passage states, "
    "each with its label and the fields its schema asks for, and the relations between them. "
    "A relation names its subject and object by label and name; both must also appear in "
    "`entities`. A person named in full and later by first name is one entity: use the full name. "
    "Read every sentence; a verb may state a relation the other way round, as each relation's "
    "description says. Only state what the passage says. Return JSON only."
)


def extraction_schema(schema: GraphSchema) -> dict[str, Any]:
    """The strict JSON schema the model fills for one chunk."""
    if not schema.entity_labels:
        raise SchemaError("KnowledgeExtractor needs at least one entity model.")
    entity_items = [strict_schema(model.model_json_schema()) for model in schema.entity_models]
    relation_items = []
    for spec in schema.relations.values():
        props = inline_refs(spec.model.model_json_schema()).get("properties", {})
        own = {k: v for k, v in props.items() if k not in ("subj", "obj", "label")}
        relation_items.append(
            {
                "type": "object",
                "description": (spec.model.__doc__ or spec.label).strip().splitlines()[0],
                "properties": {
                    "label": {"type": "string", "enum": [spec.label]},
                    "subject": _ref_schema(spec.subj_labels),
                    "object": _ref_schema(spec.obj_labels),
                    **own,
                },
            }
        )
    relations: dict[str, Any] = {"type": "array", "items": {"anyOf": relation_items}}
    if not relation_items:
        relations = {"type": "array", "maxItems": 0, "items": {"type": "object", "properties": {}}}
    return strict_schema(
        {
            "type": "object",
            # relations first: a small model that lists every entity first often closes the answer there
            "properties": {
                "relations": relations,
                "entities": {"type": "array", "items": {"anyOf": entity_items}},
            },
        }
    )


def _ref_schema(labels: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(labels)},
            "name": {"type": "string", "description": "The entity's name, as listed in `entities`."},
        },
    }


def relation_doc(model: type[Relation]) -> str:
    """A relation model's own docstring, on one line ('' for none)."""
    doc = model.__doc__ or ""
    if doc == Relation.__doc__:
        return ""
    return " ".join(doc.split())


def describe_schema(schema: GraphSchema) -> str:
    """The schema as the extraction prompt gives it: each label with its docstring, each relation's
    direction and docstring (where a relation's inverse reading is written)."""
    return schema.describe(relation_note=relation_doc)


def extraction_messages(system: str, chunk: Chunk, examples: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Message]:
    """The ``system`` message, each example as a user/assistant turn, then the passage as the user turn."""
    messages: list[Message] = [{"role": "system", "content": system}]
    for i, (text, output) in enumerate(examples):
        messages.append({"role": "user", "content": f"Passage (id example-{i}):\n{text}"})
        shown = {"relations": output.get("relations", []), "entities": output.get("entities", []), **output}
        messages.append({"role": "assistant", "content": json.dumps(shown, ensure_ascii=False)})
    messages.append({"role": "user", "content": f"Passage (id {chunk.id}):\n{chunk.text}"})
    return messages
