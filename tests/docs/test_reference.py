"""The API reference covers every exported name: each package has its page, each export an entry.

The pages enumerate ``__all__`` when the site is built (``docs/_ext/kagdocs.py``), so a new export
is documented without editing a page; these tests fail when a package has no page, when an export
names nothing, or when an exported class or function has no docstring to show.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

import pytest

from tests.docs.blocks import ROOT

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import kagdocs

PAGES = {path.stem: path for path in (ROOT / "docs" / "reference").glob("*.rst")}


def page_for(package: str) -> str:
    return "kag" if package == "kag" else package.removeprefix("kag.")


@pytest.mark.parametrize("package", kagdocs.available_packages())
def test_every_package_has_a_reference_page(package: str) -> None:
    page = PAGES.get(page_for(package))
    assert page is not None, (
        f"docs/reference/{page_for(package)}.rst is missing: add one with '.. kag-autoall:: {package}'"
    )
    assert re.search(rf"^\.\. kag-autoall:: {re.escape(package)}$", page.read_text(), re.MULTILINE), page
    navigation = (ROOT / "docs" / "index.md").read_text()
    assert f"\nreference/{page_for(package)}\n" in navigation, f"the Reference menu (docs/index.md) lacks {page.name}"


def test_the_training_package_is_documented_once_it_exists() -> None:
    """kag.training is being written: the day it imports, it needs its page (the test above then runs for it)."""
    if importlib.util.find_spec("kag.training") is not None:
        assert "kag.training" in kagdocs.available_packages()
        assert "training" in PAGES


@pytest.mark.parametrize("package", kagdocs.available_packages())
def test_every_export_has_an_entry_with_a_docstring(package: str) -> None:
    entries = kagdocs.reference_entries(package)
    assert [e.name for e in entries] == kagdocs.exported_names(package)
    module = importlib.import_module(package)
    undocumented = [
        e.name
        for e in entries
        if e.kind in ("class", "exception", "function") and not (inspect.getdoc(getattr(module, e.name)) or "").strip()
    ]
    assert not undocumented, f"{package} exports names without a docstring: {undocumented}"
    rst = "\n".join(kagdocs.reference_rst(package))
    for entry in entries:
        if entry.kind == "module":
            continue
        if entry.documented_here:
            assert f":: {package}.{entry.name}\n" in rst + "\n", entry
        else:
            assert f"`{entry.target}`" in rst, entry  # a link to where it is documented in full


def test_an_object_exported_twice_is_documented_once() -> None:
    homes: dict[int, list[str]] = {}
    for package in kagdocs.available_packages():
        module = importlib.import_module(package)
        for entry in kagdocs.reference_entries(package):
            if entry.documented_here and entry.kind != "data":
                homes.setdefault(id(getattr(module, entry.name)), []).append(f"{package}.{entry.name}")
    assert not {k: v for k, v in homes.items() if len(v) > 1}
    assert kagdocs.reference_entries("kag.programs")[0].home in ("kag", "kag.programs")


def test_errors_without_all_list_the_exception_classes() -> None:
    names = kagdocs.exported_names("kag.errors")
    assert "KagError" in names and "SchemaError" in names
    import kag.errors

    assert all(issubclass(getattr(kag.errors, n), kag.errors.KagError) for n in names)
