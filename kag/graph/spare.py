"""Arrays that grow in place: a buffer with room to spare whose leading part backs one array after another.

A refreshed label matrix or projected screen is the previous one plus a few rows. Copying
the old rows into a fresh array each time costs more than the copy itself on hosts that hand
freed memory back to the hypervisor: there the first write to a new 150 MB array took
0.2-0.37 s now and then where it usually takes 36 ms. Appending into spare room keeps the old
rows where they are; the older arrays stay valid, because an entry is written only once, when
it is first claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEADROOM = 8  # spare room of a new buffer: an eighth of its size (at least MIN_SPARE entries)
MIN_SPARE = 1024


@dataclass
class Spare:
    """A buffer whose first ``used`` entries along ``axis`` some array views; the rest is free."""

    buffer: np.ndarray
    used: int
    axis: int = 0

    @classmethod
    def fresh(cls, like: np.ndarray, n: int, axis: int) -> Spare:
        """A new buffer shaped like ``like`` with room for ``n`` entries along ``axis`` and some to spare,
        ``n`` of them claimed."""
        shape = list(like.shape)
        shape[axis] = n + max(n // HEADROOM, MIN_SPARE)
        return cls(np.empty(shape, dtype=like.dtype), n, axis)


def grown(base: np.ndarray, spare: Spare | None, keep: int, n: int, axis: int = 0) -> tuple[np.ndarray, Spare]:
    """An array of ``n`` entries along ``axis`` whose first ``keep`` are ``base``'s (the rest unset),
    and the buffer behind it.

    ``spare`` is the buffer ``base`` is the leading part of (or ``None``). When ``base`` is what
    that buffer last handed out, whole, and ``n`` fits, the new array is a longer view of the same
    buffer and no entry is copied; otherwise a new buffer with room to spare is filled. The caller
    writes only the entries past ``keep``, which no other array sees.
    """
    held = base.shape[axis]
    if spare is not None and spare.axis == axis and spare.used == held == keep and n <= spare.buffer.shape[axis]:
        spare.used = n  # claimed: a second array grown from ``base`` gets a buffer of its own
        return _prefix(spare.buffer, n, axis), spare
    fresh = Spare.fresh(base, n, axis)
    _prefix(fresh.buffer, keep, axis)[...] = _prefix(base, keep, axis)
    return _prefix(fresh.buffer, n, axis), fresh


def _prefix(array: np.ndarray, n: int, axis: int) -> np.ndarray:
    index: list[slice] = [slice(None)] * array.ndim
    index[axis] = slice(0, n)
    return array[tuple(index)]


def gathered(base: np.ndarray, rows: np.ndarray, n: int | None = None, axis: int = 0) -> tuple[np.ndarray, Spare]:
    """An array of ``n`` entries (default ``len(rows)``) along ``axis`` that starts with
    ``np.take(base, rows, axis)`` (the rest unset), in a new buffer with room to spare, and the buffer."""
    n = rows.shape[0] if n is None else n
    fresh = Spare.fresh(base, n, axis)
    out = _prefix(fresh.buffer, rows.shape[0], axis)
    if axis == 0:  # a leading block of a C-ordered buffer is contiguous: take writes into it directly
        np.take(base, rows, axis=0, out=out)
    else:
        out[...] = np.take(base, rows, axis=axis)
    return _prefix(fresh.buffer, n, axis), fresh
