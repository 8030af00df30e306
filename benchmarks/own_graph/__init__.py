"""Held-out graphs and labelled questions for learning a user's own graph (issue 44).

Two graphs unlike geography, each under its own models: ``"a"`` a software package ecosystem
(:mod:`benchmarks.own_graph.software`), ``"b"`` a university course catalogue
(:mod:`benchmarks.own_graph.university`); and ``"t"`` a film archive (:mod:`benchmarks.own_graph.film`),
a TUNING set that may be tuned on, unlike ``"a"`` and ``"b"``. Each has 8 kinds of labelled question (``KINDS``) and
questions outside its schema (kind ``"outside"``, answer ``[]``), split ``train`` (5 per kind) and
``test``. The questions are frozen in ``questions_<a|b|t>.json``; :func:`load` checks that the code
still generates exactly them. ``"a"`` and ``"b"`` are HELD OUT: see README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.own_graph import film, software, university
from benchmarks.own_graph.graph import KINDS, OUTSIDE, TRAIN_PER_KIND, OwnGraph, make_questions

__all__ = ["GRAPHS", "KINDS", "OUTSIDE", "TRAIN_PER_KIND", "OwnGraph", "generate", "graph", "load"]

GRAPHS = {"a": software, "b": university, "t": film}
HERE = Path(__file__).parent
SEED = 0


def graph(which: str) -> OwnGraph:
    """Graph ``"a"`` (software), ``"b"`` (university) or ``"t"`` (film archive, the tuning set)."""
    return GRAPHS[which].graph(SEED)


def generate(which: str) -> list[dict[str, Any]]:
    """The labelled questions of graph ``which``, generated from its rows (gold computed in code)."""
    module = GRAPHS[which]
    g = module.graph(SEED)
    return make_questions(g, module.templates(g), module.OUTSIDE, seed=SEED)


def load(which: str) -> tuple[OwnGraph, list[dict[str, Any]]]:
    """The graph and its frozen questions; raises if the generator no longer reproduces them."""
    frozen = json.loads((HERE / f"questions_{which}.json").read_text(encoding="utf-8"))
    if generate(which) != frozen:
        raise RuntimeError(f"questions_{which}.json no longer matches its generator: the held-out set was changed")
    return graph(which), frozen


def freeze(*names: str) -> None:
    """Write ``questions_<a|b|t>.json`` (all, or only ``names``). Done once, on 2026-12-07, for ``a``, ``b``
    and ``t``; rerunning it for ``a`` or ``b`` changes the held-out set."""
    for which in names or tuple(GRAPHS):
        text = json.dumps(generate(which), indent=1, ensure_ascii=False) + "\n"
        (HERE / f"questions_{which}.json").write_text(text, encoding="utf-8")
