"""Escaped HTML tables for notebook views: a plain table and one with a score bar per row.

Every cell is escaped and the markup is fixed (no scripts, no external assets).
They live in the retrieval layer so :class:`kag.rag.hits.SearchHit` can draw itself;
:mod:`kag.knowledge.html` builds the richer views (answers, subgraphs) on them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

from kag.errors import InvalidInputError

__all__ = ["esc", "score_bar", "scored_table", "table"]

_STYLE = "border-collapse:collapse;font-family:system-ui,sans-serif;font-size:13px;"
_CELL = "border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top"
_CAPTION = '<caption style="text-align:left;font-weight:600;padding:2px 0">{}</caption>'


def esc(value: Any) -> str:
    """HTML-escape any value's string form."""
    return html.escape(str(value), quote=True)


def _caption(count: int, noun: tuple[str, str] | None, caption: str | None) -> str:
    # a counted caption is computed from the rows drawn, so it cannot disagree with them
    parts = [f"{count} {noun[0] if count == 1 else noun[1]}"] if noun else []
    parts += [caption] if caption else []
    return _CAPTION.format(esc(" \u00b7 ".join(parts))) if parts else ""


def _check_width(headers: Sequence[str], cells: Sequence[Any]) -> None:
    if len(cells) != len(headers):
        raise InvalidInputError(
            f"a table row has {len(cells)} cells for {len(headers)} headers ({list(headers)}); "
            "give one header per column."
        )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    caption: str | None = None,
    *,
    noun: tuple[str, str] | None = None,
) -> str:
    """A small escaped HTML table.

    ``noun`` (singular, plural) prefixes the caption with the number of rows
    drawn, e.g. ``("citation", "citations")`` gives "3 citations".
    """
    rows = list(rows)
    for row in rows:
        _check_width(headers, row)
    head = "".join(f'<th style="{_CELL};background:#f5f5f5">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{esc(c)}</td>' for c in row) + "</tr>" for row in rows)
    return f'<table style="{_STYLE}">{_caption(len(rows), noun, caption)}<tr>{head}</tr>{body}</table>'


def score_bar(score: float) -> str:
    """A score as text plus a proportional bar (escaped number, fixed markup); "-" when not a number."""
    if not math.isfinite(score):
        return "\u2013"
    width = max(0, min(100, round(score * 100)))
    return (
        f'{score:.3f} <span style="display:inline-block;width:60px;height:8px;background:#eee">'
        f'<span style="display:block;width:{width}%;height:8px;background:#4a90d9"></span></span>'
    )


def scored_table(
    headers: Sequence[str],
    rows: Iterable[tuple[Sequence[Any], float]],
    caption: str | None = None,
    *,
    noun: tuple[str, str] | None = None,
) -> str:
    """Like :func:`table`, with a final ``score`` column drawn as a bar."""
    rows = list(rows)
    for cells, _ in rows:
        _check_width(headers, cells)
    head = "".join(f'<th style="{_CELL};background:#f5f5f5">{esc(h)}</th>' for h in (*headers, "score"))
    body = "".join(
        "<tr>"
        + "".join(f'<td style="{_CELL}">{esc(c)}</td>' for c in cells)
        + f'<td style="{_CELL}">{score_bar(score)}</td></tr>'
        for cells, score in rows
    )
    return f'<table style="{_STYLE}">{_caption(len(rows), noun, caption)}<tr>{head}</tr>{body}</table>'
