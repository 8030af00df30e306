"""How a fact and a search pattern read as one line of text: the one place arrows are drawn.

``Paris -[IsCapitalOf]-> France`` for a relation read along its direction,
``France <-[IsCapitalOf]- Paris`` against it, ``-[Borders]-`` when either direction matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Direction = Literal["forward", "backward", "both"]


def arrow(label: str, direction: Direction = "forward") -> str:
    """The relation part of a line: ``-[Label]->``, ``<-[Label]-`` or ``-[Label]-``."""
    if direction == "forward":
        return f"-[{label}]->"
    if direction == "backward":
        return f"<-[{label}]-"
    return f"-[{label}]-"


def fact_line(subject: str, label: str, obj: str, direction: Direction = "forward") -> str:
    """``subject -[label]-> obj`` (or the other arrow forms)."""
    return f"{subject} {arrow(label, direction)} {obj}"


def properties_text(props: Mapping[str, Any]) -> str:
    """``key=value, ...`` of the set properties (empty values are left out)."""
    return ", ".join(f"{key}={value}" for key, value in props.items() if value not in (None, [], {}, ""))


def pattern_text(search: Mapping[str, Any] | None) -> str:
    """A triplet search (or ``{"hops": [...]}``) as one line: ``(City "*")-[IsCapitalOf]->(Country "France")``."""
    if not search:
        return "(none)"
    parts = []
    for i, hop in enumerate(search.get("hops", [search])):
        subj = f'({hop.get("subject_label", "*")} "{hop.get("subject_similarity_search", "*")}")'
        obj = f'({hop.get("object_label", "*")} "{hop.get("object_similarity_search", "*")}")'
        rel = arrow(hop.get("relation_label", "*"), "both" if hop.get("bidirectional") else "forward")
        flags = [f for f in ("negated", "count") if hop.get(f)]
        parts.append((subj if i == 0 else "") + rel + obj + (f" {{{', '.join(flags)}}}" if flags else ""))
    return "".join(parts)
