"""The HTTP wire format shared by the REST routes and MCP: request bodies, JSON parsing, errors, origins."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Collection
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kag.errors import (
    BackendAuthError,
    BackendUnavailableError,
    ConfigError,
    HTTPError,
    InvalidInputError,
    KagError,
    LanguageModelError,
    LoaderError,
    NotFoundError,
    QueryError,
    SchemaError,
)
from kag.query.plan import MAX_HOPS
from kag.query.triplet import Condition, OrderBy, SubjectFrom, TripletSearch
from kag.server.http import Request, Response
from kag.server.service import MAX_REQUEST_K
from kag.validation import loads_json

logger = logging.getLogger("kag.server")

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# a Host header is a name or address and an optional port, nothing else (no userinfo, no path)
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?")


# --------------------------------------------------------------------------- request models


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchRequest(_Body):
    """``POST /search``: facts + passages (``Knowledge.search``), or entities of ``label``."""

    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=5, ge=1, le=MAX_REQUEST_K)
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
    subject_from: SubjectFrom | None = None
    subject_where: list[Condition] | None = None
    object_where: list[Condition] | None = None
    order_by: OrderBy | None = None
    limit: int | None = None
    hops: list[TripletSearch] | None = Field(default=None, min_length=1, max_length=MAX_HOPS)
    k: int = Field(default=10, ge=1, le=MAX_REQUEST_K)
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
    k: int = Field(default=10, ge=1, le=MAX_REQUEST_K)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    max_hops: int = Field(default=2, ge=1, le=MAX_HOPS)
    mode: Literal["graph", "rag"] = Field(
        default="graph", description="graph: the triplet-search program; rag: Knowledge.ask over facts + passages."
    )


class LabelledPassage(_Body):
    """A passage and the extraction a person labelled for it (``{"entities": [...], "relations": [...]}``)."""

    text: str = Field(min_length=1, max_length=10_000)
    extraction: dict[str, Any]


class IngestRequest(_Body):
    """``POST /ingest``: entities/relations as dicts with ``label``, texts, sources (URLs or allowed files)."""

    entities: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)
    relations: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)
    texts: list[str] = Field(default_factory=list, max_length=1_000)
    sources: list[str] = Field(default_factory=list, max_length=100)
    extract: bool = Field(default=False, description="Extract entities and relations from texts/sources.")
    examples: list[LabelledPassage] = Field(
        default_factory=list, max_length=100, description="Labelled passages shown to the model when extracting."
    )
    nearest: int | None = Field(
        default=None, ge=1, le=100, description="Show each chunk only the N labelled passages written most like it."
    )

    @model_validator(mode="after")
    def _not_empty(self) -> IngestRequest:
        if not (self.entities or self.relations or self.texts or self.sources):
            raise ValueError("nothing to ingest: give entities, relations, texts or sources")
        return self

    @model_validator(mode="after")
    def _examples_need_extract(self) -> IngestRequest:
        if (self.examples or self.nearest is not None) and not self.extract:
            raise ValueError('examples and nearest are for extraction: set "extract": true, or leave them out')
        return self


class DeleteRequest(_Body):
    """``POST /delete``: ids (entities, relations, chunks, documents), document ids, sources, a metadata filter."""

    ids: list[str] = Field(default_factory=list, max_length=10_000)
    document_ids: list[str] = Field(default_factory=list, max_length=10_000)
    sources: list[str] = Field(default_factory=list, max_length=1_000)
    where: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> DeleteRequest:
        if not (self.ids or self.document_ids or self.sources or self.where):
            raise ValueError("nothing to delete: give ids, document_ids, sources or where")
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


MAX_ERROR_MESSAGE = 2000
"""The longest error message a response carries (the rest is cut; messages quote values only in part anyway)."""


def retry_after_headers(exc: BaseException) -> dict[str, str]:
    """``Retry-After`` for a backend that cannot be reached (its ``retry_after``, else 1 s); else none."""
    if not isinstance(exc, BackendUnavailableError):
        return {}
    seconds = getattr(exc, "retry_after", 1)
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


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
        message = str(exc) or type(exc).__name__
        if len(message) > MAX_ERROR_MESSAGE:
            message = message[:MAX_ERROR_MESSAGE] + f"... ({len(message)} characters)"
        return Response.error(status, type(exc).__name__, message, retry_after_headers(exc))
    logger.error("unexpected %s while handling a request", type(exc).__name__, exc_info=exc)
    return Response.error(500, "InternalServerError", "internal server error")


# --------------------------------------------------------------------------- the app


def host_allowed(host: str, allowed: Collection[str]) -> bool:
    """Whether a ``Host`` header names an allowed host (DNS-rebinding protection)."""
    if not host:
        return True  # HTTP/1.0 without Host
    if not _HOST.fullmatch(host):
        return False  # "evil.com@localhost" and other forms a URL parser would read past
    try:
        name = urlsplit("//" + host).hostname
    except ValueError:
        return False
    return name in allowed or host in allowed


def origin_allowed(origin: str, allowed: Collection[str]) -> bool:
    """Whether a browser ``Origin`` may call the API (an allowed origin, or a local one)."""
    if origin in allowed:
        return True
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in LOCAL_HOSTS


def parse_json_body(request: Request) -> Any:
    """The request body as JSON; raises :class:`~kag.errors.HTTPError` 415 / 400 as appropriate."""
    ctype = request.header("content-type").split(";", 1)[0].strip().lower()
    if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
        raise HTTPError(415, "UnsupportedMediaType", "send the body as Content-Type: application/json")

    try:
        return loads_json(request.body, what="the body")
    except InvalidInputError as exc:
        raise HTTPError(400, "InvalidJSON", str(exc)) from None
