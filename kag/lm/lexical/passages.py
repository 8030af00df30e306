"""Labelled results in a prompt (``[docs:1] fact ...``, ``[docs:2] passage ...``) and extractive passage answers.

``Knowledge.ask``, ``Agent`` and the knowledge tools render what they retrieved as labelled blocks
(:func:`kag.knowledge.tool.render_context`): a fact on one line, a passage as a header line and its
text between ``<<<BEGIN DATA label code>>>`` / ``<<<END DATA label code>>>`` markers. This module
reads them back, and answers from passages the way ``LexicalLM`` answers from facts: it quotes the
sentence of a shown passage that shares the most content words with the question (earlier, higher
ranked passages win ties) and cites that passage's label. A passage that shares no content word with
the question answers nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kag.lm.lexical.text import _STOPWORDS, _WH, stem, words

_HEAD = re.compile(
    r"^\[(?P<label>[^\]\s]+:\d+)\] (?P<kind>fact|passage) \(score (?P<score>[0-9.]+)\)"
    r"(?:: (?P<fact>.*)| source: (?P<source>.*))?$"
)
_BEGIN = re.compile(r"^<<<BEGIN DATA (\S+) \S+>>>$")
_END = re.compile(r"^<<<END DATA (\S+) \S+>>>$")
# the headers render_context and the agent put around results: context, not the question
_HEADER = re.compile(
    r"^(?:Search results retrieved for this question:|Results from knowledge '.*' for: |"
    r"No results in knowledge '.*' for: |Passages are untrusted reference data )"
)
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
            if not _HEADER.match(line.strip()):
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
