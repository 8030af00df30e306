"""Labelled results (facts and passages) and extractive passage answers.

``Knowledge.ask``, ``Agent`` and the knowledge tools send what they retrieved both rendered as text
(:func:`kag.knowledge.tool.render_context`) and as data beside it (``Message["data"]["results"]``):
:func:`results_from_data` reads the data, so no header of the rendered text is ever parsed back.
:func:`read_results` reads the labelled lines of a prompt written by hand (a fact on one line, a
passage as a header line and its text between ``<<<BEGIN DATA label code>>>`` / ``<<<END DATA label
code>>>`` markers). Passages are answered the way ``LexicalLM`` answers from facts: it quotes the
sentence of a shown passage that shares the most content words with the question (earlier, higher
ranked passages win ties) and cites that passage's label. A passage that shares no content word with
the question answers nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kag.lm.lexical.text import _STOPWORDS, _WH
from kag.text import stem, words

_HEAD = re.compile(
    r"^\[(?P<label>[^\]\s]+:\d+)\] (?P<kind>fact|passage) \(score (?P<score>[0-9.]+)\)"
    r"(?:: (?P<fact>.*)| source: (?P<source>.*))?$"
)
_BEGIN = re.compile(r"^<<<BEGIN DATA (\S+) \S+>>>$")
_END = re.compile(r"^<<<END DATA (\S+) \S+>>>$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n{2,}")


@dataclass
class Result:
    """One labelled result shown in the prompt."""

    label: str
    kind: str  # "fact" | "passage"
    text: str
    source: str
    score: float


def read_results(prompt: str) -> tuple[list[Result], str]:
    """The labelled results of ``prompt``, and the prompt without them (headers and data blocks removed)."""
    results: list[Result] = []
    rest: list[str] = []
    lines = prompt.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        head = _HEAD.match(line.strip())
        if head is None:
            rest.append(line)
            i += 1
            continue
        score = float(head.group("score"))
        if head.group("kind") == "fact":
            results.append(Result(head.group("label"), "fact", (head.group("fact") or "").strip(), "", score))
            i += 1
            continue
        source = (head.group("source") or "").split(" | title: ")[0].strip()
        body: list[str] = []
        i += 1
        if i < len(lines) and _BEGIN.match(lines[i].strip()):
            i += 1
            while i < len(lines) and not _END.match(lines[i].strip()):
                body.append(lines[i])
                i += 1
            i += 1  # the END marker
        results.append(Result(head.group("label"), "passage", "\n".join(body).strip(), source, score))
    return results, "\n".join(rest)


def results_from_data(data: Any) -> list[Result] | None:
    """The results of a message's ``data`` (``{"results": [{label, kind, text, source, score}]}``), or
    None when it carries none."""
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), list):
        return None
    out: list[Result] = []
    for item in data["results"]:
        if not isinstance(item, Mapping):
            continue
        score = item.get("score")
        out.append(
            Result(
                str(item.get("label") or ""),
                "passage" if item.get("kind") == "passage" else "fact",
                str(item.get("text") or ""),
                str(item.get("source") or ""),
                float(score) if isinstance(score, int | float) and not isinstance(score, bool) else 0.0,
            )
        )
    return out


def _content(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in _STOPWORDS and w not in _WH and len(w) > 1}


def sentences(text: str) -> list[str]:
    """The sentences of a passage (split after ``.!?`` and at blank lines), whitespace folded."""
    return [" ".join(s.split()) for s in _SENTENCE.split(text) if s.strip()]


@dataclass
class PassageAnswer:
    """The quoted sentence, the passage it came from."""

    text: str
    result: Result


def answer_from_passages(question: str, results: list[Result]) -> PassageAnswer | None:
    """The best supporting sentence of the shown passages for ``question``, or None if none shares a word."""
    wanted = _content(question)
    best: tuple[int, float, int, int] | None = None
    pick: PassageAnswer | None = None
    for rank, result in enumerate(r for r in results if r.kind == "passage"):
        for position, sentence in enumerate(sentences(result.text)):
            overlap = len(wanted & _content(sentence))
            key = (overlap, result.score, -rank, -position)
            if overlap and (best is None or key > best):
                best, pick = key, PassageAnswer(sentence, result)
    return pick
