"""The README stays a front door: short, and every link it has leads somewhere."""

from __future__ import annotations

import re

from tests.docs.blocks import ROOT

README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)|<img[^>]*\bsrc=\"([^\"]+)\"")


def _anchor(heading: str) -> str:
    """GitHub's (and MyST's) anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_every_relative_link_of_the_readme_resolves() -> None:
    broken = []
    for match in _LINK.finditer(README.read_text(encoding="utf-8")):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):
            continue  # the README links nowhere off the repository today; an absolute URL is not checked here
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else README
        if not file.exists():
            broken.append(target)
            continue
        if anchor:
            headings = [
                line.lstrip("#") for line in file.read_text(encoding="utf-8").splitlines() if line.startswith("#")
            ]
            if anchor not in {_anchor(h) for h in headings}:
                broken.append(target)
    assert not broken
