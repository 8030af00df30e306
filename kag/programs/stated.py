"""What a passage states: the names and values an extraction may take from it.

An extracted entity's name must be a run of the passage's words, and a property value must be
stated in the passage (a number it writes, a run of its words), never invented. For a model that
decodes under a grammar, :func:`stated_schema` turns the extraction schema into per-passage enums
(names, numbers, texts), so it cannot write anything else; for any other model,
:func:`unstated` finds what its answer made up, so the extractor can refuse or drop it.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kag.lm.guards import text_spans, text_words
from kag.text import normalize_text, split_identifier, stem

__all__ = [
    "full_names",
    "is_stated",
    "name_aliases",
    "name_spans",
    "relation_words",
    "sentence_of",
    "sentences",
    "stated_numbers",
    "stated_schema",
    "states_name",
    "supporting_sentence",
]

# short lowercase words inside a name ("Bosnia and Herzegovina", "Rio de Janeiro")
_CONNECTORS = frozenset({"of", "and", "the", "de", "la", "le", "da", "do", "du", "del", "di", "van", "von", "y", "e"})
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")


# a name does not run over the end of a sentence or clause ("... Peru. Arequipa ...")
_BREAK = re.compile(r"[!?;:()\[\]\n]|[.,](?=\s|$)")


def _capital(word: str) -> bool:
    return word[:1].isupper() or word[:1].isdigit()


def name_spans(text: str, max_words: int = 5) -> list[str]:
    """The runs of ``text``'s words, within a sentence or clause, that read as names: they start
    with a capitalized word and end with one (or a number), with only capitalized words or short
    connectors between ("Republic of the Congo"). A passage without any gives every run of its
    words (names written in lowercase)."""
    spans = text_spans(_BREAK.split(text), max_words)
    names = []
    for span in spans:
        words = span.split()
        if words[0][:1].isupper() and _capital(words[-1]) and all(_capital(w) or w in _CONNECTORS for w in words):
            if all(w.casefold() in _CONNECTORS for w in words):
                continue  # "The" opening a sentence is no name ("The Hague" is)
            names.append(span)
    return names or spans


_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_SCALE = re.compile(r"\s+(thousand|million|billion|trillion)\b", re.IGNORECASE)


def stated_numbers(text: str) -> list[int | float]:
    """The numbers ``text`` writes, once each: "1,008,290" and "1008290" are 1008290, "3.5" is 3.5,
    and "2.1 million" is both 2.1 and 2100000."""
    out: dict[int | float, None] = {}
    for match in _NUMBER.finditer(text):
        raw = match.group(0).replace(",", "")
        value = float(raw)
        out.setdefault(int(value) if value.is_integer() and "." not in raw else value, None)
        scale = _SCALE.match(text, match.end())
        if scale is not None:
            scaled = value * _SCALES[scale.group(1).lower()]
            out.setdefault(round(scaled) if abs(scaled - round(scaled)) < 1e-6 else scaled, None)
    return list(out)


def _words(text: str) -> str:
    return " " + " ".join(w.casefold() for w in text_words(text)) + " "


def states_name(text: str, name: str) -> bool:
    """Whether ``name`` is a run of the passage's words (case aside). The grammar is stricter
    (:func:`name_spans`); this is the check every model's answer gets."""
    wanted = _words(name)
    return wanted.strip() != "" and wanted in _words(text)


def is_stated(text: str, value: Any) -> bool:
    """Whether ``text`` states ``value``: a number it writes, or a run of its words."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return any(float(n) == float(value) for n in stated_numbers(text))
    if isinstance(value, str):
        wanted = _words(value)
        return wanted.strip() != "" and wanted in _words(text)
    return False


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# a sentence ends at . ! ? followed by a space and a capital (or the end); "St. Louis" stays whole
_ABBREVIATIONS = _word_set(
    "St. Mt. Ft. Pt. Dr. Mr. Mrs. Ms. Jr. Sr. Co. Inc. Ltd. No. Nr. Vol. Fig. Gen. Col. Gov. Rev. Prof. "
    "Sgt. Ave. Rd. Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. Mon. Tue. Wed. Thu. Fri. "
    "Sat. Sun."
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n{2,}")


def sentences(text: str) -> list[str]:
    """The passage's sentences (split after . ! ? before a capital, and at blank lines; an
    abbreviation such as "St.", "Mt." or "Dr." does not end one, a word such as "May." does)."""
    out: list[str] = []
    for part in (p.strip() for p in _SENTENCE.split(text)):
        if not part:
            continue
        if out and out[-1].rsplit(" ", 1)[-1] in _ABBREVIATIONS:
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def sentence_of(text: str, *names: str) -> str | None:
    """The first sentence of ``text`` that writes every one of ``names``, or None.

    A relation is read from one sentence that names both its ends, as relation extraction
    usually is: two names that never share a sentence were not said to be related.
    """
    for sentence in sentences(text):
        if all(states_name(sentence, name) for name in names):
            return sentence
    return None


# words inside a full name ("Maria de la Cruz", "Ludwig van Beethoven"); "and" joins two names
_NAME_CONNECTORS = frozenset({"of", "de", "la", "le", "da", "do", "du", "del", "di", "van", "von", "bin", "al"})
# capitalized words that open a sentence or clause but no name ("The Hardware team", "At Norvale")
_NOT_NAME_START = _word_set(
    "the a an at in on of since after before when while during his her its their our my your this that "
    "these those two three four five several both each every all some many most and but or so as for from "
    "with by to it he she they we i there here then also"
)
_POSSESSIVE = re.compile(r"['’]s$")


def full_names(text: str) -> list[str]:
    """The names of two or more capitalized words that ``text`` writes, once each, in order.

    A run of capitalized words within a clause ("Maria Kowalski", "Data Engineering"), without a
    sentence-opening word ("The Billing team" is no full name) or a possessive ("Akira's").
    """
    out: dict[str, None] = {}
    for part in _BREAK.split(text):
        run: list[str] = []
        for word in [*text_words(part), ""]:
            stem = _POSSESSIVE.sub("", word)
            inside = bool(run) and word.casefold() in _NAME_CONNECTORS
            if word and (_capital(word) or inside) and stem == word:
                run.append(word)
                continue
            if word and _capital(word) and stem != word:
                run.append(stem)  # "Grace Liu's team": the name ends at the possessive
                word = ""
            while run and (run[0].casefold() in _NOT_NAME_START or run[0].casefold() in _NAME_CONNECTORS):
                run.pop(0)
            while run and run[-1].casefold() in _NAME_CONNECTORS:
                run.pop()
            if len(run) >= 2:
                out.setdefault(" ".join(run), None)
            run = [word] if word and _capital(word) else []
    return list(out)


def name_aliases(text: str) -> dict[str, str]:
    """The short names ``text`` uses for a full name it writes: ``{folded short name: full name}``.

    A name introduced once and then used by its first (or last) word ("Tomasz Wiśniewski ...
    report to Tomasz") is one entity. A short name that could be two full names of the passage, or
    that is a full name itself, maps to nothing.
    """
    names = full_names(text)
    folded_names = {normalize_text(n) for n in names}
    found: dict[str, set[str]] = {}
    for name in names:
        words = name.split()
        for short in {words[0], words[-1]}:
            found.setdefault(normalize_text(short), set()).add(name)
    return {
        short: next(iter(fulls))
        for short, fulls in found.items()
        if len(fulls) == 1 and short not in folded_names and short not in _NOT_NAME_START
    }


_PRONOUNS = _word_set("he she it they him her them his hers its their theirs himself herself itself themselves")


def _names_any(sentence: str, forms: Sequence[str]) -> bool:
    return any(states_name(sentence, form) for form in forms)


def supporting_sentence(text: str, subject_forms: Sequence[str], object_forms: Sequence[str]) -> str | None:
    """The sentence of ``text`` a relation between two entities is read from, or None.

    Each end is given as the forms the passage may write it in (its full name and its short
    names). The first sentence that writes both ends; else the first that writes one end after a
    pronoun for the other ("She reports to Akira"), the other named in the sentence before it.
    """
    parts = sentences(text)
    for sentence in parts:
        if _names_any(sentence, subject_forms) and _names_any(sentence, object_forms):
            return sentence
    for before, sentence in itertools.pairwise(parts):
        if (_refers_before(sentence, subject_forms) and _names_any(before, object_forms)) or (
            _refers_before(sentence, object_forms) and _names_any(before, subject_forms)
        ):
            return sentence
    return None


def _refers_before(sentence: str, forms: Sequence[str]) -> bool:
    """Whether ``sentence`` names one of ``forms`` with a pronoun before it ("She reports to Akira"):
    a pronoun after the name ("Felix joined; he works with Jamal") is the name itself."""
    words = [w.casefold() for w in text_words(sentence)]
    named = [
        i
        for form in forms
        for size in [len(text_words(form))]
        for i in range(len(words) - size + 1)
        if size and words[i : i + size] == [w.casefold() for w in text_words(form)]
    ]
    if not named:
        return False
    return any(w in _PRONOUNS for w in words[: min(named)])


_SMALL = frozenset({"is", "has", "have", "of", "in", "to", "by", "at", "on", "for", "the", "a", "an", "and", "with"})


def relation_words(label: str) -> list[str]:
    """The content words of a relation label, lowercase ("IsCapitalOf" -> ["capital"])."""
    return [w for w in split_identifier(label) if w not in _SMALL]


def names_relation(sentence: str, label: str) -> bool:
    """Whether ``sentence`` writes a content word of the relation ``label`` (a plural "s" aside)."""
    said = {w.casefold().removesuffix("s") for w in text_words(sentence)}
    return any(w.removesuffix("s") in said for w in relation_words(label))


def stated_schema(schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of an extraction schema (``entities`` and ``relations`` arrays) for one passage.

    Every entity ``name`` and relation endpoint name is an enum of :func:`name_spans`; every other
    string property of an entity an enum of the passage's runs of words or ``null``; every integer
    or number property an enum of :func:`stated_numbers` or ``null``, left out where the passage
    writes none (the entity keeps its default); the lists hold each item once (``uniqueItems``).
    """
    out = copy.deepcopy(dict(schema))
    names = name_spans(text)
    texts = text_spans([text])
    numbers = stated_numbers(text)
    properties = out.get("properties", {})
    entities = properties.get("entities", {})
    for variant in _variants(entities.get("items")):
        for key, prop in variant.get("properties", {}).items():
            if key == "label" or not isinstance(prop, dict):
                continue
            if key == "name":
                variant["properties"][key] = _enum(prop, names)
            else:
                variant["properties"][key] = _stated_value(prop, texts, numbers)
        # a value the passage cannot state is left out, not written as null: fewer tokens to decode
        for key in [k for k, p in variant.get("properties", {}).items() if _null_only(p)]:
            del variant["properties"][key]
            if isinstance(variant.get("required"), list) and key in variant["required"]:
                variant["required"] = [r for r in variant["required"] if r != key]
    relations = properties.get("relations", {})
    for variant in _variants(relations.get("items")):
        for side in ("subject", "object"):
            ref = variant.get("properties", {}).get(side)
            if isinstance(ref, dict) and isinstance(ref.get("properties", {}).get("name"), dict):
                ref["properties"]["name"] = _enum(ref["properties"]["name"], names)
    for array in (entities, relations):
        if isinstance(array, dict) and array.get("type") == "array":
            array["uniqueItems"] = True
    return out


def _null_only(prop: Any) -> bool:
    """True for a property schema whose only value is ``null``."""
    if not isinstance(prop, dict):
        return False
    options = prop.get("anyOf")
    if isinstance(options, list):
        return bool(options) and all(isinstance(o, dict) and o.get("type") == "null" for o in options)
    return prop.get("type") == "null"


def _variants(items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, dict):
        return []
    options = items.get("anyOf")
    return [v for v in options if isinstance(v, dict)] if isinstance(options, list) else [items]


def _enum(prop: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    kept = {k: v for k, v in prop.items() if k not in ("pattern", "maxLength", "minLength", "format")}
    return {**kept, "enum": list(values)}


def _stated_value(prop: dict[str, Any], texts: list[str], numbers: list[int | float]) -> dict[str, Any]:
    """A property's schema with its string / integer / number variant an enum of what is stated."""
    options = prop.get("anyOf")
    if not isinstance(options, list):  # a value that cannot be null: grounded only where the passage has one
        narrowed = _one(prop, texts, numbers)
        return narrowed if narrowed is not None and narrowed["enum"] else prop
    kept = []
    for option in options:
        if not isinstance(option, dict) or option.get("type") == "null":
            kept.append(option)
            continue
        narrowed = _one(option, texts, numbers)
        if narrowed is not None and narrowed.get("enum") != []:
            kept.append(narrowed)
        elif narrowed is None:
            kept.append(option)
    return {**prop, "anyOf": kept} if kept else prop


def _one(option: dict[str, Any], texts: list[str], numbers: list[int | float]) -> dict[str, Any] | None:
    kind = option.get("type")
    if kind == "string":
        return _enum(option, texts)
    if kind == "integer":
        return _enum(option, [n for n in numbers if isinstance(n, int)])
    if kind == "number":
        return _enum(option, list(numbers))
    return None


# -- reading a relation from a sentence by the words its docstring gives ------------------------------

_QUOTED_INVERSE = re.compile(r"[\"“]X ([^\"”]+?) Y[\"”] is Y (\w+) X")
_PARENTHESES = re.compile(r"\(([^()]*)\)")
_NEGATIONS = _word_set("not no never nor neither none nobody former formerly previously old")
_RELATIVE = _word_set("who which that whose")
# a clause ends at ; : — and before ", who", ", which", ", but", ", although", ", while"
_CLAUSE = re.compile(r"\s*[;:—]\s*|,\s+(?=(?:who|which|whose|but|although|though|while|whereas)\b)|\s+but\s+")


_IRREGULAR = {"led": "lead", "ran": "run", "took": "take", "built": "build", "wrote": "write", "made": "make"}
_AUXILIARIES = _word_set("is are was were be been being has have had does did will would")


def verb_stem(word: str) -> str:
    """A verb's stem for matching its forms: "manages", "managed", "managing", "manage" -> "manag"."""
    w = _IRREGULAR.get(word.casefold(), word.casefold())
    for suffix in ("ing", "ies", "ied", "es", "ed", "s"):
        if len(w) > len(suffix) + 1 and w.endswith(suffix):
            w = w[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    return w.removesuffix("e")


def relation_cues(label: str, doc: str, endpoint_words: Sequence[str] = ()) -> tuple[frozenset[str], frozenset[str]]:
    """The verb stems that state a relation in prose, from its label and docstring: ``(forward, inverse)``.

    Forward ("X <verb> Y" is ``X Label Y``): the label's words, the docstring's first word after its
    opening noun ("The person *leads* (heads, runs) the team."), and the first word of each
    alternative in parentheses. Inverse: the verbs of a quoted reading written the other way round
    (``"X manages Y" is Y ReportsTo X``).
    """
    skip = _SMALL | _AUXILIARIES | {"other", "older", "newer", "one", "another"}
    skip |= {w.casefold() for w in endpoint_words}
    forward = {verb_stem(w) for w in relation_words(label)}
    inverse: set[str] = set()
    for match in _QUOTED_INVERSE.finditer(doc):
        if match.group(2) == label:
            said = [w.casefold() for w in text_words(match.group(1))]
            verbs = {verb_stem(w) for w in said if w not in skip}
            # "X is used by Y" is Y DependsOn X: a passive reading is the forward verb, read backwards
            (forward if "by" in said else inverse).update(verbs)
    plain = _QUOTED_INVERSE.sub("", doc)
    for match in _PARENTHESES.finditer(plain):
        for part in match.group(1).split(","):
            first = [w for w in text_words(part) if w.casefold() not in skip]
            if first:
                forward.add(verb_stem(first[0]))
    opening = [w for w in text_words(_PARENTHESES.sub("", plain)) if w.casefold() not in skip]
    if opening:
        forward.add(verb_stem(opening[0]))
    return frozenset(forward - {""}), frozenset(inverse - {""})


def read_relations(
    text: str,
    names: Mapping[str, tuple[str, str]],
    cues: Mapping[str, tuple[frozenset[str], frozenset[str]]],
    ends: Mapping[str, tuple[Sequence[str], Sequence[str]]],
) -> list[tuple[str, str, str, str, str]]:
    """Relations each clause of ``text`` states by a relation's verb between two names it writes.

    ``names``: folded name (full or short) -> ``(name, label)`` of the entities the passage names;
    ``cues``: relation label -> its :func:`relation_cues`; ``ends``: relation label -> (subject
    labels, object labels). In a clause without a negation, a name before a cue verb and one after
    it are read as ``subject, object`` (forward) or ``object, subject`` (an inverse cue, or a
    passive "is run by"); names joined by "and" or commas all count. A relative clause ("..., who
    leads Search") takes the name before it as its subject, and a verb coordinated with an earlier
    one in its clause ("reports to A and manages B") the clause's subject. Returns
    ``(label, subject name, subject label, object name, object label)`` tuples, once each.
    """
    found: dict[tuple[str, str, str, str, str], None] = {}
    keys = sorted(names, key=lambda n: -len(n.split()))
    for sentence in sentences(text):
        previous_names: list[tuple[int, str]] = []
        for clause in (c for c in _CLAUSE.split(sentence) if c and c.strip()):
            words = [w.casefold() for w in text_words(clause)]
            mentions: list[tuple[int, str]] = []  # (word position, folded name)
            taken: set[int] = set()
            for key in keys:
                size = len(key.split())
                for i in range(len(words) - size + 1):
                    span = range(i, i + size)
                    if not taken.intersection(span) and normalize_text(" ".join(words[i : i + size])) == key:
                        mentions.append((i, key))
                        taken.update(span)
            mentions.sort()
            relative = bool(words) and words[0] in _RELATIVE
            negated = any(w in _NEGATIONS for w in words)
            subjects_of_clause: list[tuple[int, str]] | None = None
            cue_at = [
                i
                for i, w in enumerate(words)
                if any(verb_stem(w) in f or verb_stem(w) in inv for f, inv in cues.values())
            ]
            for n, v in enumerate(cue_at):
                stem_v = verb_stem(words[v])
                passive = v + 1 < len(words) and words[v + 1] == "by"
                start = cue_at[n - 1] if n else -1
                stop = cue_at[n + 1] if n + 1 < len(cue_at) else len(words)
                left = [m for m in mentions if start < m[0] < v]
                coordinated = v > 0 and words[v - 1] == "and"  # "reports to A and manages B"
                if (coordinated or not left) and subjects_of_clause is not None:
                    left = subjects_of_clause
                if not left and relative and previous_names:
                    left = previous_names[-1:]
                right = [m for m in mentions if v < m[0] < stop]
                if subjects_of_clause is None and left:
                    subjects_of_clause = left
                if negated:
                    continue
                for label, (forward, inverse) in cues.items():
                    direction = 1 if stem_v in forward else -1 if stem_v in inverse else 0
                    if not direction:
                        continue
                    if passive:
                        direction = -direction
                    subj_labels, obj_labels = ends[label]
                    for _, a in left:
                        for _, b in right:
                            s, o = (a, b) if direction == 1 else (b, a)
                            (s_name, s_label), (o_name, o_label) = names[s], names[o]
                            if s_label in subj_labels and o_label in obj_labels and s_name != o_name:
                                found.setdefault((label, s_name, s_label, o_name, o_label), None)
            previous_names = mentions or previous_names
    return list(found)


def named_by_noun(text: str, nouns: Mapping[str, str]) -> dict[str, str]:
    """Names ``text`` writes right before a label's noun, with that label: "the Safety team" is a
    ``Team`` named "Safety" when ``nouns`` maps "team" to ``Team`` (a plural noun counts too)."""
    found: dict[str, str] = {}
    for part in _BREAK.split(text):
        words = text_words(part)
        for i, word in enumerate(words):
            label = nouns.get(word.casefold()) or nouns.get(stem(word.casefold()))
            if label is None or i == 0:
                continue
            run: list[str] = []
            j = i - 1
            while j >= 0 and _capital(words[j]) and words[j].casefold() not in _NOT_NAME_START:
                run.insert(0, words[j])
                j -= 1
            if run:
                found[" ".join(run)] = label
    return found
