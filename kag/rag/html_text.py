"""HTML pages reduced to their visible text and title, with the standard library's ``html.parser``.

Scripts, styles and other invisible elements are dropped; block elements become line
breaks; ``<pre>`` keeps its spacing.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["html_to_text"]


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
