"""Answering extractively from the facts rendered in the prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kag.lm.lexical.passages import Result, answer_from_passages, read_results
from kag.lm.lexical.text import _ARROW, _COMPARE, _FACT_TAIL, _SECTION, _STOPWORDS, _SUPERLATIVE, _YES_NO
from kag.ranking.linking import name_key
from kag.text import split_identifier, stem, words

# -- answering from the rendered context -------------------------------------------------


@dataclass
class _Fact:
    nodes: list[str]
    labels: list[str | None]
    text: str
    score: float | None
    props: dict[str, dict[str, str]]


def _sections(text: str) -> dict[str, list[str]]:
    """``name: value`` sections of a rendered prompt; continuation lines belong to the last."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m and not line.startswith((" ", "-")):
            current = out.setdefault(m.group(1).lower(), [])
            if m.group(2) is not None and m.group(2).strip():
                current.append(m.group(2).strip())
        elif current is not None and line.strip():
            current.append(line.strip())
    return out


def _parse_fact(line: str) -> _Fact | None:
    body = line[2:] if line.startswith("- ") else line
    score: float | None = None
    props: dict[str, dict[str, str]] = {}
    m = _FACT_TAIL.match(body)
    if m:
        body = m.group(1)
        for part in m.group(2).split("; "):
            if part.startswith("score "):
                try:
                    score = float(part[6:])
                except ValueError:
                    score = None
            elif ": " in part:
                name, _, rest = part.partition(": ")
                props[name] = dict(p.split(" ", 1) for p in rest.split(", ") if " " in p)
    pieces = _ARROW.split(body)
    if len(pieces) >= 3:
        nodes = [p for i, p in enumerate(pieces) if i % 3 == 0]
        return _Fact(nodes, [None] * len(nodes), body, score, props)
    single = re.match(r"^(.*) \(([A-Za-z][A-Za-z0-9_]*)\)$", body)
    if single:  # a negated or zero-hop hit: "Lyon (City)"
        return _Fact([single.group(1)], [single.group(2)], body, score, props)
    return None


def _searched_hops(sections: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The patterns of the search in the prompt's ``search:`` section (none when it holds no search)."""
    raw = " ".join(sections.get("search", []))
    try:
        search = json.loads(raw) if raw.startswith("{") else None
    except ValueError:
        return []
    hops = search.get("hops", [search]) if isinstance(search, dict) else []
    return [hop for hop in hops if isinstance(hop, dict)]


def _searched_names(sections: dict[str, list[str]]) -> set[str]:
    """Name keys of the similarity texts of the search in the prompt (the question's entities, as linked).

    The question may spell a name differently ("Naiorbi", "Deutschland"); the search that was run
    names the entity as the graph does, so its texts say which fact nodes the question meant.
    """
    texts = [
        hop.get(side)
        for hop in _searched_hops(sections)
        for side in ("subject_similarity_search", "object_similarity_search")
    ]
    return {name_key(t) for t in texts if isinstance(t, str) and t.strip() and t != "*"}


def _ordered_side(sections: dict[str, list[str]]) -> str | None:
    """``"subject"`` or ``"object"``: the side a one-hop search in the prompt orders (a superlative's answer)."""
    hops = _searched_hops(sections)
    if len(hops) != 1:
        return None
    order = hops[0].get("order_by")
    side = order.get("side") if isinstance(order, dict) else None
    return side if side in ("subject", "object") else None


def _relations_of(fact: _Fact) -> set[str]:
    """The relation labels a rendered fact names (``A -[R]-> B``)."""
    return {a or b for a, b in _ARROW.findall(fact.text)}


def asked_relation_facts(facts: list[_Fact], tokens: list[str]) -> list[_Fact]:
    """The facts of the relations the question names by their words, where some fact has one: "What is
    the capital of Italy?" answers from ``Rome -[IsCapitalOf]-> Italy``, not from ``Milan -[IsCityOf]->
    Italy`` beside it. Facts are kept as they are when no fact's relation is named."""
    asked = {stem(t) for t in tokens if t not in _STOPWORDS}

    def named(fact: _Fact) -> bool:
        return any(
            {stem(w) for w in split_identifier(rel) if w not in _STOPWORDS} & asked for rel in _relations_of(fact)
        )

    kept = [f for f in facts if named(f)]
    return kept if kept else facts


def _contains(tokens: list[str], name: str) -> bool:
    key = words(name)
    n = len(key)
    return n > 0 and any(tokens[i : i + n] == key for i in range(len(tokens) - n + 1))


@dataclass
class _Answer:
    text: str
    names: list[str]
    facts: list[_Fact]
    count: int | None
    found: bool
    labels: list[str] = field(default_factory=list)  # the labels ([docs:1]) of the results it relies on


NOT_FOUND = (
    "Not found in the knowledge graph: no matching facts were retrieved, so I cannot answer "
    "(extractive answer: only retrieved facts and passages are used)."
)


def _compose(prompt: str, question: str | None = None, results: list[Result] | None = None) -> _Answer:
    """The extractive answer to the question in ``prompt``, from the facts (or else the passages) it shows.

    ``results``: the labelled results as data (a message's ``data``); the prompt is then not searched
    for them, and holds only what else the request says (``""`` when the data says it all).
    """
    if results is None:
        results, rest = read_results(prompt)
    else:
        rest = prompt
    answer = _compose_facts(rest, results, question)
    if answer.found or answer.count is not None:
        return answer
    passage = answer_from_passages(question if question is not None else _question(rest), results)
    if passage is None:
        return answer
    label = passage.result.label
    source = f" from {passage.result.source}" if passage.result.source else ""
    return _Answer(
        f"{passage.text} [{label}] (extractive answer: quoted{source})",
        [],
        [],
        None,
        True,
        [label],
    )


def _compose_facts(prompt: str, results: list[Result], question: str | None = None) -> _Answer:
    """The extractive answer from the facts: ``name: value`` sections, plain fact lines and labelled facts."""
    sections = _sections(prompt)
    if question is None:
        question = _question(prompt, sections)
    facts = [f for lines in sections.values() for ln in lines if (f := _parse_fact(ln)) is not None]
    if not sections:
        facts = [f for ln in prompt.splitlines() if "-[" in ln and (f := _parse_fact(ln.strip()))]
    label_of: dict[int, str] = {}
    for result in results:
        if result.kind == "fact" and (fact := _parse_fact(result.text)) is not None:
            label_of[id(fact)] = result.label
            facts.append(fact)
    count: int | None = None
    for line in sections.get("count", []):
        if re.fullmatch(r"-?\d+", line):
            count = int(line)
    tokens = words(question)
    facts = asked_relation_facts(facts, tokens)
    searched = _searched_names(sections)

    # the search names the question's entities as the graph does: when it names a fact's node, it
    # alone says what was asked about ("Sudan" is not named by "South Sudan", nor "French" by
    # "French Guiana"); otherwise (an unlinked spelling) the question's words do
    linked = bool(searched) and any(name_key(n) in searched for f in facts for n in f.nodes)

    def named(name: str) -> bool:
        if linked:
            return name_key(name) in searched
        return _contains(tokens, name) or name_key(name) in searched

    source = f"top fact: {facts[0].text}" if facts else ""

    def cite(chosen: list[_Fact]) -> list[str]:
        return list(dict.fromkeys(label_of[id(f)] for f in chosen if id(f) in label_of))[:10]

    if count is not None:
        return _Answer(
            f"{count} (the number of matches the knowledge-graph query counted; extractive answer)",
            [str(count)],
            facts,
            count,
            True,
            cite(facts[:1]),
        )
    if not facts:
        return _Answer(NOT_FOUND, [], [], None, False)
    # a property question ("What is the population of Tokyo?"), unless the property only
    # filters or orders what is asked ("neighbours with a population of more than 2 million")
    ranked = bool(_COMPARE.search(question) or _SUPERLATIVE.search(question))
    for fact in [] if ranked else facts:
        for name, props in fact.props.items():
            if not named(name):
                continue
            for prop, value in props.items():
                if prop in tokens or stem(prop) in {stem(t) for t in tokens}:
                    return _Answer(
                        f"The {prop} of {name} is {value} (extractive answer; {source}).",
                        [value],
                        facts,
                        None,
                        True,
                        cite([fact]),
                    )
    names: list[str] = []
    used: list[_Fact] = []
    # "Which award is the oldest?": a search that orders one side asks for that side
    ordered = _ordered_side(sections)
    for fact in facts:
        mentioned = [i for i, n in enumerate(fact.nodes) if named(n)]
        if mentioned:
            far = max(range(len(fact.nodes)), key=lambda i: (min(abs(i - m) for m in mentioned), -i))
            pick = None if far in mentioned else fact.nodes[far]
        else:
            pick = fact.nodes[-1] if ordered == "object" else fact.nodes[0]
        if pick is not None and pick not in names:
            names.append(pick)
            used.append(fact)
    if tokens and tokens[0] in _YES_NO:
        text = f"Yes: the knowledge graph states {facts[0].text} (extractive answer)."
        return _Answer(text, ["yes"], facts, None, True, cite(facts[:1]))
    if not names:  # every entity of the facts was named in the question
        return _Answer(f"{facts[0].text} (extractive answer).", [facts[0].nodes[0]], facts, None, True, cite(facts[:1]))
    shown = names[:10]
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return _Answer(
        f"{', '.join(shown)}{more} (extractive answer from {len(facts)} retrieved fact(s); {source}).",
        names,
        facts,
        None,
        True,
        cite(used),
    )


def _resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **rest}
    return node if isinstance(node, dict) else {}


_REASON = re.compile(r"reason|rational|explan|justif|thought|thinking|analysis|note")
_SOURCE = re.compile(r"fact|source|citation|evidence|support|context|reference")
_CITE = re.compile(r"citation|cite|label")


def _fill(name: str, prop: Any, root: dict[str, Any], ans: _Answer, depth: int = 0) -> Any:
    """A value for one schema property, from the extractive answer."""
    prop = _resolve(prop, root)
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        options = list(prop["enum"])
        lowered = [str(o).lower() for o in options]
        for candidate in (*ans.names, ans.text):
            if str(candidate).lower() in lowered:
                return options[lowered.index(str(candidate).lower())]
        return options[0] if options else None
    for key in ("anyOf", "oneOf"):
        if key in prop:
            branches = [_resolve(b, root) for b in prop[key]]
            non_null = [b for b in branches if b.get("type") != "null"]
            if not non_null:
                return None
            if not ans.found and len(non_null) < len(branches):
                return None
            if len(non_null) < len(branches) and _numeric_kind(non_null[0]) and not _answers_a_number(ans):
                return None  # a field the question does not ask for stays empty (no count, no value)
            return _fill(name, non_null[0], root, ans, depth)
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    lname = name.lower()
    if kind == "string":
        if _REASON.search(lname):
            return (
                "Extractive: selected from the retrieved facts by lexical matching "
                "(kag.lm.LexicalLM, not a language model); no reasoning was performed."
            )
        if _SOURCE.search(lname):
            return ans.facts[0].text if ans.facts else ""
        return ans.text
    if kind == "integer":
        if ans.count is not None:
            return ans.count
        return len(ans.names) if "count" in lname or "number" in lname or "total" in lname else len(ans.facts)
    if kind == "number":
        scores = [f.score for f in ans.facts if f.score is not None]
        if ans.count is not None and not ("score" in lname or "confidence" in lname):
            return float(ans.count)
        return float(scores[0]) if scores else 0.0
    if kind == "boolean":
        return ans.found
    if kind == "array":
        items = _resolve(prop.get("items") or {}, root)
        item_kind = items.get("type")
        if item_kind == "string":
            if _CITE.search(lname) and ans.labels:
                return list(ans.labels)  # the labels of the results shown ([docs:1]), as the prompt asks
            return [f.text for f in ans.facts] if _SOURCE.search(lname) else list(ans.names)
        if item_kind == "object" and depth < 4:
            return [_fill_object(items, root, ans, depth + 1)] if ans.found and prop.get("minItems") else []
        return []
    if kind == "object" or "properties" in prop:
        return _fill_object(prop, root, ans, depth + 1) if depth < 4 else {}
    if kind == "null":
        return None
    return ans.text


def _numeric_kind(prop: Mapping[str, Any]) -> bool:
    return prop.get("type") in ("integer", "number")


def _answers_a_number(ans: _Answer) -> bool:
    """Whether the answer is a number: a count, or a numeric property value ("The population of X is 5")."""
    if ans.count is not None:
        return True
    return bool(ans.names) and all(re.fullmatch(r"-?\d+(?:[.,]\d+)*", str(n).strip()) for n in ans.names)


def _fill_object(schema: dict[str, Any], root: dict[str, Any], ans: _Answer, depth: int = 0) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: _fill(name, prop, root, ans, depth) for name, prop in props.items()}


def _question(prompt: str, sections: Mapping[str, list[str]] | None = None) -> str:
    """The question inside a rendered prompt (``query: ...`` style sections or plain text)."""
    sections = _sections(prompt) if sections is None else sections
    for key in ("query", "question", "q", "input", "request", "prompt", "text"):
        lines = [ln for ln in sections.get(key, []) if not ln.startswith("- ")]
        if lines:
            return " ".join(lines)
    for lines in sections.values():
        if len(lines) == 1 and lines[0].endswith("?"):
            return lines[0]
    if sections:
        first = [ln for ln in next(iter(sections.values())) if not ln.startswith("- ")]
        if first:
            return " ".join(first)
    plain = [ln.strip() for ln in prompt.splitlines() if ln.strip() and "-[" not in ln]
    return next((ln for ln in plain if ln.endswith("?")), plain[0] if plain else prompt)
