"""Typed errors raised by kag.

Every error derives from :class:`KagError`, and each message says what went wrong
and what to do about it. Subclasses also derive from the closest builtin
(``ValueError``, ``ConnectionError``, ``OSError``...) so generic handlers keep working.

The hierarchy, by what went wrong (each group is a section below):

* The root: ``KagError``
* Settings and usage: a constructor argument, URI, CLI flag or template is wrong (ValueError):
  ``ConfigError``, ``UsageError``, ``APIKeysError``, ``InsecureBindError``, ``UnknownBackendError``,
  ``VectorBackendConfigError``, ``MissingDependencyError``, ``UnsupportedTransportError``,
  ``DimensionsUnknownError``, ``TemplateError``, ``UnsafeTemplateError``
* Input and schema: a value, label or document a caller gave does not fit: ``SchemaError``,
  ``InvalidInputError``, ``UnsupportedFilterError``, ``JSONSchemaValidationError``, ``NotFoundError``,
  ``KnowledgeNotFoundError``, ``UnsupportedKnowledgeOperationError``
* Queries: planning, compiling and running a search: ``QueryError``, ``UnsafeQueryError``,
  ``CypherUnsupportedError``
* Stores and files: the backend or the disk failed (ConnectionError, OSError): ``StoreError``,
  ``StoreFormatError``, ``BackendUnavailableError``, ``BackendAuthError``, ``WriteTimeoutError``,
  ``FileWriteError``, ``CheckpointError``
* Loading documents: ``LoaderError``, ``UnsafeURLError``
* Language models and embedders: ``LanguageModelError``, ``GenerationError``, ``InvalidOutputError``,
  ``EmbeddingError``, ``EmbeddingServiceError``
* Training: ``TrainingError``, ``RewardError``
* Serving: HTTP and MCP: ``HTTPError``, ``RequestRejected``, ``RPCError``
* Event loops: ``SyncInEventLoopError``, ``EventLoopError``
"""

from __future__ import annotations

# -- the root ----------------------------------------------------------------------------------


class KagError(Exception):
    """Base class of every error kag raises on purpose."""


# -- settings and usage ------------------------------------------------------------------------


class ConfigError(KagError, ValueError):
    """A setting, URI or constructor argument is invalid."""


class UsageError(ConfigError):
    """A command-line value is unusable (bad ``--schema``, ``--kb``, ``--lm``, label...): exit code 2."""


class APIKeysError(UsageError):
    """An API key list (``KAG_API_KEYS`` or ``--api-keys FILE``) is malformed: exit code 2."""


class InsecureBindError(UsageError):
    """Serving on a non-loopback address without API keys was refused (give keys, or ``--insecure-no-auth``)."""


class UnknownBackendError(ConfigError):
    """``create_knowledge`` was given a backend name kag does not know; the message lists the names."""


class VectorBackendConfigError(ConfigError):
    """A vector backend (``"vector"``, ``"chroma"``, ``"qdrant"``, ``"pinecone"``) got missing or refused options."""


class MissingDependencyError(ConfigError, ImportError):
    """An optional client library is not installed; the message names the extra to install."""


class UnsupportedTransportError(ConfigError):
    """An ``Agent`` was given a transport kag does not implement; only ``"runtime"`` (in-process) is."""


class DimensionsUnknownError(ConfigError, AttributeError):
    """An embedder's vector size is not known yet (an AttributeError too: hasattr() is False)."""


class TemplateError(ConfigError):
    """A prompt template has a syntax error, uses an undefined variable, or failed to render."""


class UnsafeTemplateError(TemplateError):
    """A prompt template tried something the sandbox forbids (private attributes, mutation...)."""


# -- input and schema --------------------------------------------------------------------------


class SchemaError(KagError, ValueError):
    """A label, property or model does not fit the declared schema."""


class InvalidInputError(KagError, ValueError):
    """A value given by a caller (text, k, threshold, vector...) is unusable."""


class UnsupportedFilterError(InvalidInputError):
    """A ``where`` filter uses an operator an external index cannot evaluate natively.

    Adapters over Chroma, Qdrant or Pinecone translate kag filters into the database's
    own filter form and refuse what it cannot express rather than drop it: rewrite the
    filter with the supported operators, or pass ``filter_converter=`` to build the
    native filter yourself.
    """


class JSONSchemaValidationError(KagError, ValueError):
    """A JSON value does not satisfy a JSON schema; ``errors`` lists each problem."""

    MAX_REPORTED = 10

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        shown = self.errors[: self.MAX_REPORTED]
        more = len(self.errors) - len(shown)
        text = "; ".join(shown) + (f"; ... and {more} more" if more > 0 else "")
        super().__init__(text)


class NotFoundError(KagError, KeyError):
    """An entity, relation or document id does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class KnowledgeNotFoundError(KagError, LookupError):
    """Retrieval mode ``required`` found nothing usable within the budget."""


class UnsupportedKnowledgeOperationError(KagError, NotImplementedError):
    """A lifecycle call (add, upsert, delete, refresh...) on retrieval-only knowledge.

    Knowledge built over an external retriever (``Knowledge(my_retriever)``,
    ``Knowledge.from_callable``) can search but does not own the index: manage the
    documents in that system, or use ``create_knowledge("memory")`` / ``("neo4j")``.
    """


# -- queries -----------------------------------------------------------------------------------


class QueryError(KagError):
    """A query could not be planned, compiled or executed."""


class UnsafeQueryError(QueryError):
    """A query was refused because it is not provably read-only."""


class CypherUnsupportedError(QueryError, NotImplementedError):
    """``kb.query(cypher)`` on a store that does not run Cypher (``memory://``).

    Cypher runs on Neo4j only: open the knowledge base on ``neo4j://...``, or say it
    with ``triplet_search`` (which runs on every backend).
    """


# -- stores and files --------------------------------------------------------------------------


class StoreError(KagError):
    """A graph store failed (file format, persistence, backend response)."""


class StoreFormatError(StoreError, ValueError):
    """A persisted store file is malformed or of an unknown version."""


class BackendUnavailableError(StoreError, ConnectionError):
    """The graph backend cannot be reached (server down, wrong address)."""


class BackendAuthError(StoreError, PermissionError):
    """The graph backend refused the credentials."""


class WriteTimeoutError(BackendUnavailableError, TimeoutError):
    """A write to the graph backend did not finish within its deadline (``write_timeout``).

    It may or may not have been written: a transaction that reached the server before the
    deadline can still commit. kag's writes are idempotent (``MERGE`` by id), so retrying the
    same call is safe and converges.
    """


class FileWriteError(StoreError, OSError):
    """A file kag saves for a user could not be written (folder missing, disk full, no permission).

    The previous version of the file, if any, is left whole (saves are atomic).
    """


class CheckpointError(KagError, OSError):
    """A training checkpoint, variables file or training log cannot be written or read (the path, and why).

    An I/O error (``OSError``), not a ``ValueError``: the data is fine, the file is not.
    """


# -- loading documents -------------------------------------------------------------------------


class LoaderError(KagError, ValueError):
    """A source could not be loaded (missing file, bad encoding, too large...)."""


class UnsafeURLError(LoaderError):
    """A URL was refused (scheme, loopback/private/link-local address...)."""


# -- language models and embedders -------------------------------------------------------------


class LanguageModelError(KagError):
    """A language model endpoint failed (transport, HTTP status, bad payload)."""


class GenerationError(LanguageModelError, ValueError):
    """The language model's output stayed invalid after the repair attempts.

    ``output`` holds the model's last answer as it wrote it (``None`` when there was none), so a
    caller can still use the part of it that is valid.
    """

    def __init__(self, *args: object, output: str | None = None) -> None:
        super().__init__(*args)
        self.output = output


class InvalidOutputError(LanguageModelError, ValueError):
    """A completion arrived but cannot be used as is (e.g. cut off at the token limit).

    Raised by :meth:`kag.lm.base.BaseLanguageModel._complete` implementations; the repair
    loop treats it like a validation failure and asks the model again. ``raw`` keeps the
    completion text as it arrived.
    """

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class EmbeddingError(KagError, ValueError):
    """An embedder returned vectors of the wrong shape or with NaN/inf values."""


class EmbeddingServiceError(EmbeddingError, LanguageModelError):
    """An embedding endpoint failed (transport error or HTTP status), after any retries."""


# -- training ----------------------------------------------------------------------------------


class TrainingError(KagError, ValueError):
    """A program cannot be trained as asked: ``fit`` before ``compile``, an empty dataset, ``y`` that
    does not fit the program's output, variables saved by another program; the message says what to change."""


class RewardError(TrainingError):
    """A reward returned something that is not a number in [0, 1] (NaN, a string, 1.5...)."""


# -- serving -----------------------------------------------------------------------------------


class HTTPError(KagError):
    """An error with a ready HTTP status: handlers raise it, the server answers ``status``.

    ``kind`` is the error name in the JSON body; ``headers`` are added to the response
    (``Retry-After``, ``Allow``...).
    """

    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, dict(headers or {})


class RequestRejected(HTTPError):
    """A request refused while it was being read (framing, size, time): answered, then the connection closes."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, "BadRequest" if status == 400 else "Rejected", message, headers)


class RPCError(KagError):
    """A JSON-RPC error (MCP): ``code`` is the JSON-RPC error code, ``data`` optional details."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


# -- event loops -------------------------------------------------------------------------------


class SyncInEventLoopError(KagError, RuntimeError):
    """``.sync`` was used from inside a running event loop: ``await`` the async method instead."""


class EventLoopError(KagError, RuntimeError):
    """An object was used from two running event loops at once (threads, nested ``asyncio.run``).

    Use it from one loop at a time (one ``asyncio.run`` after another is fine), or give each
    loop its own ``KnowledgeBase``.
    """
