"""From the analysis of a question to a triplet search (one hop or a chain)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.lm.lexical.analysis import _Analysis, _Mention
from kag.lm.lexical.schema import _Schema
from kag.lm.lexical.text import _WEAK_SYNONYMS, ANY, holds_year, superlative_descending

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
                    if not a.mentions and sf.kind == "target":
                        score += 0.05  # nothing named: the rows are the asked-for entities
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
    """A path of patterns from a mentioned entity to the asked-for label (or back).

    The shortest path wins, except that each relation the question names ("border", "capital")
    that the path uses makes it cheaper: "the capitals of the countries that border X" goes
    X -Borders- Country -IsCapitalOf- City, not straight to X's capital.
    """
    if not a.mentions or a.target is None or max_hops < 2:
        return None
    mention = a.mentions[0]
    starts = [lab for lab in mention.names if lab != ANY] or list(schema.entity_labels)
    wanted = _evidenced(a)
    # edges between labels, grouped: (from, to, backward) -> relations
    edges: dict[tuple[str, str, bool], list[str]] = {}
    for rel in schema.relations.values():
        for s in rel.subj:
            for o in rel.obj:
                edges.setdefault((s, o, False), []).append(rel.label)
                if not rel.symmetric or s != o:
                    edges.setdefault((o, s, True), []).append(rel.label)

    def pick(edge: tuple[str, str, bool]) -> tuple[str, bool]:
        """The edge's relation (``"*"`` when several fit equally well) and whether the question names it."""
        rels = edges[edge]
        scores = [a.rel_scores.get(r, 0.0) + 5.0 * (r in wanted) for r in rels]
        top = max(scores)
        chosen = [r for r, sc in zip(rels, scores, strict=True) if sc == top]
        return (chosen[0] if len(chosen) == 1 else ANY), chosen[0] in wanted

    best: tuple[float, list[tuple[str, str, bool]], bool] | None = None
    for start in starts:
        for reverse in (False, True):
            src, dst = (a.target, start) if reverse else (start, a.target)
            paths: list[list[tuple[str, str, bool]]] = [[]]
            for _ in range(max_hops):
                grown = []
                for path in paths:
                    here = path[-1][1] if path else src
                    visited = {src, *(step[1] for step in path)}
                    for frm, to, back in edges:
                        if frm != here:
                            continue
                        # a label is visited once, except through a relation between two of its entities
                        loop = frm == to and (frm, to, back) not in path
                        if to not in visited or loop:
                            grown.append([*path, (frm, to, back)])
                paths = grown
                for path in paths:
                    if path[-1][1] == dst:
                        named = {r for r, w in (pick(step) for step in path) if w}
                        cost = 10.0 * len(path) + 3.0 * sum(back for _, _, back in path) + reverse * 0.5
                        cost -= 12.0 * len(named)
                        if best is None or cost < best[0]:
                            best = (cost, path, reverse)
    if best is None:
        return None
    _, path, reverse = best
    hops = []
    for i, (frm, to, back) in enumerate(path):
        relation, _ = pick((frm, to, back))
        if relation != ANY and schema.relations[relation].symmetric:
            back = False  # matched from either end anyway
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


_DEFAULTS: dict[str, Any] = {
    "subject_from": "previous_object",
    "subject_where": [],
    "object_where": [],
    "order_by": None,
    "limit": None,
}


def _finish(hops: list[dict[str, Any]], schema: _Schema) -> list[dict[str, Any]]:
    """Every property the requested hop schema has (defaults for the newer ones), and no other."""
    if not schema.hop_fields:
        return hops
    out = []
    for hop in hops:
        full = {**{k: v for k, v in _DEFAULTS.items() if k in schema.hop_fields}, **hop}
        out.append({k: v for k, v in full.items() if k in schema.hop_fields})
    return out


def _search(a: _Analysis, schema: _Schema, level: int) -> list[dict[str, Any]]:
    """The hops to answer with (every property of the hop schema filled); see :func:`_choose`."""
    return _finish(_choose(a, schema, level), schema)


def _choose(a: _Analysis, schema: _Schema, level: int) -> list[dict[str, Any]]:
    if level >= 2:
        return [_fallback(a)]
    constrained = _constraints(a, schema)
    if constrained is not None:
        hops: list[dict[str, Any]] | None = constrained
    else:
        score, hop, complete = _single_hop(a, schema)
        hops = [hop] if hop is not None else None
        if not a.negated:
            chained = _chain(a, schema, schema.max_hops)
            wanted = _evidenced(a)
            if chained is not None and (
                not complete
                # "the capitals of the countries that border X": the chain says more of the question
                or len(wanted & {h["relation_label"] for h in chained})
                > len(wanted & {h["relation_label"] for h in hops or []})
            ):
                hops = chained
        if hops is None or (score <= 0.0 and not a.mentions and a.target is None):
            hops = [_fallback(a)]
    hops = _attach_numbers(hops or [_fallback(a)], a, schema)
    if level == 1:
        hops = [{**h, "relation_label": ANY} for h in hops]
    return hops


# -- several conditions on the asked-for entity ------------------------------------------


def _evidenced(a: _Analysis) -> set[str]:
    """Relations named by a word of the question that is not a label word ("border", "capital")."""
    positions = a.rel_positions or {}
    return {label for label, ps in positions.items() if any(p not in a.label_positions for p in ps)}


def _link(schema: _Schema, target: str, other: tuple[str, ...] | None) -> list[tuple[str, bool]]:
    """Relations from ``target`` (as subject) to one of ``other`` (any when None): ``(label, backwards)``."""
    out: list[tuple[str, bool]] = []
    for rel in schema.relations.values():
        if target in rel.subj and (other is None or any(o in rel.obj for o in other)):
            out.append((rel.label, False))
        elif target in rel.obj and (other is None or any(o in rel.subj for o in other)):
            out.append((rel.label, not rel.symmetric))
    return out


def _constraints(a: _Analysis, schema: _Schema) -> list[dict[str, Any]] | None:
    """Several conditions on the asked-for entity: "Which countries in Europe do not use the Euro?".

    One hop per named entity (the relation that links the asked-for label to it), plus a negated
    hop to anything ("... have no land borders") when the negation names no entity. Two conditions
    make a path through the answer (path position 1: the first condition read backwards, then the
    second from the answer); more start from the first hop's subject (``first_subject``).
    """
    target = a.target
    if target is None or schema.max_hops < 2 or not a.mentions:
        return None
    for m, n in zip(a.mentions, a.mentions[1:], strict=False):
        if all(t in ("and", "or", "nor") for t in a.tokens[m.end : n.start]):
            return None  # "France and Germany": a list of entities, not two conditions
    positions = a.rel_positions or {}
    neg = a.negation_at
    after_neg = [m for m in a.mentions if neg is not None and m.start > neg]
    negated_mention = after_neg[0] if after_neg else None
    # (mention or None, negated, token span whose relation words count for it)
    items: list[tuple[_Mention | None, bool, int, int]] = []
    prev_end = 0
    for i, m in enumerate(a.mentions):
        if target in m.names and len(m.names) == 1 and not _link(schema, target, (target,)):
            continue
        nxt = a.mentions[i + 1].start if i + 1 < len(a.mentions) else len(a.tokens)
        if neg is not None and m is not negated_mention and neg > m.start:
            nxt = min(nxt, neg)  # the words after the negation belong to the negated condition
        items.append((m, m is negated_mention, prev_end, nxt))
        prev_end = m.end
    if neg is not None and negated_mention is None:
        items.append((None, True, neg, len(a.tokens)))
    if len(items) < 2 or len(items) > schema.max_hops:
        return None
    hops: list[dict[str, Any]] = []
    for mention, negated, lo, hi in items:
        labels = tuple(lab for lab in mention.names if lab != ANY) if mention else None
        options = _link(schema, target, labels or None)
        if not options:
            return None

        def score(option: tuple[str, bool], lo: int = lo, hi: int = hi, negated: bool = negated) -> float:
            label, back = option
            ps = positions.get(label, [])
            value = 2.0 * any(lo <= p < hi for p in ps) + a.rel_scores.get(label, 0.0) - 0.1 * back
            if neg is not None and not negated and ps and all(p > neg for p in ps):
                value -= 3.0  # named only after the negation: that is the negated condition's relation
            return value

        best = max(score(o) for o in options)
        top = [o for o in options if score(o) == best]
        if mention is None and best < 2.0:
            return None  # a negation that names neither an entity nor a relation
        relation, back = top[0]
        if len(top) > 1 and mention is None:
            return None
        obj_labels = schema.relations[relation].subj if back else schema.relations[relation].obj
        if mention is not None:
            obj_label = next((lab for lab in mention.names if lab in obj_labels), obj_labels[0])
            obj = (obj_label, mention.names.get(obj_label, next(iter(mention.names.values()))))
        else:
            obj = (obj_labels[0] if len(obj_labels) == 1 else ANY, ANY)
        hops.append(
            _hop((target, ANY), relation, obj, bidirectional=back, negated=negated, count=False)
            | {"_symmetric": schema.relations[relation].symmetric}
        )
    hops.sort(key=lambda h: h["negated"])  # the chain starts from a positive condition
    if hops[0]["negated"]:
        return None
    hops[0]["count"] = a.count
    if len(hops) == 2:
        # a path through the asked-for entity (path position 1): read the first condition backwards
        first = hops[0]
        hops[0] = _hop(
            (first["object_label"], first["object_similarity_search"]),
            first["relation_label"],
            (target, ANY),
            bidirectional=not first["bidirectional"] and not first["_symmetric"],
            count=a.count,
        )
    elif "subject_from" in schema.hop_fields:
        for h in hops[1:]:
            h["subject_from"] = "first_subject"
    else:
        return None
    return [{k: v for k, v in h.items() if k != "_symmetric"} for h in hops]


# -- comparisons and superlatives ---------------------------------------------------------


def _field(a: _Analysis, schema: _Schema, label: str, near: int) -> str | None:
    """The numeric field of ``label`` the question's words name (closest to ``near`` first)."""
    fields = schema.numeric.get(label) or {}
    if not fields:
        return None
    scores = dict.fromkeys(fields, 0.0)
    for pos, w in a.field_words or []:
        weak = a.tokens[pos] in _WEAK_SYNONYMS
        for name, stems in fields.items():
            if w in stems or (len(w) >= 5 and any(s[:5] == w[:5] for s in stems if len(s) >= 5)):
                weight = 0.3 if weak else 1.0
                scores[name] = max(scores[name], weight + 0.5 / (1 + abs(pos - near)))
    best = max(scores.values())
    if best == 0.0 and len(fields) > 1:
        return next(iter(fields))  # no word names one: the first declared
    return max(scores, key=lambda n: scores[n])


def _attach_numbers(hops: list[dict[str, Any]], a: _Analysis, schema: _Schema) -> list[dict[str, Any]]:
    """Put the question's comparison (``*_where``) and superlative (``order_by`` + ``limit``) on the answer side."""
    if a.compare is None and a.superlative is None:
        return hops
    if not ({"subject_where", "order_by"} & schema.hop_fields):
        return hops
    sides: list[tuple[int, str, str]] = []  # (hop, "subject"|"object", label)
    for i, h in enumerate(hops):
        if i == 0 and h["subject_similarity_search"] == ANY:
            sides.append((0, "subject", h["subject_label"]))
        if h["object_similarity_search"] == ANY and not h["negated"]:
            sides.append((i, "object", h["object_label"]))
    sides = [s for s in sides if s[2] in schema.numeric]
    if not sides:
        return hops
    # the label the superlative qualifies ("the most populous country"), else the asked-for one
    wanted = a.target
    if a.superlative is not None:
        after = [(p, lab) for p, lab in (a.label_at or {}).items() if 0 < p - a.superlative.pos <= 3]
        wanted = min(after)[1] if after else wanted
    sides.sort(key=lambda s: s[2] != wanted)  # stable otherwise: the first hop's sides first
    hop_index, side, label = sides[0]
    hops = [dict(h) for h in hops]
    hop = hops[hop_index]
    if a.compare is not None and f"{side}_where" in schema.hop_fields:
        name = _field(a, schema, label, a.compare.start)
        if name is not None:
            hop[f"{side}_where"] = [
                {"field": name, "op": a.compare.op, "value": compared_value(a, schema, label, name)}
            ]
    if a.superlative is not None and "order_by" in schema.hop_fields:
        name = _field(a, schema, label, a.superlative.pos)
        if name is not None:
            in_years = holds_year(schema.numeric.get(label, {}).get(name, frozenset()))
            direction = "desc" if superlative_descending(a.superlative.word, in_years) else "asc"
            hop["order_by"] = {"side": side, "field": name, "direction": direction}
            hop["limit"] = 1
    return hops


_SCALE_WORDS = {"thousand": "thousand", "million": "million", "billion": "billion"}


def compared_value(a: _Analysis, schema: _Schema, label: str, field_name: str) -> int | float:
    """The number a comparison holds a field to: as written ("170") where the field is kept in the
    unit the question scaled by ("budget, millions of dollars" asked "more than 170 million"), else
    the scaled value (170000000)."""
    assert a.compare is not None
    written = a.compare.written
    if written is None:
        return a.compare.value
    stems = schema.numeric.get(label, {}).get(field_name, frozenset())
    scaled_by = {stem for stem in stems if stem in _SCALE_WORDS}
    return written if scaled_by else a.compare.value
