"""The HTTP API: routes, request models and error mapping.

Routes (JSON in, JSON out)::

    GET  /                 the service and its routes
    GET  /health           {"status", "backend", "uri", "counts"}; within 1 s, 503 {"status": "degraded",
                           "reason"} with Retry-After when the backend is down
    GET  /schema           entity and relation labels, the TripletSearch JSON schema
    POST /search           {"query", "k"?, "label"?, "where"?}           -> {"hits": [...]}
    POST /triplet_search   {TripletSearch fields | "hops": [...], "k"?, "threshold"?, "include_vectors"?}
                                                                         -> {"facts", "count", "cypher", "params"}
    POST /ask              {"question", "k"?, "threshold"?, "max_hops"?, "mode"?: "graph"|"rag"}
                                                                         -> {"answer", "search", "cypher", "facts", ...}
    POST /ingest           {"entities"?, "relations"?, "texts"?, "sources"?, "extract"?, "examples"?,
                            "nearest"?}                                  -> report
    POST /delete           {"ids"?, "document_ids"?, "sources"?, "where"?}  -> {"deleted", "counts"}
    POST /mcp              MCP Streamable HTTP transport (JSON-RPC 2.0, JSON responses)
    GET  /metrics          Prometheus text format (501 without the ``metrics`` extra)

With API keys (:mod:`kag.server.auth`), every route but ``/health`` needs
``Authorization: Bearer <key>`` (**401** without a valid key, **403** outside its
scope); ``/health`` then shows its counts and URI only to a key with ``read``.
Every request runs in one namespace (tenant), chosen by :mod:`kag.server.tenants`
from the key and the ``X-Kag-Namespace`` header, never from the body.
Each request is logged once on the ``kag.server.access`` logger (INFO: client,
method, route, status, latency in ms, the namespace and the key's id; never bodies
or keys) and counted in :mod:`kag.server.metrics`.

Request bodies must be ``application/json`` (else **415**) holding an object;
unknown fields are refused. Errors are ``{"error": {"type", "message"}}``:

* invalid JSON: **400** ``InvalidJSON``; a body that fails its model: **422**
  ``ValidationError`` (with ``details``);
* :class:`~kag.errors.SchemaError` / :class:`~kag.errors.InvalidInputError` /
  ``ConfigError`` / ``LoaderError`` / ``QueryError``: **400**; ``NotFoundError``: **404**;
* :class:`~kag.errors.BackendUnavailableError` / ``BackendAuthError``: **503**, with ``Retry-After``
  for an unreachable backend. During a Neo4j outage every request that needs the graph gets it at
  once (the store fails fast, see :mod:`kag.graph.neo4j`), and service resumes by itself within
  about half a second of the server answering again;
  ``LanguageModelError``: **502**; other kag errors: **500** with their message;
* anything else: **500** ``InternalServerError``, logged, details never sent;
* unknown path **404**, wrong method **405** (with ``Allow``); a ``Host`` or a
  browser ``Origin`` that is not local: **403** (DNS-rebinding protection; see
  ``allowed_hosts`` / ``allowed_origins``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import pydantic

from kag.datamodels.schema import provider_schema
from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    HTTPError,
)
from kag.query.triplet import triplet_search_schema
from kag.server.auth import APIKey, APIKeys
from kag.server.http import Request, Response
from kag.server.metrics import METRICS_MISSING, Metrics
from kag.server.service import Service
from kag.server.specs import backend_name
from kag.server.tenants import NAMESPACE_HEADER, Tenant, Tenants, request_namespace
from kag.server.wire import (
    LOCAL_HOSTS,
    AskRequest,
    DeleteRequest,
    IngestRequest,
    SearchRequest,
    TripletSearchRequest,
    error_response,
    host_allowed,
    origin_allowed,
    parse_json_body,
    retry_after_headers,
)

__all__ = ["App", "create_app"]

logger = logging.getLogger("kag.server")
access_logger = logging.getLogger("kag.server.access")

RouteHandler = Callable[[Request, Tenant], Awaitable[Response]]


class App:
    """Routes requests to the :class:`Service` of their namespace (and its :class:`MCPServer` at ``/mcp``).

    An ``App`` is the handler of a :class:`kag.server.http.HTTPServer`.
    ``allowed_origins`` lists extra browser origins allowed besides local ones.
    ``allowed_hosts`` are the ``Host`` header names accepted (default: local
    names only, against DNS rebinding); ``None`` accepts any (e.g. behind a proxy).
    ``api_keys``: require a key on every route but ``/health`` (``None``: no
    authentication, for loopback use). ``metrics``: where requests are counted
    (``None``: nowhere); ``metrics_route`` serves ``GET /metrics`` (**501** when
    ``metrics`` is ``None``, naming the ``metrics`` extra). ``tenants``: the namespaces
    served (default: ``service``'s, others opened on first use).
    """

    def __init__(
        self,
        service: Service,
        *,
        mcp: bool = True,
        tenants: Tenants | None = None,
        allowed_origins: Collection[str] = (),
        allowed_hosts: Collection[str] | None = LOCAL_HOSTS,
        api_keys: APIKeys | None = None,
        metrics: Metrics | None = None,
        metrics_route: bool = True,
    ) -> None:
        self.service = service
        self.tenants = tenants if tenants is not None else Tenants(service, mcp=mcp)
        self.api_keys = api_keys
        self.metrics = metrics
        self.allowed_origins = frozenset(allowed_origins)
        self.allowed_hosts = None if allowed_hosts is None else frozenset(allowed_hosts)
        self.routes: dict[str, dict[str, RouteHandler]] = {
            "/": {"GET": self.index},
            "/health": {"GET": self.health},
            "/schema": {"GET": self.schema},
            "/search": {"POST": self.search},
            "/triplet_search": {"POST": self.triplet_search},
            "/ask": {"POST": self.ask},
            "/ingest": {"POST": self.ingest},
            "/delete": {"POST": self.delete},
        }
        if mcp:
            self.routes["/mcp"] = {"POST": self.mcp}
        if metrics_route:
            self.routes["/metrics"] = {"GET": self.metrics_text}

    async def __call__(self, request: Request) -> Response:
        """Handle one request: answer it, then count it and write its access log line."""
        start = time.perf_counter()
        route = request.path if request.path in self.routes else "unmatched"
        if self.metrics is not None:
            self.metrics.in_flight.inc()
        namespace: list[str] = []  # filled by _answer once known
        try:
            response, key = await self._answer(request, namespace)
        finally:
            if self.metrics is not None:
                self.metrics.in_flight.dec()
        self._record(
            request.client,
            request.method,
            route,
            response.status,
            time.perf_counter() - start,
            namespace[0] if namespace else "-",
            key.key_id if key is not None else "-",
        )
        return response

    def _record(
        self, client: str, method: str, route: str, status: int, seconds: float, namespace: str, key_id: str
    ) -> None:
        """Count one answered request and write its access log line (never bodies or keys)."""
        if self.metrics is not None:
            self.metrics.observe_request(method, route, status, seconds)
        if access_logger.isEnabledFor(logging.INFO):
            access_logger.info(
                "%s %s %s %d %.1fms ns=%s key=%s",
                client or "-",
                method[:16],
                route,
                status,
                seconds * 1000,
                namespace,
                key_id,
                extra={
                    "namespace": namespace,
                    "client": client,
                    "method": method[:16],
                    "route": route,
                    "status": status,
                    "latency_ms": round(seconds * 1000, 3),
                    "key_id": key_id,
                },
            )

    def refused(self, client: str, status: int, seconds: float) -> None:
        """A request the HTTP server refused itself (malformed, too large, too slow, shed): counted
        under route ``refused`` and logged like any other, with method ``-`` (it was never parsed)."""
        self._record(client, "-", "refused", status, seconds, "-", "-")

    async def _answer(self, request: Request, namespace: list[str]) -> tuple[Response, APIKey | None]:
        if self.allowed_hosts is not None and not host_allowed(request.header("host"), self.allowed_hosts):
            return Response.error(403, "Forbidden", "this Host is not allowed"), None
        origin = request.header("origin")
        if origin and not origin_allowed(origin, self.allowed_origins):
            return Response.error(403, "Forbidden", "this Origin is not allowed"), None
        methods = self.routes.get(request.path)
        key: APIKey | None = None
        if self.api_keys is not None:
            authorization = request.header("authorization")
            key = self.api_keys.identify(authorization)
            try:
                self.api_keys.require(key, request.path if methods else None, sent=bool(authorization.strip()))
            except HTTPError as exc:
                return Response.error(exc.status, exc.kind, exc.message, exc.headers), key
        if methods is None:
            return Response.error(404, "NotFound", f"no route {request.path!r}; see GET / for the routes"), key
        handler = methods.get(request.method)
        if handler is None:
            allow = ", ".join(sorted(methods))
            return Response.error(
                405, "MethodNotAllowed", f"{request.path} accepts {allow}, not {request.method}", {"Allow": allow}
            ), key
        try:
            ns = request_namespace(
                request.header(NAMESPACE_HEADER),
                key,
                authenticated=self.api_keys is not None,
                default=self.tenants.default.namespace,
            )
            namespace.append(ns)
            tenant = await self.tenants.get(ns)
            return await handler(request, tenant), key
        except HTTPError as exc:
            return Response.error(exc.status, exc.kind, exc.message, exc.headers), key
        except Exception as exc:
            return error_response(exc), key

    def _body(self, request: Request, model: type[pydantic.BaseModel]) -> Any:
        data = parse_json_body(request)
        if not isinstance(data, dict):
            kind = "an array" if isinstance(data, list) else type(data).__name__
            raise HTTPError(422, "ValidationError", f"the body must be a JSON object, got {kind}")
        return model.model_validate(data)

    # -- handlers -------------------------------------------------------------
    async def index(self, request: Request, tenant: Tenant) -> Response:
        """``GET /``: the service and its routes."""
        from kag.version import __version__

        routes = {path: sorted(methods) for path, methods in self.routes.items()}
        return Response.json(
            200, {"name": "kag", "version": __version__, "knowledge": self.service.knowledge.name, "routes": routes}
        )

    async def health(self, request: Request, tenant: Tenant) -> Response:
        """``GET /health``: status, backend and counts, within a second (``HEALTH_SECONDS``).

        When the backend cannot be reached: **503** ``{"status": "degraded", "backend", "reason"}``
        with ``Retry-After``. With API keys, a caller without a ``read`` key gets only ``status``
        and ``backend``.
        """
        detailed = True
        if self.api_keys is not None:
            key = self.api_keys.identify(request.header("authorization"))
            detailed = key is not None and key.allows("read")
        try:
            health = await tenant.service.health()
        except (BackendUnavailableError, BackendAuthError) as exc:
            body: dict[str, Any] = {"status": "degraded", "backend": backend_name(self.service.kb)}
            if detailed:
                body["reason"] = str(exc)
                body["error"] = {"type": type(exc).__name__, "message": str(exc)}
            return Response.json(503, body, retry_after_headers(exc))
        if not detailed:
            health = {"status": health["status"], "backend": health["backend"]}
        return Response.json(200, health)

    async def metrics_text(self, request: Request, tenant: Tenant) -> Response:
        """``GET /metrics``: the Prometheus text format; **501** without the ``metrics`` extra."""
        if self.metrics is None:
            return Response.error(501, "NotImplemented", METRICS_MISSING)
        return Response(200, self.metrics.render(), {"Content-Type": self.metrics.content_type})

    async def schema(self, request: Request, tenant: Tenant) -> Response:
        """``GET /schema``: declared labels and the TripletSearch JSON schema."""
        graph = self.service.schema
        body = {
            "entities": {
                label: {
                    k: v for k, v in model.model_json_schema().items() if k in ("properties", "required", "description")
                }
                for label, model in graph.entities.items()
            },
            "relations": {
                label: {"subject": list(spec.subj_labels), "object": list(spec.obj_labels)}
                for label, spec in graph.relations.items()
            },
            "triplet_search": provider_schema(triplet_search_schema(graph)),
        }
        return Response.json(200, body)

    async def search(self, request: Request, tenant: Tenant) -> Response:
        """``POST /search``."""
        body: SearchRequest = self._body(request, SearchRequest)
        hits = await tenant.service.search(body.query, k=body.k, label=body.label, where=body.where)
        return Response.json(200, {"query": body.query, "hits": hits})

    async def triplet_search(self, request: Request, tenant: Tenant) -> Response:
        """``POST /triplet_search``."""
        body: TripletSearchRequest = self._body(request, TripletSearchRequest)
        result = await tenant.service.triplet_search(
            body.search(), k=body.k, threshold=body.threshold, include_vectors=body.include_vectors
        )
        return Response.json(200, result)

    async def ask(self, request: Request, tenant: Tenant) -> Response:
        """``POST /ask``."""
        body: AskRequest = self._body(request, AskRequest)
        result = await tenant.service.ask(
            body.question, k=body.k, threshold=body.threshold, max_hops=body.max_hops, mode=body.mode
        )
        return Response.json(200, result)

    async def ingest(self, request: Request, tenant: Tenant) -> Response:
        """``POST /ingest``."""
        body: IngestRequest = self._body(request, IngestRequest)
        sources = [tenant.service.check_source(s) for s in body.sources]
        report = await tenant.service.ingest(
            entities=body.entities,
            relations=body.relations,
            texts=body.texts,
            sources=sources,
            extract=body.extract,
            extraction_examples=[(e.text, e.extraction) for e in body.examples],
            nearest=body.nearest,
        )
        if self.metrics is not None:
            self.metrics.observe_ingest(report)
        return Response.json(200, report)

    async def delete(self, request: Request, tenant: Tenant) -> Response:
        """``POST /delete``: by ids, document ids, sources or a metadata filter, in the request's namespace."""
        body: DeleteRequest = self._body(request, DeleteRequest)
        report = await tenant.service.delete(
            ids=body.ids, document_ids=body.document_ids, sources=body.sources, where=body.where
        )
        return Response.json(200, report)

    async def mcp(self, request: Request, tenant: Tenant) -> Response:
        """``POST /mcp``: the MCP endpoint of the request's namespace."""
        assert tenant.mcp is not None  # the route exists only when MCP is on
        return await tenant.mcp.handle_http(request)


def create_app(
    service: Service,
    *,
    mcp: bool = True,
    allowed_origins: Collection[str] = (),
    allowed_hosts: Collection[str] | None = LOCAL_HOSTS,
    api_keys: APIKeys | None = None,
    metrics: bool = True,
    max_namespaces: int = 64,
) -> App:
    """An :class:`App` over ``service``, with the MCP endpoint at ``/mcp`` unless ``mcp=False``.

    ``api_keys`` turns authentication on. ``metrics=True`` counts requests, store calls,
    ingested rows and model tokens when ``prometheus_client`` is installed and serves
    them at ``GET /metrics`` (**501** naming the extra when it is not); ``False``: no ``/metrics``.
    ``service`` serves the ``default`` namespace (or the one it was opened in); others are
    opened on first use over the same backend, at most ``max_namespaces`` in all.
    """
    collected = Metrics.create() if metrics else None

    def opened(tenant: Service) -> None:
        if collected is not None:
            # the model is read only once built (tenant._lm), so scraping never builds one
            collected.watch(tenant.kb.store, tenant.knowledge.store, model=lambda: tenant._lm)

    return App(
        service,
        mcp=mcp,
        tenants=Tenants(service, mcp=mcp, max_namespaces=max_namespaces, on_open=opened),
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
        api_keys=api_keys,
        metrics=collected,
        metrics_route=metrics,
    )
