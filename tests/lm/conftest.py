"""Fixtures for the language-model tests: a real local HTTP server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# `tests` is not an installed package; make `tests.helpers` importable however pytest
# was started (the helper is shared with other test suites).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.helpers.http_server import LocalHTTPServer, local_http_server  # noqa: E402, F401


@pytest.fixture
def server(local_http_server: LocalHTTPServer) -> LocalHTTPServer:  # noqa: F811
    """A started local HTTP server (stopped after the test)."""
    return local_http_server


@pytest.fixture(autouse=True)
def _no_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real key must never reach the local test servers.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
