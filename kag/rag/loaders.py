"""Load sources (files, directories, URLs, bytes, inline text) into ``Document``s.

How a ``str`` source is interpreted (first rule that applies wins):

1. ``scheme://...`` with no whitespace is a URL (only http/https are accepted;
   anything else raises :class:`~kag.errors.UnsafeURLError`);
2. text containing a newline, or longer than 4096 characters, is inline text;
3. a string naming an existing file or directory is that path;
4. any other string containing whitespace is inline text;
5. a single token that looks like a path — it contains ``/`` or ``\\``, or ends in
   an extension such as ``.md`` — raises ``LoaderError("file not found")``;
6. any other single token (``"hello"``) is inline text.

Wrap text in ``Document.from_text`` or paths in ``pathlib.Path`` to make the
intent explicit: a ``Path`` that does not exist is always "file not found".

``bytes`` are decoded (BOM, UTF-8, then the fallback encodings); content that
looks binary is refused. HTML is reduced to text with the standard library's
``html.parser`` (script and style dropped). PDFs need the optional ``pypdf``
(``pip install 'graph-kag[pdf]'``) and give one ``Document`` per page with
``metadata["page"]`` (1-based).

This module chooses what a source is and reads it; each format's reading is in its own
module: :mod:`kag.rag.plain_text` (decoding, titles, JSON), :mod:`kag.rag.html_text` and
:mod:`kag.rag.pdf_pages`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from kag.datamodels.documents import Document
from kag.errors import InvalidInputError, LoaderError
from kag.rag.html_text import html_to_text
from kag.rag.pdf_pages import pdf_documents
from kag.rag.plain_text import decode_bytes, find_title, first_line, format_json, looks_binary
from kag.rag.urlsafety import Resolver, fetch_url
from kag.validation import check_int, check_number

# the format helpers are re-exported: callers import them from here
__all__ = [
    "IGNORED_DIRS",
    "LOADABLE_EXTENSIONS",
    "PDF_EXTENSION",
    "TEXT_EXTENSIONS",
    "AutoLoader",
    "LoadFailure",
    "LoadResult",
    "Loader",
    "OnError",
    "Source",
    "decode_bytes",
    "find_title",
    "format_json",
    "html_to_text",
    "list_directory",
    "looks_binary",
    "names_a_url",
    "pdf_documents",
]

logger = logging.getLogger(__name__)

Source = Document | Path | str | bytes | bytearray
OnError = Literal["raise", "skip"]

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
TEXT_EXTENSIONS = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".rst": "text/x-rst",
    ".py": "text/x-python",
    ".json": "application/json",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/jsonl",
    ".tsv": "text/tab-separated-values",
    ".ini": "text/plain",
    ".cfg": "text/plain",
    ".conf": "text/plain",
    ".properties": "text/plain",
    ".log": "text/plain",
}
PDF_EXTENSION = ".pdf"
LOADABLE_EXTENSIONS = frozenset([*TEXT_EXTENSIONS, PDF_EXTENSION])

_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://\S*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def names_a_url(text: str) -> bool:
    """Whether a one-line source is meant as a URL (``scheme://...``), well-formed or not."""
    stripped = text.strip()
    return bool(_SCHEME.match(stripped)) and "\n" not in stripped


_PATH_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_INLINE_MAX_PATH = 4096


@dataclass
class LoadFailure:
    """A source that could not be loaded, and why."""

    source: str
    error: LoaderError


@dataclass
class LoadResult:
    """What :meth:`AutoLoader.load_with_report` returns: good documents and failures."""

    documents: list[Document] = field(default_factory=list)
    errors: list[LoadFailure] = field(default_factory=list)


@runtime_checkable
class Loader(Protocol):
    """Turns one source (or a list of them) into documents: ``await load(source, *, metadata=None)``."""

    async def load(self, source: Any, *, metadata: Mapping[str, Any] | None = None) -> list[Document]:
        """The documents of ``source``, ``metadata`` added to each."""
        ...


class AutoLoader:
    """Loads any mix of sources into ``Document``s (see the module docstring for rules).

    ``max_bytes`` bounds each file and each HTTP body; ``timeout`` bounds each URL
    fetch; ``allow_private_networks`` / ``allowed_hosts`` relax the SSRF checks of
    :mod:`kag.rag.urlsafety`; ``resolver`` replaces DNS resolution (tests).
    Documents with the same id (same source and text) are returned once.
    """

    def __init__(
        self,
        max_bytes: int = 10_000_000,
        timeout: float = 20.0,
        allow_private_networks: bool = False,
        max_redirects: int = 5,
        *,
        fallback_encodings: Sequence[str] = ("cp1252", "latin-1"),
        allowed_hosts: Collection[str] = (),
        resolver: Resolver | None = None,
        concurrency: int = 8,
    ) -> None:
        self.max_bytes = check_int(max_bytes, name="AutoLoader max_bytes", error=InvalidInputError)
        self.timeout = check_number(
            timeout, name="AutoLoader timeout (seconds)", minimum=0, exclusive_minimum=True, error=InvalidInputError
        )
        self.allow_private_networks = allow_private_networks
        self.max_redirects = check_int(
            max_redirects, name="AutoLoader max_redirects", minimum=0, error=InvalidInputError
        )
        self.fallback_encodings = tuple(fallback_encodings)
        self.allowed_hosts = frozenset(allowed_hosts)
        self.resolver = resolver
        self.concurrency = check_int(concurrency, name="AutoLoader concurrency", error=InvalidInputError)

    # public API ---------------------------------------------------------------

    async def load(
        self,
        sources: Source | Iterable[Source],
        on_error: OnError = "raise",
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        """Load ``sources`` (one or many), in order.

        ``on_error="raise"`` raises the first ``LoaderError``; ``"skip"`` logs a
        warning per failure and returns the good documents (use
        :meth:`load_with_report` to get the failures back). ``metadata`` is added
        to every document's own metadata (the :class:`Loader` protocol).
        """
        if on_error not in ("raise", "skip"):
            raise InvalidInputError("on_error must be 'raise' or 'skip'.")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInputError(f"metadata must be a mapping, got {type(metadata).__name__}.")
        result = await self._load(sources, fail_fast=on_error == "raise")
        for failure in result.errors:
            logger.warning("skipped source %s: %s", failure.source, failure.error)
        if not metadata:
            return result.documents
        return [
            Document(id=d.id, text=d.text, source=d.source, metadata={**d.metadata, **metadata}, mime_type=d.mime_type)
            for d in result.documents
        ]

    async def load_with_report(self, sources: Source | Iterable[Source]) -> LoadResult:
        """Load every source it can; return the documents and one failure per bad source."""
        return await self._load(sources, fail_fast=False)

    # dispatch -----------------------------------------------------------------

    async def _load(self, sources: Source | Iterable[Source], *, fail_fast: bool) -> LoadResult:
        items = self._as_list(sources)
        semaphore = asyncio.Semaphore(self.concurrency)

        async def guarded(source: Source) -> list[Document] | LoadFailure:
            async with semaphore:
                try:
                    return await self._load_one(source)
                except LoaderError as exc:
                    if fail_fast:
                        raise
                    return LoadFailure(source=_describe(source), error=exc)

        # directories expand into one item per file, so one bad file never hides the others
        tasks: list[Awaitable[list[Document] | LoadFailure]] = []
        for item in items:
            directory = await self._directory_of(item)
            if directory is None:
                tasks.append(guarded(item))
                continue
            files = await asyncio.to_thread(list_directory, directory)
            if not files:
                error = LoaderError(
                    f"{directory}: no loadable files (extensions {', '.join(sorted(LOADABLE_EXTENSIONS))})."
                )
                if fail_fast:
                    raise error
                tasks.append(_done(LoadFailure(source=str(directory), error=error)))
                continue
            tasks.extend(guarded(file) for file in files)

        futures = [asyncio.ensure_future(task) for task in tasks]
        try:
            outcomes = await asyncio.gather(*futures)
        except BaseException:
            # fail fast: stop the other fetches instead of leaving them running
            for future in futures:
                future.cancel()
            await asyncio.gather(*futures, return_exceptions=True)
            raise
        result = LoadResult()
        seen: set[str] = set()
        for outcome in outcomes:
            if isinstance(outcome, LoadFailure):
                result.errors.append(outcome)
                continue
            for doc in outcome:
                if doc.id not in seen:
                    seen.add(doc.id)
                    result.documents.append(doc)
        return result

    @staticmethod
    async def _directory_of(source: Source) -> Path | None:
        """The directory ``source`` names, if it names one."""
        if isinstance(source, Path):
            candidate = source.expanduser()
        elif isinstance(source, str) and "\n" not in source and len(source) <= _INLINE_MAX_PATH:
            if _URL_LIKE.match(source.strip()):
                return None
            candidate = Path(source).expanduser()
        else:
            return None
        return candidate if await asyncio.to_thread(_is_dir, candidate) else None

    @staticmethod
    def _as_list(sources: Source | Iterable[Source]) -> list[Source]:
        if isinstance(sources, Document | Path | str | bytes | bytearray):
            return [sources]
        if isinstance(sources, os.PathLike):
            return [Path(sources)]
        try:
            items = list(sources)
        except TypeError as exc:
            raise InvalidInputError(
                f"cannot load a {type(sources).__name__}; pass a path, URL, text, bytes, Document or a list of those."
            ) from exc
        for i, item in enumerate(items):
            if not isinstance(item, Document | str | bytes | bytearray | os.PathLike):
                raise InvalidInputError(
                    f"source #{i} is a {type(item).__name__}; expected a path, URL, text, bytes or Document."
                )
        return [Path(s) if isinstance(s, os.PathLike) and not isinstance(s, Path) else s for s in items]

    async def _load_one(self, source: Source) -> list[Document]:
        if isinstance(source, Document):
            return [source]
        if isinstance(source, bytes | bytearray):
            return [self._from_bytes(bytes(source))]
        if isinstance(source, Path):
            return await self._load_path(source)
        return await self._load_str(source)

    async def _load_str(self, source: str) -> list[Document]:
        stripped = source.strip()
        if not stripped:
            raise LoaderError("empty source: the text to load is empty or only whitespace.")
        if _URL_LIKE.match(stripped):
            return await self._load_url(stripped)
        if _SCHEME.match(stripped) and "\n" not in stripped:
            # one line that starts like a URL but is not one: refusing it beats indexing it as text
            raise LoaderError(
                f"{stripped[:100]!r} starts like a URL but has whitespace in it; percent-encode "
                "spaces (%20), or pass inline text as a kag.Document."
            )
        if "\n" in source or len(source) > _INLINE_MAX_PATH:
            return [self._inline(source)]
        path = Path(source).expanduser()
        if await asyncio.to_thread(_exists, path):
            return await self._load_path(path)
        if any(ch.isspace() for ch in stripped):
            return [self._inline(source)]
        if "/" in stripped or "\\" in stripped or _PATH_EXTENSION.search(stripped):
            raise LoaderError(
                f"file not found: {source!r} (it looks like a path; to load it as text, pass Document.from_text(...))."
            )
        return [self._inline(source)]

    # inline / bytes -----------------------------------------------------------

    @staticmethod
    def _inline(text: str) -> Document:
        title = find_title(text) or first_line(text)
        return Document.from_text(text, source="inline", metadata={"title": title})

    def _from_bytes(self, data: bytes) -> Document:
        if len(data) > self.max_bytes:
            raise LoaderError(f"bytes source is too large: {len(data)} > max_bytes={self.max_bytes}.")
        text = decode_bytes(data, "bytes source", fallback_encodings=self.fallback_encodings)
        if not text.strip():
            raise LoaderError("bytes source is empty.")
        title = find_title(text) or first_line(text)
        return Document.from_text(text, source="bytes", metadata={"title": title})

    # files and directories ----------------------------------------------------

    async def _load_path(self, path: Path) -> list[Document]:
        path = path.expanduser()
        if await asyncio.to_thread(_is_dir, path):  # reached only via a nested call
            docs: list[Document] = []
            for file in await asyncio.to_thread(list_directory, path):
                docs.extend(await self._load_file(file))
            return docs
        return await self._load_file(path)

    async def _load_file(self, path: Path) -> list[Document]:
        return await asyncio.to_thread(self._load_file_sync, path)

    def _load_file_sync(self, path: Path) -> list[Document]:
        name = str(path)
        try:
            resolved = path.resolve()
            if not resolved.is_file():
                raise LoaderError(f"file not found: {name!r}.")
            with resolved.open("rb") as handle:
                # read one byte past the limit instead of trusting stat(): files can grow
                data = handle.read(self.max_bytes + 1)
            if len(data) > self.max_bytes:
                raise LoaderError(f"{name}: file is too large (> max_bytes={self.max_bytes}).")
        except OSError as exc:
            raise LoaderError(f"{name}: cannot read the file ({exc.strerror or exc}).") from exc
        source = str(resolved)
        suffix = resolved.suffix.lower()
        base = {"source": source, "path": source}
        if suffix == PDF_EXTENSION:
            return pdf_documents(data, source, base)
        text = decode_bytes(data, name, fallback_encodings=self.fallback_encodings)
        mime = TEXT_EXTENSIONS.get(suffix, "text/plain")
        text = format_json(text, mime)
        title: str | None
        if mime == "text/html":
            text, title = html_to_text(text)
        else:
            prose = mime in ("text/markdown", "text/plain", "text/x-rst")
            title = find_title(text) if prose else None
        if not text.strip():
            raise LoaderError(f"{name}: the file has no text.")
        meta = {**base, "title": title or resolved.name}
        return [Document(text=text, source=source, metadata=meta, mime_type=mime)]

    # URLs ---------------------------------------------------------------------

    async def _load_url(self, url: str) -> list[Document]:
        result = await fetch_url(
            url,
            max_bytes=self.max_bytes,
            timeout=self.timeout,
            allow_private_networks=self.allow_private_networks,
            max_redirects=self.max_redirects,
            allowed_hosts=self.allowed_hosts,
            resolver=self.resolver,
        )
        final = result.url
        base: dict[str, Any] = {"source": final, "url": final}
        if final != url:
            base["requested_url"] = url
        mime = result.content_type
        if mime == "application/pdf" or (mime == "application/octet-stream" and result.content.startswith(b"%PDF-")):
            return pdf_documents(result.content, final, base)
        text = decode_bytes(
            result.content,
            final,
            charset=result.charset,
            fallback_encodings=self.fallback_encodings,
        )
        title: str | None = None
        if mime in ("text/html", "application/xhtml+xml") or (
            mime == "application/octet-stream" and text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))
        ):
            text, title = html_to_text(text)
            mime = "text/html"
        elif mime.startswith("text/"):
            title = find_title(text)
        else:
            text = format_json(text, mime)
        if not text.strip():
            raise LoaderError(f"{final}: the response has no text.")
        meta = {**base, "title": title or _url_title(final)}
        return [Document(text=text, source=final, metadata=meta, mime_type=mime)]


async def _done(failure: LoadFailure) -> LoadFailure:
    return failure


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # ValueError: embedded NUL
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _url_title(url: str) -> str:
    parts = urlsplit(url)
    last = unquote(parts.path.rstrip("/").rsplit("/", 1)[-1])
    return last or parts.hostname or url


def _describe(source: Source) -> str:
    if isinstance(source, Document):
        return source.source
    if isinstance(source, bytes | bytearray):
        return f"<{len(source)} bytes>"
    text = str(source)
    return text if len(text) <= 120 else text[:117] + "..."


def list_directory(root: Path) -> list[Path]:
    """Loadable files under ``root``, recursively, in sorted order.

    Skips hidden files and directories, VCS/tool caches (``IGNORED_DIRS``) and
    symlinked directories (no loops); keeps only ``LOADABLE_EXTENSIONS``.
    """
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            path = Path(dirpath, filename)
            if path.suffix.lower() in LOADABLE_EXTENSIONS:
                found.append(path)
    return found
