"""Passages: ``Document`` (a loaded source) and ``Chunk`` (a span of a document).

Ids are content hashes, so loading the same source twice yields the same ids and
re-ingesting is idempotent:

* ``document_id(source, text)`` = ``"doc_"`` + the first 24 hex digits of
  ``sha256(source + "\\0" + text)``;
* ``chunk_id(document_id, index, text)`` = ``"chk_"`` + the first 24 hex digits of
  ``sha256(document_id + "\\0" + str(index) + "\\0" + text)``.

Metadata must be JSON-like (str, int, float, bool, None, lists and dicts with
str keys of those) because it is persisted and filtered on every backend.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kag.errors import InvalidInputError, KagError

_ID_HEX = 24
_MAX_DEPTH = 32


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:_ID_HEX]


def document_id(source: str, text: str) -> str:
    """Stable id of a document: ``"doc_"`` + sha256(source NUL text)[:24]."""
    return "doc_" + _digest(source, text)


def chunk_id(document_id: str, index: int, text: str) -> str:
    """Stable id of a chunk: ``"chk_"`` + sha256(document_id NUL index NUL text)[:24]."""
    return "chk_" + _digest(document_id, str(index), text)


def check_json_like(value: Any, where: str = "metadata", _depth: int = 0) -> Any:
    """Return ``value`` if it is JSON-like, else raise ``InvalidInputError`` naming the path."""
    if _depth > _MAX_DEPTH:
        raise InvalidInputError(f"{where} is nested deeper than {_MAX_DEPTH} levels.")
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}; NaN and infinity are not JSON values.")
        return value
    if isinstance(value, list | tuple):
        return [check_json_like(v, f"{where}[{i}]", _depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInputError(
                    f"{where} has a key {k!r} of type {type(k).__name__}; metadata keys must be str."
                )
            out[k] = check_json_like(v, f"{where}.{k}", _depth + 1)
        return out
    raise InvalidInputError(
        f"{where} is a {type(value).__name__}; metadata values must be JSON-like "
        "(str, int, float, bool, None, lists or dicts of those). Convert it first, "
        "e.g. a datetime with .isoformat()."
    )


class _PassageModel(BaseModel):
    """Shared base: constructor errors raised by kag validators surface as kag errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # pydantic wraps ValueError subclasses; hand callers the typed kag error
            for err in exc.errors():
                cause = (err.get("ctx") or {}).get("error")
                if isinstance(cause, KagError):
                    raise cause from None
            raise InvalidInputError(f"invalid {type(self).__name__}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible dict of every field."""
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild from :meth:`to_dict` output (``InvalidInputError`` on bad data)."""
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"{cls.__name__}.from_dict() needs a dict, got {type(data).__name__}.")
        return cls(**dict(data))


def _metadata(value: Any) -> Any:
    """Metadata must be a JSON-like dict (``None`` means empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"metadata must be a dict, got {type(value).__name__}.")
    return check_json_like(value)


class Document(_PassageModel):
    """A loaded source: plain text plus where it came from.

    ``text`` is always extracted plain text (HTML tags stripped, PDF text
    extracted); ``mime_type`` (also accepted and readable as ``media_type``)
    records the type of the original content. ``source`` defaults to
    ``"inline"``; ``id`` defaults to ``document_id(source, text)``. The text may be given
    positionally: ``Document("Receipts are due in 30 days.", source="policy.md")``.
    """

    id: str = ""
    text: str
    source: str = "inline"
    metadata: dict[str, Any] = {}
    mime_type: str = Field(default="text/plain", validation_alias=AliasChoices("mime_type", "media_type"))

    def __init__(
        self,
        positional_text: str | None = None,
        /,
        *,
        text: str | None = None,
        source: str = "inline",
        metadata: dict[str, Any] | None = None,
        id: str = "",
        mime_type: str | None = None,
        media_type: str | None = None,
        **extra: Any,
    ) -> None:
        # explicit so that type checkers accept media_type=; unknown keys still fail validation (extra="forbid")
        if mime_type is not None and media_type is not None and mime_type != media_type:
            raise InvalidInputError("give mime_type= or media_type= (the same field), not two different values.")
        # Document("...", source=...) as well as Document(text="...", source=...)
        if positional_text is not None and text is not None:
            raise InvalidInputError("give the document's text once: Document('...') or Document(text='...').")
        text = positional_text if positional_text is not None else text
        kind = mime_type if mime_type is not None else media_type
        data: dict[str, Any] = {"id": id, "text": text, "source": source, "metadata": metadata, **extra}
        if kind is not None:
            data["mime_type"] = kind
        super().__init__(**data)

    @property
    def media_type(self) -> str:
        """The type of the original content (another name of ``mime_type``)."""
        return self.mime_type

    def to_dict(self) -> dict[str, Any]:
        """``id``, ``text``, ``source``, ``metadata`` and ``media_type`` (``from_dict`` takes either name)."""
        data = self.model_dump(mode="json")
        data["media_type"] = data.pop("mime_type")
        return data

    @field_validator("metadata", mode="before")
    @classmethod
    def _json_metadata(cls, value: Any) -> Any:
        return _metadata(value)

    @model_validator(mode="after")
    def _default_id(self) -> Self:
        if not self.id:
            self.id = document_id(self.source, self.text)
        return self

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        source: str = "inline",
        metadata: dict[str, Any] | None = None,
        mime_type: str = "text/plain",
    ) -> Document:
        """Build a document from text; ``metadata["source"]`` defaults to ``source``."""
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be str, got {type(text).__name__}.")
        meta = {"source": source, **(metadata or {})}
        return cls(text=text, source=source, metadata=meta, mime_type=mime_type)


class Chunk(_PassageModel):
    """A contiguous span ``[start, end)`` of a document's text.

    Invariant: ``document.text[chunk.start:chunk.end] == chunk.text``.
    ``id`` defaults to ``chunk_id(document_id, index, text)``; ``start`` to 0
    and ``end`` to ``start + len(text)``; ``source`` to ``metadata["source"]``.
    """

    id: str = ""
    document_id: str
    index: int
    text: str
    start: int = 0
    end: int = -1  # filled with start + len(text) when not given
    metadata: dict[str, Any] = {}
    source: str = ""

    @model_validator(mode="before")
    @classmethod
    def _default_end(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("end") is None and isinstance(data.get("text"), str):
            start = data.get("start", 0)
            if isinstance(start, int):
                data = {**data, "end": start + len(data["text"])}
        return data

    @field_validator("metadata", mode="before")
    @classmethod
    def _json_metadata(cls, value: Any) -> Any:
        return _metadata(value)

    @model_validator(mode="after")
    def _check_span(self) -> Self:
        if self.index < 0:
            raise InvalidInputError(f"chunk index must be >= 0, got {self.index}.")
        if self.start < 0 or self.end < self.start:
            raise InvalidInputError(f"chunk span [{self.start}, {self.end}) is invalid.")
        if self.end - self.start != len(self.text):
            raise InvalidInputError(
                f"chunk span [{self.start}, {self.end}) has length {self.end - self.start} "
                f"but its text has {len(self.text)} characters."
            )
        if not self.id:
            self.id = chunk_id(self.document_id, self.index, self.text)
        if not self.source and isinstance(self.metadata.get("source"), str):
            self.source = self.metadata["source"]
        return self
