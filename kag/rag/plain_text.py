"""Plain text and JSON: bytes decoded to text, a document's title found, JSON made uniform.

What :class:`~kag.rag.loaders.AutoLoader` does with the bytes of a text file, a text
response or a ``bytes`` source before they become a ``Document``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from kag.errors import LoaderError

__all__ = ["decode_bytes", "find_title", "first_line", "format_json", "looks_binary"]

_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_RST_UNDERLINE = re.compile(r"^([^\n]*\S[^\n]*)\n([=\-~^\"'`#*+])\2{2,}[ \t]*$", re.MULTILINE)
_TITLE_MAX = 200


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


def first_line(text: str) -> str:
    """The first non-blank line (at most 80 characters), else ``"inline text"``: a title for text without one."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:80]
    return "inline text"


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
