"""A rejected value is quoted only up to a short prefix: a 200k-value ``$in`` is not a MB-sized message."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from kag.errors import InvalidInputError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
from kag.query.filters import SHOWN_CHARS, validate_filter
from kag.server.app import create_app
from kag.server.http import HTTPServer
from kag.server.service import Service

SEED = "kag.examples.seed"


@pytest.mark.parametrize(
    "where",
    [
        {"year": {"$in": list(range(200_000))}},  # too many values
        {"year": {"$in": [{"a": 1}] * 200_000}},  # wrong kind of values
        {"year": {"$gt": "x" * 2_000_000}},  # one huge string is fine as an operand: no error expected
        {"$and": "y" * 1_000_000},
        {"year": {"$bogus" + "z" * 500_000: 1}},
        {"y" * 500_000: 1},
    ],
)
def test_filter_errors_quote_a_short_prefix(where: dict[str, object]) -> None:
    try:
        validate_filter(where)
    except InvalidInputError as exc:
        message = str(exc)
        assert len(message) < 1200, len(message)
        assert "..." in message  # says it was cut, and how large the value was
    else:
        assert "$gt" in str(where)[:20]  # the one valid filter of the list


async def test_the_server_answers_a_huge_bad_filter_with_a_small_400(tmp_path: Path) -> None:
    service = Service.open(f"memory://{tmp_path / 'kb.json'}", SEED)
    assert service.kb.entity_models == tuple(ENTITY_MODELS) and service.kb.relation_models == tuple(RELATION_MODELS)
    server = HTTPServer(create_app(service), port=0, max_body_bytes=4 * 1024 * 1024)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            body = {"query": "x", "where": {"year": {"$in": list(range(200_000))}}}
            response = await client.post("/search", json=body)
        assert response.status_code in (400, 422), response.text[:300]
        assert len(response.content) < 3000, len(response.content)
        assert "200000 items" in response.text
    finally:
        await server.close()
        await service.aclose()


def test_shown_keeps_short_values_whole() -> None:
    from kag.query.filters import shown

    assert shown([1, 2, 3]) == "[1, 2, 3]" and shown("abc") == "'abc'"
    long = shown("q" * 10_000)
    assert long.startswith("'qqq") and "10002 characters" in long and len(long) < SHOWN_CHARS + 60
