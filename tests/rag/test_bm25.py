"""BM25Index: parity with rank_bm25.BM25Okapi on a real corpus, updates, ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from kag.errors import InvalidInputError
from kag.ranking.bm25 import BM25Index
from kag.text import words

QUERIES = [
    "how do I catch exceptions with try",
    "with statement context manager",
    "string formatting format spec",
    "lambda expressions anonymous functions",
    "yield generator",
    "class definition inheritance",
    "import module package",
    "operator precedence",
    "global nonlocal names",
    "the the the",  # a term in most documents: idf floored by epsilon
    "dict dict keys",  # repeated query term counts twice, as in rank_bm25
]


def _reference_top(reference: BM25Okapi, ids: list[str], query: str, k: int) -> list[tuple]:
    scores = reference.get_scores(words(query))
    tokens = set(words(query))
    matched = [i for i, doc in enumerate(reference.doc_freqs) if tokens & doc.keys()]
    ranked = sorted(matched, key=lambda i: (-scores[i], ids[i]))[:k]
    return [(ids[i], float(scores[i])) for i in ranked]


def test_same_top10_as_rank_bm25_on_python_topics(topics: dict[str, str]) -> None:
    ids = sorted(topics)
    index = BM25Index(k1=1.5, idf="okapi")
    index.add(ids, [topics[i] for i in ids])
    reference = BM25Okapi([words(topics[i]) for i in ids])
    assert index.avgdl == pytest.approx(reference.avgdl)
    assert index.average_idf == pytest.approx(reference.average_idf)
    for query in QUERIES:
        ours = index.search(query, k=10)
        expected = _reference_top(reference, ids, query, 10)
        assert [i for i, _ in ours] == [i for i, _ in expected], query
        np.testing.assert_allclose([s for _, s in ours], [s for _, s in expected], rtol=1e-9)
    assert index.search("try except finally", k=1)[0][0] == "try"


def test_scores_match_for_every_document(topics: dict[str, str]) -> None:
    ids = sorted(topics)
    index = BM25Index(k1=1.2, b=0.6, epsilon=0.1, idf="okapi")
    index.add(ids, [topics[i] for i in ids])
    reference = BM25Okapi([words(topics[i]) for i in ids], k1=1.2, b=0.6, epsilon=0.1)
    query = "raise an exception in a loop and return from a function"
    expected = reference.get_scores(words(query))
    ours = index.scores(query)
    for i, doc_id in enumerate(ids):
        assert ours.get(doc_id, 0.0) == pytest.approx(expected[i], rel=1e-9, abs=1e-12)


def test_add_replace_remove_equals_fresh_build() -> None:
    incremental = BM25Index()
    incremental.add(["a", "b", "c"], ["red apple", "green apple pie", "blue sky"])
    incremental.add(["b"], ["yellow banana"])  # replaces b
    incremental.add(["d"], ["apple banana smoothie"])
    assert incremental.remove(["c", "zzz"]) == 1
    fresh = BM25Index()
    fresh.add(["a", "b", "d"], ["red apple", "yellow banana", "apple banana smoothie"])
    for query in ["apple", "banana", "sky", "red smoothie"]:
        got, want = incremental.search(query, 5), fresh.search(query, 5)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want])
    assert len(incremental) == 3 and "c" not in incremental and "d" in incremental
    assert incremental.search("sky", 5) == []


def test_ties_are_broken_by_id_and_k_limits() -> None:
    index = BM25Index()
    index.add(["z", "m", "a", "q"], ["same words", "same words", "same words", "other"])
    assert [i for i, _ in index.search("same", 10)] == ["a", "m", "z"]
    assert [i for i, _ in index.search("same", 2)] == ["a", "m"]
    assert index.search("same", 0) == []
    assert index.search("absent", 3) == []
    assert BM25Index().search("anything", 3) == []


def test_many_tied_matches_are_cut_to_k_by_id() -> None:
    # more matches than one sort handles directly: the top-k cut must keep every tie with the k-th
    ids = [f"d{i:03d}" for i in range(200)]
    index = BM25Index()
    index.add(ids[::-1], ["alpha beta"] * 150 + ["alpha"] * 50)  # d049..d000 hold "alpha" alone
    hits = index.search("alpha beta", 10)
    assert [i for i, _ in hits] == ids[50:60]
    assert len({s for _, s in hits}) == 1
    # the 50 shorter documents score higher on "alpha"; each group is in id order
    assert [i for i, _ in index.search("alpha", 70)] == ids[:70]


def test_custom_tokenizer_and_validation() -> None:
    index = BM25Index(tokenizer=lambda text: text.split("|"))
    index.add(["x", "y"], ["a b|c", "a|b c"])
    assert [i for i, _ in index.search("a b", 5)] == ["x"]
    with pytest.raises(InvalidInputError):
        index.add(["only one id"], ["t1", "t2"])
    with pytest.raises(InvalidInputError):
        index.add("x", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        index.search("a", -1)
    with pytest.raises(InvalidInputError):
        BM25Index(b=2.0)


def test_lucene_idf_gives_every_term_weight() -> None:
    # the Okapi idf of a term in half the documents is log(1.5/1.5) = 0: "France" would find nothing
    index = BM25Index()
    index.add(["a", "b"], ["Paris is the capital of France", "Berlin is the capital of Germany"])
    hits = index.search("What is the capital of France?", k=2)
    assert hits[0][0] == "a" and hits[0][1] > hits[1][1] > 0
    okapi = BM25Index(idf="okapi")
    okapi.add(["a", "b"], ["Paris is the capital of France", "Berlin is the capital of Germany"])
    assert okapi.scores("France") == {"a": 0.0}
    # two zero-weight terms: the documents holding either still match, with score 0
    assert okapi.scores("France Germany") == {"a": 0.0, "b": 0.0}
    assert [i for i, _ in okapi.search("France Germany", 5)] == ["a", "b"]


def test_lucene_scores_follow_the_formula(topics: dict[str, str]) -> None:
    ids = sorted(topics)
    texts = [topics[i] for i in ids]
    index = BM25Index()
    index.add(ids, texts)
    docs = [words(t) for t in texts]
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    query = words("raise an exception in a loop")
    for doc_id, doc in zip(ids[:40], docs[:40], strict=True):
        expected = 0.0
        for term in query:
            df = sum(1 for d in docs if term in d)
            if df == 0 or term not in doc:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = doc.count(term)
            expected += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * len(doc) / avgdl))
        assert index.scores("raise an exception in a loop").get(doc_id, 0.0) == pytest.approx(expected, rel=1e-9)


def test_unknown_idf_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        BM25Index(idf="tfidf")  # type: ignore[arg-type]
