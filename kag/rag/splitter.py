"""Recursive character splitting with exact offsets.

``RecursiveCharacterSplitter`` cuts text at the coarsest separator that works:
paragraphs (``"\\n\\n"``), then lines, sentences (``". "``), words, and finally
fixed character windows. Pieces are packed greedily into chunks of at most
``chunk_size`` characters; consecutive chunks share up to ``chunk_overlap``
characters of whole pieces. Every chunk is a span ``[start, end)`` of the input
with surrounding whitespace trimmed, so ``text[start:end] == chunk_text`` holds
exactly and every non-whitespace character lands in at least one chunk.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from kag.datamodels.documents import Chunk, Document
from kag.errors import InvalidInputError

Span = tuple[int, int]


@runtime_checkable
class Splitter(Protocol):
    """Turns documents into chunks: ``split(documents) -> list[Chunk]``."""

    def split(self, documents: Iterable[Document]) -> list[Chunk]:
        """The chunks of ``documents``, in order, with stable ids."""
        ...


class RecursiveCharacterSplitter:
    """Split text into overlapping chunks of at most ``chunk_size`` characters.

    ``separators`` are tried in order; a piece still longer than ``chunk_size``
    after the last separator is cut into character windows (so the size bound
    always holds, whether or not ``""`` is listed).
    """

    def __init__(
        self,
        chunk_size: int = 1000,
        chunk_overlap: int = 150,
        separators: Sequence[str] = ("\n\n", "\n", ". ", " ", ""),
    ) -> None:
        if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
            raise InvalidInputError(f"chunk_size must be a positive int, got {chunk_size!r}.")
        if not isinstance(chunk_overlap, int) or isinstance(chunk_overlap, bool) or chunk_overlap < 0:
            raise InvalidInputError(f"chunk_overlap must be an int >= 0, got {chunk_overlap!r}.")
        if chunk_overlap >= chunk_size:
            raise InvalidInputError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size}).")
        if isinstance(separators, str) or not all(isinstance(s, str) for s in separators):
            raise InvalidInputError("separators must be a sequence of strings.")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators = tuple(separators)

    # spans --------------------------------------------------------------------

    def split_spans(self, text: str) -> list[Span]:
        """``(start, end)`` offsets of the chunks of ``text``, in order."""
        if not isinstance(text, str):
            raise InvalidInputError(f"split_spans() takes str, got {type(text).__name__}.")
        raw = self._split(text, 0, len(text), self.separators)
        out: list[Span] = []
        for start, end in raw:
            # trim whitespace at the edges; whitespace-only spans disappear
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if start >= end:
                continue
            if out and out[-1][0] <= start and end <= out[-1][1]:
                continue  # only whitespace was new: the previous chunk already has it all
            if out and start <= out[-1][0] and out[-1][1] <= end:
                out[-1] = (start, end)  # trimming made the previous chunk a prefix of this one
                continue
            out.append((start, end))
        return out

    def split_text(self, text: str) -> list[str]:
        """The chunk texts of ``text`` (see :meth:`split_spans` for offsets)."""
        return [text[s:e] for s, e in self.split_spans(text)]

    def split_documents(self, documents: Iterable[Document]) -> list[Chunk]:
        """Chunks of every document, with stable ids and inherited metadata.

        Each chunk's metadata is the document's metadata plus ``document_id``,
        ``chunk_index``, ``start`` and ``end``; its ``source`` is the document's.
        """
        chunks: list[Chunk] = []
        for doc in documents:
            if not isinstance(doc, Document):
                raise InvalidInputError(f"split_documents() takes Documents, got {type(doc).__name__}.")
            for index, (start, end) in enumerate(self.split_spans(doc.text)):
                meta = {
                    **doc.metadata,
                    "document_id": doc.id,
                    "chunk_index": index,
                    "start": start,
                    "end": end,
                }
                chunks.append(
                    Chunk(
                        document_id=doc.id,
                        index=index,
                        text=doc.text[start:end],
                        start=start,
                        end=end,
                        metadata=meta,
                        source=doc.source,
                    )
                )
        return chunks

    def split(self, documents: Iterable[Document]) -> list[Chunk]:
        """Another name of :meth:`split_documents` (the :class:`Splitter` protocol)."""
        return self.split_documents(documents)

    # internals ----------------------------------------------------------------

    def _split(self, text: str, start: int, end: int, separators: tuple[str, ...]) -> list[Span]:
        if end - start <= self.chunk_size:
            return [(start, end)]
        for i, sep in enumerate(separators):
            if sep == "":
                break
            if text.find(sep, start, end) != -1:
                return self._split_on(text, start, end, sep, separators[i + 1 :])
        return self._windows(start, end)

    def _split_on(self, text: str, start: int, end: int, sep: str, rest: tuple[str, ...]) -> list[Span]:
        # pieces keep their separator at the end, so they tile [start, end) exactly
        pieces: list[Span] = []
        pos = start
        while pos < end:
            hit = text.find(sep, pos, end)
            cut = end if hit == -1 else hit + len(sep)
            pieces.append((pos, cut))
            pos = cut
        out: list[Span] = []
        pending: list[Span] = []
        for piece in pieces:
            if piece[1] - piece[0] <= self.chunk_size:
                pending.append(piece)
                continue
            out.extend(self._merge(pending))
            pending = []
            out.extend(self._split(text, piece[0], piece[1], rest))
        out.extend(self._merge(pending))
        return out

    def _merge(self, pieces: list[Span]) -> list[Span]:
        """Pack contiguous pieces (each <= chunk_size) into chunks with overlap."""
        out: list[Span] = []
        window: deque[Span] = deque()
        for piece in pieces:
            if window and piece[1] - window[0][0] > self.chunk_size:
                out.append((window[0][0], window[-1][1]))
                # keep a tail of whole pieces as overlap, if the new piece still fits
                while window and (
                    window[-1][1] - window[0][0] > self.chunk_overlap or piece[1] - window[0][0] > self.chunk_size
                ):
                    window.popleft()
            window.append(piece)
        if window:
            out.append((window[0][0], window[-1][1]))
        return out

    def _windows(self, start: int, end: int) -> list[Span]:
        step = self.chunk_size - self.chunk_overlap
        out: list[Span] = []
        pos = start
        while True:
            stop = min(pos + self.chunk_size, end)
            out.append((pos, stop))
            if stop >= end:
                return out
            pos += step
