"""Fenced code blocks of kag's Markdown documentation (README.md and docs/), as the docs tests run them.

A block whose info string starts with ``python`` runs, unless its info string also says ``notest``
(a partial snippet, or one that needs a key or a server); ``neo4j`` marks a block that runs against
the test Neo4j. A MyST ``{code-cell}`` (a page the site build executes) runs like ``python``.

A page with blocks that run declares where a reader runs them, on a line of its own outside the
blocks (an HTML comment: neither GitHub nor the site shows it):

* ``<!-- runs-in: notebook -->``: inside a running event loop, as a Jupyter cell or the
  ``python -m asyncio`` REPL runs code; top-level ``await`` works, a blocking facade
  (``kb.sync``) or ``asyncio.run`` does not. The page says so in its text.
* ``<!-- runs-in: script -->``: as ``python page.py`` runs it, no event loop running; top-level
  ``await`` is a ``SyntaxError``, ``asyncio.run`` and ``kb.sync`` work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_RUNS_IN = re.compile(r"^<!--\s*runs-in:\s*(?P<mode>\S+)\s*-->\s*$")
RUN_MODES = ("notebook", "script")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of the fence), its info string and its code."""

    path: Path
    line: int
    info: str
    code: str

    @property
    def words(self) -> list[str]:
        return self.info.replace("{code-cell}", "python").split()

    @property
    def is_python(self) -> bool:
        return bool(self.words) and self.words[0] in ("python", "py")

    @property
    def runs(self) -> bool:
        return self.is_python and "notest" not in self.words[1:]

    @property
    def needs_neo4j(self) -> bool:
        return "neo4j" in self.words[1:]

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, nested fences (a longer fence around a shorter one) kept whole."""
    return _read(path)[0]


def prose(path: Path) -> str:
    """The text of a Markdown file outside its fenced blocks."""
    return "\n".join(_read(path)[1])


def run_mode(path: Path) -> str | None:
    """Where a page's blocks run, ``"notebook"`` or ``"script"``, from its ``<!-- runs-in: MODE -->`` line.

    ``None`` when the page declares nothing; a ``ValueError`` for an unknown mode or two declarations.
    """
    found = [m["mode"] for line in _read(path)[1] if (m := _RUNS_IN.match(line))]
    if len(found) > 1:
        raise ValueError(f"{path}: runs-in is declared {len(found)} times; declare it once")
    if found and found[0] not in RUN_MODES:
        raise ValueError(f"{path}: runs-in: {found[0]!r} is not one of {RUN_MODES}")
    return found[0] if found else None


def _read(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a Markdown file, and its lines outside them."""
    lines = path.read_text(encoding="utf-8").splitlines()
    outside: list[str] = []
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            outside.append(lines[i])
            i += 1
            continue
        indent, fence, info = len(match["indent"]), match["fence"], match["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        else:
            raise ValueError(f"{path}:{i + 1}: the code fence {fence!r} is never closed")
        if info.startswith("{code-cell}"):  # MyST cell options (":tags: ...") are not code
            while body and body[0].startswith(":"):
                body.pop(0)
        found.append(Block(path, i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return found, outside


def documentation_files() -> list[Path]:
    """README.md and every Markdown page of the site."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
    return [ROOT / "README.md", *pages]
