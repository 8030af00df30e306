"""Adversarial metadata filters through ``kag.query.filters.compile_cypher``.

Values only ever become ``$parameters``; keys become backtick-quoted property
names only after validation, and anything that is not a valid key, operator,
alias or parameter prefix is refused with ``InvalidInputError``.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.errors import InvalidInputError
from kag.query.filters import OPERATORS, PROPERTY_PREFIX, compile_cypher, flatten_metadata, matches, validate_filter
from tests.hardening import INJECTIONS

GOOD_KEYS = ("lang", "year", "tags", "draft", "title", "author.name", "a_b.c_d", "_private", "source.url_")
BAD_KEYS = (
    "",
    " ",
    "lang ",
    "la ng",
    "la`ng",
    "`lang`",
    "lang`) DETACH DELETE n //",
    "a__b",
    "a.__b",
    "a_.b",
    "a._b",
    ".a",
    "a.",
    "a..b",
    "1abc",
    "$where",
    "$lang",
    "lang\x00",
    "läng",
    "Ｌang",  # fullwidth L
    "x" * 65,
    "a/*",
    "a//b",
    "a}b",
    "lang OR true",
    "meta__lang'",
)
BAD_OPERATORS = ("$regex", "$where", "$expr", "eq", "$EQ", "$eq ", "$contains`", "$in) OR true //", "$$eq")
ALLOWED_WORDS = {
    "CASE", "WHEN", "THEN", "ELSE", "END", "IS", "NOT", "NULL", "AND", "OR", "IN", "CONTAINS",
    "true", "false", "INTEGER", "FLOAT", "STRING", "BOOLEAN", "LIST", "ANY",
}  # fmt: skip
SAFE_CHARS = re.compile(r"^[A-Za-z0-9_ ()<>=:,.$]*$")


def marker_value(rng: random.Random, i: int) -> str:
    """An adversarial string value carrying a unique marker."""
    parts = [f"zv{i:05d}", *rng.sample(INJECTIONS, rng.randint(1, 4))]
    rng.shuffle(parts)
    return "".join(parts)


def random_filter(rng: random.Random, i: int, depth: int = 0) -> dict[str, Any]:
    """A valid filter full of hostile string values."""
    counter = iter(range(i * 1000, i * 1000 + 1000))

    def text() -> str:
        return marker_value(rng, next(counter))

    def value() -> Any:
        roll = rng.random()
        if roll < 0.6:
            return text()
        if roll < 0.75:
            return rng.choice([0, -1, 2**62, 3.5, -0.0, 1e300])
        if roll < 0.85:
            return rng.choice([True, False])
        return [text(), text()]

    out: dict[str, Any] = {}
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.15 and depth < 2:
            out[rng.choice(["$and", "$or"])] = [random_filter(rng, i, depth + 1) for _ in range(rng.randint(1, 3))]
            continue
        key = rng.choice(GOOD_KEYS)
        if roll < 0.4:
            out[key] = value()
            continue
        op = rng.choice(OPERATORS)
        if op == "$exists":
            out[key] = {op: rng.choice([True, False])}
        elif op in ("$in", "$nin"):
            out[key] = {op: [text() for _ in range(rng.randint(1, 3))]}
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            out[key] = {op: rng.choice([text(), 5, 2.5])}
        elif op == "$contains":
            out[key] = {op: rng.choice([text(), 7, True])}
        else:
            out[key] = {op: value()}
    return out


def strings_in(node: Any) -> list[str]:
    """Every string value (not key) inside a filter or a params dict."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in strings_in(v)]
    if isinstance(node, list | tuple):
        return [s for v in node for s in strings_in(v)]
    return []


def check_text(text: str, params: dict[str, Any], strings: list[str]) -> None:
    """Only fixed syntax, validated property names and $parameters are in ``text``."""
    for s in strings:
        assert s not in text
    for ident in re.findall(r"`([^`]*)`", text):
        assert ident == "n" or re.fullmatch(re.escape(PROPERTY_PREFIX) + r"[A-Za-z_][A-Za-z0-9_]*", ident), ident
    bare = re.sub(r"`[^`]*`", "", text)
    assert SAFE_CHARS.match(bare), bare
    for word in re.findall(r"\$?[A-Za-z_][A-Za-z0-9_]*", bare):
        if word.startswith("$"):
            assert word[1:] in params, word
        else:
            assert word in ALLOWED_WORDS, word


FILTERS = [random_filter(random.Random(9000 + i), i) for i in range(2_000)]


def test_two_thousand_hostile_filters_keep_values_in_params() -> None:
    assert sum(len(strings_in(w)) for w in FILTERS) > 3_000
    for where in FILTERS:
        strings = strings_in(where)
        params: dict[str, Any] = {"existing": 1, "f0": "caller's"}
        text = compile_cypher(where, "n", params, prefix="f")
        check_text(text, params, strings)
        assert params["existing"] == 1 and params["f0"] == "caller's"  # caller parameters are kept
        assert set(strings) <= set(strings_in(params))  # every value went into params, unchanged


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_are_refused(key: str) -> None:
    for where in ({key: "x"}, {key: {"$eq": 1}}, {"$or": [{"lang": "en"}, {key: None}]}):
        with pytest.raises(InvalidInputError):
            compile_cypher(where, "n", {})
        with pytest.raises(InvalidInputError):
            matches(where, {})


@pytest.mark.parametrize("op", BAD_OPERATORS)
def test_bad_operators_are_refused(op: str) -> None:
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang": {op: "x"}}, "n", {})


@pytest.mark.parametrize(
    "where",
    [
        {"lang": {"$in": "en"}},
        {"lang": {"$in": [{"$ne": 1}]}},
        {"lang": {"$exists": "yes"}},
        {"lang": {"$gt": True}},
        {"lang": {"$gt": [1]}},
        {"lang": {"$eq": {"nested": 1}}},
        {"lang": object()},
        {"lang": float("nan")},
        {"lang": 2**70},
        {"$and": []},
        {"$or": {"lang": "en"}},
        {"$not": {"lang": "en"}},
        {1: "x"},
        ["lang", "en"],
        "lang = 'en'",
    ],
    ids=repr,
)
def test_malformed_operands_are_refused(where: Any) -> None:
    with pytest.raises(InvalidInputError):
        validate_filter(where)
    with pytest.raises(InvalidInputError):
        compile_cypher(where, "n", {})


@pytest.mark.parametrize("alias", ["", "n) DETACH DELETE n //", "`n`", "n.x", "1n", "n n", "ñ"])
def test_bad_alias_is_refused(alias: str) -> None:
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang": "en"}, alias, {})


@pytest.mark.parametrize("prefix", ["", "f-", "f}", "$f", "f f", "f`"])
def test_bad_parameter_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(InvalidInputError):
        compile_cypher({"lang": "en"}, "n", {}, prefix=prefix)


def test_deep_nesting_is_bounded() -> None:
    where: dict[str, Any] = {"lang": "en"}
    for _ in range(40):
        where = {"$and": [where]}
    with pytest.raises(InvalidInputError, match="deeper"):
        compile_cypher(where, "n", {})


def test_flatten_drops_unfilterable_keys() -> None:
    meta: dict[str, Any] = {key: "v" for key in BAD_KEYS if key}
    meta["lang"] = "en"
    meta["nested"] = {"`x`": 1, "ok": 2}
    flat = flatten_metadata(meta)
    assert flat == {"meta__lang": "en", "meta__nested__ok": 2}


KEY = st.one_of(st.sampled_from(GOOD_KEYS), st.sampled_from(BAD_KEYS), st.text(max_size=12))
VALUE = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.lists(st.text(max_size=10), min_size=1, max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEY, op=st.sampled_from(["$eq", "$ne", "$contains", "$in", "$gt"]), value=VALUE)
def test_property_keys_validated_values_parameterized(key: str, op: str, value: Any) -> None:
    if op == "$in" and not isinstance(value, list):
        value = [value]
    where = {key: {op: value}}
    try:
        validate_filter(where)
    except InvalidInputError:
        with pytest.raises(InvalidInputError):
            compile_cypher(where, "n", {})
        return
    params: dict[str, Any] = {}
    text = compile_cypher(where, "n", params)
    check_text(text, params, [])
    # the text depends on the key and the value's kind only, never on the value itself
    assert text == compile_cypher({key: {op: placeholder(value)}}, "n", {})
    assert value in params.values()
    assert key.replace(".", "__") in text  # a valid key is there, as a quoted property name


def placeholder(value: Any) -> Any:
    """A bland value of the same kind (string, bool, int, float, list of those)."""
    if isinstance(value, list):
        return [placeholder(v) for v in value]
    if isinstance(value, str):
        return "placeholder"
    if isinstance(value, bool):
        return value
    return type(value)(0)
