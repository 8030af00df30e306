"""Searches one edit away from a search: what an optimizer tries when a question failed.

Per pattern: either direction, the sides swapped (the relation read the other way), the negation and
the count flipped; where the retriever may chain more patterns, the chain one pattern longer at
either end. Only edits that can be planned are returned (``validate``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kag.datamodels.schema import GraphSchema

__all__ = ["longer_chains", "search_variants", "swapped"]


def search_variants(
    search: Mapping[str, Any], schema: GraphSchema, max_hops: int, validate: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """Searches one edit away from ``search`` that ``validate`` accepts, each once (see the module doc)."""

    hops = [dict(h) for h in search["hops"]] if isinstance(search.get("hops"), list) else [dict(search)]
    candidates: list[dict[str, Any]] = []
    for i, hop in enumerate(hops):
        edits = [
            {"bidirectional": not hop.get("bidirectional", False)},
            swapped(hop),
            {"negated": not hop.get("negated", False)},
        ]
        if i == len(hops) - 1:
            edits.append({"count": not hop.get("count", False)})
        for edit in edits:
            changed = [dict(h) for h in hops]
            changed[i] = {**hop, **edit}
            candidates.append({"hops": changed} if "hops" in search else changed[0])
    candidates += [{"hops": longer} for longer in longer_chains(hops, schema, max_hops)]
    variants: list[dict[str, Any]] = []
    seen = {json.dumps(search, sort_keys=True)}
    for candidate in candidates:  # once each, and only what can run here
        key = json.dumps(candidate, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        try:
            validate(candidate)
        except ValueError:
            continue
        variants.append(candidate)
    return variants


def longer_chains(hops: list[dict[str, Any]], schema: GraphSchema, max_hops: int) -> list[list[dict[str, Any]]]:
    """The chain one pattern longer, at either end (see :func:`search_variants`)."""
    if len(hops) >= max_hops:
        return []
    first, last = hops[0], hops[-1]

    def plain(hop: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """``hop`` with ``fields``, no flags, and (where it has them) no conditions or ordering."""
        cleared: dict[str, Any] = {"subject_where": [], "object_where": [], "order_by": None, "limit": None}
        return {
            **hop,
            **{k: v for k, v in cleared.items() if k in hop},
            "negated": False,
            "bidirectional": False,
            "count": False,
            **fields,
        }

    out: list[list[dict[str, Any]]] = []
    named = first.get("subject_similarity_search", "*") != "*" and first.get("subject_label")
    for spec in schema.relations.values():
        if named and named in spec.subj_labels and named in spec.obj_labels:
            lead = plain(first, relation_label=spec.label, object_label=named, object_similarity_search="*")
            if "subject_where" in first:  # the named entity's own conditions stay with it
                lead["subject_where"] = first["subject_where"]
            then = {
                **first,
                "subject_similarity_search": "*",
                **({"subject_where": []} if "subject_where" in first else {}),
            }
            out.append([lead, then, *hops[1:]])
    asked = last.get("object_similarity_search", "*") == "*" and not last.get("count") and last.get("object_label")
    for spec in schema.relations.values():
        if asked and asked in spec.subj_labels:
            for label in spec.obj_labels:
                tail = plain(
                    last,
                    subject_label=asked,
                    subject_similarity_search="*",
                    relation_label=spec.label,
                    object_label=label,
                    object_similarity_search="*",
                )
                out.append([*hops, tail])
    return out


def swapped(hop: Mapping[str, Any]) -> dict[str, Any]:
    """The pattern read the other way: subject and object sides exchanged."""
    swapped = dict(hop)
    swapped["subject_label"], swapped["object_label"] = hop.get("object_label"), hop.get("subject_label")
    swapped["subject_similarity_search"] = hop.get("object_similarity_search", "*")
    swapped["object_similarity_search"] = hop.get("subject_similarity_search", "*")
    if "subject_where" in hop or "object_where" in hop:
        swapped["subject_where"], swapped["object_where"] = hop.get("object_where", []), hop.get("subject_where", [])
    order = hop.get("order_by")
    if isinstance(order, Mapping) and order.get("side") in ("subject", "object"):
        swapped["order_by"] = {**order, "side": "object" if order["side"] == "subject" else "subject"}
    return swapped
