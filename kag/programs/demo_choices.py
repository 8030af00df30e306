"""What a search may take when a small model must follow its demos, and the texts it may quote.

A model under a grammar shown its nearest demos picks far more reliably among the patterns those
demos show than from the whole schema: :func:`demo_choices` gives each search field the values the
demos' searches use (one pattern), :func:`demo_chain_choices` the same per position of a chain. The
similarity texts a search may quote are the inputs' own strings (:func:`input_texts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from kag.text import says_count, says_negation
from kag.training.variables import Demo

__all__ = [
    "SIMILARITY_FIELDS",
    "demo_chain_choices",
    "demo_choices",
    "demo_hops",
    "grounded_flags",
    "input_texts",
    "quoted",
    "without_defaults",
]

SIMILARITY_FIELDS = ("subject_similarity_search", "object_similarity_search")

_CHOICE_FIELDS = ("subject_label", "relation_label", "object_label", "negated", "bidirectional", "count")


def demo_hops(demo: Demo) -> list[Mapping[str, Any]]:
    out = demo.output
    return [h for h in (out["hops"] if isinstance(out.get("hops"), list) else [out]) if isinstance(h, Mapping)]


def demo_choices(demos: Sequence[Demo], spans: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """The values a search may take when it must follow ``demos``: each field's values across their hops.

    With ``spans`` (the input's quotable texts, one-pattern searches only): a similarity text every
    demo fills is one of ``spans``, and one every demo leaves ``"*"`` stays ``"*"``.
    """
    return _hop_choices([h for demo in demos for h in demo_hops(demo)], spans)


def grounded_flags(texts: Sequence[str], demos: Sequence[Demo]) -> dict[str, list[Any]]:
    """The logic flags a search may not set for these input ``texts``: ``{"negated": [False]}`` where
    no text says a negation ("not", "without", "other than", ...) and no shown demo negates, the same
    for ``count`` ("how many", "number of"). A small model under a grammar otherwise sets them at
    random ("Who maintains quasar?" searched negated); a demo that negates a question without such a
    word ("anything but X") still lets the model negate."""
    hops = [h for demo in demos for h in demo_hops(demo)]
    fixed: dict[str, list[Any]] = {}
    if not any(says_negation(t) for t in texts) and not any(h.get("negated") for h in hops):
        fixed["negated"] = [False]
    if not any(says_count(t) for t in texts) and not any(h.get("count") for h in hops):
        fixed["count"] = [False]
    return fixed


def demo_chain_choices(demos: Sequence[Demo], spans: Sequence[str]) -> list[dict[str, list[Any]]] | None:
    """Per position of the chain, the values its pattern may take, when every demo has as many
    patterns (``None`` otherwise): "Which continent is Lima in?" shown "Which continent is Quito
    in?" must search City -> Country first, then Country -> Continent, quoting its own name where
    the demo quoted one."""
    chains = [demo_hops(demo) for demo in demos]
    if not chains or len({len(c) for c in chains}) != 1:
        return None
    return [_hop_choices([c[i] for c in chains], spans) for i in range(len(chains[0]))]


def _hop_choices(hops: Sequence[Mapping[str, Any]], spans: Sequence[str] | None) -> dict[str, list[Any]]:
    allowed: dict[str, list[Any]] = {}
    for name in _CHOICE_FIELDS:
        values = [h.get(name, False if name in ("negated", "bidirectional", "count") else None) for h in hops]
        allowed[name] = list(dict.fromkeys(v for v in values if v is not None))
    if spans is not None and spans:
        for name in SIMILARITY_FIELDS:
            asked = [h.get(name, "*") == "*" for h in hops]
            if asked and all(asked):
                allowed[name] = ["*"]
            elif asked and not any(asked):
                allowed[name] = list(spans)
    return {name: values for name, values in allowed.items() if values}


def quoted(search: Mapping[str, Any]) -> list[str]:
    """The similarity texts a search (or chain) quotes: the names its question holds."""
    hops = search["hops"] if isinstance(search.get("hops"), list) else [search]
    return [h[f] for h in hops if isinstance(h, Mapping) for f in SIMILARITY_FIELDS if isinstance(h.get(f), str)]


def input_texts(items: Sequence[Any]) -> list[str]:
    """The string values of the inputs (what a quoted similarity text may be taken from)."""
    texts: list[str] = []
    for item in items:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        values = data.values() if isinstance(data, Mapping) else [data]
        texts.extend(v for v in values if isinstance(v, str))
    return texts


def without_defaults(demo: Demo, defaults: Mapping[str, Any]) -> Demo:
    """``demo`` with the search fields in ``defaults`` dropped where they hold that default."""

    def prune(pattern: Any) -> Any:
        if not isinstance(pattern, Mapping):
            return pattern
        return {k: v for k, v in pattern.items() if not (k in defaults and v == defaults[k])}

    output = dict(demo.output)
    if isinstance(output.get("hops"), list):
        output["hops"] = [prune(h) for h in output["hops"]]
    else:
        output = prune(output)
    return demo if output == demo.output else replace(demo, output=output)
