"""Metadata filters: validation, Python semantics, Cypher compilation (no injection)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import InvalidInputError
from kag.query.filters import (
    OPERATORS,
    compile_cypher,
    compile_matcher,
    flatten_metadata,
    matches,
    property_name,
    validate_filter,
)

META: dict[str, Any] = {
    "lang": "en",
    "year": 2021,
    "score": 0.75,
    "draft": False,
    "tags": ["graph", "rag"],
    "author": {"name": "Ada", "address": {"city": "London"}},
    "title": "Graph retrieval notes",
    "nums": [1, 2.5],
    "nothing": None,
}

# (filter, expected) pairs: the semantics table, also used by the Neo4j parity test
CASES: list[tuple[dict[str, Any], bool]] = [
    ({}, True),
    ({"lang": "en"}, True),
    ({"lang": "fr"}, False),
    ({"lang": {"$eq": "en"}, "year": 2021}, True),
    ({"lang": "en", "year": 2020}, False),
    ({"year": 2021.0}, True),  # 2021 == 2021.0, as in Cypher
    ({"draft": False}, True),
    ({"draft": 0}, False),  # booleans are not numbers
    ({"year": True}, False),
    ({"year": "2021"}, False),
    ({"lang": {"$ne": "fr"}}, True),
    ({"lang": {"$ne": "en"}}, False),
    ({"missing": {"$ne": "x"}}, True),  # $ne matches a missing field
    ({"year": {"$ne": "2021"}}, True),
    ({"year": {"$gt": 2020, "$lte": 2021}}, True),
    ({"year": {"$gt": 2021}}, False),
    ({"year": {"$gte": 2021}}, True),
    ({"year": {"$lt": 2021.5}}, True),
    ({"score": {"$lt": 1}}, True),
    ({"year": {"$gt": "2000"}}, False),  # number vs string: false, not an error
    ({"lang": {"$gt": "de"}}, True),
    ({"lang": {"$lt": 5}}, False),
    ({"missing": {"$gt": 1}}, False),
    ({"tags": {"$gt": 1}}, False),
    ({"lang": {"$in": ["en", "de"]}}, True),
    ({"lang": {"$in": ["de"]}}, False),
    ({"lang": {"$in": []}}, False),
    ({"year": {"$in": [2021.0]}}, True),
    ({"draft": {"$in": [0]}}, False),
    ({"missing": {"$in": ["x"]}}, False),
    ({"lang": {"$nin": ["de"]}}, True),
    ({"lang": {"$nin": ["en"]}}, False),
    ({"missing": {"$nin": ["x"]}}, True),
    ({"tags": {"$contains": "rag"}}, True),
    ({"tags": {"$contains": "ra"}}, False),  # list: membership, not substring
    ({"title": {"$contains": "retrieval"}}, True),
    ({"title": {"$contains": "Retrieval"}}, False),  # case-sensitive
    ({"nums": {"$contains": 1}}, True),
    ({"nums": {"$contains": 2.5}}, True),
    ({"year": {"$contains": 2}}, False),
    ({"title": {"$contains": 5}}, False),
    ({"missing": {"$contains": "x"}}, False),
    ({"author.name": "Ada"}, True),
    ({"author.address.city": {"$in": ["London", "Paris"]}}, True),
    ({"author.address.zip": {"$exists": False}}, True),
    ({"author": {"$exists": True}}, False),  # filters address leaves
    ({"lang": {"$exists": True}}, True),
    ({"nothing": {"$exists": True}}, False),  # None is absent
    ({"nothing": None}, True),
    ({"lang": None}, False),
    ({"lang": {"$ne": None}}, True),
    ({"tags": ["graph", "rag"]}, True),  # list equality
    ({"tags": ["rag", "graph"]}, False),
    ({"$or": [{"lang": "fr"}, {"year": 2021}]}, True),
    ({"$or": [{"lang": "fr"}, {"year": 1999}]}, False),
    ({"$and": [{"lang": "en"}, {"$or": [{"draft": True}, {"tags": {"$contains": "graph"}}]}]}, True),
    ({"$and": [{"lang": "en"}], "year": {"$lt": 2000}}, False),
]


@pytest.mark.parametrize(("where", "expected"), CASES)
def test_matches(where: dict[str, Any], expected: bool) -> None:
    assert matches(where, META) is expected
    assert compile_matcher(where)(META) is expected


def test_none_filter_matches_everything() -> None:
    assert matches(None, {}) is True
    validate_filter(None)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"lang": {"$regex": "e.*"}}, "unknown operator '\\$regex'"),
        ({"$not": {"lang": "en"}}, "unknown filter operator"),
        ({"$or": []}, "non-empty list"),
        ({"$and": {"lang": "en"}}, "non-empty list"),
        ({"$or": ["lang"]}, "must be a dict"),
        ({"lang": {}}, "empty operator"),
        ({"year": {"$gt": [1]}}, "number or a string"),
        ({"year": {"$gt": True}}, "number or a string"),
        ({"lang": {"$in": "en"}}, "list"),
        ({"lang": {"$in": [None]}}, "list"),
        ({"lang": {"$exists": 1}}, "true or false"),
        ({"lang": {"$contains": ["x"]}}, "string, number or boolean"),
        ({"lang": {"x": 1}}, "unknown operator"),
        ({"lang": {"a": 1}}, "supported operators"),
        ({"a b": 1}, "segment"),
        ({"a..b": 1}, "segment"),
        ({"a__b": 1}, "segment"),
        ({"a_.b": 1}, "segment"),
        ({"a._b": 1}, "segment"),
        ({"1abc": 1}, "segment"),
        ({"x" * 65: 1}, "segment"),
        ({"lang`) OR true //": 1}, "segment"),
        ({"lang": float("nan")}, "expects"),
        ({"lang": 2**70}, "expects"),
        ({"lang": {"$eq": {"nested": 1}}}, "expects"),
        ("lang = 'en'", "must be a dict"),
    ],
)
def test_validation_errors(where: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        validate_filter(where)
    with pytest.raises(InvalidInputError):
        compile_cypher(where, "n", {})


def test_error_message_lists_supported_operators() -> None:
    with pytest.raises(InvalidInputError) as info:
        validate_filter({"x": {"$like": "a"}})
    for op in OPERATORS:
        assert op in str(info.value)


def test_flatten_metadata() -> None:
    flat = flatten_metadata(
        {
            **META,
            "mixed": [1, "a"],
            "objs": [{"k": 1}],
            "empty": [],
            "ints": [1, 2],
            "huge": 2**80,
            "bad key": "skipped",
            "_private": 1,
            "trailing_": {"x": 1},  # a parent may not end with "_": unreachable, skipped
            "ok": {"_x": 1},  # a child may not start with "_"
        }
    )
    assert flat == {
        "meta__lang": "en",
        "meta__year": 2021,
        "meta__score": 0.75,
        "meta__draft": False,
        "meta__tags": ["graph", "rag"],
        "meta__author__name": "Ada",
        "meta__author__address__city": "London",
        "meta__title": "Graph retrieval notes",
        "meta__nums": [1.0, 2.5],
        "meta__mixed": '[1, "a"]',
        "meta__objs": '[{"k": 1}]',
        "meta__ints": [1, 2],
        "meta__huge": str(2**80),
        "meta___private": 1,
    }
    assert property_name("author.address.city") == "meta__author__address__city"


def test_compile_cypher_shapes_and_params() -> None:
    params: dict[str, Any] = {"f0": "taken"}
    text = compile_cypher({"lang": "en", "year": {"$gte": 2020}, "author.name": {"$exists": True}}, "c", params)
    assert text == (
        "((CASE WHEN `c`.`meta__lang` IS :: STRING NOT NULL THEN `c`.`meta__lang` = $f1 "
        "ELSE false END) AND (CASE WHEN (`c`.`meta__year` IS :: INTEGER NOT NULL OR "
        "`c`.`meta__year` IS :: FLOAT NOT NULL) THEN `c`.`meta__year` >= $f2 ELSE false END) "
        "AND `c`.`meta__author__name` IS NOT NULL)"
    )
    assert params == {"f0": "taken", "f1": "en", "f2": 2020}
    params = {}
    assert compile_cypher({}, "n", params) == "true" and params == {}
    assert compile_cypher(None, "n", params) == "true"
    text = compile_cypher({"$or": [{"t": {"$contains": "x"}}, {"k": None}]}, "n", params, "w")
    assert text == (
        "((CASE WHEN `n`.`meta__t` IS :: STRING NOT NULL THEN `n`.`meta__t` CONTAINS $w0 "
        "WHEN `n`.`meta__t` IS :: LIST<ANY> NOT NULL THEN $w0 IN `n`.`meta__t` ELSE false END)"
        " OR `n`.`meta__k` IS NULL)"
    )
    assert params == {"w0": "x"}


@pytest.mark.parametrize("alias", ["", "n m", "n`", "1n", "n.x", "n) MATCH (m"])
def test_compile_cypher_rejects_bad_alias_and_prefix(alias: str) -> None:
    with pytest.raises(InvalidInputError):
        compile_cypher({"a": 1}, alias, {})
    with pytest.raises(InvalidInputError):
        compile_cypher({"a": 1}, "n", {}, prefix=alias or "-")


# ------------------------------------------------------------------ injection property

_TOKEN = re.compile(
    r"\s+|\(|\)|`n`\.`meta__[A-Za-z0-9_]+`|\$f\d+|<>|<=|>=|=|<|>|::|LIST<ANY>|"
    r"\b(?:CASE|WHEN|THEN|ELSE|END|AND|OR|NOT|IS|NULL|IN|CONTAINS|STRING|INTEGER|FLOAT|"
    r"BOOLEAN|true|false)\b"
)

_nasty_text = st.lists(
    st.sampled_from([*"`'\"\\$(){}[];:., \n/*-=<>|aZ_9é", " MATCH (m) DETACH DELETE m //"]),
    min_size=1,
    max_size=12,
).map("".join)
_values = st.one_of(
    _nasty_text,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_keys = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,8}(\.[A-Za-z][A-Za-z0-9]{0,8}){0,2}", fullmatch=True),
    _nasty_text,
)


@st.composite
def _filters(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    if depth < 2 and draw(st.booleans()):
        key = draw(st.sampled_from(["$and", "$or"]))
        return {key: draw(st.lists(_filters(depth + 1), min_size=1, max_size=3))}
    out: dict[str, Any] = {}
    for key in draw(st.lists(_keys, min_size=1, max_size=3)):
        op = draw(st.sampled_from(OPERATORS))
        if op in ("$in", "$nin"):
            operand: Any = draw(st.lists(_values, max_size=3))
        elif op == "$exists":
            operand = draw(st.booleans())
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            operand = draw(st.one_of(_nasty_text, st.integers(-1000, 1000)))
        else:
            operand = draw(_values)
        out[key] = {op: operand}
    return out


def _collect_values(where: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(where, dict):
        for _key, value in where.items():
            found.extend(_collect_values(value) if isinstance(value, dict | list) else [value])
    elif isinstance(where, list):
        for item in where:
            found.extend(_collect_values(item) if isinstance(item, dict | list) else [item])
    return found


@settings(max_examples=400, deadline=None)
@given(where=_filters())
def test_compiled_cypher_never_contains_caller_text(where: dict[str, Any]) -> None:
    params: dict[str, Any] = {}
    try:
        text = compile_cypher(where, "n", params)
    except InvalidInputError:
        return  # refused keys are fine; what matters is what compiles
    # the whole text is made of safe tokens only
    assert _TOKEN.sub("", text) == "", text
    # every value travelled as a parameter
    flat_params: list[Any] = []
    for value in params.values():
        flat_params.extend(value if isinstance(value, list) else [value])
    for value in _collect_values(where):
        if isinstance(value, bool) and value in (True, False) and value not in flat_params:
            continue  # $exists flags compile to IS [NOT] NULL
        assert value in flat_params
    # and the Python evaluator accepts the same filter
    matches(where, {"a": 1})
