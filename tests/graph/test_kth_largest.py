"""``kag.ranking.select.kth_largest``: the sampled cut answers exactly what a full partition does."""

from __future__ import annotations

import numpy as np
import pytest

from kag.ranking.select import kth_largest


def full_partition(values: np.ndarray, k: int) -> float:
    return float(-np.partition(-values, k - 1)[k - 1])


def arrays(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    sparse = np.zeros(n, dtype=np.float32)
    sparse[rng.integers(0, n, 40)] = rng.random(40, dtype=np.float32)
    return {
        "random": rng.standard_normal(n).astype(np.float32),
        "ascending": np.sort(rng.standard_normal(n)).astype(np.float32),  # the strided sample sees the low end
        "descending": -np.sort(-rng.standard_normal(n)),
        "few distinct values": rng.integers(0, 4, n).astype(np.float32),  # ties at the cut
        "mostly zeros": sparse,
        # periodic peaks a strided sample may hit every time: fewer than k values pass its bound
        **{f"peaks every {p}": (np.arange(n) % p == 0).astype(np.float32) for p in (8, 24, 32, 48)},
    }


@pytest.mark.parametrize("n", [40_000, 100_003])
@pytest.mark.parametrize("k", [1, 7, 800, 5_000])
def test_sampled_cut_equals_the_full_partition(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    for name, values in arrays(rng, n).items():
        assert kth_largest(values, k) == full_partition(values, k), name


def test_small_arrays_and_large_k() -> None:
    rng = np.random.default_rng(5)
    values = rng.standard_normal(50_000).astype(np.float32)
    for k in (1, 3, 10, 50_000 // 8 + 1, 50_000):  # past n / 8 the whole array is partitioned
        assert kth_largest(values, k) == full_partition(values, k)
    small = rng.standard_normal(100)
    assert kth_largest(small, 5) == full_partition(small, 5)
