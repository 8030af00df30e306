"""Arrays grown in place (kag.graph.spare): an append reuses the buffer, older arrays never change."""

from __future__ import annotations

import numpy as np

from kag.graph.spare import MIN_SPARE, gathered, grown


def test_appends_reuse_the_buffer_and_leave_older_arrays_as_they_were() -> None:
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    first, spare = grown(base, None, 4, 6)
    assert not np.shares_memory(first, base) and spare.buffer.shape[0] == 6 + MIN_SPARE
    assert np.array_equal(first[:4], base)
    first[4:] = 7.0
    second, again = grown(first, spare, 6, 9)
    assert again is spare and np.shares_memory(second, first) and spare.used == 9  # nothing copied
    second[6:] = -1.0
    assert np.array_equal(first[4:], np.full((2, 3), 7.0))  # the older array sees none of it
    assert np.array_equal(second[:6], first)


def test_a_second_growth_from_the_same_array_gets_its_own_buffer() -> None:
    base, spare = grown(np.ones((5, 2), dtype=np.float32), None, 5, 5)
    left, _ = grown(base, spare, 5, 7)
    left[5:] = 1.5
    right, other = grown(base, spare, 5, 6)  # base is no longer what the buffer last handed out
    right[5:] = 9.0
    assert other is not spare and not np.shares_memory(left, right)
    assert np.array_equal(left[5:], np.full((2, 2), 1.5))


def test_rows_changed_in_place_or_dropped_are_copied() -> None:
    base, spare = grown(np.zeros((5, 2), dtype=np.float32), None, 5, 5)
    shorter, other = grown(base, spare, 3, 3)  # the last rows deleted: kept 3 of 5
    assert other is not spare and shorter.shape == (3, 2)
    wider = np.arange(6, dtype=np.float32).reshape(2, 3)
    columns, cspare = grown(wider, None, 3, 5, axis=1)  # along the columns
    assert columns.shape == (2, 5) and np.array_equal(columns[:, :3], wider)
    more, same = grown(columns, cspare, 5, 8, axis=1)
    assert same is cspare and np.shares_memory(more, columns) and np.array_equal(more[:, :5], columns)


def test_gathered_is_take_with_room_to_spare() -> None:
    base = np.random.default_rng(1).standard_normal((50, 4)).astype(np.float32)
    rows = np.array([3, 1, 49, 0])
    for axis, source in ((0, base), (1, base.T.copy())):
        out, spare = gathered(source, rows, axis=axis)
        assert np.array_equal(out, np.take(source, rows, axis=axis)) and spare.used == 4
        assert spare.buffer.shape[axis] == 4 + MIN_SPARE
    longer, spare = gathered(base, rows, 6)  # room for two more rows, written by the caller
    assert longer.shape == (6, 4) and np.array_equal(longer[:4], base[rows]) and spare.used == 6
