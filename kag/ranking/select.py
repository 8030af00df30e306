"""Order statistics of score arrays, shared by every exact top-k screen."""

from __future__ import annotations

import math

import numpy as np

_SAMPLED_MIN = 32_768  # below this, one partition of the whole array is as fast
_SAMPLE = 4_096  # values in the strided sample that bounds the k-th largest from below


def kth_largest(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (``1 <= k <= len``).

    Selected from the negated array: scores hold many equal low values (rows sharing no
    feature with the query), which make numpy's introselect slow from the high end
    (0.28 ms vs 0.02 ms on 34k City scores).

    A large array with a small ``k`` is first cut by a lower bound read from a strided
    sample of it; when at least ``k`` values pass the bound, the ``k``-th largest of those
    is the answer (the same value), else the whole array is partitioned. Measured on 100k
    screen scores (``k = 800``): 0.14 ms against 0.65 ms for the whole partition.
    """
    n = values.shape[0]
    if n >= _SAMPLED_MIN and k * 8 <= n:
        sample = values[:: n // _SAMPLE]
        expected = k * sample.shape[0] / n  # sample values expected above the k-th largest
        rank = min(sample.shape[0], math.ceil(2 * expected + 3 * math.sqrt(expected) + 8))
        bound = -np.partition(-sample, rank - 1)[rank - 1]
        passed = values[values >= bound]
        if passed.shape[0] >= k:
            return float(-np.partition(-passed, k - 1)[k - 1])
    return float(-np.partition(-values, k - 1)[k - 1])
