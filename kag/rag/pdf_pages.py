"""PDF files and responses as one ``Document`` per page with text, read with the optional ``pypdf``
(``pip install 'graph-kag[pdf]'``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kag.datamodels.documents import Document
from kag.errors import LoaderError
from kag.version import pip_install

__all__ = ["pdf_documents"]


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
