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
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kag.errors import DimensionsUnknownError, EmbeddingError, InvalidInputError
from kag.text import words
from kag.validation import check_int


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into a ``(len(texts), dimensions)`` float32 matrix.

    An embedder may also have ``embed_query(text)`` (used for search queries when
    present) and ``embed_documents(texts)``; objects with only those two are
    wrapped by :func:`as_embedder`.
    """

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


# memo sizes per embedder (bounded, so a long-running index build cannot grow them without end):
# feature hashes (about 150 B each), words (their feature hashes), and whole short texts, which
# entity names and queries repeat (a long chunk's arrays would cost kilobytes each)
_MAX_HASHES = 500_000
_MAX_WORDS = 200_000
_MAX_TEXTS = 50_000
_MAX_CACHED_TEXT = 200  # characters


class HashEmbedder:
    """Deterministic signed feature-hashing embedder (no weights, no network).

    Features: normalized words (weight 1), adjacent word pairs (weight 1) and
    character trigrams of each word (weight 1.0, which lets typos still match).
    Feature hashes are memoized per embedder (bounded: see ``_MAX_HASHES``), so a
    corpus's recurring words and trigrams are hashed once; the vectors are the same.
    """

    def __init__(self, dimensions: int = 384, *, trigram_weight: float = 1.0) -> None:
        if not isinstance(dimensions, int) or dimensions < 8 or dimensions > 65536:
            raise InvalidInputError("HashEmbedder dimensions must be an int in [8, 65536].")
        self.dimensions = dimensions
        self.trigram_weight = float(trigram_weight)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._hashes: dict[str, int] = {}  # feature -> hash
        self._words: dict[str, list[int]] = {}  # word -> hashes of its word and trigram features

    @property
    def name(self) -> str:
        return f"hash-v1-{self.dimensions}-{self.trigram_weight:g}"

    def _hash(self, feature: str) -> int:
        """The feature's 64-bit hash, memoized: words and trigrams recur across texts, and hashing
        each occurrence was most of the embedder's time."""
        h = self._hashes.get(feature)
        if h is None:
            h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
            if len(self._hashes) < _MAX_HASHES:
                self._hashes[feature] = h
        return h

    def _word(self, token: str) -> list[int]:
        """Hashes of a word's own feature followed by its trigrams', memoized per word."""
        cached = self._words.get(token)
        if cached is None:
            padded = f"<{token}>"
            cached = [self._hash(f"w:{token}")]
            if self.trigram_weight:
                cached += [self._hash(f"c:{padded[i : i + 3]}") for i in range(len(padded) - 2)]
            if len(self._words) < _MAX_WORDS:
                self._words[token] = cached
        return cached

    def _features(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        toks = words(text)
        # features in a fixed order (words, pairs, each word's trigrams): float32 sums depend on it
        per_word = [self._word(t) for t in toks]
        hashes = [w[0] for w in per_word]
        if not toks:
            # no word characters ("****", ""): one feature of the raw text keeps the vector
            # non-zero, so it can be stored and compared (it matches only the same text)
            hashes.append(self._hash(f"raw:{' '.join(text.split())}"))
        hashes += [self._hash(f"b:{a} {b}") for a, b in itertools.pairwise(toks)]
        plain = len(hashes)
        for w in per_word:
            hashes.extend(itertools.islice(w, 1, None))
        h = np.fromiter(hashes, dtype=np.uint64, count=len(hashes))
        idx = (h % np.uint64(self.dimensions)).astype(np.int64)
        sign = np.where((h >> np.uint64(63)) & np.uint64(1), np.float32(1.0), np.float32(-1.0))
        weight = np.ones(len(hashes), dtype=np.float32)
        weight[plain:] = self.trigram_weight
        out = (idx, sign, weight)
        if len(text) <= _MAX_CACHED_TEXT and len(self._cache) < _MAX_TEXTS:
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
        # the lengths summed in float64, where the float32 squares are exact: the same bits on every CPU
        # (a float32 norm's rounding depends on the summation order the CPU's kernels take)
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)).astype(np.float32)[:, None]
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        return matrix

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_sync(texts)

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Same as :meth:`embed` (documents and queries share one hashing)."""
        return self.embed_sync(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query."""
        if not isinstance(text, str):
            raise InvalidInputError(f"embed_query() takes a str, got {type(text).__name__}.")
        return self.embed_sync([text])[0]


class CallableEmbedder:
    """User embedding functions (sync or async) as an :class:`Embedder`.

    Two call shapes:

    * ``CallableEmbedder(fn, dimensions)``: ``fn(texts) -> vectors`` embeds everything;
    * ``CallableEmbedder(embed_documents=batch_fn, embed_query=query_fn)``: documents
      (chunks, entity names) go through ``batch_fn(texts) -> vectors`` and search
      queries through ``query_fn(text) -> vector`` (both must share one vector space).

    ``dimensions`` may be left out: it is learnt from the first vectors returned
    (``await embedder.ensure_dimensions()`` probes once; ``Knowledge`` does it for you).
    Vectors are checked (shape, finiteness) and L2-normalized.
    """

    def __init__(
        self,
        fn: Callable[[list[str]], Any] | None = None,
        dimensions: int | None = None,
        *,
        embed_documents: Callable[[list[str]], Any] | None = None,
        embed_query: Callable[[str], Any] | None = None,
        name: str | None = None,
        batch_size: int = 256,
    ) -> None:
        if fn is not None and embed_documents is not None:
            raise InvalidInputError("give CallableEmbedder either fn or embed_documents=, not both.")
        documents_fn = fn if fn is not None else embed_documents
        if documents_fn is None or not callable(documents_fn):
            raise InvalidInputError("CallableEmbedder needs a callable fn or embed_documents=.")
        if embed_query is not None and not callable(embed_query):
            raise InvalidInputError("CallableEmbedder embed_query= must be callable.")
        if dimensions is not None:
            check_int(dimensions, name="CallableEmbedder dimensions (or None to learn it)", error=InvalidInputError)
        self._fn = documents_fn
        self._query_fn = embed_query
        self._dimensions: int | None = dimensions
        self.batch_size = max(1, batch_size)
        self._name = name or f"callable-{getattr(documents_fn, '__name__', 'fn')}"
        if name is None and dimensions is not None:
            self._name += f"-{dimensions}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        """Vector size; ``DimensionsUnknownError`` until given or learnt (see :meth:`ensure_dimensions`)."""
        if self._dimensions is None:
            raise DimensionsUnknownError(
                f"the dimensions of {self._name} are not known yet: pass CallableEmbedder(dimensions=...) "
                "or await embedder.ensure_dimensions() first."
            )
        return self._dimensions

    @dimensions.setter
    def dimensions(self, value: int) -> None:
        check_int(value, name="dimensions", error=InvalidInputError)
        self._dimensions = value

    async def ensure_dimensions(self) -> int:
        """The vector size, embedding one probe text when it is not known yet."""
        if self._dimensions is None:
            await self.embed_query("dimension probe")
        assert self._dimensions is not None
        return self._dimensions

    def _check(self, out: Any, rows: int) -> np.ndarray:
        if self._dimensions is None:
            shape = np.shape(out)
            if len(shape) != 2 or shape[0] != rows or shape[1] < 1:
                raise EmbeddingError(f"{self._name} returned an array of shape {shape}, expected ({rows}, d).")
            self._dimensions = int(shape[1])
        return check_matrix(out, rows, self._dimensions, self._name)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents in batches of ``batch_size``."""
        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not a single string.")
        texts = list(texts)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            parts.append(self._check(await _maybe_await(self._fn(batch)), len(batch)))
        if not parts:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        return np.concatenate(parts)

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed document texts: ``(len(texts), dimensions)`` float32, rows L2-normalized."""
        return await self.embed(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query (``embed_query=`` when given, else the document function)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"embed_query() takes a str, got {type(text).__name__}.")
        if self._query_fn is None:
            return (await self.embed([text]))[0]
        out = await _maybe_await(self._query_fn(text))
        return self._check(np.asarray(out, dtype=np.float32).reshape(1, -1), 1)[0]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@runtime_checkable
class DocumentQueryEmbedder(Protocol):
    """The other common embedder shape: ``embed_documents(texts)`` and ``embed_query(text)`` (sync or async)."""

    def embed_documents(self, texts: list[str]) -> Any:
        """Vectors of ``texts`` (a matrix, or an awaitable of one)."""
        ...

    def embed_query(self, text: str) -> Any:
        """The vector of one query (or an awaitable of it)."""
        ...


def as_embedder(obj: Any, *, dimensions: int | None = None) -> Embedder:
    """``obj`` as a kag embedder: an :class:`Embedder` as is, or an ``embed_documents``/``embed_query`` object wrapped.

    A wrapped object keeps its query function for search queries. ``None`` stays
    ``None`` for the caller's default. Anything else raises ``InvalidInputError``.
    """
    if isinstance(obj, CallableEmbedder):
        return obj
    learns = callable(getattr(obj, "ensure_dimensions", None))  # dimensions known after a first call
    if callable(getattr(obj, "embed", None)) and (_has_dimensions(obj) or learns):
        embedder: Embedder = obj
        return embedder
    if callable(getattr(obj, "embed_documents", None)) and callable(getattr(obj, "embed_query", None)):
        dims = dimensions if dimensions is not None else getattr(obj, "dimensions", None)
        return CallableEmbedder(
            embed_documents=obj.embed_documents,
            embed_query=obj.embed_query,
            dimensions=dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else None,
            name=str(getattr(obj, "name", "") or type(obj).__name__),
        )
    raise InvalidInputError(
        f"{type(obj).__name__} is not an embedder: give it `dimensions`, `name` and an async `embed(texts)`, "
        "or `embed_documents(texts)` and `embed_query(text)`."
    )


def _has_dimensions(obj: Any) -> bool:
    try:
        getattr(obj, "dimensions")  # noqa: B009  (a property may raise while unknown)
    except AttributeError:
        return False
    return True


async def embed_query(embedder: Any, text: str) -> np.ndarray:
    """One query vector from any kag embedder: its ``embed_query`` when it has one, else ``embed([text])``."""
    query_fn = getattr(embedder, "embed_query", None)
    if callable(query_fn):
        vector = np.asarray(await _maybe_await(query_fn(text)), dtype=np.float32).reshape(1, -1)
        return check_matrix(vector, 1, embedder.dimensions, embedder.name)[0]
    out = await embedder.embed([text])
    return check_matrix(out, 1, embedder.dimensions, embedder.name)[0]
