"""From the analysis of a question to a triplet search (one hop or a chain)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.lm.lexical.analysis import _Analysis
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.text import ANY

# -- from analysis to a search ----------------------------------------------------------


@dataclass(frozen=True)
class _Fill:
    """What goes on one side of a pattern: a mention, the asked-for label, or anything."""

    kind: str  # "mention" | "target" | "any"
    index: int = -1


def _side_label(fill: _Fill, allowed: tuple[str, ...], a: _Analysis) -> tuple[str, str] | None:
    """``(label, text)`` for a fill on a side allowing ``allowed`` labels, or None if it cannot fit."""
    if fill.kind == "mention":
        names = a.mentions[fill.index].names
        options = [lab for lab in names if lab == ANY or lab in allowed]
        if not options:
            return None
        hinted = [lab for lab in options if lab in a.hints]
        label = (hinted or options)[0]
        if label == ANY:
            label = allowed[0] if len(allowed) == 1 else ANY
        return label, names[options[0] if not hinted else hinted[0]]
    if fill.kind == "target":
        if a.target is None or a.target not in allowed:
            return None
        return a.target, ANY
    return (allowed[0] if len(allowed) == 1 else ANY), ANY


def _hop(
    subject: tuple[str, str],
    relation: str,
    obj: tuple[str, str],
    *,
    bidirectional: bool = False,
    negated: bool = False,
    count: bool = False,
) -> dict[str, Any]:
    return {
        "subject_label": subject[0],
        "subject_similarity_search": subject[1],
        "relation_label": relation,
        "object_label": obj[0],
        "object_similarity_search": obj[1],
        "negated": negated,
        "bidirectional": bidirectional,
        "count": count,
    }


def _single_hop(a: _Analysis, schema: _Schema) -> tuple[float, dict[str, Any] | None, bool]:
    """The best single pattern: ``(score, hop, complete)``; complete = everything placed."""
    fills = [_Fill("mention", i) for i in range(len(a.mentions))]
    if a.target is not None:
        fills.append(_Fill("target"))
    fills.append(_Fill("any"))
    wanted = len(a.mentions) + (1 if a.target is not None else 0)
    scored: list[tuple[float, str, bool, _Fill, _Fill, tuple[str, str], tuple[str, str]]] = []
    for rel in schema.relations.values():
        for bidi in (False, True):
            subj_allowed, obj_allowed = (rel.obj, rel.subj) if bidi else (rel.subj, rel.obj)
            for sf in fills:
                for of in fills:
                    if sf == of and sf.kind != "any":
                        continue
                    s = _side_label(sf, subj_allowed, a)
                    o = _side_label(of, obj_allowed, a)
                    if s is None or o is None:
                        continue
                    placed = [f for f in (sf, of) if f.kind != "any"]
                    score = 4.0 * sum(f.kind == "mention" for f in placed)
                    score += 2.0 * sum(f.kind == "target" for f in placed)
                    score += 1.5 * a.rel_scores.get(rel.label, 0.0)
                    score -= 0.6 if bidi else 0.0
                    if sf.kind == "mention" and not a.mentions[sf.index].after_preposition:
                        score += 0.1
                    if of.kind == "mention" and a.mentions[of.index].after_preposition:
                        score += 0.1
                    if a.negated:
                        # negated rows are subjects: the asked-for side must be the subject
                        score += 1.0 if sf.kind == "target" else (-5.0 if of.kind == "target" else 0.0)
                    if a.target is None and sf.kind == "any" and of.kind == "mention":
                        score += 0.05  # "capital of France": the subject is what is asked
                    scored.append((score, rel.label, bidi, sf, of, s, o))
    if not scored:
        return 0.0, None, False
    best = max(t[0] for t in scored)
    top = [t for t in scored if abs(t[0] - best) < 1e-9]
    first = top[0]
    score, rel_label, bidi, sf, of, s, o = first
    same_shape = {t[1] for t in top if (t[2], t[3], t[4]) == (bidi, sf, of)}
    # several relations fit equally well: do not guess, search any relation
    relation = rel_label if len(same_shape) == 1 else ANY
    n_placed = sum(f.kind != "any" for f in (sf, of))
    hop = _hop(s, relation, o, bidirectional=bidi, negated=a.negated, count=a.count)
    return score, hop, n_placed >= wanted


def _chain(a: _Analysis, schema: _Schema, max_hops: int) -> list[dict[str, Any]] | None:
    """A path of patterns from a mentioned entity to the asked-for label (or back)."""
    if not a.mentions or a.target is None or max_hops < 2:
        return None
    mention = a.mentions[0]
    starts = [lab for lab in mention.names if lab != ANY] or list(schema.entity_labels)
    # edges between labels, grouped: (from, to, backward) -> relations
    edges: dict[tuple[str, str, bool], list[str]] = {}
    for rel in schema.relations.values():
        for s in rel.subj:
            for o in rel.obj:
                edges.setdefault((s, o, False), []).append(rel.label)
                edges.setdefault((o, s, True), []).append(rel.label)
    best: tuple[float, list[tuple[str, str, bool]], bool] | None = None
    for start in starts:
        for reverse in (False, True):
            src, dst = (a.target, start) if reverse else (start, a.target)
            paths: list[list[tuple[str, str, bool]]] = [[]]
            for _ in range(max_hops):
                grown = []
                for path in paths:
                    here = path[-1][1] if path else src
                    for frm, to, back in edges:
                        if frm == here and all(to != step[0] for step in path) and to != src:
                            grown.append([*path, (frm, to, back)])
                paths = grown
                for path in paths:
                    if path[-1][1] == dst:
                        cost = 10.0 * len(path) + 3.0 * sum(back for _, _, back in path) + reverse * 0.5
                        if best is None or cost < best[0]:
                            best = (cost, path, reverse)
    if best is None:
        return None
    _, path, reverse = best
    hops = []
    for i, (frm, to, back) in enumerate(path):
        rels = edges[(frm, to, back)]
        scores = [a.rel_scores.get(r, 0.0) for r in rels]
        top = max(scores)
        chosen = [r for r, sc in zip(rels, scores, strict=True) if sc == top]
        relation = chosen[0] if len(chosen) == 1 else ANY
        subj_text = mention.names.get(frm, ANY) if (i == 0 and not reverse) else ANY
        obj_text = mention.names.get(to, ANY) if (i == len(path) - 1 and reverse) else ANY
        if ANY in mention.names:  # unknown label (no name index): the text is the same for all
            subj_text = mention.names[ANY] if (i == 0 and not reverse) else subj_text
            obj_text = mention.names[ANY] if (i == len(path) - 1 and reverse) else obj_text
        hops.append(_hop((frm, subj_text), relation, (to, obj_text), bidirectional=back, count=a.count and i == 0))
    return hops


def _fallback(a: _Analysis) -> dict[str, Any]:
    """Facts around the first mention (any relation, either way), or around the asked-for label."""
    if a.mentions:
        names = a.mentions[0].names
        label = next(iter(names))
        return _hop((label, names[label]), ANY, (a.target or ANY, ANY), bidirectional=True, count=a.count)
    return _hop((a.target or ANY, ANY), ANY, (ANY, ANY), negated=False, count=a.count)


def _search(a: _Analysis, schema: _Schema, level: int) -> list[dict[str, Any]]:
    """The hops to answer with; ``level`` > 0 relaxes the choice after a failed validation."""
    if level >= 2:
        return [_fallback(a)]
    score, hop, complete = _single_hop(a, schema)
    hops: list[dict[str, Any]] | None = [hop] if hop is not None else None
    if not complete and not a.negated:
        chained = _chain(a, schema, schema.max_hops)
        if chained is not None:
            hops = chained
    if hops is None or (score <= 0.0 and not a.mentions and a.target is None):
        hops = [_fallback(a)]
    if level == 1:
        hops = [{**h, "relation_label": ANY} for h in hops]
    return hops
