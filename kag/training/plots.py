"""Pictures of training: the reward per epoch, and a program's module graph.

``plot_history`` draws with matplotlib (``pip install 'graph-kag[train]'``) and returns
the figure, which Jupyter shows inline. ``plot_program`` writes the module graph
as SVG by itself (no Graphviz binary): columns by depth from the inputs, one box
per input or module call, arrows for the data flow. Its result shows inline in
Jupyter (``_repr_svg_``) and saves with ``.save(path)``.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kag.errors import ConfigError, MissingDependencyError
from kag.files import atomic_write_text
from kag.version import pip_install

__all__ = ["ProgramPicture", "plot_history", "plot_program"]


def plot_history(history: Any, *, keys: list[str] | None = None, title: str | None = None) -> Any:
    """A matplotlib figure of ``reward`` and ``val_reward`` (or ``keys``) per epoch.

    ``history`` is what ``fit`` returned (or its ``.history`` dict).
    """
    try:
        import matplotlib.pyplot as plt  # headless machines get a non-interactive backend by themselves
    except ImportError as exc:
        raise MissingDependencyError(f"plot_history needs matplotlib: {pip_install('train')}.") from exc
    logs = history.history if hasattr(history, "history") else history
    if not isinstance(logs, dict) or not logs:
        raise ConfigError("plot_history needs the History returned by fit (or its .history dict).")
    shown = keys or [k for k in ("reward", "val_reward") if k in logs]
    if not shown:
        raise ConfigError(f"nothing to plot: the history has {sorted(logs)}; pass keys=[...].")
    missing = [k for k in shown if k not in logs]
    if missing:
        raise ConfigError(f"the history has no {missing}; it has {sorted(logs)}.")
    figure, axes = plt.subplots(figsize=(6, 3.5))
    for key in shown:
        values = logs[key]
        axes.plot(range(1, len(values) + 1), values, marker="o", label=key)
    axes.set_xlabel("epoch")
    axes.set_ylabel("reward")
    if all(k.endswith("reward") for k in shown):
        axes.set_ylim(-0.02, 1.02)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    axes.set_title(title or "Training")
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    plt.close(figure)  # returned, not shown twice in notebooks
    return figure


@dataclass(frozen=True)
class ProgramPicture:
    """An SVG picture of a program (``.svg``), shown inline by Jupyter."""

    svg: str

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the SVG to ``path`` (atomically)."""
        return atomic_write_text(Path(path), self.svg)


_BOX_W, _BOX_H, _GAP_X, _GAP_Y, _PAD = 210, 64, 60, 22, 16


def plot_program(program: Any) -> ProgramPicture:
    """The program's graph: its inputs and module calls as boxes, data flow as arrows."""
    inputs = getattr(program, "inputs", None)
    nodes = getattr(program, "nodes", None)
    if inputs is None or nodes is None:
        raise ConfigError(f"plot_program needs a kag Program, got {type(program).__name__}.")
    depth: dict[str, int] = {t.name: 0 for t in inputs}
    rows: list[tuple[str, str, str, list[str]]] = [(t.name, "Input", t.data_model.__name__, []) for t in inputs]
    for node in nodes:
        parents = [t.name for t in node.inbound]
        depth[node.output.name] = 1 + max((depth.get(p, 0) for p in parents), default=0)
        rows.append((node.output.name, type(node.module).__name__, node.output.data_model.__name__, parents))
    columns: dict[int, list[str]] = {}
    for name, *_ in rows:
        columns.setdefault(depth[name], []).append(name)
    place: dict[str, tuple[int, int]] = {}
    for col, names in columns.items():
        for row, name in enumerate(names):
            place[name] = (_PAD + col * (_BOX_W + _GAP_X), _PAD + row * (_BOX_H + _GAP_Y))
    width = _PAD * 2 + (max(columns) + 1) * (_BOX_W + _GAP_X) - _GAP_X
    height = _PAD * 2 + max(len(v) for v in columns.values()) * (_BOX_H + _GAP_Y) - _GAP_Y
    outputs = {t.name for t in getattr(program, "outputs", [])}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="kag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for name, _kind, _model, parents in rows:
        x, y = place[name]
        for parent in parents:
            px, py = place[parent]
            parts.append(
                f'<line x1="{px + _BOX_W}" y1="{py + _BOX_H // 2}" x2="{x}" y2="{y + _BOX_H // 2}" '
                'stroke="#555" stroke-width="1.5" marker-end="url(#kag-arrow)"/>'
            )
    for name, kind, model, _parents in rows:
        x, y = place[name]
        fill = "#e8f0fe" if kind == "Input" else "#fef7e0" if name in outputs else "#e6f4ea"
        title = html.escape(f"{name}: {kind} -> {model}")
        parts.append(
            f'<g><title>{title}</title><rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="8" '
            f'fill="{fill}" stroke="#444"/>'
            f'<text x="{x + _BOX_W // 2}" y="{y + 20}" text-anchor="middle" font-weight="bold">'
            f"{html.escape(_clip(name))}</text>"
            f'<text x="{x + _BOX_W // 2}" y="{y + 38}" text-anchor="middle" fill="#333">'
            f"{html.escape(_clip(kind))}</text>"
            f'<text x="{x + _BOX_W // 2}" y="{y + 54}" text-anchor="middle" fill="#666" font-size="11">'
            f"{html.escape(_clip(f'→ {model}'))}</text></g>"
        )
    parts.append("</svg>")
    return ProgramPicture("".join(parts))


def _clip(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
