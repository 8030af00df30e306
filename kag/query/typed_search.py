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

__all__ = ["EXTENDED_FIELDS", "typed_triplet_chain_schema", "typed_triplet_search_schema", "typed_variants"]

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


# the limits a grammar may write for order_by (llama.cpp's converter cannot bound an integer)
LIMITS = (1, 2, 3, 4, 5, 10, 20, 50, 100)


def _fields(schema: GraphSchema, labels: tuple[str, ...]) -> dict[str, str]:
    """The comparable fields every one of ``labels`` declares with one kind (none for ``"*"``)."""
    if not labels or ANY in labels:
        return {}
    kinds = [schema.field_kinds(label) for label in labels]
    return {name: kind for name, kind in kinds[0].items() if all(k.get(name) == kind for k in kinds[1:])}


def _conditions(prop: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """A ``*_where`` list whose items name only ``fields``, each with a value of its kind."""
    desc = prop.get("description", "")
    if not fields:
        return {"type": "array", "items": prop["items"], "maxItems": 0, "description": desc}
    base = prop["items"]
    items = []
    for name, kind in fields.items():
        item = copy.deepcopy(base)
        item.pop("description", None)
        item["properties"]["field"] = {"type": "string", "enum": [name]}
        item["properties"]["value"] = {"type": "string"} if kind == "str" else {"type": "number"}
        items.append(item)
    return {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}, "description": desc}


def _order(side: str, fields: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "side": {"type": "string", "enum": [side]},
            "field": {"type": "string", "enum": list(fields)},
            "direction": {"type": "string", "enum": ["asc", "desc"]},
        },
        "required": ["side", "field", "direction"],
        "additionalProperties": False,
    }


# the fields added to the triplet language after its first eight (chains on one entity, field
# conditions, ordering); each has a default that keeps the old meaning
EXTENDED_FIELDS = ("subject_from", "subject_where", "object_where", "order_by", "limit")


def typed_triplet_search_schema(schema: GraphSchema, *, full: bool = False) -> dict[str, Any]:
    """A strict TripletSearch schema as a union of endpoint-typed variants (see module doc).

    ``full=False`` (the default) leaves out :data:`EXTENDED_FIELDS`: a small model under a
    grammar fills free-form condition lists with repetitions until the token limit, and the
    answer's omitted fields take their defaults. ``full=True`` narrows those fields as well
    (condition fields per label, values of the field's kind, ``order_by`` and ``limit`` together).
    """
    base = triplet_search_schema(schema)
    if not full:
        for name in EXTENDED_FIELDS:
            base["properties"].pop(name)
        base["required"] = [r for r in base["required"] if r not in EXTENDED_FIELDS]
    # each field's description is said once, at the root, not once per variant: the schema of a graph
    # of ordinary size stays readable (and small, where a prompt shows it)
    described = {name: prop.get("description", "") for name, prop in base["properties"].items()}
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
        if not full:
            variants.append(_undescribed(variant))
            continue
        subject_fields = _fields(schema, (subject,))
        object_fields = _fields(schema, objects)
        props["subject_where"] = _conditions(props["subject_where"], subject_fields)
        props["object_where"] = _conditions(props["object_where"], object_fields)
        # order_by and limit come together or not at all (the planner's cross-field rule)
        unordered = copy.deepcopy(variant)
        unordered["properties"]["order_by"] = {"type": "null"}
        unordered["properties"]["limit"] = {"type": "null"}
        variants.append(_undescribed(unordered))
        orders = [("subject", subject_fields), ("object", object_fields)]
        options = [_order(side, fields) for side, fields in orders if fields]
        if options:
            ordered = copy.deepcopy(variant)
            ordered["properties"]["order_by"] = {"anyOf": options}
            ordered["properties"]["limit"] = {"type": "integer", "enum": list(LIMITS)}
            variants.append(_undescribed(ordered))
    # no "type" at the root: strict_schema would close an object node that has no
    # properties of its own; the variants are closed objects
    fields = "\n".join(f"- {name}: {text}" for name, text in described.items() if text)
    description = f"{base.get('description', '')}\nFields (every variant):\n{fields}".strip()
    typed: dict[str, Any] = strict_schema(
        {"title": base.get("title", "TripletSearch"), "description": description, "anyOf": variants}
    )
    return typed


def _undescribed(node: Any) -> Any:
    """``node`` without its ``description`` keys, at any depth (they are said once, at the root)."""
    if isinstance(node, dict):
        return {k: _undescribed(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_undescribed(v) for v in node]
    return node


def typed_triplet_chain_schema(schema: GraphSchema, max_hops: int, *, full: bool = False) -> dict[str, Any]:
    """A chain of 1..max_hops typed searches (joins between hops are left to the planner)."""
    item = typed_triplet_search_schema(schema, full=full)
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
