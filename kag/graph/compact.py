"""Compact columns for the embedded store's relationships (no Python object per edge).

A million relationships held as networkx edges cost about 750 MiB (adjacency dicts both
ways, a props dict and an id string per edge). Here they cost a few numpy arrays:

* :class:`IdColumn`: the ids, UTF-8 in one fixed-width bytes array, found by binary search
  over a sorted permutation (which also gives the id ranks the tie-break needs);
* :class:`GrowArray`: an append-only int32 array (start, end, type, slot per edge);
* :class:`PropTable`: the properties of one relationship type, column-wise (one list per
  key; a value shared by many edges, such as the type name, is one object).

Positions are append-only: a deleted edge keeps its slot, marked dead, so a position
never changes meaning while the store is open (saving compacts them).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kag.errors import InvalidInputError

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""Placeholder of an unset property in a :class:`PropTable` column (``None`` is a value)."""


class GrowArray:
    """An append-only numpy array that doubles its buffer as it grows."""

    def __init__(self, dtype: Any = np.int32, data: np.ndarray | None = None) -> None:
        self._data = np.zeros(16, dtype=dtype) if data is None else np.array(data, dtype=dtype)
        self.size = 0 if data is None else int(self._data.shape[0])

    def extend(self, values: np.ndarray | Sequence[int]) -> None:
        """Append ``values``."""
        arr = np.asarray(values, dtype=self._data.dtype)
        need = self.size + arr.shape[0]
        if need > self._data.shape[0]:
            grown = np.zeros(max(16, need, 2 * self._data.shape[0]), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : need] = arr
        self.size = need

    @property
    def view(self) -> np.ndarray:
        """The filled part (a view: writes go to the store)."""
        return self._data[: self.size]

    def nbytes(self) -> int:
        """Bytes held, spare capacity included."""
        return int(self._data.nbytes)


class IdColumn:
    """String ids by position: UTF-8 in a fixed-width bytes array, found by binary search.

    The array is as wide as the longest id (in bytes). Lookups binary-search a sorted
    permutation of the positions; ids appended since the last sort wait in a small dict
    and are merged in (a linear merge of two sorted runs) once there are many. An id
    deleted and written again gets a new position; the old one stays, dead.
    """

    def __init__(self) -> None:
        self._data = np.zeros(16, dtype="S1")
        self.size = 0
        self._alive = GrowArray(np.bool_)
        self.live = 0
        self._order = np.zeros(0, dtype=np.int64)  # sorted positions of [0, len(_order))
        self._keys = np.zeros(0, dtype="S1")  # the ids in that order (binary search without a sorter)
        self._recent: dict[str, int] = {}

    # -- writes -----------------------------------------------------------------
    def append(self, ids: Sequence[str]) -> np.ndarray:
        """Store ``ids`` (not present, pairwise distinct, checked by :func:`check_id`) at new positions.

        Returns the positions.
        """
        if not ids:
            return np.zeros(0, dtype=np.int64)
        encoded = [i.encode("utf-8") for i in ids]
        width = max(len(b) for b in encoded)
        if width > self._data.dtype.itemsize:
            self._data = self._data.astype(f"S{width}")
        need = self.size + len(encoded)
        if need > self._data.shape[0]:
            grown = np.zeros(max(16, need, 2 * self._data.shape[0]), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : need] = encoded
        positions = np.arange(self.size, need, dtype=np.int64)
        self.size = need
        self._alive.extend(np.ones(len(encoded), dtype=bool))
        self.live += len(encoded)
        if len(encoded) > 4096:  # a bulk write: sort it in now rather than through the dict
            self._merge()
        else:
            self._recent.update(zip(ids, positions.tolist(), strict=True))
        return positions

    def kill(self, pos: int) -> None:
        """Mark position ``pos`` deleted."""
        if self._alive.view[pos]:
            self._alive.view[pos] = False
            self.live -= 1

    # -- reads ------------------------------------------------------------------
    @property
    def alive(self) -> np.ndarray:
        """Boolean mask of the live positions."""
        return self._alive.view

    def id_of(self, pos: int) -> str | None:
        """The id at ``pos`` (``None`` when deleted)."""
        if not self._alive.view[pos]:
            return None
        return bytes(self._data[pos]).decode("utf-8")

    def ids_of(self, positions: np.ndarray) -> list[str]:
        """The ids at ``positions`` (all live)."""
        return [bytes(b).decode("utf-8") for b in self._data[positions]]

    def find(self, item: str) -> int | None:
        """The live position of ``item``, or ``None``."""
        pos = int(self.find_many([item])[0])
        return None if pos < 0 else pos

    def find_many(self, ids: Sequence[str]) -> np.ndarray:
        """Live positions of ``ids`` (-1 where absent)."""
        out = np.full(len(ids), -1, dtype=np.int64)
        if not ids or not self.live:
            return out
        if len(self._recent) > 4096 + self._order.shape[0] // 8:
            self._merge()
        rest: list[int] = []
        recent = self._recent
        for i, item in enumerate(ids):
            pos = recent.get(item)
            if pos is None:
                if not item.endswith("\x00"):  # never stored (see check_id)
                    rest.append(i)
            elif self._alive.view[pos]:  # the newest copy of an id: if dead, so are the older ones
                out[i] = pos
        if rest and self._order.shape[0]:
            keys = np.asarray([ids[i].encode("utf-8") for i in rest])
            if keys.dtype.itemsize > self._keys.dtype.itemsize:  # longer than every stored id: absent
                fits = np.asarray([len(k) <= self._keys.dtype.itemsize for k in keys.tolist()])
                rest = [r for r, ok in zip(rest, fits.tolist(), strict=True) if ok]
                keys = keys[fits].astype(self._keys.dtype)
            lo = np.searchsorted(self._keys, keys, side="left")
            hi = np.searchsorted(self._keys, keys, side="right")
            alive = self._alive.view
            for r, a, b in zip(rest, lo.tolist(), hi.tolist(), strict=True):
                for j in range(a, b):  # equal ids: an old dead copy and at most one live one
                    pos = int(self._order[j])
                    if alive[pos]:
                        out[r] = pos
                        break
        return out

    def ranks(self) -> np.ndarray:
        """Rank of each position's id in sorted (code point) order; dead positions rank anywhere."""
        self._merge()
        ranks = np.empty(self.size, dtype=np.int64)
        ranks[self._order] = np.arange(self.size, dtype=np.int64)
        return ranks

    def sorted_positions(self) -> np.ndarray:
        """Every position (dead ones included) in id order."""
        self._merge()
        return self._order

    def nbytes(self) -> int:
        """Bytes held by the arrays (the small dict of recent ids not counted)."""
        return int(self._data.nbytes + self._order.nbytes + self._keys.nbytes + self._alive.nbytes())

    def _merge(self) -> None:
        """Sort the recent ids into the permutation (timsort merges the two sorted runs)."""
        if self._order.shape[0] == self.size:
            self._recent.clear()
            return
        old = self._order
        new = np.arange(old.shape[0], self.size, dtype=np.int64)
        new = new[np.argsort(self._data[new], kind="stable")]
        both = np.concatenate([old, new])
        self._order = both[np.argsort(self._data[both], kind="stable")]
        self._keys = self._data[self._order]
        self._recent.clear()

    # -- persistence ------------------------------------------------------------
    def raw(self, positions: np.ndarray) -> np.ndarray:
        """The ids at ``positions`` as a fixed-width bytes array (for saving)."""
        return np.ascontiguousarray(self._data[positions])

    @classmethod
    def from_raw(cls, raw: np.ndarray, order: np.ndarray | None = None) -> IdColumn:
        """A column of the ids in the fixed-width bytes array ``raw`` (``order``: their sorted permutation)."""
        if not isinstance(raw, np.ndarray) or raw.ndim != 1 or raw.dtype.kind != "S":
            raise ValueError("the ids are not a fixed-width bytes array")
        col = cls()
        data = raw.copy()
        col._data = data if data.shape[0] else np.zeros(16, dtype=data.dtype)
        col.size = int(data.shape[0])
        col._alive = GrowArray(np.bool_, np.ones(col.size, dtype=bool))
        col.live = col.size
        if order is None or order.shape[0] != col.size:
            order = np.argsort(data, kind="stable")
        col._order = np.asarray(order, dtype=np.int64)
        col._keys = data[col._order]
        if col.size > 1 and not bool(np.all(col._keys[1:] >= col._keys[:-1])):
            raise ValueError("the stored id order is not sorted")
        return col


def check_id(item: Any) -> None:
    """Refuse an id an :class:`IdColumn` cannot hold: not a string, or ending with NUL."""
    if not isinstance(item, str) or item.endswith("\x00"):
        # a fixed-width bytes array cannot tell trailing NULs from its padding
        raise InvalidInputError(f"id {item!r} must be a string that does not end with a NUL character.")


class PropTable:
    """Properties of the relationships of one type, column-wise (slot = the edge's row here)."""

    def __init__(self) -> None:
        self.positions = GrowArray(np.int64)  # edge position of each slot
        self.columns: dict[str, list[Any]] = {}

    @property
    def size(self) -> int:
        """Number of slots (dead edges included)."""
        return self.positions.size

    def add(self, positions: Sequence[int]) -> int:
        """New slots for the edges at ``positions``; return the first slot."""
        first = self.size
        self.positions.extend(positions)
        for col in self.columns.values():
            col.extend([MISSING] * len(positions))
        return first

    def get(self, slot: int) -> dict[str, Any]:
        """The properties of ``slot`` as a new dict."""
        out = {}
        for key, col in self.columns.items():
            value = col[slot]
            if value is not MISSING:
                out[key] = list(value) if isinstance(value, list) else value
        return out

    def value(self, slot: int, key: str) -> Any:
        """One property of ``slot`` (``MISSING`` when unset)."""
        col = self.columns.get(key)
        return MISSING if col is None else col[slot]

    def set(self, slot: int, key: str, value: Any) -> None:
        """Set (``MISSING``: unset) one property of ``slot``."""
        col = self.columns.get(key)
        if col is None:
            if value is MISSING:
                return
            col = self.columns[key] = [MISSING] * self.size
        col[slot] = _share(value)

    def merge(self, slot: int, new: Mapping[str, Any], merge_key: str) -> None:
        """``SET r += new``, except ``merge_key`` (provenance), which becomes the sorted union."""
        for key, value in new.items():
            if key == merge_key:
                before = self.value(slot, key)
                value = sorted({*(before if isinstance(before, list) else ()), *value})
            self.set(slot, key, value)

    def fill(self, first: int, records: Sequence[Mapping[str, Any]], merge_key: str) -> None:
        """Set the properties of new slots ``first, first + 1, ...`` (nothing set there yet)."""
        keys = dict.fromkeys(k for props in records for k in props)
        end = first + len(records)
        for key in keys:
            col = self.columns.get(key)
            if col is None:
                col = self.columns[key] = [MISSING] * self.size
            values = [props.get(key, MISSING) for props in records]
            if key == merge_key:
                values = [v if v is MISSING else sorted(set(v)) for v in values]
            col[first:end] = [_share(v) for v in values]

    def slots_with(self, key: str) -> Iterable[tuple[int, Any]]:
        """``(slot, value)`` of every slot where ``key`` is set."""
        col = self.columns.get(key)
        if col is None:
            return ()
        return ((slot, value) for slot, value in enumerate(col) if value is not MISSING)

    def dump(self, slots: np.ndarray) -> dict[str, Any]:
        """Columns of ``slots`` for saving (see :func:`dump_column`)."""
        picks = slots.tolist()
        return {key: dump_column([col[s] for s in picks]) for key, col in self.columns.items()}

    @classmethod
    def load(cls, positions: np.ndarray, columns: Mapping[str, Any]) -> PropTable:
        """A table from :meth:`dump`'s columns, the slots at edge ``positions``."""
        table = cls()
        table.positions = GrowArray(np.int64, positions)
        n = table.size
        for key, spec in columns.items():
            table.columns[str(key)] = load_column(spec, n)
        return table


def _share(value: Any) -> Any:
    # equal short strings become one object: a column of a million type names holds one string
    return sys.intern(value) if type(value) is str and len(value) <= 64 else value


def dump_column(values: list[Any]) -> dict[str, Any]:
    """A column for :func:`pack_document`: one repeated string, an int64 / float64 array, or a list.

    Unset slots are listed in ``missing`` (and hold ``None`` or 0 in the stored values).
    """
    missing = [i for i, v in enumerate(values) if v is MISSING]
    skip = set(missing)
    present = [v for i, v in enumerate(values) if i not in skip] if missing else values
    kinds = {type(v) for v in present}
    out: dict[str, Any] = {"count": len(values), "missing": missing}
    if kinds == {str} and present.count(present[0]) == len(present):
        out["same"] = present[0]
    elif kinds == {int} and min(present) >= -(2**63) and max(present) < 2**63:
        out["int64"] = np.asarray([0 if v is MISSING else v for v in values], dtype=np.int64)
    elif kinds == {float}:
        out["float64"] = np.asarray([0.0 if v is MISSING else v for v in values], dtype=np.float64)
    else:
        out["values"] = [None if v is MISSING else v for v in values]
    return out


def load_column(spec: Mapping[str, Any], count: int) -> list[Any]:
    """The values of a column written by :func:`dump_column` (``MISSING`` where unset)."""
    if int(spec["count"]) != count:
        raise ValueError(f"a column has {spec['count']} values for {count} relations")
    if "same" in spec:
        same = spec["same"]
        if not isinstance(same, str):
            raise ValueError("a repeated column value must be a string")
        values: list[Any] = [_share(same)] * count
    elif "int64" in spec:
        values = checked_array(spec["int64"], np.int64, count).tolist()
    elif "float64" in spec:
        values = checked_array(spec["float64"], np.float64, count).tolist()
    else:
        values = [_share(v) for v in spec["values"]]
        if len(values) != count:
            raise ValueError(f"a column has {len(values)} values for {count} relations")
    for i in spec["missing"]:
        values[i] = MISSING
    return values


def checked_array(value: Any, dtype: Any, count: int | None) -> np.ndarray:
    """``value`` as a 1-d array of ``dtype`` and ``count`` items (any count when ``None``); else ValueError."""
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype != np.dtype(dtype):
        raise ValueError(f"expected a 1-d {np.dtype(dtype)} array")
    if count is not None and value.shape[0] != count:
        raise ValueError(f"expected {count} values, found {value.shape[0]}")
    return value


MAGIC = b"KAGSTORE"
_ALIGN = 64


def pack_document(document: Any) -> bytes:
    """``document`` (JSON values and numpy arrays) as one binary file.

    Arrays may be values of (nested) dicts, not list items. Layout: ``MAGIC``, the
    header's length (8 bytes, little-endian), the header (UTF-8 JSON, each array
    replaced by ``{"__array__": [dtype, shape, offset]}``), then the
    arrays' bytes, each at a 64-byte-aligned offset after the header. Reading it back is
    one JSON parse of the small header plus zero-copy views of the arrays.
    """
    blobs: list[bytes] = []
    offset = 0

    def walk(value: Any) -> Any:
        nonlocal offset
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "O":
                raise TypeError("object arrays cannot be packed")
            arr = np.ascontiguousarray(value)
            if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            ref = {"__array__": [arr.dtype.str, list(arr.shape), offset]}
            data = arr.tobytes()
            pad = (-len(data)) % _ALIGN
            blobs.append(data + b"\0" * pad)
            offset += len(data) + pad
            return ref
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value  # lists hold plain JSON values (arrays go in dicts)

    header = json.dumps(walk(document), ensure_ascii=False, allow_nan=False).encode("utf-8")
    header += b" " * ((-(len(MAGIC) + 8 + len(header))) % _ALIGN)
    return b"".join([MAGIC, len(header).to_bytes(8, "little"), header, *blobs])


def unpack_document(data: bytes) -> Any:
    """The document :func:`pack_document` wrote (arrays are read-only views of ``data``)."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise ValueError("not a packed kag store")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8
    header = json.loads(data[start : start + size].decode("utf-8"))
    base = start + size
    buffer = memoryview(data)

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            ref = value.get("__array__")
            if ref is not None and len(value) == 1:
                dtype, shape, offset = np.dtype(ref[0]), tuple(int(s) for s in ref[1]), int(ref[2])
                count = int(np.prod(shape)) if shape else 1
                if offset < 0 or base + offset + count * dtype.itemsize > len(data):
                    raise ValueError("an array lies outside the file")
                arr = np.frombuffer(buffer, dtype=dtype, count=count, offset=base + offset)
                return arr.reshape(shape)
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(header)
