"""The HTTP API: routes, request models and error mapping.

Routes (JSON in, JSON out)::

    GET  /                 the service and its routes
    GET  /health           {"status", "backend", "uri", "counts"} (503 when the backend is down)
    GET  /schema           entity and relation labels, the TripletSearch JSON schema
    POST /search           {"query", "k"?, "label"?, "where"?}           -> {"hits": [...]}
    POST /triplet_search   {TripletSearch fields | "hops": [...], "k"?, "threshold"?, "include_vectors"?}
                                                                         -> {"facts", "count", "cypher", "params"}
    POST /ask              {"question", "k"?, "threshold"?, "max_hops"?, "mode"?: "graph"|"rag"}
                                                                         -> {"answer", "search", "cypher", "facts", ...}
    POST /ingest           {"entities"?, "relations"?, "texts"?, "sources"?, "extract"?} -> report
    POST /mcp              MCP Streamable HTTP transport (JSON-RPC 2.0, JSON responses)

Request bodies must be ``application/json`` (else **415**) holding an object;
unknown fields are refused. Errors are ``{"error": {"type", "message"}}``:

* invalid JSON: **400** ``InvalidJSON``; a body that fails its model: **422**
  ``ValidationError`` (with ``details``);
* :class:`~kag.errors.SchemaError` / :class:`~kag.errors.InvalidInputError` /
  ``ConfigError`` / ``LoaderError`` / ``QueryError``: **400**; ``NotFoundError``: **404**;
* :class:`~kag.errors.BackendUnavailableError` / ``BackendAuthError``: **503**;
  ``LanguageModelError``: **502**; other kag errors: **500** with their message;
* anything else: **500** ``InternalServerError``, logged, details never sent;
* unknown path **404**, wrong method **405** (with ``Allow``); a ``Host`` or a
  browser ``Origin`` that is not local: **403** (DNS-rebinding protection; see
  ``allowed_hosts`` / ``allowed_origins``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConfigError,
    InvalidInputError,
    KagError,
    LanguageModelError,
    LoaderError,
    NotFoundError,
    QueryError,
    SchemaError,
)
from kag.query.plan import MAX_HOPS
from kag.query.triplet import TripletSearch, triplet_search_schema
from kag.server.config import MAX_K, Service
from kag.server.http import Request, Response

if TYPE_CHECKING:
    from kag.server.mcp import MCPServer

__all__ = [
    "App",
    "AskRequest",
    "IngestRequest",
    "SearchRequest",
    "TripletSearchRequest",
    "create_app",
    "error_response",
]

logger = logging.getLogger("kag.server")

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RouteHandler = Callable[[Request], Awaitable[Response]]


# --------------------------------------------------------------------------- request models


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchRequest(_Body):
    """``POST /search``: facts + passages (``Knowledge.search``), or entities of ``label``."""

    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=5, ge=1, le=MAX_K)
    label: str | None = Field(default=None, description="Search entities of this label (or '*') by similarity.")
    where: dict[str, Any] | None = Field(default=None, description="Metadata filter on passages.")


class TripletSearchRequest(_Body):
    """``POST /triplet_search``: one TripletSearch (flat fields) or a chain (``hops``)."""

    subject_label: str | None = None
    subject_similarity_search: str | None = None
    relation_label: str | None = None
    object_label: str | None = None
    object_similarity_search: str | None = None
    negated: bool | None = None
    bidirectional: bool | None = None
    count: bool | None = None
    hops: list[TripletSearch] | None = Field(default=None, min_length=1, max_length=MAX_HOPS)
    k: int = Field(default=10, ge=1, le=MAX_K)
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    include_vectors: bool = Field(default=False, description="Return the query vectors in params.")

    @model_validator(mode="after")
    def _one_form(self) -> TripletSearchRequest:
        if self.hops is not None and self.search_fields():
            raise ValueError("give either the TripletSearch fields or `hops`, not both")
        return self

    def search_fields(self) -> dict[str, Any]:
        """The TripletSearch fields that were given."""
        names = TripletSearch.model_fields
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def search(self) -> dict[str, Any]:
        """The search as ``KnowledgeBase.triplet_search`` takes it."""
        if self.hops is not None:
            return {"hops": [hop.model_dump() for hop in self.hops]}
        return self.search_fields()


class AskRequest(_Body):
    """``POST /ask``: a question answered by ``Input -> KnowledgeRetriever -> Generator``."""

    question: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=10, ge=1, le=MAX_K)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    max_hops: int = Field(default=2, ge=1, le=MAX_HOPS)
    mode: Literal["graph", "rag"] = Field(
        default="graph", description="graph: the triplet-search program; rag: Knowledge.ask over facts + passages."
    )


class IngestRequest(_Body):
    """``POST /ingest``: entities/relations as dicts with ``label``, texts, sources (URLs or allowed files)."""

    entities: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)
    relations: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)
    texts: list[str] = Field(default_factory=list, max_length=1_000)
    sources: list[str] = Field(default_factory=list, max_length=100)
    extract: bool = Field(default=False, description="Extract entities and relations from texts/sources.")

    @model_validator(mode="after")
    def _not_empty(self) -> IngestRequest:
        if not (self.entities or self.relations or self.texts or self.sources):
            raise ValueError("nothing to ingest: give entities, relations, texts or sources")
        return self


# --------------------------------------------------------------------------- errors


def _validation_details(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in err.get("loc", ())], "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors(include_url=False, include_input=False, include_context=False)[:20]
    ]


def _validation_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; ... and {more} more" if more > 0 else "")


def error_response(exc: BaseException) -> Response:
    """The JSON error response for an exception raised while handling a request."""
    if isinstance(exc, pydantic.ValidationError):
        body = {
            "error": {
                "type": "ValidationError",
                "message": _validation_message(exc),
                "details": _validation_details(exc),
            }
        }
        return Response.json(422, body)
    if isinstance(exc, KagError):
        status = 500
        if isinstance(exc, NotFoundError):
            status = 404
        elif isinstance(exc, SchemaError | InvalidInputError | ConfigError | LoaderError | QueryError):
            status = 400
        elif isinstance(exc, BackendUnavailableError | BackendAuthError):
            status = 503
        elif isinstance(exc, LanguageModelError):
            status = 502
        return Response.error(status, type(exc).__name__, str(exc) or type(exc).__name__)
    logger.error("unexpected %s while handling a request", type(exc).__name__, exc_info=exc)
    return Response.error(500, "InternalServerError", "internal server error")


# --------------------------------------------------------------------------- the app


def _host_allowed(host: str, allowed: Collection[str]) -> bool:
    if not host:
        return True  # HTTP/1.0 without Host
    try:
        name = urlsplit("//" + host).hostname
    except ValueError:
        return False
    return name in allowed or host in allowed


def _origin_allowed(origin: str, allowed: Collection[str]) -> bool:
    if origin in allowed:
        return True
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in LOCAL_HOSTS


def parse_json_body(request: Request) -> Any:
    """The request body as JSON; raises ``_HTTPError`` 415 / 400 as appropriate."""
    ctype = request.header("content-type").split(";", 1)[0].strip().lower()
    if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
        raise HTTPError(415, "UnsupportedMediaType", "send the body as Content-Type: application/json")

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(request.body.decode("utf-8"), parse_constant=reject_constant)
    except UnicodeDecodeError:
        raise HTTPError(400, "InvalidJSON", "the body is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise HTTPError(
            400, "InvalidJSON", f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise HTTPError(400, "InvalidJSON", f"the body is not valid JSON: {exc}") from None


class HTTPError(Exception):
    """An error with a ready HTTP status (raised by handlers, turned into a response by :class:`App`)."""

    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers or {}

    def response(self) -> Response:
        return Response.error(self.status, self.kind, self.message, self.headers)


class App:
    """Routes requests to a :class:`Service` (and an optional :class:`MCPServer` at ``/mcp``).

    An ``App`` is the handler of a :class:`kag.server.http.HTTPServer`.
    ``allowed_origins`` lists extra browser origins allowed besides local ones.
    ``allowed_hosts`` are the ``Host`` header names accepted (default: local
    names only, against DNS rebinding); ``None`` accepts any (e.g. behind a proxy).
    """

    def __init__(
        self,
        service: Service,
        *,
        mcp: MCPServer | None = None,
        allowed_origins: Collection[str] = (),
        allowed_hosts: Collection[str] | None = LOCAL_HOSTS,
    ) -> None:
        self.service = service
        self.mcp = mcp
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
        }
        if mcp is not None:
            self.routes["/mcp"] = {"POST": mcp.handle_http}

    async def __call__(self, request: Request) -> Response:
        """Handle one request."""
        if self.allowed_hosts is not None and not _host_allowed(request.header("host"), self.allowed_hosts):
            return Response.error(403, "Forbidden", "this Host is not allowed")
        origin = request.header("origin")
        if origin and not _origin_allowed(origin, self.allowed_origins):
            return Response.error(403, "Forbidden", "this Origin is not allowed")
        methods = self.routes.get(request.path)
        if methods is None:
            return Response.error(404, "NotFound", f"no route {request.path!r}; see GET / for the routes")
        handler = methods.get(request.method)
        if handler is None:
            allow = ", ".join(sorted(methods))
            return Response.error(
                405, "MethodNotAllowed", f"{request.path} accepts {allow}, not {request.method}", {"Allow": allow}
            )
        try:
            return await handler(request)
        except HTTPError as exc:
            return exc.response()
        except Exception as exc:
            return error_response(exc)

    def _body(self, request: Request, model: type[pydantic.BaseModel]) -> Any:
        data = parse_json_body(request)
        if not isinstance(data, dict):
            kind = "an array" if isinstance(data, list) else type(data).__name__
            raise HTTPError(422, "ValidationError", f"the body must be a JSON object, got {kind}")
        return model.model_validate(data)

    # -- handlers -------------------------------------------------------------
    async def index(self, request: Request) -> Response:
        """``GET /``: the service and its routes."""
        from kag import __version__

        routes = {path: sorted(methods) for path, methods in self.routes.items()}
        return Response.json(
            200, {"name": "kag", "version": __version__, "knowledge": self.service.knowledge.name, "routes": routes}
        )

    async def health(self, request: Request) -> Response:
        """``GET /health``: status, backend and counts; 503 when the backend cannot be reached."""
        try:
            return Response.json(200, await self.service.health())
        except (BackendUnavailableError, BackendAuthError) as exc:
            body = {
                "status": "unavailable",
                "backend": self.service.kb.uri.split("://", 1)[0],
                "error": {"type": type(exc).__name__, "message": str(exc)},
            }
            return Response.json(503, body)

    async def schema(self, request: Request) -> Response:
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
            "triplet_search": triplet_search_schema(graph),
        }
        return Response.json(200, body)

    async def search(self, request: Request) -> Response:
        """``POST /search``."""
        body: SearchRequest = self._body(request, SearchRequest)
        hits = await self.service.search(body.query, k=body.k, label=body.label, where=body.where)
        return Response.json(200, {"query": body.query, "hits": hits})

    async def triplet_search(self, request: Request) -> Response:
        """``POST /triplet_search``."""
        body: TripletSearchRequest = self._body(request, TripletSearchRequest)
        result = await self.service.triplet_search(
            body.search(), k=body.k, threshold=body.threshold, include_vectors=body.include_vectors
        )
        return Response.json(200, result)

    async def ask(self, request: Request) -> Response:
        """``POST /ask``."""
        body: AskRequest = self._body(request, AskRequest)
        result = await self.service.ask(
            body.question, k=body.k, threshold=body.threshold, max_hops=body.max_hops, mode=body.mode
        )
        return Response.json(200, result)

    async def ingest(self, request: Request) -> Response:
        """``POST /ingest``."""
        body: IngestRequest = self._body(request, IngestRequest)
        sources = [self.service.check_source(s) for s in body.sources]
        report = await self.service.ingest(
            entities=body.entities,
            relations=body.relations,
            texts=body.texts,
            sources=sources,
            extract=body.extract,
        )
        return Response.json(200, report)


def create_app(
    service: Service,
    *,
    mcp: bool = True,
    allowed_origins: Collection[str] = (),
    allowed_hosts: Collection[str] | None = LOCAL_HOSTS,
) -> App:
    """An :class:`App` over ``service``, with the MCP endpoint at ``/mcp`` unless ``mcp=False``."""
    from kag.server.mcp import MCPServer

    return App(
        service,
        mcp=MCPServer(service) if mcp else None,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
    )
