"""Typed errors raised by kag.

Every error derives from :class:`KagError`, and each message says what went wrong
and what to do about it. Subclasses also derive from the closest builtin
(``ValueError``, ``ConnectionError``...) so generic handlers keep working.
"""

from __future__ import annotations


class KagError(Exception):
    """Base class of every error kag raises on purpose."""


class ConfigError(KagError, ValueError):
    """A setting, URI or constructor argument is invalid."""


class SchemaError(KagError, ValueError):
    """A label, property or model does not fit the declared schema."""


class InvalidInputError(KagError, ValueError):
    """A value given by a caller (text, k, threshold, vector...) is unusable."""


class QueryError(KagError):
    """A query could not be planned, compiled or executed."""


class UnsafeQueryError(QueryError):
    """A query was refused because it is not provably read-only."""


class EmbeddingError(KagError, ValueError):
    """An embedder returned vectors of the wrong shape or with NaN/inf values."""


class StoreError(KagError):
    """A graph store failed (file format, persistence, backend response)."""


class StoreFormatError(StoreError, ValueError):
    """A persisted store file is malformed or of an unknown version."""


class BackendUnavailableError(StoreError, ConnectionError):
    """The graph backend cannot be reached (server down, wrong address)."""


class BackendAuthError(StoreError, PermissionError):
    """The graph backend refused the credentials."""


class LanguageModelError(KagError):
    """A language model endpoint failed (transport, HTTP status, bad payload)."""


class GenerationError(LanguageModelError, ValueError):
    """The language model's output stayed invalid after the repair attempts."""


class LoaderError(KagError, ValueError):
    """A source could not be loaded (missing file, bad encoding, too large...)."""


class UnsafeURLError(LoaderError):
    """A URL was refused (scheme, loopback/private/link-local address...)."""


class KnowledgeNotFoundError(KagError, LookupError):
    """Retrieval mode ``required`` found nothing usable within the budget."""


class NotFoundError(KagError, KeyError):
    """An entity, relation or document id does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class EmbeddingServiceError(EmbeddingError, LanguageModelError):
    """An embedding endpoint failed (transport error or HTTP status), after any retries."""


class DimensionsUnknownError(ConfigError, AttributeError):
    """An embedder's vector size is not known yet (an AttributeError too: hasattr() is False)."""
