"""Every ```python block of README.md and docs/ runs, in order, page by page.

The blocks of one page share one namespace and one event loop, as a reader who pastes them into a
notebook would: top-level ``await`` works. Each page runs in a fresh temporary directory, offline,
against the memory store and offline models; a page with a block marked ``neo4j`` runs against the
test Neo4j server (NEO4J_* from ``.neo4j/env``, as ``make test`` exports them).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.docs.blocks import ROOT, Block, blocks, documentation_files
from tests.neo4j_support import check_reachable, neo4j_settings

PAGES = [(path, [b for b in blocks(path) if b.runs]) for path in documentation_files()]
PAGES = [(path, runnable) for path, runnable in PAGES if runnable]


def _params() -> list[Any]:
    params = []
    for path, runnable in PAGES:
        marks = [pytest.mark.neo4j] if any(b.needs_neo4j for b in runnable) else []
        params.append(pytest.param(runnable, id=str(path.relative_to(ROOT)), marks=marks))
    return params


def run_block(block: Block, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    """Run one block in ``namespace``; a block with top-level ``await`` runs on ``loop``."""
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # exec semantics; with top-level await it returns a coroutine
    if inspect.iscoroutine(result):
        loop.run_until_complete(result)


@pytest.mark.parametrize("runnable", _params())
def test_page_code_blocks_run(
    runnable: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.chdir(tmp_path)
    if request.node.get_closest_marker("neo4j"):
        settings = neo4j_settings()
        check_reachable(settings)
        monkeypatch.setenv("NEO4J_URI", settings["uri"])
        monkeypatch.setenv("NEO4J_USERNAME", settings["user"])
        monkeypatch.setenv("NEO4J_PASSWORD", settings["password"])
        monkeypatch.setenv("NEO4J_DATABASE", settings["database"])
    # a real module in sys.modules, so models defined on the page resolve their annotations (and
    # ``module:QualName`` paths of saved programs) as they would in a reader's file
    module = types.ModuleType(f"kag_docs_{abs(hash(runnable[0].path))}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    loop = asyncio.new_event_loop()
    try:
        for block in runnable:
            try:
                run_block(block, namespace, loop)
            except Exception as exc:
                raise AssertionError(f"the code block at {block.where} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def test_fences_are_read_as_a_reader_sees_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n"
        "```python\nx = 1\n```\n"
        "- a list item:\n  ```python notest\n  partial(\n  ```\n"
        "````markdown\n```python\nnot a block of this page\n```\n````\n"
        "```{code-cell} ipython3\n:tags: [hide-input]\ny = 2\n```\n"
        "```python neo4j\nz = 3\n```\n"
        "```bash\nmake docs\n```\n"
    )
    found = blocks(page)
    assert [(b.line, b.runs, b.needs_neo4j) for b in found] == [
        (2, True, False),
        (6, False, False),
        (9, False, False),
        (14, True, False),
        (18, True, True),
        (21, False, False),
    ]
    assert found[0].code == "x = 1\n" and found[1].code == "partial(\n" and found[3].code == "y = 2\n"


def test_a_failing_block_names_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nvalue = 1\n```\n\n```python\nassert value == 2, 'the page says 2'\n```\n")
    namespace: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    try:
        first, second = blocks(page)
        run_block(first, namespace, loop)
        with pytest.raises(AssertionError, match="the page says 2") as failure:
            run_block(second, namespace, loop)
        assert str(failure.traceback[-1].path) == second.where  # the traceback points into the page
    finally:
        loop.close()
