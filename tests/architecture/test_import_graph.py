"""The import graph of ``kag``: no cycles between modules, and imports only point down the layers.

Every ``import`` and ``from ... import`` in ``kag/`` counts, including the ones inside
functions and ``TYPE_CHECKING`` blocks: a lazy import is still a dependency. The layers
are the ones ``docs/architecture.md`` records; a test below keeps the two in step.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kag"

# Lowest first. A module may import modules of a strictly lower layer, or of its own
# package (without cycles). Peers in one layer never import each other.
LAYERS: list[tuple[str, ...]] = [
    ("kag.errors",),
    ("kag.text", "kag.validation", "kag.files", "kag.runtime", "kag._sync", "kag.version"),
    ("kag.datamodels",),
    ("kag.query", "kag.ranking"),
    ("kag.graph", "kag.rag", "kag.lm"),
    ("kag.knowledge",),
    ("kag.training",),
    ("kag.programs",),
    ("kag.examples", "kag.agents", "kag.integrations"),
    ("kag.datasets",),
    ("kag.server", "kag.demo"),
    ("kag.engines",),
    ("kag.cli",),
    ("kag",),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The kag modules ``name`` imports (a ``from package import submodule`` counts as the submodule)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "kag")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "kag":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    found.discard(name)
    unknown = found - set(MODULES)
    assert not unknown, f"{name} imports modules that do not exist: {sorted(unknown)}"
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def group_of(name: str) -> str:
    """The layer entry a module belongs to: the longest matching prefix."""
    best = ""
    for layer in LAYERS:
        for entry in layer:
            if (name == entry or name.startswith(entry + ".")) and len(entry) > len(best):
                best = entry
    assert best, f"{name} is in no layer: add it to LAYERS and docs/architecture.md"
    return best


LEVEL = {entry: i for i, layer in enumerate(LAYERS) for entry in layer}


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        group_of(name)


def test_imports_only_point_down() -> None:
    upward = []
    for name, targets in GRAPH.items():
        here = group_of(name)
        for target in targets:
            there = group_of(target)
            if there == here:
                continue
            if LEVEL[there] >= LEVEL[here]:
                upward.append(f"{name} ({here}) -> {target} ({there})")
    assert not upward, "imports that do not point down the layers:\n" + "\n".join(sorted(upward))


def test_no_import_cycles() -> None:
    # Tarjan's strongly connected components over the module graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_a_planted_cycle_and_an_upward_edge(tmp_path: Path) -> None:
    # the analysis itself must be able to fail: parse two synthetic modules the same way
    a = ast.parse("from kag.query import plan\ndef f():\n    from kag.knowledge import base\n")
    names = {
        alias.name if isinstance(n, ast.Import) else f"{n.module}.{alias.name}"
        for n in ast.walk(a)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for alias in n.names
    }
    assert names == {"kag.query.plan", "kag.knowledge.base"}  # function-level imports are seen
    assert LEVEL[group_of("kag.knowledge.base")] > LEVEL[group_of("kag.query.plan")]


def test_docs_record_the_same_layers() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    block = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", doc, re.S)
    assert block, "docs/architecture.md must keep the layer table between <!-- layers --> markers"
    rows = [line for line in block.group(1).splitlines() if line.startswith("|") and re.search(r"`kag", line)]
    documented = [tuple(re.findall(r"`(kag[\w.]*)`", row)) for row in rows]
    assert list(reversed(documented)) == LAYERS


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.count(".") >= 1))
def test_no_module_imports_the_root_package(name: str) -> None:
    assert "kag" not in GRAPH[name], f"{name} imports the root package `kag`; import the module that defines the name"


@pytest.mark.parametrize("owner", ["kag.knowledge.base:KnowledgeBase", "kag.knowledge.knowledge:Knowledge"])
def test_every_coroutine_method_has_a_typed_blocking_twin(owner: str) -> None:
    import importlib
    import inspect

    module_name, _, class_name = owner.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    sync_cls = getattr(importlib.import_module(module_name), f"{class_name}Sync")
    public = {
        name
        for name, member in inspect.getmembers(cls)
        if inspect.iscoroutinefunction(member) and not name.startswith("_")
    }
    assert public, f"{class_name} has no coroutine methods?"
    missing = sorted(name for name in public if name not in sync_cls.__dict__)
    assert not missing, f"{class_name}Sync lacks blocking twins of {missing}"
