"""BM25: ``kag.ranking.bm25.BM25Index`` vs the ``rank_bm25`` package's ``BM25Okapi``.

Corpus: the standard library's ``pydoc_data.topics`` (the text behind
``help("topics")``), split by kag's ``RecursiveCharacterSplitter`` into chunks
of 500 characters. Both indexes use kag's tokenizer (``kag.rag.embedders.words``)
and the same parameters (k1=1.5, b=0.75, epsilon=0.25). Queries: the topic
names plus word pairs drawn from the corpus.

For every query the top 10 must be identical: the reference ranking is
``rank_bm25``'s scores over the documents sharing a query term, sorted by score
descending then id ascending (kag's documented tie-break), and the scores must
agree to 1e-9. Timed per query, alternating: ``BM25Index.search(q, 10)`` vs
``BM25Okapi.get_scores(tokens)`` + top-10 selection (tokenizing included on
both sides); index construction is timed too.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from rank_bm25 import BM25Okapi

from benchmarks.common import Report, Result, log
from kag.rag.splitter import RecursiveCharacterSplitter
from kag.ranking.bm25 import BM25Index
from kag.text import words

GOAL = 10.0
K = 10


def corpus(chunk_size: int = 500) -> tuple[list[str], list[str]]:
    """``(ids, texts)`` of the chunked pydoc topics."""
    from pydoc_data.topics import topics

    splitter = RecursiveCharacterSplitter(chunk_size, 50)
    ids, texts = [], []
    for topic in sorted(topics):
        for i, chunk in enumerate(splitter.split_text(topics[topic])):
            ids.append(f"{topic}#{i:03d}")
            texts.append(chunk)
    return ids, texts


def make_queries(texts: list[str], count: int, seed: int = 11) -> list[str]:
    """Topic names plus random word pairs from the corpus."""
    from pydoc_data.topics import topics

    rng = random.Random(seed)
    out = [t.replace("-", " ") for t in sorted(topics)]
    vocab = sorted({w for t in texts for w in words(t) if len(w) > 3 and not w.isdigit()})
    while len(out) < count:
        out.append(" ".join(rng.sample(vocab, 2)))
    return out[:count]


def reference_top(
    bm: BM25Okapi, ids: list[str], has: list[set[str]], tokens: list[str], k: int
) -> list[tuple[str, float]]:
    """rank_bm25's ranking with kag's documented tie-break (score desc, id asc)."""
    scores = bm.get_scores(tokens)
    qset = set(tokens)
    cand = [i for i, terms in enumerate(has) if terms & qset]
    cand.sort(key=lambda i: (-scores[i], ids[i]))
    return [(ids[i], float(scores[i])) for i in cand[:k]]


def baseline_top(bm: BM25Okapi, query: str, k: int) -> np.ndarray:
    """What a rank_bm25 user does: tokenize, score every document, take the top k."""
    scores = bm.get_scores(words(query))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


def measure(report: Report, chunk_size: int, queries: int) -> None:
    """Check and time both indexes on the corpus chunked at ``chunk_size``; add rows to ``report``."""
    ids, texts = corpus(chunk_size)
    log(f"bm25: {len(texts):,} chunks of <= {chunk_size} characters, {queries} queries")
    t0 = time.perf_counter()
    index = BM25Index(k1=1.5, idf="okapi")  # rank_bm25's formula, so top-10 lists can be compared
    index.add(ids, texts)
    index.search("warm up the statistics", 1)
    t_kag_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    bm = BM25Okapi(texts, tokenizer=words)
    t_base_build = time.perf_counter() - t0

    has = [set(freqs) for freqs in bm.doc_freqs]
    work = make_queries(texts, queries)
    for q in work:
        got = index.search(q, K)
        ref = reference_top(bm, ids, has, words(q), K)
        if [i for i, _ in got] != [i for i, _ in ref]:
            raise AssertionError(f"top-{K} differs for {q!r}: {got} vs {ref}")
        if not np.allclose([s for _, s in got], [s for _, s in ref], rtol=1e-9, atol=1e-12):
            raise AssertionError(f"scores differ for {q!r}")

    a, b = [], []
    for q in work[:5]:
        index.search(q, K)
        baseline_top(bm, q, K)
    for q in work:
        for _ in range(3):
            t0 = time.perf_counter()
            index.search(q, K)
            t1 = time.perf_counter()
            baseline_top(bm, q, K)
            t2 = time.perf_counter()
            a.append(t1 - t0)
            b.append(t2 - t1)
    kag_ms, base_ms = float(np.median(a)) * 1000, float(np.median(b)) * 1000
    size = f"{len(texts):,} chunks of <= {chunk_size} chars"
    report.add(
        Result(
            "BM25",
            "query, top-10, median",
            kag_ms,
            "ms",
            base_ms,
            "rank_bm25 BM25Okapi",
            base_ms / kag_ms,
            f">= {GOAL:.0f}x faster",
            base_ms / kag_ms >= GOAL,
            note=size,
        )
    )
    report.add(
        Result(
            "BM25",
            "query, top-10, mean",
            float(np.mean(a)) * 1000,
            "ms",
            float(np.mean(b)) * 1000,
            "rank_bm25 BM25Okapi",
            float(np.mean(b) / np.mean(a)),
        )
    )
    report.add(
        Result(
            "BM25",
            "index build",
            t_kag_build * 1000,
            "ms",
            t_base_build * 1000,
            "rank_bm25 BM25Okapi",
            t_base_build / t_kag_build,
        )
    )
    report.notes.append(
        f"{size}: top-10 ids identical and scores equal to 1e-9 on all {len(work)} queries "
        f"({len(work) * 3} timed runs per side, alternating)."
    )


def run(queries: int = 200, chunk_sizes: tuple[int, ...] = (500, 200)) -> Report:
    """Both chunkings of the corpus; ratio = rank_bm25 time / kag time."""
    report = Report("BM25 (kag.ranking.bm25 vs rank_bm25)")
    for size in chunk_sizes:
        measure(report, size, queries)
    report.notes.append("ratio = rank_bm25 time / kag time (higher is better).")
    return report


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    print(run(args.queries).markdown())


if __name__ == "__main__":
    main()
