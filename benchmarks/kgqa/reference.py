"""A reference evaluator of (extended) triplet searches over ``countries.json``, independent of kag.

It reads the JSON itself, matches texts to names *exactly* (after folding accents and
case, aliases included, or through an explicit ``resolve`` map for misspellings), and
implements the semantics of ``kag/query/plan.py`` (negated hops in chains, field
conditions and ``order_by`` included) as ``README.md`` states them. The dataset tests
use it to check that every gold search, read with those semantics, yields its gold
answer: a check of the questions, not of kag.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.kgqa.make_questions import DATA, fold
from benchmarks.kgqa.proposed import hops_of

ANY = "*"
Node = tuple[str, str]  # (label, name)


@dataclass
class Graph:
    """Nodes with their properties and names; edges by relation type."""

    props: dict[Node, dict[str, Any]] = field(default_factory=dict)
    keys: dict[Node, set[str]] = field(default_factory=dict)  # folded names and aliases
    edges: list[tuple[str, Node, Node]] = field(default_factory=list)
    out: dict[Node, list[int]] = field(default_factory=lambda: defaultdict(list))
    into: dict[Node, list[int]] = field(default_factory=lambda: defaultdict(list))

    def node(self, label: str, name: str, aliases: list[str] | None = None, **props: Any) -> Node:
        key = (label, name)
        self.props[key] = props
        self.keys[key] = {fold(name), *(fold(a) for a in aliases or [])}
        return key

    def edge(self, rel: str, subj: Node, obj: Node) -> None:
        self.edges.append((rel, subj, obj))
        self.out[subj].append(len(self.edges) - 1)
        self.into[obj].append(len(self.edges) - 1)

    @classmethod
    def load(cls, path: Path = DATA) -> Graph:
        raw = json.loads(path.read_text(encoding="utf-8"))
        g = cls()
        continents = {n: g.node("Continent", n) for n in raw["continents"]}
        regions = {n: g.node("Region", n) for n in raw["regions"]}
        currencies = {c["code"]: g.node("Currency", c["name"]) for c in raw["currencies"]}
        languages = {x["code"]: g.node("Language", x["name"], x.get("other_names")) for x in raw["languages"]}
        countries = {}
        for c in raw["countries"]:
            aliases = [c.get("official_name") or "", *c["other_names"], *c["translations"].values()]
            n = g.node("Country", c["name"], [a for a in aliases if a], population=c["population"], area=c["area"])
            countries[c["iso"]] = n
            g.edge("IsInContinent", n, continents[c["continent"]])
            if c["region"]:
                g.edge("IsInRegion", n, regions[c["region"]])
            for code in c["currencies"]:
                g.edge("UsesCurrency", n, currencies[code])
            for code in c["languages"]:
                g.edge("SpeaksLanguage", n, languages[code])
        capital = {c["iso"]: c["capital"] for c in raw["countries"]}
        for c in raw["cities"]:
            n = g.node("City", c["name"], c.get("other_names"), population=c["population"])
            g.edge("IsCityOf", n, countries[c["country"]])
            if capital[c["country"]] == c["name"]:
                g.edge("IsCapitalOf", n, countries[c["country"]])
        for p in raw["provinces"]:
            g.edge("IsProvinceOf", g.node("Province", p["name"]), countries[p["country"]])
        for a, b in raw["borders"]:
            g.edge("Borders", countries[a], countries[b])
        return g


def _passes(value: Any, op: str, bound: float) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return {
        "=": value == bound,
        "!=": value != bound,
        "<": value < bound,
        "<=": value <= bound,
        ">": value > bound,
        ">=": value >= bound,
    }[op]


class Evaluator:
    """Evaluates search dicts on a :class:`Graph` (exact name matching)."""

    def __init__(self, graph: Graph) -> None:
        self.g = graph

    def _matches(
        self, node: Node, label: str, text: str, conditions: list[dict[str, Any]], resolve: Mapping[str, str]
    ) -> bool:
        if label != ANY and node[0] != label:
            return False
        if text != ANY:
            target = resolve.get(text)
            if target is not None:
                if node[1] != target:
                    return False
            elif fold(text) not in self.g.keys[node]:
                return False
        props = self.g.props[node]
        return all(_passes(props.get(c["field"]), c["op"], float(c["value"])) for c in conditions)

    def _steps(self, node: Node, h: dict[str, Any]) -> list[tuple[int, Node]]:
        """(edge index, far node) for the relationships a hop may follow from ``node``."""
        rel = h["relation_label"]
        found = [(i, self.g.edges[i][2]) for i in self.g.out[node] if rel in (ANY, self.g.edges[i][0])]
        if h["bidirectional"]:
            found += [(i, self.g.edges[i][1]) for i in self.g.into[node] if rel in (ANY, self.g.edges[i][0])]
        return found

    def rows(self, search: dict[str, Any], resolve: Mapping[str, str] | None = None) -> list[list[Node]]:
        """Every matching path (a negated hop filters the node it starts from; it adds no position)."""
        resolve = resolve or {}
        hops = hops_of(search)
        first = hops[0]
        starts = [
            n
            for n in self.g.props
            if self._matches(
                n, first["subject_label"], first["subject_similarity_search"], first.get("subject_where", []), resolve
            )
        ]
        paths: list[tuple[list[Node], set[int]]] = [([n], set()) for n in starts]
        for i, h in enumerate(hops):
            if i > 0:  # the joined node must also fit this hop's subject side
                paths = [
                    (p, used)
                    for p, used in paths
                    if self._matches(
                        p[-1], h["subject_label"], h["subject_similarity_search"], h.get("subject_where", []), resolve
                    )
                ]

            def fits(far: Node, h: dict[str, Any] = h) -> bool:
                return self._matches(
                    far, h["object_label"], h["object_similarity_search"], h.get("object_where", []), resolve
                )

            if h["negated"]:
                paths = [(p, used) for p, used in paths if not any(fits(far) for _, far in self._steps(p[-1], h))]
                continue
            grown = []
            for p, used in paths:
                for edge, far in self._steps(p[-1], h):
                    if edge not in used and fits(far):
                        grown.append(([*p, far], used | {edge}))
            paths = grown
        result = [p for p, _ in paths]
        for i, h in enumerate(hops):
            spec = h.get("order_by")
            if spec is not None:
                # the hop's subject is position i, its object i + 1 (no negated hop precedes an ordered one here)
                pos = i if spec["side"] == "subject" else i + 1
                desc = spec["direction"] == "desc"

                def value(p: list[Node], pos: int = pos, fieldname: str = spec["field"]) -> float | None:
                    v = self.g.props[p[pos]].get(fieldname)
                    return None if v is None else float(v)

                known = [p for p in result if value(p) is not None]
                unknown = [p for p in result if value(p) is None]
                known.sort(key=lambda p: value(p) or 0.0, reverse=desc)
                result = known + unknown
            if h.get("limit") is not None:
                result = result[: int(h["limit"])]
        return result

    def answer(
        self, search: dict[str, Any], node: int | None, resolve: Mapping[str, str] | None = None
    ) -> int | set[str]:
        """The row count of a counting search, else the names at path position ``node``."""
        rows = self.rows(search, resolve)
        if any(h["count"] for h in hops_of(search)):
            return len(rows)
        assert node is not None
        return {p[node][1] for p in rows}
