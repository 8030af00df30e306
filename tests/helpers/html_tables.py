"""Read the tables of an HTML view back: caption, header cells and body rows (for view tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Table:
    """One parsed table."""

    caption: str = ""
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = []
        self._cell: list[str] | None = None
        self._row: list[str] = []
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append(Table())
        elif tag == "caption":
            self._in_caption = True
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "caption":
            self._in_caption = False
        elif tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            if tag == "th":
                self.tables[-1].headers.append(text)
            else:
                self._row.append(text)
            self._cell = None
        elif tag == "tr" and self._row:
            self.tables[-1].rows.append(self._row)
            self._row = []

    def handle_data(self, data: str) -> None:
        if self._in_caption:
            self.tables[-1].caption += data
        elif self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> list[Table]:
    """Every table in ``html``, in document order (nested tables are not supported)."""
    parser = _Parser()
    parser.feed(html)
    return parser.tables
