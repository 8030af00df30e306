"""docs/architecture.md names only files and folders that exist: the map stays true to the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def test_every_path_the_architecture_doc_names_exists() -> None:
    named = sorted(set(re.findall(r"`(kag/[A-Za-z0-9_./]*)`", DOC.read_text(encoding="utf-8"))))
    assert len(named) > 40  # the doc really maps the code
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_the_architecture_doc_names_imports() -> None:
    import importlib

    text = DOC.read_text(encoding="utf-8")
    modules = sorted(set(re.findall(r"`(kag(?:\.[a-z_][a-z0-9_]*)+)`", text)))
    assert len(modules) > 20
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            # a dotted name may end in an attribute ("kag.query.plan.plan_triplet_search")
            parent, _, attr = name.rpartition(".")
            try:
                if not hasattr(importlib.import_module(parent), attr):
                    missing.append(name)
            except ModuleNotFoundError:
                missing.append(name)
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"
