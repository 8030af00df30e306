"""Triplet-search schemas whose every instance names relations with fitting endpoint types.

``triplet_search_schema`` lets each label be any declared label, so a model can
write ``City -[IsCapitalOf]-> City``: the JSON is schema-valid but the search
cannot be planned, and the repair loop has to ask again. Small local models
do this most of the time. The *typed* schema here is a union (``anyOf``) of
variants, one per subject label and direction, each listing only the
relations and object labels that fit; the variants are found by asking
:func:`~kag.query.plan.plan_triplet_search` itself, so they agree with the
planner by construction. Every instance of a typed schema is also an instance
of the plain strict schema (same properties, narrower enums).

Under grammar-constrained decoding (:class:`kag.lm.llamacpp.LlamaCppLM`) this
makes a single search valid on the first try. Chains still rely on the repair
loop for the joins between hops (hop i's object label must meet hop i+1's
subject label). OpenAI strict mode rejects ``anyOf`` at the root, so HTTP
models keep using the plain schema.
"""

from __future__ import annotations

import copy
from typing import Any

from kag.datamodels.schema import ANY, GraphSchema, strict_schema
from kag.errors import SchemaError
from kag.query.plan import plan_triplet_search
from kag.query.triplet import triplet_search_schema

__all__ = ["typed_triplet_chain_schema", "typed_triplet_search_schema", "typed_variants"]

_PROBE = "x"  # any non-"*" text: planning only looks at labels here


def _plans(schema: GraphSchema, subject: str, relation: str, obj: str, bidirectional: bool) -> bool:
    search = {
        "subject_label": subject,
        "subject_similarity_search": _PROBE,
        "relation_label": relation,
        "object_label": obj,
        "object_similarity_search": _PROBE,
        "negated": False,
        "bidirectional": bidirectional,
        "count": False,
    }
    try:
        plan_triplet_search(search, schema)
    except ValueError:  # SchemaError / InvalidInputError: this combination cannot be planned
        return False
    return True


def typed_variants(schema: GraphSchema) -> list[tuple[str, tuple[str, ...], tuple[str, ...], bool]]:
    """``(subject_label, relation_labels, object_labels, bidirectional)`` rectangles that plan.

    For each subject label (``"*"`` included) and direction, relations are grouped
    by the set of object labels they accept, so the union stays small.
    """
    entities = [*schema.entity_labels, ANY]
    relations = [*schema.relation_labels, ANY]
    variants: list[tuple[str, tuple[str, ...], tuple[str, ...], bool]] = []
    for bidirectional in (False, True):
        for subject in entities:
            groups: dict[tuple[str, ...], list[str]] = {}
            for relation in relations:
                objects = tuple(o for o in entities if _plans(schema, subject, relation, o, bidirectional))
                if objects:
                    groups.setdefault(objects, []).append(relation)
            variants.extend((subject, tuple(rels), objects, bidirectional) for objects, rels in groups.items())
    if not variants:
        raise SchemaError("no relation of the schema can be searched: declare at least one relation model.")
    return variants


def typed_triplet_search_schema(schema: GraphSchema) -> dict[str, Any]:
    """A strict TripletSearch schema as a union of endpoint-typed variants (see module doc)."""
    base = triplet_search_schema(schema)
    variants = []
    for subject, relations, objects, bidirectional in typed_variants(schema):
        variant = copy.deepcopy(base)
        variant.pop("title", None)
        variant.pop("description", None)
        props = variant["properties"]
        props["subject_label"] = {**props["subject_label"], "enum": [subject]}
        props["relation_label"] = {**props["relation_label"], "enum": list(relations)}
        props["object_label"] = {**props["object_label"], "enum": list(objects)}
        props["bidirectional"] = {**props["bidirectional"], "enum": [bidirectional]}
        variants.append(variant)
    # no "type" at the root: strict_schema would close an object node that has no
    # properties of its own; the variants are closed objects
    typed: dict[str, Any] = strict_schema(
        {"title": base.get("title", "TripletSearch"), "description": base.get("description", ""), "anyOf": variants}
    )
    return typed


def typed_triplet_chain_schema(schema: GraphSchema, max_hops: int) -> dict[str, Any]:
    """A chain of 1..max_hops typed searches (joins between hops are left to the planner)."""
    item = typed_triplet_search_schema(schema)
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
