"""The documentation site builds in strict mode (any warning fails) and shows what a reader relies on.

One build per test session, into a temporary directory, exactly as ``make docs`` builds ``site/``:
broken links, a page missing from the navigation, a docstring that does not parse, a notebook or
executed page whose code fails and an export autodoc cannot import all fail it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from sphinx.util.inventory import InventoryFile

from tests.docs.blocks import ROOT

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import kagdocs

# what a page may load from elsewhere: nothing (src=, <link href=> and CSS url() pointing off the site)
_EXTERNAL_ASSET = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc=["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//"""
    r"""|@import\s+(?:url\()?["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//""",
    re.IGNORECASE,
)


_BUILD: dict[str, str] = {}  # what the build printed on stderr


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-E", "-b", "html", "docs", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=280)
    _BUILD["stderr"] = done.stderr
    # the executed notebooks' kernels log on the same stderr ("[IPKernelApp] WARNING | ..."): not Sphinx's
    warnings = [
        line for line in done.stderr.splitlines() if ("WARNING" in line or "ERROR" in line) and not line.startswith("[")
    ]
    assert done.returncode == 0, "the strict site build failed:\n" + "\n".join(
        warnings or done.stderr.splitlines()[-40:]
    )
    return out


def test_a_quiet_build_prints_nothing(site: Path) -> None:
    # with -q a build that succeeds is silent: the executed pages' kernels used to warn, one line each,
    # that they ran over unencrypted TCP (docs/conf.py has them use CurveZMQ or IPC sockets)
    assert _BUILD["stderr"].strip() == ""


def test_the_strict_build_has_every_page(site: Path) -> None:
    sources = {
        p.relative_to(ROOT / "docs").with_suffix("")
        for p in (ROOT / "docs").rglob("*")
        if p.suffix in (".md", ".rst", ".ipynb") and "_build" not in p.parts
    }
    built = {p.relative_to(site).with_suffix("") for p in site.rglob("*.html")}
    assert sources <= built, sources - built


def test_no_page_loads_anything_from_elsewhere(site: Path) -> None:
    offending = []
    for path in [*site.rglob("*.html"), *site.rglob("*.css")]:
        for match in _EXTERNAL_ASSET.finditer(path.read_text(encoding="utf-8", errors="replace")):
            offending.append(f"{path.relative_to(site)}: {match.group(0)[:120]}")
    assert not offending


def test_the_reference_documents_every_export(site: Path) -> None:
    with open(site / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    python = {name for kind, entries in inventory.items() if kind.startswith("py:") for name in entries}
    missing = [
        f"{package}.{e.name} (as {e.target})"
        for package in kagdocs.available_packages()
        for e in kagdocs.reference_entries(package)
        if e.kind != "module" and e.target not in python
    ]
    assert not missing
    assert "kag.KnowledgeBase.triplet_search" in python  # members too, with their signatures


def test_the_notebook_renders_with_its_pictures(site: Path) -> None:
    page = (site / "notebooks" / "explore.html").read_text(encoding="utf-8")
    assert "<svg" in page and "Lyon" in page  # the subgraph view, drawn when the site was built
    assert "Paris -[IsCapitalOf]-&gt; France" in page  # a result table


def test_executed_pages_show_the_cypher_kag_compiles(site: Path) -> None:
    page = (site / "guides" / "triplet-language.html").read_text(encoding="utf-8")
    assert "WHERE NOT EXISTS {" in page  # the negated hop, printed by the code above it
    assert "Andorra -[Borders]-&gt; France; Andorra -[Borders]-&gt; Spain" in page
    security = (site / "explanations" / "security.html").read_text(encoding="utf-8")
    assert "vector.similarity.cosine" in security or "$l1_0" in security


def test_the_benchmark_tables_come_from_the_results_file(site: Path) -> None:
    results = (ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8")
    rows = [line for line in results.splitlines() if line.startswith("| ") and "---" not in line]
    first_row = rows[1].split("|")[3].strip()  # the first data row's metric cell
    page = (site / "explanations" / "performance.html").read_text(encoding="utf-8")
    assert first_row.replace("<", "&lt;").replace(">", "&gt;") in page


def test_the_performance_page_leads_with_the_result(site: Path) -> None:
    results = (ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8")
    page = (site / "explanations" / "performance.html").read_text(encoding="utf-8")
    body = page[page.index("<h1>") :]
    first = re.search(r"<p>(.*?)</p>", body, re.DOTALL)
    assert first is not None and first.group(1).startswith("<strong>In short.</strong>")
    assert f"Goals met in the last run: {kagdocs.goals_met(results)}." in first.group(1)  # the table's own count
    summary = body.index('<div class="bench-summary')  # the table, in the container kag.css fits to the column
    log = body.index('id="the-run-log"')
    assert summary < body.index("Where goals are missed") < log  # the result first, the run log at the end
    assert "Machine: nproc" in body[log:] and "Machine: nproc" not in body[:log]
    if "Rerun and merged" in results:
        assert "Rerun and merged" not in body[:log]


def test_pages_open_with_what_they_are_about_not_how_they_were_written() -> None:
    for page in ("local-models.md", "explanations/performance.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        opening = text.split("\n\n", 2)[1]  # the paragraph under the title
        assert "draft" not in opening and "Rerun and merged" not in opening and "written for the run" not in opening


def test_goals_met_counts_the_summary_rows_with_a_goal() -> None:
    results = (
        "# kag benchmark results\n\nGoals met: 99 of 99 (a stale line).\n\n## Summary\n\n"
        "| benchmark | metric | kag | baseline | ratio | goal | met |\n"
        "| --- | --- | ---: | ---: | ---: | --- | :---: |\n"
        "| a | x | 1 | 2 | 2x | >= 1x | yes |\n| a | y | 1 | – | – | – | – |\n"
        "| b | z | 1 | 2 | 0.5x | >= 1x | **no** |\n"
        "\n## Details\n\n| a | detail | 1 | 2 | 2x | >= 1x | yes |\n"
    )
    assert kagdocs.goals_met(results) == "1 of 2"
    css = (ROOT / "docs" / "_static" / "kag.css").read_text(encoding="utf-8")
    assert ".bench-summary table.docutils { table-layout: fixed; width: 100%;" in css


def test_search_and_highlighting_work_offline(site: Path) -> None:
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    assert "triplet" in index and "knowledgebas" in index
    page = (site / "getting-started" / "first-program.html").read_text(encoding="utf-8")
    assert 'class="highlight-python' in page and '<span class="k">class</span>' in page


def test_the_asset_check_sees_what_a_browser_would_fetch() -> None:
    fetched = [
        '<script src="https://cdn.example/require.js"></script>',
        "<link rel='stylesheet' href='//fonts.example/css?family=Roboto'>",
        "body { background: url(https://img.example/x.png) }",
        '@import "https://fonts.example/a.css";',
    ]
    assert all(_EXTERNAL_ASSET.search(text) for text in fetched)
    assert not _EXTERNAL_ASSET.search('<a class="muted-link" href="https://www.sphinx-doc.org/">Sphinx</a>')
    assert not _EXTERNAL_ASSET.search('<script src="_static/furo.js"></script><img src="../_images/a.svg">')
