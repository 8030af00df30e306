"""The one home of the bounds every entry point checks: ``k``, thresholds, counts.

Each check returns the value in its canonical type or raises
:class:`~kag.errors.InvalidInputError` (a ``ValueError``) naming the argument and its
allowed range, so a caller sees the same message from the library, the CLI and HTTP.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from kag.errors import ConfigError, InvalidInputError, KagError

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


def check_int(
    value: Any,
    *,
    name: str,
    minimum: int | None = 1,
    maximum: int | None = None,
    error: type[KagError] = ConfigError,
) -> int:
    """``value`` as an ``int`` within ``minimum..maximum`` (either bound may be ``None``).

    ``bool`` is refused although it is an ``int``: ``True`` is not a count. The default bounds
    are those of a positive count (``minimum=1``); ``minimum=0`` allows zero.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not _within(value, minimum, maximum):
        raise error(f"{name} must be {_int_range(minimum, maximum)}, got {value!r}.")
    return value


def check_number(
    value: Any,
    *,
    name: str,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    error: type[KagError] = ConfigError,
) -> float:
    """A finite ``int`` or ``float`` (not ``bool``) within the bounds, as a ``float``.

    ``exclusive_minimum=True`` makes ``minimum`` itself invalid (a weight or timeout ``> 0``).
    """
    bad = isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    if not bad:
        bad = not _within(value, minimum, maximum) or (exclusive_minimum and value == minimum)
    if bad:
        low = "" if minimum is None else (f"> {minimum}" if exclusive_minimum else f">= {minimum}")
        high = "" if maximum is None else f"<= {maximum}"
        bounds = " and ".join(b for b in (low, high) if b)
        raise error(f"{name} must be a finite number{' ' + bounds if bounds else ''}, got {value!r}.")
    return float(value)


def _within(value: float, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def _int_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer between {minimum} and {maximum}"
    if minimum == 1:
        return "a positive integer"
    if minimum is not None:
        return f"an integer >= {minimum}"
    if maximum is not None:
        return f"an integer <= {maximum}"
    return "an integer"


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


DEFAULT_NAMESPACE = "default"
"""The namespace (tenant) of a store opened without one."""
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_namespace(value: Any, *, error: type[InvalidInputError] | type[ConfigError] = ConfigError) -> str:
    """A namespace (tenant) name: 1-64 of ``A-Z a-z 0-9 _ . -``, starting with a letter or digit.

    Namespaces are always query *values* (never Cypher text); the pattern keeps them
    printable in logs, metrics labels, HTTP headers and file names.
    """
    if not isinstance(value, str) or not _NAMESPACE.fullmatch(value):
        raise error(
            f"a namespace must be 1-64 characters of A-Z, a-z, 0-9, '_', '.', '-' starting with a letter or "
            f"digit, got {value!r}."
        )
    return value


MAX_JSON_DEPTH = 80
"""How deeply JSON from outside may nest: room for a filter of the deepest allowed nesting (32 filter
levels are 64 JSON levels) inside a request body."""

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text (brackets inside strings do not count)."""
    bare = _JSON_STRING.sub('""', text).encode("utf-8", "replace")
    chars = np.frombuffer(bare, dtype=np.uint8)
    if not chars.size:
        return 0
    step = np.isin(chars, _OPEN).astype(np.int64) - np.isin(chars, _CLOSE).astype(np.int64)
    return int(np.cumsum(step).max(initial=0))


_OPEN = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSE = np.frombuffer(b"]}", dtype=np.uint8)


def loads_json(text: str | bytes, *, what: str = "the JSON", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON from outside: no NaN/Infinity, no number that overflows to infinity, bounded depth.

    Raises :class:`~kag.errors.InvalidInputError` (never ``RecursionError``) with a message that
    says what was wrong.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInputError(f"{what} is not valid UTF-8.") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise InvalidInputError(f"{what} nests {depth} levels deep; at most {max_depth} are allowed.")

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def finite_float(literal: str) -> float:
        number = float(literal)
        if not math.isfinite(number):  # 1e999 parses as inf; JSON has no infinities
            raise ValueError(f"{literal} is out of range for a JSON number")
        return number

    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{what} is not valid JSON ({exc}).") from None
