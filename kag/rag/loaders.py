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
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from kag.datamodels.documents import Document
from kag.errors import InvalidInputError, LoaderError
from kag.rag.urlsafety import Resolver, fetch_url
from kag.version import pip_install

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
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_RST_UNDERLINE = re.compile(r"^([^\n]*\S[^\n]*)\n([=\-~^\"'`#*+])\2{2,}[ \t]*$", re.MULTILINE)
_INLINE_MAX_PATH = 4096
_TITLE_MAX = 200


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


# --------------------------------------------------------------------------- text helpers


def looks_binary(data: bytes) -> bool:
    """Heuristic: NUL bytes or many control characters in the first 8 KiB."""
    sample = data[:8192]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return control / len(sample) > 0.1


def decode_bytes(
    data: bytes,
    name: str,
    *,
    charset: str | None = None,
    fallback_encodings: Sequence[str] = ("cp1252", "latin-1"),
) -> str:
    """Decode ``data`` to text: BOM, declared ``charset``, UTF-8, then the fallbacks.

    UTF-8 with a few malformed bytes (it has valid multi-byte sequences) decodes with
    replacement characters; bytes without any valid multi-byte sequence try the fallbacks.

    Raises ``LoaderError`` naming ``name`` when the bytes look binary or no
    encoding fits.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 BOM (has NULs, check first)
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise LoaderError(f"{name}: invalid UTF-16 text ({exc}).") from exc
    if looks_binary(data):
        raise LoaderError(
            f"{name}: content looks binary (NUL or control bytes), not text; "
            "convert it to text first (PDFs are supported with the .pdf extension)."
        )
    encodings = ["utf-8-sig"]
    if charset:
        encodings.insert(0, charset)
    if not charset:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            damaged = data.decode("utf-8-sig", errors="replace")
            # valid multi-byte sequences next to a malformed byte: UTF-8 text with damage, kept with
            # U+FFFD; without any, the high bytes are a single-byte encoding (the fallbacks)
            if any(ord(ch) > 0x7F and ch != "\ufffd" for ch in damaged):
                return damaged
    encodings.extend(fallback_encodings)
    for encoding in encodings:
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    raise LoaderError(
        f"{name}: could not decode the text as {', '.join(encodings)}; "
        "pass AutoLoader(fallback_encodings=...) with the right encoding."
    )


class _HTMLText(HTMLParser):
    """Collects visible text; block elements become line breaks."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "ul",
            "ol",
            "tr",
            "table",
            "section",
            "article",
            "header",
            "footer",
            "nav",
            "aside",
            "main",
            "blockquote",
            "pre",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "hr",
            "dt",
            "dd",
            "dl",
            "figure",
            "figcaption",
            "form",
            "address",
            "body",
        }
    )

    _LINE = frozenset({"br", "li", "tr", "dt", "dd"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.h1_parts: list[str] = []
        self._skip_depth = 0
        self._in_title = False
        self._in_h1 = False
        self._in_pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip_depth += 1
        if tag == "h1":
            self._in_h1 = True
        if tag == "pre":
            self._in_pre += 1
        if tag in self._BLOCK:
            self.parts.append("\n" if tag in self._LINE else "\n\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP and self._skip_depth:
            self._skip_depth -= 1
        if tag == "h1":
            self._in_h1 = False
        if tag == "pre" and self._in_pre:
            self._in_pre -= 1
        if tag in self._BLOCK and tag not in self._LINE:  # items break on their start tag
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
            return
        if self._skip_depth:
            return
        if self._in_h1:
            self.h1_parts.append(data)
        self.parts.append(data if self._in_pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str | None]:
    """Visible text of an HTML page and its title (``<title>``, else the first ``<h1>``)."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    raw = "".join(parser.parts)
    lines = [line.strip() for line in raw.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title_parts).split()) or " ".join("".join(parser.h1_parts).split())
    return text, title or None


def find_title(text: str) -> str | None:
    """The first Markdown heading (``# Title``) or reStructuredText underlined title."""
    head = text[:20_000]
    match = _MD_HEADING.search(head)
    if match:
        return match.group(1).strip()[:_TITLE_MAX]
    match = _RST_UNDERLINE.search(head)
    if match and len(match.group(1).strip()) > 0:
        return match.group(1).strip()[:_TITLE_MAX]
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:80]
    return "inline text"


# --------------------------------------------------------------------------- the loader


@runtime_checkable
class Loader(Protocol):
    """Turns one source (or a list of them) into documents: ``await load(source, *, metadata=None)``."""

    async def load(self, source: Any, *, metadata: Mapping[str, Any] | None = None) -> list[Document]:
        """The documents of ``source``, ``metadata`` added to each."""
        ...


def format_json(text: str, mime: str) -> str:
    """JSON (``application/json``) indented, JSON Lines one compact object a line, when it parses; else as is.

    Re-serializing makes the text uniform for splitting and keyword search; it keeps
    every key and value (non-ASCII characters stay as they are).
    """
    if mime == "application/json" or mime.endswith("+json"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            return text
    if mime in ("application/jsonl", "application/x-ndjson"):
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (ValueError, RecursionError):
            return text
        return "\n".join(json.dumps(row, ensure_ascii=False) for row in rows)
    return text


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
        if not isinstance(max_bytes, int) or max_bytes < 1:
            raise InvalidInputError("AutoLoader max_bytes must be a positive int.")
        if timeout <= 0:
            raise InvalidInputError("AutoLoader timeout must be > 0 seconds.")
        if max_redirects < 0:
            raise InvalidInputError("AutoLoader max_redirects must be >= 0.")
        if concurrency < 1:
            raise InvalidInputError("AutoLoader concurrency must be >= 1.")
        self.max_bytes = max_bytes
        self.timeout = float(timeout)
        self.allow_private_networks = allow_private_networks
        self.max_redirects = max_redirects
        self.fallback_encodings = tuple(fallback_encodings)
        self.allowed_hosts = frozenset(allowed_hosts)
        self.resolver = resolver
        self.concurrency = concurrency

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
        title = find_title(text) or _first_line(text)
        return Document.from_text(text, source="inline", metadata={"title": title})

    def _from_bytes(self, data: bytes) -> Document:
        if len(data) > self.max_bytes:
            raise LoaderError(f"bytes source is too large: {len(data)} > max_bytes={self.max_bytes}.")
        text = decode_bytes(data, "bytes source", fallback_encodings=self.fallback_encodings)
        if not text.strip():
            raise LoaderError("bytes source is empty.")
        title = find_title(text) or _first_line(text)
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


def pdf_documents(data: bytes, source: str, base: dict[str, Any]) -> list[Document]:
    """One ``Document`` per PDF page with text; ``metadata["page"]`` is 1-based."""
    try:
        import pypdf  # optional dependency, imported only when a PDF shows up
    except ImportError as exc:
        raise LoaderError(
            f"{source}: reading PDFs needs the optional pypdf package; install it with `{pip_install('pdf')}`."
        ) from exc
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise LoaderError(f"{source}: the PDF is encrypted; decrypt it first.")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = None
        if reader.metadata is not None and reader.metadata.title:
            title = str(reader.metadata.title).strip() or None
    except LoaderError:
        raise
    except Exception as exc:  # pypdf raises many exception types for damaged files
        raise LoaderError(f"{source}: malformed PDF ({type(exc).__name__}: {exc}).") from exc
    docs = []
    for number, text in enumerate(pages, start=1):
        if not text.strip():
            continue  # blank or scanned page: nothing to index
        page_source = f"{source}#page={number}"
        meta = {
            **base,
            "source": page_source,
            "title": title or Path(urlsplit(source).path).name or source,
            "page": number,
            "page_count": len(pages),
        }
        docs.append(Document(text=text, source=page_source, metadata=meta, mime_type="application/pdf"))
    if not docs:
        raise LoaderError(f"{source}: the PDF has no extractable text (scanned images need OCR first).")
    return docs
