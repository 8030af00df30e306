"""A dependency-free progress bar for an extraction run: chunks done of chunks given, on a terminal."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A dependency-free progress bar on a text stream (off when the stream is not a TTY)."""

    def __init__(
        self, total: int, *, enabled: bool | None = None, stream: TextIO | None = None, label: str = "chunks"
    ) -> None:
        self.total, self.done, self.label = total, 0, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more done and redraw the bar (a newline once all are done)."""
        self.done += n
        if self.enabled and self.total:
            filled = round(30 * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {self.label}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
