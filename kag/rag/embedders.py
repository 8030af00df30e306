"""Embedders: text -> L2-normalized float32 vectors.

``HashEmbedder`` is the offline default: deterministic signed feature hashing of
normalized words and adjacent word pairs (plus character trigrams, so that
misspelled names still land close to the right entity). It needs no model
weights and gives the same vectors on every machine and Python version.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kag.errors import EmbeddingError, InvalidInputError
from kag.text import words


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into a ``(len(texts), dimensions)`` float32 matrix."""

    dimensions: int

    @property
    def name(self) -> str:
        """A stable identifier, stored with persisted vectors."""
        ...

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; rows are L2-normalized."""
        ...


def check_matrix(matrix: Any, rows: int, dimensions: int, source: str) -> np.ndarray:
    """Validate an embedder's output and return it as normalized float32."""
    arr = np.asarray(matrix, dtype=np.float32)
    if arr.ndim != 2 or arr.shape != (rows, dimensions):
        raise EmbeddingError(
            f"{source} returned an array of shape {arr.shape}, expected ({rows}, {dimensions}); "
            "check the embedder's dimensions setting."
        )
    if not np.isfinite(arr).all():
        raise EmbeddingError(f"{source} returned NaN or infinite values; refusing to store them.")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if rows and (norms == 0).any():
        # zero vectors have no direction; keep them zero (they score 0.5, "unrelated")
        norms = np.where(norms == 0, 1.0, norms)
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


class HashEmbedder:
    """Deterministic signed feature-hashing embedder (no weights, no network).

    Features: normalized words (weight 1), adjacent word pairs (weight 1) and
    character trigrams of each word (weight 1.0, which lets typos still match).
    """

    def __init__(self, dimensions: int = 384, *, trigram_weight: float = 1.0) -> None:
        if not isinstance(dimensions, int) or dimensions < 8 or dimensions > 65536:
            raise InvalidInputError("HashEmbedder dimensions must be an int in [8, 65536].")
        self.dimensions = dimensions
        self.trigram_weight = float(trigram_weight)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @property
    def name(self) -> str:
        return f"hash-v1-{self.dimensions}-{self.trigram_weight:g}"

    def _features(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        toks = words(text)
        feats: list[tuple[str, float]] = [(f"w:{t}", 1.0) for t in toks]
        if not toks:
            # no word characters ("****", ""): one feature of the raw text keeps the vector
            # non-zero, so it can be stored and compared (it matches only the same text)
            feats.append((f"raw:{' '.join(text.split())}", 1.0))
        feats += [(f"b:{a} {b}", 1.0) for a, b in itertools.pairwise(toks)]
        if self.trigram_weight:
            for t in toks:
                padded = f"<{t}>"
                feats += [(f"c:{padded[i : i + 3]}", self.trigram_weight) for i in range(len(padded) - 2)]
        idx = np.empty(len(feats), dtype=np.int64)
        sign = np.empty(len(feats), dtype=np.float32)
        weight = np.empty(len(feats), dtype=np.float32)
        for i, (feat, w) in enumerate(feats):
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            idx[i] = h % self.dimensions
            sign[i] = 1.0 if (h >> 63) & 1 else -1.0
            weight[i] = w
        out = (idx, sign, weight)
        if len(self._cache) < 100_000:
            self._cache[text] = out
        return out

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as one batch (blocking; cheap)."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        matrix = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        rows, cols, vals = [], [], []
        for r, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"text #{r} is {type(text).__name__}, expected str.")
            idx, sign, weight = self._features(text)
            rows.append(np.full(idx.shape, r, dtype=np.int64))
            cols.append(idx)
            vals.append(sign * weight)
        if rows:
            np.add.at(matrix, (np.concatenate(rows), np.concatenate(cols)), np.concatenate(vals))
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return matrix

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_sync(texts)


class CallableEmbedder:
    """Wraps a user function ``texts -> vectors`` (sync or async) as an Embedder."""

    def __init__(
        self,
        fn: Callable[[list[str]], Any] | Callable[[list[str]], Awaitable[Any]],
        dimensions: int,
        *,
        name: str | None = None,
        batch_size: int = 256,
    ) -> None:
        if dimensions < 1:
            raise InvalidInputError("CallableEmbedder dimensions must be >= 1.")
        self._fn = fn
        self.dimensions = dimensions
        self.batch_size = max(1, batch_size)
        self._name = name or f"callable-{getattr(fn, '__name__', 'fn')}-{dimensions}"

    @property
    def name(self) -> str:
        return self._name

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            out = self._fn(batch)
            if inspect.isawaitable(out):
                out = await out
            parts.append(check_matrix(out, len(batch), self.dimensions, self._name))
        if not parts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.concatenate(parts)
