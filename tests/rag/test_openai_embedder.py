"""OpenAIEmbedder against a real local HTTP server."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from kag.errors import (
    ConfigError,
    DimensionsUnknownError,
    EmbeddingError,
    EmbeddingServiceError,
    InvalidInputError,
    LanguageModelError,
)
from kag.rag.embedders import Embedder
from kag.rag.openai_embedder import OpenAIEmbedder
from tests.helpers.http_server import LocalHTTPServer, RecordedRequest, Reply

KEY = "sk-test-secret-key"


def _vector(text: str, dims: int) -> list[float]:
    rng = np.random.default_rng(abs(hash(text)) % (2**32))
    return [float(x) for x in rng.normal(size=dims)]


def embeddings_handler(dims: int, *, shuffle: bool = True):  # type: ignore[no-untyped-def]
    def handle(request: RecordedRequest) -> dict:
        body = request.json()
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(text, dims)}
            for i, text in enumerate(body["input"])
        ]
        if shuffle:
            data.reverse()  # the API does not promise order: the client must sort by index
        return {"object": "list", "data": data, "model": body["model"], "usage": {}}

    return handle


def make(server: LocalHTTPServer, **kwargs: object) -> OpenAIEmbedder:
    options: dict = {"base_url": server.url + "/v1", "api_key": KEY, "backoff_base": 0.001}
    options.update(kwargs)
    return OpenAIEmbedder(**options)


async def test_embeds_in_batches_sorted_by_index(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", embeddings_handler(8))
    embedder = make(server, model="custom-model", dimensions=8, batch_size=2)
    texts = ["alpha", "beta", "gamma", "", "delta"]
    matrix = await embedder.embed(texts)
    assert matrix.shape == (5, 8) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    expected = np.array(_vector("gamma", 8))
    np.testing.assert_allclose(matrix[2], expected / np.linalg.norm(expected), rtol=1e-5)
    bodies = [r.json() for r in server.requests]
    assert [b["input"] for b in bodies] == [["alpha", "beta"], ["gamma", " "], ["delta"]]
    assert all(b["model"] == "custom-model" and b["dimensions"] == 8 for b in bodies)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert isinstance(embedder, Embedder)


async def test_dimensions_from_known_model_and_from_first_response(
    server: LocalHTTPServer,
) -> None:
    assert OpenAIEmbedder(api_key="k").dimensions == 1536
    server.route("POST", "/v1/embeddings", embeddings_handler(6))
    embedder = make(server, model="local-model")
    with pytest.raises(DimensionsUnknownError):
        _ = embedder.dimensions
    assert not hasattr(embedder, "dimensions")  # AttributeError too: protocol checks say "no"
    assert await embedder.ensure_dimensions() == 6
    assert embedder.dimensions == 6
    assert "dimensions" not in server.requests[0].json()  # not requested, only learned
    assert (await embedder.embed([])).shape == (0, 6)


async def test_retries_429_and_5xx_then_succeeds(server: LocalHTTPServer) -> None:
    ok = embeddings_handler(4)
    replies = [
        Reply.json({"error": "slow down"}, 429, headers={"Retry-After": "0"}),
        Reply.json({"error": "boom"}, 503),
    ]

    def handler(request: RecordedRequest) -> object:
        return replies.pop(0) if replies else ok(request)

    server.route("POST", "/v1/embeddings", handler)
    matrix = await make(server, model="m", dimensions=4, max_retries=3).embed(["x"])
    assert matrix.shape == (1, 4)
    assert len(server.requests) == 3


async def test_gives_up_after_max_retries(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", lambda r: Reply.json({"error": "down"}, 500))
    embedder = make(server, model="m", dimensions=4, max_retries=2)
    with pytest.raises(EmbeddingServiceError, match="after 3 attempt") as info:
        await embedder.embed(["x"])
    assert isinstance(info.value, LanguageModelError) and isinstance(info.value, EmbeddingError)
    assert KEY not in str(info.value)
    assert len(server.requests) == 3


async def test_client_errors_are_not_retried(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", lambda r: Reply.json({"error": "bad key"}, 401))
    with pytest.raises(EmbeddingServiceError, match=r"401.*check the API key"):
        await make(server, model="m", dimensions=4).embed(["x"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"nope": []}, "no 'data'"),
        ({"data": []}, "got 0 embeddings"),
        ({"data": [{"index": 5, "embedding": [1.0, 0.0]}]}, "bad index"),
        ({"data": [{"index": 0, "embedding": "abc"}]}, "list of numbers"),
        ({"data": [{"index": 0, "embedding": [1.0, None]}]}, "list of numbers"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0, 3.0]}]}, "shape"),
        ({"data": [{"index": 0, "embedding": [1e39, 1.0]}]}, "NaN or infinite"),
    ],
)
async def test_bad_payloads(server: LocalHTTPServer, payload: dict, message: str) -> None:
    server.route("POST", "/v1/embeddings", lambda r: payload)
    with pytest.raises(EmbeddingError, match=message):
        await make(server, model="m", dimensions=2).embed(["x"])


async def test_non_json_and_duplicate_index(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", lambda r: Reply(body="<html>oops</html>"))
    with pytest.raises(EmbeddingError, match="not JSON"):
        await make(server, model="m", dimensions=2).embed(["x"])
    server.route(
        "POST",
        "/v1/embeddings",
        lambda r: {"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [0.0, 1.0]}]},
    )
    with pytest.raises(EmbeddingError, match="twice"):
        await make(server, model="m", dimensions=2).embed(["x", "y"])


async def test_timeout_is_retried_then_reported(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", lambda r: Reply.json({}, delay=2.0))
    embedder = make(server, model="m", dimensions=2, timeout=0.2, max_retries=1)
    with pytest.raises(EmbeddingServiceError, match="transport error"):
        await embedder.embed(["x"])
    assert len(server.requests) == 2


async def test_shared_client(server: LocalHTTPServer) -> None:
    server.route("POST", "/v1/embeddings", embeddings_handler(3))
    async with httpx.AsyncClient() as client:
        embedder = make(server, model="m", dimensions=3, client=client)
        first, second = await asyncio.gather(embedder.embed(["a"]), embedder.embed(["b", "c"]))
        assert first.shape == (1, 3) and second.shape == (2, 3)
        assert not client.is_closed


def test_config_name_and_repr_hide_the_key() -> None:
    embedder = OpenAIEmbedder(api_key=KEY, dimensions=256)
    config = embedder.get_config()
    assert config == {
        "type": "openai",
        "model": "text-embedding-3-small",
        "base_url": "https://api.openai.com/v1",
        "dimensions": 256,
        "batch_size": 128,
        "timeout": 30.0,
        "max_retries": 3,
    }
    assert KEY not in repr(embedder) and KEY not in str(config)
    assert embedder.name == "openai:text-embedding-3-small:256"
    assert OpenAIEmbedder(api_key=KEY).name == "openai:text-embedding-3-small"


def test_key_from_environment_and_required_for_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIEmbedder()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert OpenAIEmbedder()._headers()["Authorization"] == "Bearer from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    local = OpenAIEmbedder(base_url="http://127.0.0.1:1/v1", model="x", dimensions=2)
    assert "Authorization" not in local._headers()  # local servers may need no key


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": ""},
        {"dimensions": 0},
        {"batch_size": 0},
        {"timeout": 0},
        {"max_retries": -1},
        {"base_url": "ftp://host/v1"},
        {"base_url": "not a url"},
    ],
)
def test_constructor_validation(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        OpenAIEmbedder(api_key="k", **kwargs)


async def test_input_validation() -> None:
    embedder = OpenAIEmbedder(api_key="k")
    with pytest.raises(InvalidInputError):
        await embedder.embed("single string")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await embedder.embed([1])  # type: ignore[list-item]
