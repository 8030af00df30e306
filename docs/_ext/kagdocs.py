"""Sphinx extension for kag's site: the API reference enumerated from each package's ``__all__``.

``.. kag-autoall:: kag.rag`` documents every name ``kag.rag`` exports, so a new export shows up in
the reference without editing a page, and a name autodoc cannot import fails the strict build.
An object exported by several packages (``kag.Generator`` is ``kag.programs.Generator``) is
documented once, under the first package of :data:`PACKAGES` that exports it; the other pages
link to it. ``tests/docs/test_reference.py`` checks the pages against the exports.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from dataclasses import dataclass
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

# the packages whose exports the reference documents, in the order that decides an object's home page;
# a package that does not exist yet (kag.training while it is being written) is simply absent
PACKAGES = ("kag", "kag.programs", "kag.training", "kag.lm", "kag.rag", "kag.errors")


def available_packages() -> list[str]:
    """The packages of :data:`PACKAGES` that this checkout has."""
    found = []
    for name in PACKAGES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the package exists but one of its imports is missing: say so
                raise
            continue
        found.append(name)
    return found


def exported_names(module_name: str) -> list[str]:
    """What a package exports: its ``__all__``; for a module without one (``kag.errors``), the
    exception classes it defines."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == module_name
    )


@dataclass(frozen=True)
class Entry:
    """How one exported name appears on its package's reference page."""

    module: str
    name: str
    kind: str  # class, exception, function, data, module
    home: str  # the package under which the object is documented in full

    @property
    def documented_here(self) -> bool:
        return self.home == self.module

    @property
    def target(self) -> str:
        return f"{self.home}.{self.name}"


def _kind(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "exception" if issubclass(value, BaseException) else "class"
    if inspect.isroutine(value):
        return "function"
    return "data"


def _homes() -> dict[int, tuple[str, str]]:
    """id(object) -> (package, name) of the first package that exports it (classes and functions only:
    equal constants of two packages are not one object to link)."""
    homes: dict[int, tuple[str, str]] = {}
    for package in available_packages():
        module = importlib.import_module(package)
        for name in exported_names(package):
            value = getattr(module, name)
            if _kind(value) in ("class", "exception", "function"):
                homes.setdefault(id(value), (package, name))
    return homes


def reference_entries(module_name: str) -> list[Entry]:
    """The entries of ``module_name``'s reference page, in ``__all__`` order."""
    module = importlib.import_module(module_name)
    homes = _homes()
    entries = []
    for name in exported_names(module_name):
        if not hasattr(module, name):
            raise AttributeError(f"{module_name}.__all__ names {name!r}, which {module_name} does not define")
        value = getattr(module, name)
        kind = _kind(value)
        home, home_name = homes.get(id(value), (module_name, name))
        if home_name != name:  # exported under another name elsewhere: document it here too
            home = module_name
        entries.append(Entry(module_name, name, kind, home))
    return entries


_AUTODOC = {"class": "autoclass", "exception": "autoexception", "function": "autofunction", "data": "autodata"}
_ROLE = {"class": "class", "exception": "exc", "function": "func", "data": "data", "module": "mod"}
_GROUPS = (("class", "Classes"), ("exception", "Exceptions"), ("function", "Functions"), ("data", "Constants"))


def reference_rst(module_name: str) -> list[str]:
    """reStructuredText of a package's reference: an index of every export, then each documented in full."""
    entries = reference_entries(module_name)
    lines = [f".. currentmodule:: {module_name}", ""]
    index = [f":{_ROLE[e.kind]}:`~{e.target}`" for e in entries if e.kind != "module"]
    lines += ["**Exports:** " + ", ".join(index) + ".", ""]
    modules = [e for e in entries if e.kind == "module"]
    if modules:
        lines += ["**Modules:** " + ", ".join(f"``{e.name}`` (:mod:`{e.module}.{e.name}`)" for e in modules), ""]
    elsewhere = [e for e in entries if not e.documented_here and e.kind != "module"]
    if elsewhere:
        lines += ["**Documented in full under the name most code imports:**", ""]
        lines += [f"- ``{e.name}``: :{_ROLE[e.kind]}:`{e.target}`" for e in elsewhere]
        lines.append("")
    for kind, title in _GROUPS:
        group = [e for e in entries if e.kind == kind and e.documented_here]
        if not group:
            continue
        lines += [f".. rubric:: {title}", ""]
        for entry in group:
            lines += [f".. {_AUTODOC[kind]}:: {module_name}.{entry.name}", ""]
    return lines


class AutoAllDirective(SphinxDirective):
    """``.. kag-autoall:: PACKAGE``: the reference of every name PACKAGE exports."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        self.env.note_dependency(importlib.import_module(module_name).__file__ or "")
        container = nodes.container()
        content = StringList(reference_rst(module_name), source=f"<kag-autoall {module_name}>")
        self.state.nested_parse(content, self.content_offset, container)
        return container.children


# kag's docstrings write plurals of literals as ``Document``s, which reStructuredText reads as an
# unterminated literal: an escaped space (``Document``\ s) renders the same text and parses
_PLURAL_LITERAL = re.compile(r"``(?=[^`\s])([^`]*[^`\s])``(?=[A-Za-z])")


def fix_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """``autodoc-process-docstring``: make ``Name``s parse as a literal followed by text."""
    lines[:] = [_PLURAL_LITERAL.sub(lambda m: f"``{m.group(1)}``\\ ", line) for line in lines]


def goals_met(results: str) -> str:
    """``"81 of 94"``: the summary rows of ``benchmarks/results.md`` whose goal was met, of those with a goal.

    The performance page states it from the same file as its table, so the two never disagree.
    """
    summary = results.split("## Summary", 1)[-1].split("## Details", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "---" not in line][1:]
    met = [line.rstrip().rstrip("|").rsplit("|", 1)[-1].strip() for line in rows]
    judged = [cell for cell in met if cell in ("yes", "**no**")]
    return f"{judged.count('yes')} of {len(judged)}"


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("kag-autoall", AutoAllDirective)
    app.connect("autodoc-process-docstring", fix_docstring)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
