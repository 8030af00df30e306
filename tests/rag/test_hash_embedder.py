"""The default HashEmbedder: its vectors follow the documented hashing exactly, memoized or not."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from kag.rag.embedders import HashEmbedder
from kag.text import words


def _reference(text: str, dims: int, trigram_weight: float) -> np.ndarray:
    """The documented features (words, adjacent pairs, each word's padded trigrams), hashed one by one."""
    toks = words(text)
    feats = [(f"w:{t}", 1.0) for t in toks] or [(f"raw:{' '.join(text.split())}", 1.0)]
    feats += [(f"b:{a} {b}", 1.0) for a, b in itertools.pairwise(toks)]
    if trigram_weight:
        for t in toks:
            padded = f"<{t}>"
            feats += [(f"c:{padded[i : i + 3]}", trigram_weight) for i in range(len(padded) - 2)]
    v = np.zeros(dims, dtype=np.float32)
    for feat, weight in feats:
        h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
        np.add.at(v, h % dims, np.float32(1.0 if h >> 63 else -1.0) * np.float32(weight))
    # unit length, the length summed in float64 (exact squares): the same bits whatever the CPU's kernels
    norm = np.float32(np.sqrt(sum(float(x) * float(x) for x in v)))
    return v / norm if norm else v


TEXTS = [
    "Paris is the capital of France",
    "paris PARIS paris",  # repeated words: their memoized hashes are reused
    "Straße über Köln, 東京 and São Paulo",
    "****",
    "",
    "a b a b a b",
    "The quick brown fox " * 60,  # long: not kept whole, its words still memoized
]


@pytest.mark.parametrize("trigram_weight", [1.0, 0.37, 0.0])
def test_vectors_equal_the_documented_hashing(trigram_weight: float) -> None:
    embedder = HashEmbedder(96, trigram_weight=trigram_weight)
    for _ in range(2):  # the second pass is served by the memos
        got = embedder.embed_sync(TEXTS)
        for text, row in zip(TEXTS, got, strict=True):
            assert np.array_equal(row, _reference(text, 96, trigram_weight)), text


def test_memos_stay_bounded_and_long_texts_are_not_kept_whole() -> None:
    embedder = HashEmbedder(64)
    long_text = "word " * 100
    embedder.embed_sync([long_text, "short name"])
    assert long_text not in embedder._cache and "short name" in embedder._cache
    assert "word" in embedder._words
