"""Retrieval evaluation helpers: recall@k, MRR and a printable comparison table."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence

from kag.validation import check_k


def recall_at_k(ranked: Sequence[Hashable], relevant: Collection[Hashable], k: int) -> float:
    """Share of ``relevant`` items found among the first ``k`` entries of ``ranked``.

    ``ranked`` may repeat labels (e.g. the topic of each retrieved chunk); each
    relevant label counts once. An empty ``relevant`` set gives 1.0.
    """
    check_k(k)
    wanted = set(relevant)
    if not wanted:
        return 1.0
    found = wanted.intersection(ranked[:k])
    return len(found) / len(wanted)


def reciprocal_rank(ranked: Sequence[Hashable], relevant: Collection[Hashable]) -> float:
    """``1 / rank`` of the first relevant entry of ``ranked`` (0.0 if none)."""
    wanted = set(relevant)
    for rank, item in enumerate(ranked, start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def mean_recall_at_k(runs: Iterable[tuple[Sequence[Hashable], Collection[Hashable]]], k: int) -> float:
    """Mean of :func:`recall_at_k` over ``(ranked, relevant)`` pairs."""
    return mean(recall_at_k(ranked, relevant, k) for ranked, relevant in runs)


def format_table(rows: Mapping[str, Mapping[str, float]], *, digits: int = 3) -> str:
    """A fixed-width text table: one row per key of ``rows``, one column per metric."""
    if not rows:
        return ""
    columns: list[str] = []
    for metrics in rows.values():
        columns.extend(c for c in metrics if c not in columns)
    first = max(4, *(len(name) for name in rows))
    widths = [max(len(c), digits + 2) for c in columns]
    header = "mode".ljust(first) + "  " + "  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))
    lines = [header, "-" * len(header)]
    for name, metrics in rows.items():
        cells = [
            (f"{metrics[c]:.{digits}f}" if c in metrics else "-").rjust(w) for c, w in zip(columns, widths, strict=True)
        ]
        lines.append(name.ljust(first) + "  " + "  ".join(cells))
    return "\n".join(lines)
