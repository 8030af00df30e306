"""``TripletSearch``: the structured query a language model fills.

The model picks labels from dynamic enums built from the declared schema and
writes free text for the similarity sides; logic flags select negation,
direction and counting. ``TripletChain`` joins several searches: by default a
path (hop i's object is hop i+1's subject); ``subject_from="first_subject"``
puts another constraint on the chain's first subject instead. ``subject_where``
/ ``object_where`` compare declared fields; ``order_by`` + ``limit`` ask for
superlatives. Every new field has a default that keeps the old meaning.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictFloat, StrictInt

from kag.datamodels.base import DataModel
from kag.datamodels.schema import ANY, GraphSchema, dynamic_enum, strict_schema

Operator = Literal["=", "!=", "<", "<=", ">", ">="]
SubjectFrom = Literal["previous_object", "first_subject"]
# conditions per side: enough for any question, and a bound a grammar can enforce (a small model
# under a grammar otherwise repeats list items until its token limit)
MAX_CONDITIONS = 4


class Condition(DataModel):
    """A condition (field, op, value) on one side's entity; an entity without the field never passes."""

    field: str = Field(description="A declared field of the side's entity label.")
    op: Operator = Field(description="The comparison: =, !=, <, <=, >, >=.")
    value: StrictInt | StrictFloat | str = Field(
        description="What the field is compared with: a number for a numeric field, a string for a text field."
    )


class OrderBy(DataModel):
    """Order the rows by a declared field of one side's entity (entities without it come last)."""

    side: Literal["subject", "object"] = Field(description="Whose field orders the rows: subject's or object's.")
    field: str = Field(description="A declared field of that side's entity label.")
    direction: Literal["asc", "desc"] = Field(description="asc: smallest first; desc: largest first.")


class TripletSearch(DataModel):
    """One (subject)-[relation]->(object) pattern with similarity text on both ends."""

    subject_label: str = Field(default=ANY, description='The label of the subject entity, or "*" for any entity.')
    subject_similarity_search: str = Field(
        default=ANY,
        description='Text to match the subject by similarity (e.g. its name), or "*" to match any.',
    )
    relation_label: str = Field(
        default=ANY, description='The relation between subject and object, or "*" for any relation.'
    )
    object_label: str = Field(default=ANY, description='The label of the object entity, or "*" for any entity.')
    object_similarity_search: str = Field(
        default=ANY,
        description='Text to match the object by similarity (e.g. its name), or "*" to match any.',
    )
    negated: bool = Field(
        default=False,
        description="True to find subjects that do NOT have this relation to a matching object.",
    )
    bidirectional: bool = Field(default=False, description="True to match the relation in either direction.")
    count: bool = Field(default=False, description="True to return the number of matches instead of the matches.")
    subject_from: SubjectFrom = Field(
        default="previous_object",
        description=(
            "In a chain, where this hop's subject comes from: previous_object (the object the chain has "
            "reached, a path) or first_subject (hop 1's subject: another condition on the same entity). "
            "Ignored on hop 1."
        ),
    )
    subject_where: list[Condition] = Field(
        default=[],
        max_length=MAX_CONDITIONS,
        description="Conditions on declared fields the subject must pass ([] for none).",
    )
    object_where: list[Condition] = Field(
        default=[],
        max_length=MAX_CONDITIONS,
        description="Conditions on declared fields the object must pass ([] for none).",
    )
    order_by: OrderBy | None = Field(
        default=None, description="Order the results by a field (e.g. most populous first), or null."
    )
    limit: int | None = Field(
        default=None, description="With order_by: keep only this many first results (1 for 'the most ...'), or null."
    )


class TripletChain(DataModel):
    """Triplet searches joined on shared entities (a path, or several conditions on the first subject)."""

    hops: list[TripletSearch] = Field(
        description=(
            "One to N triplet searches; each hop's subject is the previous hop's object, or the first "
            "hop's subject when subject_from is first_subject."
        )
    )


def triplet_search_schema(schema: GraphSchema) -> dict[str, Any]:
    """The strict, self-contained JSON schema of a TripletSearch over ``schema``'s labels."""
    base = TripletSearch.model_json_schema()
    entity_desc = 'Entity label: one of the declared labels, or "*" for any.'
    base = dynamic_enum(base, "subject_label", schema.entity_labels, entity_desc)
    base = dynamic_enum(base, "object_label", schema.entity_labels, entity_desc)
    rel_desc = "Relation label (subject -> object): " + "; ".join(
        f"{s.label}: {s.arrow()}" for s in schema.relations.values()
    )
    base = dynamic_enum(base, "relation_label", schema.relation_labels, rel_desc)
    base["title"] = "TripletSearch"
    base["description"] = "Search the knowledge graph for (subject)-[relation]->(object) facts."
    strict = strict_schema(base)
    _field_enums(strict, schema)
    return strict


def _field_enums(strict: dict[str, Any], schema: GraphSchema) -> None:
    """Turn the ``field`` of conditions and of ``order_by`` into an enum of the declared fields."""
    fields = schema.filterable_fields()
    names = list(fields) or [ANY]  # an enum needs a value; "*" is refused by the planner
    desc = "A declared field: " + (
        "; ".join(f"{name} ({'|'.join(labels)})" for name, labels in fields.items()) or "none is declared"
    )
    field_schema = {"type": "string", "enum": names, "description": desc}
    props = strict["properties"]
    for side in ("subject_where", "object_where"):
        item = props[side]["items"]["properties"]
        item["field"] = dict(field_schema)
        # a JSON number or string; the planner checks it against the field's declared type
        item["value"] = {"anyOf": [{"type": "number"}, {"type": "string"}], "description": item["value"]["description"]}
    for variant in props["order_by"]["anyOf"]:
        if variant.get("type") == "object":
            variant["properties"]["field"] = dict(field_schema)


def triplet_chain_schema(schema: GraphSchema, max_hops: int) -> dict[str, Any]:
    """Strict schema of a chain of 1..max_hops triplet searches."""
    item = triplet_search_schema(schema)
    return strict_schema(
        {
            "type": "object",
            "description": (
                f"1 to {max_hops} triplet searches joined on shared entities: the object of hop i is the "
                "subject of hop i+1, or, with subject_from first_subject, hop 1's subject is."
            ),
            "properties": {
                "hops": {
                    "type": "array",
                    "items": item,
                    "minItems": 1,
                    "maxItems": max_hops,
                    "description": "The hops, in path order.",
                }
            },
        }
    )
