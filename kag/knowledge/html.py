"""HTML views for Jupyter: tables of hits and triplets, a grounded answer, and a subgraph drawn as inline SVG.

Everything shown comes from stored data or model output, so every string is
escaped; no scripts, no external assets (notebooks stay offline and safe).
The subgraph drawing lives in :mod:`kag.knowledge.subgraph_svg`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from kag.errors import InvalidInputError
from kag.knowledge.subgraph_svg import SubgraphView

__all__ = ["SubgraphView", "esc", "rag_answer_html", "score_bar", "scored_table", "table"]

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


class HitLike(Protocol):
    """What :func:`rag_answer_html` reads from a search hit (``SearchHit`` fits)."""

    @property
    def kind(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def score(self) -> float: ...


class CitationLike(Protocol):
    """What :func:`rag_answer_html` reads from a citation (``Citation`` fits)."""

    @property
    def label(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source(self) -> str: ...


class AnswerLike(Protocol):
    """What :func:`rag_answer_html` reads from an answer (``RAGAnswer`` fits; typed here to avoid an import cycle)."""

    @property
    def query(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def citations(self) -> Sequence[CitationLike]: ...
    @property
    def labels(self) -> Mapping[str, HitLike]: ...


def rag_answer_html(answer: AnswerLike, text_chars: int = 200) -> str:
    """A grounded answer: question, answer, the citations it makes, and (folded) every result it was shown.

    Each table's caption counts the rows of that table, and every column has a
    header. Texts are cut at ``text_chars`` characters.
    """
    head = f"<p><b>Q:</b> {esc(answer.query)}<br><b>A:</b> {esc(answer.text)}</p>"
    cited_rows: list[tuple[Sequence[Any], float]] = []
    for citation in answer.citations:
        hit = answer.labels.get(citation.label)
        cited_rows.append(
            (
                (citation.label, citation.kind, citation.source, hit.text[:text_chars] if hit else ""),
                hit.score if hit else math.nan,
            )
        )
    cited = (
        scored_table(["label", "kind", "source", "text"], cited_rows, noun=("citation", "citations"))
        if cited_rows
        else "<p><em>0 citations</em></p>"
    )
    if not answer.labels:
        return head + cited
    cited_labels = {c.label for c in answer.citations}
    shown_rows = [
        ((label, hit.kind, hit.source, hit.text[:text_chars], "yes" if label in cited_labels else ""), hit.score)
        for label, hit in answer.labels.items()
    ]
    n = len(shown_rows)
    shown = scored_table(["label", "kind", "source", "text", "cited"], shown_rows, noun=("result", "results"))
    summary = f"{n} {'result' if n == 1 else 'results'} shown to the model"
    return head + cited + f'<details style="margin-top:6px"><summary>{esc(summary)}</summary>{shown}</details>'
