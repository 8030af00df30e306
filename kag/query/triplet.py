"""``TripletSearch``: the structured query a language model fills.

The model picks labels from dynamic enums built from the declared schema and
writes free text for the similarity sides; logic flags select negation,
direction and counting. ``TripletChain`` joins several searches into a path.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kag.datamodels.base import DataModel
from kag.datamodels.schema import ANY, GraphSchema, dynamic_enum, strict_schema


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


class TripletChain(DataModel):
    """A path of triplet searches: hop i's object is hop i+1's subject."""

    hops: list[TripletSearch] = Field(
        description="One to N triplet searches; each hop's object is the next hop's subject."
    )


def triplet_search_schema(schema: GraphSchema) -> dict[str, Any]:
    """The strict, self-contained JSON schema of a TripletSearch over ``schema``'s labels."""
    base = TripletSearch.model_json_schema()
    entity_desc = 'Entity label: one of the declared labels, or "*" for any.'
    base = dynamic_enum(base, "subject_label", schema.entity_labels, entity_desc)
    base = dynamic_enum(base, "object_label", schema.entity_labels, entity_desc)
    rel_desc = "Relation label (subject -> object): " + "; ".join(
        f"{s.label}: {'|'.join(s.subj_labels)} -> {'|'.join(s.obj_labels)}" for s in schema.relations.values()
    )
    base = dynamic_enum(base, "relation_label", schema.relation_labels, rel_desc)
    base["title"] = "TripletSearch"
    base["description"] = "Search the knowledge graph for (subject)-[relation]->(object) facts."
    return strict_schema(base)


def triplet_chain_schema(schema: GraphSchema, max_hops: int) -> dict[str, Any]:
    """Strict schema of a chain of 1..max_hops triplet searches."""
    item = triplet_search_schema(schema)
    return strict_schema(
        {
            "type": "object",
            "description": (
                f"A path of 1 to {max_hops} triplet searches joined on shared entities: "
                "the object of hop i is the subject of hop i+1."
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
