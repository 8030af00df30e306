"""HTML views for Jupyter: tables of hits and triplets, a grounded answer, and a subgraph drawn as inline SVG.

Everything shown comes from stored data or model output, so every string is
escaped; no scripts, no external assets (notebooks stay offline and safe).
The subgraph drawing lives in :mod:`kag.knowledge.subgraph_svg`, the escaped tables in :mod:`kag.rag.html`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kag.knowledge.subgraph_svg import SubgraphView
from kag.rag.html import esc, score_bar, scored_table, table

__all__ = ["SubgraphView", "esc", "rag_answer_html", "score_bar", "scored_table", "table"]


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
