"""Prometheus metrics of the server (``GET /metrics``), with the optional ``metrics`` extra.

``pip install 'graph-kag[metrics]'`` installs ``prometheus_client``; without it
:meth:`Metrics.create` returns ``None`` and ``GET /metrics`` answers **501**
naming the extra. Each :class:`Metrics` has its own registry (no global state):

* ``kag_http_requests_total{method,route,status}`` and
  ``kag_http_request_duration_seconds{method,route,status}`` (histogram): every
  request the app answers; ``route`` is the matched route or ``unmatched``, so
  unknown paths cannot grow the label set;
* ``kag_http_requests_in_flight``;
* ``kag_store_query_duration_seconds{store,operation}`` (histogram): each call of
  the graph store (``store="graph"``) and the passage store (``"passages"``);
* ``kag_ingest_rows_total{kind}``: entities, relations, documents and chunks written
  through ``POST /ingest``;
* ``kag_model_tokens_total{model,kind}``: prompt and completion tokens, for language
  models that count them (an ``usage`` mapping, e.g. the local llama.cpp model).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from kag.version import pip_install

__all__ = ["METRICS_MISSING", "Metrics"]

METRICS_MISSING = (
    f"metrics need the prometheus_client library, which is not installed: {pip_install('metrics')} "
    "(the 'metrics' extra)"
)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_GRAPH_OPERATIONS = ("ensure_schema", "upsert", "execute", "get_nodes", "get_relations", "delete", "counts")
_PASSAGE_OPERATIONS = (
    "ensure_schema",
    "write",
    "delete_documents",
    "list_documents",
    "vector_search",
    "keyword_search",
    "chunk_vectors",
    "get_chunks",
    "mentioned_by",
    "entities",
    "chunk_texts",
    "link",
    "counts",
)
_OBSERVERS = "_kag_metrics_observers"

StoreObserver = Callable[[str, str, float], None]


class Metrics:
    """The server's metrics in a registry of their own; :meth:`render` is the Prometheus text format."""

    def __init__(self) -> None:
        import prometheus_client as prom  # ImportError without the 'metrics' extra: see create()

        self._prom = prom
        self.registry = prom.CollectorRegistry(auto_describe=True)
        self.content_type: str = prom.CONTENT_TYPE_LATEST
        self.requests = prom.Counter(
            "kag_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=self.registry
        )
        self.latency = prom.Histogram(
            "kag_http_request_duration_seconds",
            "Time to answer an HTTP request (until the response is ready).",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = prom.Gauge(
            "kag_http_requests_in_flight", "HTTP requests being answered.", registry=self.registry
        )
        self.store_latency = prom.Histogram(
            "kag_store_query_duration_seconds",
            "Time of one call of the graph or passage store.",
            ["store", "operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.ingest_rows = prom.Counter(
            "kag_ingest_rows", "Rows written through POST /ingest.", ["kind"], registry=self.registry
        )
        self._models: list[Callable[[], Any]] = []
        self.registry.register(_TokenCollector(self._models))

    @classmethod
    def create(cls) -> Metrics | None:
        """Metrics, or ``None`` when ``prometheus_client`` is not installed."""
        try:
            return cls()
        except ImportError:
            return None

    # -- recording ------------------------------------------------------------
    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        labels = (method if method in _METHODS else "OTHER", route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def observe_store(self, store: str, operation: str, seconds: float) -> None:
        """Record one store call."""
        self.store_latency.labels(store, operation).observe(seconds)

    def observe_ingest(self, report: Mapping[str, Any]) -> None:
        """Count the rows an ingest report says were written."""
        upserted = report.get("upserted") or {}
        passages = report.get("passages") or {}
        for kind, value in (
            ("entities", upserted.get("entities", 0)),
            ("relations", upserted.get("relations", 0)),
            ("documents", passages.get("documents", 0)),
            ("chunks", passages.get("chunks", 0)),
        ):
            if isinstance(value, int) and value > 0:
                self.ingest_rows.labels(kind).inc(value)

    def watch(self, graph_store: Any, passage_store: Any = None, model: Callable[[], Any] | None = None) -> None:
        """Time the calls of ``graph_store`` and ``passage_store``; report ``model()``'s tokens when it counts them.

        ``model`` returns the language model if one is built (else ``None``), so scraping never builds one.
        """
        _instrument(graph_store, "graph", _GRAPH_OPERATIONS, self.observe_store)
        if passage_store is not None:
            _instrument(passage_store, "passages", _PASSAGE_OPERATIONS, self.observe_store)
        if model is not None:
            self._models.append(model)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        data: bytes = self._prom.generate_latest(self.registry)
        return data


class _TokenCollector:
    """``kag_model_tokens_total``, read from the language models' ``usage`` at scrape time."""

    def __init__(self, models: list[Callable[[], Any]]) -> None:
        self.models = models

    def describe(self) -> list[Any]:
        return []  # labels appear only once a model has counted tokens

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily("kag_model_tokens", "Tokens used by the language model.", labels=["model", "kind"])
        found = False
        for get in self.models:
            lm = get()
            usage = getattr(lm, "usage", None)
            if lm is None or not isinstance(usage, Mapping) or not usage.get("calls", 1):
                continue  # not built, or it never counted a call (the lexical model has no tokens)
            for kind in ("prompt", "completion"):
                value = usage.get(f"{kind}_tokens")
                if isinstance(value, int | float):
                    family.add_metric([str(getattr(lm, "name", type(lm).__name__)), kind], float(value))
                    found = True
        if found:
            yield family


def _instrument(store: Any, kind: str, operations: tuple[str, ...], observer: StoreObserver) -> None:
    """Wrap ``store``'s coroutine methods (on the instance, once) so each call reports its duration."""
    observers: list[StoreObserver] | None = store.__dict__.get(_OBSERVERS) if hasattr(store, "__dict__") else None
    if observers is None:
        if not hasattr(store, "__dict__"):
            return  # a store with __slots__ cannot be timed from outside
        observers = []
        for name in operations:
            method = getattr(store, name, None)
            if inspect.iscoroutinefunction(method):
                setattr(store, name, _timed(method, kind, name, observers))
        store.__dict__[_OBSERVERS] = observers
    if observer not in observers:
        observers.append(observer)


def _timed(
    method: Callable[..., Awaitable[Any]], kind: str, name: str, observers: list[StoreObserver]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            for observe in observers:
                observe(kind, name, elapsed)

    return timed
