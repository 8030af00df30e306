"""kag installs as ``graph-kag`` (the registry's ``kag`` is another project); ``import kag`` stays.

Every install command a reader copies, from the docs, the notebooks or an error message, names that
distribution, and the install page says what clashes with what.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import distribution

import pytest

import kag
from kag.errors import LoaderError
from kag.rag.loaders import pdf_documents
from kag.server.metrics import METRICS_MISSING
from kag.version import DISTRIBUTION, pip_install
from tests.docs.blocks import ROOT

# ``kag[extra]`` not preceded by a name character: the old distribution name with an extra
_OLD_NAME = re.compile(r"(?<![\w./-])kag\[[a-z-]+\]")
# files whose owners are changing them now; each still names the old distribution until they pass
# DISTRIBUTION / pip_install to their messages (the test fails once one no longer does: drop it here)
_PENDING: tuple[str, ...] = ()


def _read_by_readers() -> list[str]:
    folders = ("docs", "kag", "notebooks", "benchmarks", "scripts", "deploy")
    found = [ROOT / "README.md", ROOT / "Dockerfile"]
    for folder in folders:
        found += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in (".md", ".py", ".ipynb", ".sh", ".rst", ".txt", ".yml", ".toml")
        ]
    return sorted(str(p.relative_to(ROOT)) for p in found if p.exists() and "_build" not in p.parts)


def test_the_distribution_is_graph_kag_and_the_module_kag() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "graph-kag"
    assert project["scripts"]["kag"] == "kag.cli:main"
    installed = distribution(DISTRIBUTION)  # the environment's editable install, under the new name
    assert installed.version == kag.__version__
    assert pip_install("local") == "pip install 'graph-kag[local]'"


def test_no_reader_is_told_to_install_the_other_kag() -> None:
    offending = [
        f"{path}: {match.group(0)}"
        for path in _read_by_readers()
        if path not in _PENDING
        for match in _OLD_NAME.finditer((ROOT / path).read_text(encoding="utf-8", errors="replace"))
    ]
    assert not offending
    still_old = [path for path in _PENDING if _OLD_NAME.search((ROOT / path).read_text(encoding="utf-8"))]
    assert still_old == list(_PENDING), "a pending file now names graph-kag: remove it from _PENDING"


def test_the_install_page_says_what_clashes_with_what() -> None:
    page = (ROOT / "docs" / "getting-started" / "install.md").read_text(encoding="utf-8")
    assert "pip install 'graph-kag[local]'" in page
    kaggle = next(line for line in page.splitlines() if line.startswith("| `kag` |"))
    assert "Kaggle" in kaggle and "not this one" in kaggle
    openspg = next(line for line in page.splitlines() if line.startswith("| `openspg-kag` |"))
    assert "top-level `kag` module" in openspg and "cannot share an environment" in openspg


def test_error_messages_name_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "pip install 'graph-kag[metrics]'" in METRICS_MISSING
    monkeypatch.setitem(__import__("sys").modules, "pypdf", None)  # as if pypdf were not installed
    with pytest.raises(LoaderError, match=re.escape("pip install 'graph-kag[pdf]'")):
        pdf_documents(b"%PDF-1.4", "a.pdf", {})
