"""HTML views for Jupyter: hits, triplets and a small subgraph drawn as inline SVG.

Everything shown comes from stored data or model output, so every string is
escaped; no scripts, no external assets (notebooks stay offline and safe).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_STYLE = "border-collapse:collapse;font-family:system-ui,sans-serif;font-size:13px;"
_CELL = "border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top"


def esc(value: Any) -> str:
    """HTML-escape any value's string form."""
    return html.escape(str(value), quote=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], caption: str | None = None) -> str:
    """A small escaped HTML table."""
    head = "".join(f'<th style="{_CELL};background:#f5f5f5">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{esc(c)}</td>' for c in row) + "</tr>" for row in rows)
    cap = f'<caption style="text-align:left;font-weight:600">{esc(caption)}</caption>' if caption else ""
    return f'<table style="{_STYLE}">{cap}<tr>{head}</tr>{body}</table>'


def score_bar(score: float) -> str:
    """A score as text plus a proportional bar (escaped number, fixed markup)."""
    width = max(0, min(100, round(score * 100)))
    return (
        f'{score:.3f} <span style="display:inline-block;width:60px;height:8px;background:#eee">'
        f'<span style="display:block;width:{width}%;height:8px;background:#4a90d9"></span></span>'
    )


def scored_table(
    headers: Sequence[str], rows: Iterable[tuple[Sequence[Any], float]], caption: str | None = None
) -> str:
    """Like :func:`table`, with a final score column drawn as a bar."""
    head = "".join(f'<th style="{_CELL};background:#f5f5f5">{esc(h)}</th>' for h in (*headers, "score"))
    body = "".join(
        "<tr>"
        + "".join(f'<td style="{_CELL}">{esc(c)}</td>' for c in cells)
        + f'<td style="{_CELL}">{score_bar(score)}</td></tr>'
        for cells, score in rows
    )
    cap = f'<caption style="text-align:left;font-weight:600">{esc(caption)}</caption>' if caption else ""
    return f'<table style="{_STYLE}">{cap}<tr>{head}</tr>{body}</table>'


_PALETTE = ("#4a90d9", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d35400")


@dataclass
class SubgraphView:
    """A small graph (nodes with labels, directed typed edges) that draws itself as SVG."""

    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (label, name)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (start, end, type)
    max_nodes: int = 60

    def _repr_html_(self) -> str:
        return self.svg()

    def svg(self, size: int = 420) -> str:
        """Circular layout; nodes coloured by label; at most ``max_nodes`` nodes drawn."""
        ids = list(self.nodes)[: self.max_nodes]
        if not ids:
            return "<em>empty subgraph</em>"
        pos = {}
        radius = size / 2 - 60
        for i, node_id in enumerate(ids):
            angle = 2 * math.pi * i / len(ids)
            pos[node_id] = (size / 2 + radius * math.cos(angle), size / 2 + radius * math.sin(angle))
        labels = sorted({self.nodes[i][0] for i in ids})
        colour = {label: _PALETTE[j % len(_PALETTE)] for j, label in enumerate(labels)}
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
            f'viewBox="0 0 {size} {size}" style="font-family:system-ui,sans-serif;font-size:11px">',
            '<defs><marker id="kag-arrow" viewBox="0 0 10 10" refX="18" refY="5" markerWidth="6" '
            'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#999"/></marker></defs>',
        ]
        for start, end, kind in self.edges:
            if start in pos and end in pos:
                (x1, y1), (x2, y2) = pos[start], pos[end]
                parts.append(
                    f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#999" '
                    'marker-end="url(#kag-arrow)"/>'
                    f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2:.1f}" fill="#666">{esc(kind)}</text>'
                )
        for node_id in ids:
            label, name = self.nodes[node_id]
            x, y = pos[node_id]
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{colour[label]}"><title>{esc(label)}: '
                f"{esc(name)}</title></circle>"
                f'<text x="{x + 11:.1f}" y="{y + 4:.1f}">{esc(name)}</text>'
            )
        legend = " ".join(
            f'<tspan fill="{colour[label]}">\u25cf</tspan><tspan> {esc(label)}  </tspan>' for label in labels
        )
        parts.append(f'<text x="6" y="{size - 8}">{legend}</text></svg>')
        return "".join(parts)
