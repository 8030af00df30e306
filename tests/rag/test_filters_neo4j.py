"""compile_cypher on a real Neo4j 5 agrees with matches() (skipped without a server).

Rows are Cypher maps shaped like nodes written with flatten_metadata(); queries
are read-only and touch no stored data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.errors import InvalidInputError
from kag.query.filters import compile_cypher, flatten_metadata, matches
from tests.neo4j_support import sync_session
from tests.rag.test_filters import CASES, META

pytestmark = pytest.mark.neo4j

ROWS: list[dict[str, Any]] = [
    META,
    {},
    {"lang": "fr", "year": 1999.5, "tags": ["x"], "draft": True, "title": "rag"},
    {"lang": 5, "year": "2021", "tags": "graph", "nums": [True, False], "author": {"name": 1}},
]


@pytest.fixture(scope="module")
def session() -> Iterator[Any]:
    yield from sync_session()


def _evaluate(session: Any, filters: list[dict[str, Any]], rows: list[dict]) -> list[list[bool]]:
    params: dict[str, Any] = {"rows": [flatten_metadata(r) for r in rows]}
    exprs = [compile_cypher(w, "n", params, prefix=f"c{i}_") for i, w in enumerate(filters)]
    query = (
        "UNWIND range(0, size($rows) - 1) AS i WITH i, $rows[i] AS n "
        f"RETURN i, [{', '.join(exprs)}] AS results ORDER BY i"
    )
    return [[bool(v) for v in record["results"]] for record in session.run(query, params)]


def test_semantics_table_agrees_with_neo4j(session: Any) -> None:
    filters = [where for where, _ in CASES]
    results = _evaluate(session, filters, ROWS)
    for row_index, row in enumerate(ROWS):
        for where, got in zip(filters, results[row_index], strict=True):
            assert got is matches(where, row), (where, row)
    assert results[0] == [expected for _, expected in CASES]


_scalars = st.one_of(
    st.sampled_from(["en", "fr", "graph", "Graph rag", ""]),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.0, -1.5]),
    st.booleans(),
)
_leaf = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.none())
_metadata = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(_leaf, st.dictionaries(st.sampled_from(["x", "y"]), _leaf, max_size=2)),
    max_size=3,
)


@st.composite
def _filter(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        key = draw(st.sampled_from(["$and", "$or"]))
        return {key: draw(st.lists(_filter(depth + 1), min_size=1, max_size=2))}
    field = draw(st.sampled_from(["a", "b", "c", "a.x", "b.y", "zz"]))
    op = draw(st.sampled_from(["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$contains", "$exists"]))
    if op in ("$in", "$nin"):
        operand: Any = draw(st.lists(_scalars, max_size=3))
    elif op == "$exists":
        operand = draw(st.booleans())
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        operand = draw(st.one_of(st.sampled_from(["en", "f", ""]), st.integers(-3, 3)))
    elif op == "$contains":
        operand = draw(_scalars)
    else:
        operand = draw(st.one_of(_scalars, st.lists(_scalars, min_size=1, max_size=2)))
    return {field: {op: operand}}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    filters=st.lists(_filter(), min_size=1, max_size=8),
    rows=st.lists(_metadata, min_size=1, max_size=4),
)
def test_random_filters_agree_with_neo4j(
    session: Any, filters: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> None:
    try:
        results = _evaluate(session, filters, rows)
    except InvalidInputError:
        return
    for row, got in zip(rows, results, strict=True):
        assert got == [matches(w, row) for w in filters], (filters, row)
