"""Every ```python block of README.md and docs/ runs, in order, page by page, the way its page declares.

The blocks of one page share one namespace, as a reader who pastes them into one notebook or one file
would. A page declares where it runs (``tests/docs/blocks.py``): ``<!-- runs-in: notebook -->`` runs
every block inside one running event loop, as Jupyter and ``python -m asyncio`` do (top-level
``await`` works, ``kb.sync`` and ``asyncio.run`` raise); ``<!-- runs-in: script -->`` runs them as
``python page.py`` would (no loop running, top-level ``await`` is a ``SyntaxError``). Each page runs in
a fresh temporary directory, offline, against the memory store and offline models; a page with a
block marked ``neo4j`` runs against the test Neo4j server (NEO4J_* from ``.neo4j/env``, as
``make test`` exports them).
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

from tests.docs.blocks import ROOT, RUN_MODES, Block, blocks, documentation_files, prose, run_mode
from tests.neo4j_support import check_reachable, neo4j_settings

PAGES = [(path, [b for b in blocks(path) if b.runs]) for path in documentation_files()]
PAGES = [(path, runnable) for path, runnable in PAGES if runnable]


def _params() -> list[Any]:
    params = []
    for path, runnable in PAGES:
        marks = [pytest.mark.neo4j] if any(b.needs_neo4j for b in runnable) else []
        params.append(pytest.param(path, runnable, id=str(path.relative_to(ROOT)), marks=marks))
    return params


def _failed(block: Block, exc: BaseException) -> AssertionError:
    return AssertionError(f"the code block at {block.where} failed: {type(exc).__name__}: {exc}")


def run_script_block(block: Block, namespace: dict[str, Any]) -> None:
    """Run one block as ``python page.py`` would: no event loop running, top-level ``await`` a ``SyntaxError``."""
    exec(compile(block.code, block.where, "exec"), namespace)


async def run_notebook_cell(block: Block, namespace: dict[str, Any]) -> None:
    """Run one block as a notebook cell: inside the running loop, a top-level ``await`` awaited there."""
    code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # exec semantics; with top-level await it returns a coroutine
    if inspect.iscoroutine(result):
        await result


def run_page(runnable: list[Block], namespace: dict[str, Any], mode: str) -> None:
    """Run a page's blocks in order in ``namespace``, the way ``mode`` says; a failure names its block."""
    if mode == "script":
        for block in runnable:
            try:
                run_script_block(block, namespace)
            except Exception as exc:
                raise _failed(block, exc) from exc
        return
    if mode != "notebook":
        raise ValueError(f"unknown run mode {mode!r}; expected one of {RUN_MODES}")

    async def cells() -> None:
        for block in runnable:
            try:
                await run_notebook_cell(block, namespace)
            except Exception as exc:
                raise _failed(block, exc) from exc

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(cells())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@pytest.mark.parametrize(("path", "runnable"), _params())
def test_page_code_blocks_run(
    path: Path,
    runnable: list[Block],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    mode = run_mode(path)
    assert mode is not None, f"{path.name}: declare where its blocks run, <!-- runs-in: notebook --> or script"
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
    module = types.ModuleType(f"kag_docs_{abs(hash(path))}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    run_page(runnable, module.__dict__, mode)


def test_every_page_declares_where_it_runs_and_a_notebook_page_says_so() -> None:
    """A reader who runs a notebook page as ``python file.py`` gets a SyntaxError: the page tells them where."""
    undeclared = [str(path.relative_to(ROOT)) for path, _ in PAGES if run_mode(path) is None]
    assert not undeclared, f"declare <!-- runs-in: notebook --> or <!-- runs-in: script --> on {undeclared}"
    silent = [
        str(path.relative_to(ROOT))
        for path, _ in PAGES
        if run_mode(path) == "notebook" and "python -m asyncio" not in prose(path)
    ]
    assert not silent, f"say in the text that these run in a notebook or `python -m asyncio`: {silent}"


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
    for mode in RUN_MODES:
        with pytest.raises(AssertionError, match="the page says 2") as failure:
            run_page(blocks(page), {}, mode)
        assert f"{page}:5" in str(failure.value)
        traceback = failure.value.__cause__.__traceback__ if failure.value.__cause__ else None
        while traceback is not None and traceback.tb_next is not None:
            traceback = traceback.tb_next
        assert traceback is not None and traceback.tb_frame.f_code.co_filename == f"{page}:5"  # into the page


def _page(tmp_path: Path, *codes: str) -> list[Block]:
    page = tmp_path / "page.md"
    page.write_text("".join(f"```python\n{code}\n```\n\n" for code in codes))
    return blocks(page)


def test_a_notebook_page_runs_every_block_inside_one_running_loop(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    run_page(
        _page(tmp_path, "import asyncio\nfirst = asyncio.get_running_loop()", "await asyncio.sleep(0)\nsame = first"),
        namespace,
        "notebook",
    )
    assert namespace["same"] is namespace["first"] and namespace["first"].is_closed()
    # what fails in a Jupyter cell fails here: a blocking facade, asyncio.run
    kb = "import kag\nkb = kag.KnowledgeBase('memory://', entity_models=[], relation_models=[])"
    with pytest.raises(AssertionError, match="SyncInEventLoopError"):
        run_page(_page(tmp_path, kb, "kb.sync.counts()"), {}, "notebook")
    with pytest.raises(AssertionError, match="cannot be called from a running event loop"):
        run_page(
            _page(
                tmp_path,
                "import asyncio\ncoro = asyncio.sleep(0)\ntry:\n    asyncio.run(coro)\nfinally:\n    coro.close()",
            ),
            {},
            "notebook",
        )


def test_a_script_page_runs_without_a_loop_and_refuses_top_level_await(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    kb = "import kag\nkb = kag.KnowledgeBase('memory://', entity_models=[], relation_models=[])"
    run_page(_page(tmp_path, kb, "counts = kb.sync.counts()\nkb.sync.close()"), namespace, "script")
    assert namespace["counts"]["nodes"] == 0
    with pytest.raises(AssertionError, match="SyntaxError"):
        run_page(_page(tmp_path, "import asyncio", "await asyncio.sleep(0)"), {}, "script")


def test_where_a_page_runs_is_read_from_one_comment(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n<!-- runs-in: notebook -->\n\n```markdown\n<!-- runs-in: script -->\n```\n")
    assert run_mode(page) == "notebook"  # the comment inside a block is an example, not a declaration
    page.write_text("# Title\n")
    assert run_mode(page) is None
    page.write_text("<!-- runs-in: repl -->\n")
    with pytest.raises(ValueError, match="not one of"):
        run_mode(page)
    page.write_text("<!-- runs-in: script -->\n<!-- runs-in: notebook -->\n")
    with pytest.raises(ValueError, match="declared 2 times"):
        run_mode(page)
