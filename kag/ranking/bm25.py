"""BM25 keyword index, vectorized with numpy.

Two IDF formulas:

* ``idf="lucene"`` (default): ``log(1 + (N - df + 0.5) / (df + 0.5))``, what Lucene's
  ``BM25Similarity`` and so Neo4j's fulltext indexes compute. It is positive for every
  term, so a term found in half the documents still counts (with two documents, a
  search for a word of one of them finds it). ``k1=1.2, b=0.75`` are Lucene's defaults.
* ``idf="okapi"``: ``log(N - df + 0.5) - log(df + 0.5)`` with terms whose IDF is
  negative given ``epsilon * mean(idf)``, as ``rank_bm25.BM25Okapi`` does (scores match
  it exactly on the same tokens). A term in exactly half the documents weighs zero.

A repeated query term counts once per occurrence in both.

Postings are kept in CSR form (term -> document rows, and each posting's whole
contribution ``idf * tf * (k1 + 1) / (tf + norm)``, computed once per rebuild), and a
query is scored by gathering its terms' postings and summing them with one
``np.bincount``; there is no Python loop over documents.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np

from kag.errors import InvalidInputError
from kag.ranking.select import kth_largest
from kag.text import words
from kag.validation import check_k

_SORT_ALL = 64  # up to this many matches one sort of them all is faster than a cut first
Tokenizer = Callable[[str], list[str]]
IDF = Literal["lucene", "okapi"]


class BM25Index:
    """An incremental BM25 index over ``(id, text)`` pairs.

    ``add`` upserts (re-adding an id replaces its text), ``remove`` deletes; the
    statistics are rebuilt lazily on the next ``search``.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        epsilon: float = 0.25,
        *,
        idf: IDF = "lucene",
        tokenizer: Tokenizer = words,
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise InvalidInputError("BM25Index needs k1 >= 0 and 0 <= b <= 1.")
        if idf not in ("lucene", "okapi"):
            raise InvalidInputError(f"idf must be 'lucene' or 'okapi', got {idf!r}.")
        self.idf: IDF = idf
        self.k1 = float(k1)
        self.b = float(b)
        self.epsilon = float(epsilon)
        self.tokenizer = tokenizer
        self._vocab: dict[str, int] = {}
        # per-document term ids and counts, keyed by the caller's id (insertion ordered)
        self._docs: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        self._dirty = True
        self._ids: list[str] = []
        self._id_rank = np.zeros(0, dtype=np.int64)
        self._bounds: list[int] = [0]  # CSR offsets as Python ints: slicing with them skips numpy scalars
        self._rows = np.zeros(0, dtype=np.int64)
        self._weights = np.zeros(0, dtype=np.float64)
        self._doc_len = np.zeros(0, dtype=np.float64)
        self._average_idf = 0.0
        self._avgdl = 0.0

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    @property
    def avgdl(self) -> float:
        """Mean document length in tokens."""
        if self._dirty:
            self._rebuild()
        return self._avgdl

    @property
    def average_idf(self) -> float:
        """Mean IDF over the corpus vocabulary (before the epsilon floor)."""
        if self._dirty:
            self._rebuild()
        return self._average_idf

    @property
    def ids(self) -> list[str]:
        """Indexed ids in insertion order."""
        return list(self._docs)

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index ``texts`` under ``ids`` (an existing id is replaced)."""
        if isinstance(ids, str) or isinstance(texts, str):
            raise InvalidInputError("add() takes sequences of ids and texts, not single strings.")
        if len(ids) != len(texts):
            raise InvalidInputError(f"add() got {len(ids)} ids but {len(texts)} texts.")
        for doc_id, text in zip(ids, texts, strict=True):
            if not isinstance(doc_id, str) or not isinstance(text, str):
                raise InvalidInputError("BM25Index ids and texts must be str.")
            counts = Counter(self.tokenizer(text))
            term_ids = np.fromiter(
                (self._vocab.setdefault(t, len(self._vocab)) for t in counts),
                dtype=np.int64,
                count=len(counts),
            )
            tfs = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            self._docs.pop(doc_id, None)  # re-adding moves it to the end, like a fresh add
            self._docs[doc_id] = (term_ids, tfs, int(tfs.sum()))
        self._dirty = True

    def remove(self, ids: Iterable[str]) -> int:
        """Remove ``ids`` (unknown ids are ignored); return how many were removed."""
        if isinstance(ids, str):
            ids = [ids]
        removed = sum(1 for doc_id in ids if self._docs.pop(doc_id, None) is not None)
        if removed:
            self._dirty = True
        return removed

    def _rebuild(self) -> None:
        self._ids = list(self._docs)
        n_docs = len(self._ids)
        n_terms = len(self._vocab)
        if n_docs == 0:
            self._bounds = [0] * (n_terms + 1)
            self._rows = np.zeros(0, dtype=np.int64)
            self._weights = np.zeros(0, dtype=np.float64)
            self._doc_len = np.zeros(0, dtype=np.float64)
            self._id_rank = np.zeros(0, dtype=np.int64)
            self._dirty = False
            return
        entries = [self._docs[i] for i in self._ids]
        terms = np.concatenate([e[0] for e in entries])
        tfs = np.concatenate([e[1] for e in entries])
        rows = np.repeat(np.arange(n_docs, dtype=np.int64), [len(e[0]) for e in entries])
        order = np.argsort(terms, kind="stable")
        self._rows = rows[order]
        sorted_tfs = tfs[order]
        df = np.bincount(terms, minlength=n_terms)
        self._bounds = [0, *np.cumsum(df).tolist()]
        self._doc_len = np.array([e[2] for e in entries], dtype=np.float64)
        self._avgdl = float(self._doc_len.mean())
        present = df > 0
        idf = np.zeros(n_terms, dtype=np.float64)
        if self.idf == "lucene":
            idf[present] = np.log1p((n_docs - df[present] + 0.5) / (df[present] + 0.5))
            self._average_idf = float(idf[present].mean()) if present.any() else 0.0
        else:  # same formula and floor as rank_bm25.BM25Okapi, over terms present in the corpus
            idf[present] = np.log(n_docs - df[present] + 0.5) - np.log(df[present] + 0.5)
            self._average_idf = float(idf[present].mean()) if present.any() else 0.0
            idf[present & (idf < 0)] = self.epsilon * self._average_idf
        # every posting's contribution, computed once instead of per query: a query then costs one
        # gather and one bincount (measured 18 -> 11 us on 1.3k chunks; the same floats, summed in the same order)
        norm = self.k1 * (1 - self.b + self.b * self._doc_len / self._avgdl)
        term_of = np.repeat(np.arange(n_terms, dtype=np.int64), df)
        self._weights = idf[term_of] * (sorted_tfs * (self.k1 + 1) / (sorted_tfs + norm[self._rows]))
        # with positive idfs every matching document scores > 0, so no separate match mask is needed
        self._positive = bool((idf[present] > 0).all())
        # rank of each row's id in sorted order, for deterministic tie-breaking
        self._id_rank = np.empty(n_docs, dtype=np.int64)
        self._id_rank[np.argsort(np.array(self._ids, dtype=object), kind="stable")] = np.arange(n_docs)
        self._dirty = False

    def _matches(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows sharing at least one query term (ascending) and their scores."""
        if self._dirty:
            self._rebuild()
        n_docs = len(self._ids)
        term_ids = [self._vocab[t] for t in self.tokenizer(query) if t in self._vocab]
        bounds = self._bounds
        spans = [(bounds[t], bounds[t + 1]) for t in term_ids]  # a loop over query terms only
        if not spans or n_docs == 0:
            return self._rows[:0], self._weights[:0]
        if len(spans) == 1:  # one term: its postings are the matches, rows already ascending and distinct
            lo, hi = spans[0]
            return self._rows[lo:hi], self._weights[lo:hi]
        # in query order, so each row sums its terms in the order a per-term loop would
        rows = np.concatenate([self._rows[lo:hi] for lo, hi in spans])
        scores = np.bincount(rows, weights=np.concatenate([self._weights[lo:hi] for lo, hi in spans]), minlength=n_docs)
        # with positive idfs every matching row scores > 0; else count the postings
        # (nonzero of a bool mask: 3x faster than of the float array itself)
        matched = ((scores if self._positive else np.bincount(rows, minlength=n_docs)) > 0).nonzero()[0]
        return matched, scores[matched]

    def scores(self, query: str) -> dict[str, float]:
        """BM25 score of every document that shares a term with ``query``."""
        rows, scores = self._matches(query)
        return dict(zip([self._ids[i] for i in rows.tolist()], scores.tolist(), strict=True))

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Top ``k`` ``(id, score)`` among documents sharing a term with ``query``.

        Sorted by score descending, ties broken by id ascending.
        """
        check_k(k, minimum=0)
        rows, scores = self._matches(query)
        if k == 0 or rows.size == 0:
            return []
        if rows.size > max(k, _SORT_ALL):  # keep the k best and all tied with the k-th, then sort those
            keep = scores >= kth_largest(scores, k)
            rows, scores = rows[keep], scores[keep]
        # lexsort: last key is primary -> score descending, then id ascending
        order = np.lexsort((self._id_rank[rows], -scores))[:k]
        return list(zip([self._ids[i] for i in rows[order].tolist()], scores[order].tolist(), strict=True))
