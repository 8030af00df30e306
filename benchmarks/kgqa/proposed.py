"""Which language features a gold search uses beyond plain one-hop / path searches.

The KGQA questions were written before kag's triplet language had negated hops inside
chains, field conditions and ordering; each question lists the features its gold search
needs in ``extensions`` (kept so the dataset stays self-describing and the runner can
report them apart). kag now implements all of them with the same field names, so every
gold search is planned and run by ``kag.query.plan.plan_triplet_search`` /
``kb.triplet_search`` like any other.
"""

from __future__ import annotations

from typing import Any

EXTENSIONS = ("negated_hop", "where", "order_by", "symmetric")


def hops_of(search: dict[str, Any]) -> list[dict[str, Any]]:
    """The hops of a search dict (one hop for a plain search)."""
    return list(search["hops"]) if "hops" in search else [search]


def extensions_used(search: dict[str, Any]) -> list[str]:
    """The features beyond plain hops/paths that a search dict uses (``[]``: none)."""
    hops = hops_of(search)
    used = set()
    if len(hops) > 1 and any(h.get("negated") for h in hops):
        used.add("negated_hop")
    for h in hops:
        if h.get("subject_where") or h.get("object_where"):
            used.add("where")
        if h.get("order_by") is not None or h.get("limit") is not None:
            used.add("order_by")
    return sorted(used)
