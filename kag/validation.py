"""The one home of the bounds every entry point checks: ``k``, thresholds, counts.

Each check returns the value in its canonical type or raises
:class:`~kag.errors.InvalidInputError` (a ``ValueError``) naming the argument and its
allowed range, so a caller sees the same message from the library, the CLI and HTTP.
"""

from __future__ import annotations

import math
from typing import Any

from kag.errors import ConfigError, InvalidInputError

MAX_K = 10_000
"""The largest ``k`` any search accepts: results beyond it are a scan, not a search."""


def check_k(
    k: Any,
    *,
    name: str = "k",
    minimum: int = 1,
    maximum: int = MAX_K,
    error: type[InvalidInputError] | type[ConfigError] = InvalidInputError,
) -> int:
    """``k`` as an ``int`` in ``minimum..maximum`` (``bool`` is refused: ``True`` is not a count)."""
    if isinstance(k, bool) or not isinstance(k, int) or not minimum <= k <= maximum:
        raise error(f"{name} must be an integer between {minimum} and {maximum}, got {k!r}.")
    return k


def check_threshold(
    value: Any,
    *,
    name: str = "threshold",
    low: float = 0.0,
    high: float = 1.0,
    error: type[InvalidInputError] | type[ConfigError] = InvalidInputError,
) -> float:
    """A finite number in ``[low, high]`` as a ``float``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise error(f"{name} must be a number in [{low}, {high}], got {value!r}.")
    if not low <= value <= high:
        raise error(f"{name} must be a number in [{low}, {high}], got {value!r}.")
    return float(value)


def check_finite(
    value: Any, *, name: str, error: type[InvalidInputError] | type[ConfigError] = InvalidInputError
) -> float:
    """Any finite number as a ``float`` (score cut-offs that are not similarities)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise error(f"{name} must be a finite number, got {value!r}.")
    return float(value)
