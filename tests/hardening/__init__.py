"""Hardening tests: adversarial inputs, malformed model output, concurrency, SSRF refusals.

This module also holds the deterministic generator of adversarial triplet-search
payloads shared by the compile-only tests and the two-backend tests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kag.query.plan import MAX_TEXT

# declared by the seed schema (kag.examples.seed)
ENTITY_LABELS = ("City", "Country")
RELATION_LABELS = ("IsCapitalOf", "IsCityOf")
SEED_WORDS = ("Paris", "France", "Lyon", "Berlin", "Tokyo", "Spain", "Osaka", "Rome", "Milan", "Japan")

INJECTIONS = (
    "'",
    '"',
    "`",
    "\\",
    "\\'",
    "//",
    "/*",
    "*/",
    "}",
    "{",
    ")",
    "(",
    "]",
    ";",
    "$threshold",
    "$v0_0",
    "$k",
    "MATCH (n) DETACH DELETE n",
    "}) DETACH DELETE n //",
    "`) DETACH DELETE n //",
    "' OR 1=1 //",
    '" OR true /*',
    "*/ MATCH (x) SET x.pwned = true /*",
    "CALL dbms.killQueries([])",
    "CALL { MATCH (n) DELETE n }",
    "CREATE (:Pwned {at: timestamp()})",
    "MERGE (p:Pwned) RETURN p",
    "DROP INDEX kag_City_embedding",
    "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
    "RETURN 1 UNION MATCH (n) DETACH DELETE n",
    "WITH 1 AS x CALL apoc.cypher.runWrite('MATCH (n) DELETE n', {}) YIELD value",
    "FOREACH (n IN [1] | CREATE (:Pwned))",
    "\x00",
    "\x00MATCH",
    "\u202e",  # right-to-left override
    "\ufeff",
    "\u200b",
    "\U0001d513\U0001d51e\U0001d52f\U0001d526\U0001d530",  # mathematical fraktur
    "Zürich",
    "東京",
    "Москва",
    "القاهرة",
    "😀",
    "\n",
    "\r\n",
    "\t",
    "{{ 7*7 }}",
    "{% raw %}",
    "%s%s%n",
    "\\u0060",
    "&#96;",
)
BAD_LABELS = (
    "city",
    "CITY",
    "City ",
    " City",
    "City`",
    "`City`",
    "City|Country",
    "City:Country",
    "City) DETACH DELETE n //",
    "City`) DETACH DELETE n //",
    "Country {id: 1}",
    "KagEntity",
    "Document",
    "Chunk",
    "Pwned",
    "",
    " ",
    "**",
    "1City",
    "_City",
    "City\x00",
    "Ci\u200bty",
    "Сity",  # Cyrillic С
    "A" * 65,
    "x" * 5000,
    "MATCH",
    "DETACH DELETE",
    "CALL",
)
BAD_RELATIONS = (
    "iscapitalof",
    "IsCapitalOf ",
    "IsCapitalOf|IsCityOf",
    "IsCapitalOf]->() DETACH DELETE n //",
    "`IsCapitalOf`",
    "HAS_CHUNK",
    "MENTIONS",
    "NEXT",
    "KNOWS",
    "",
    "**",
    "DELETE",
)


@dataclass(frozen=True)
class Payload:
    """One generated search and what the generator knows about it."""

    search: dict[str, Any]
    bad_label: bool  # some label is neither declared nor "*"
    bad_text: bool  # some text is empty/blank or longer than MAX_TEXT

    def texts(self) -> list[str]:
        """Every similarity text of the payload (hops included)."""
        hops = self.search.get("hops", [self.search])
        out = []
        for hop in hops:
            for key in ("subject_similarity_search", "object_similarity_search"):
                value = hop.get(key, "*")
                if isinstance(value, str) and value.strip() != "*":
                    out.append(value)
        return out


def adversarial_text(rng: random.Random, marker: str) -> str:
    """A text mixing injection fragments with a unique marker (and sometimes a seed word)."""
    parts = [marker]
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(INJECTIONS))
    if rng.random() < 0.5:
        parts.append(rng.choice(SEED_WORDS))
    rng.shuffle(parts)
    sep = rng.choice(["", " ", "\n", "\x00", "`"])
    text = sep.join(parts)
    roll = rng.random()
    if roll < 0.03:
        text = text + "A" * (MAX_TEXT + rng.randint(1, 50_000))  # too long
    elif roll < 0.06:
        head = text[: MAX_TEXT // 2]
        text = head + " " + "B" * (MAX_TEXT - len(head) - 2)  # long, within the limit
    return text


def _label(rng: random.Random, good: tuple[str, ...], bad: tuple[str, ...]) -> tuple[str, bool]:
    roll = rng.random()
    if roll < 0.12:
        return rng.choice(bad), True
    if roll < 0.3:
        return "*", False
    return rng.choice(good), False


def _side_text(rng: random.Random, marker: str) -> tuple[str, bool]:
    roll = rng.random()
    if roll < 0.2:
        return "*", False
    if roll < 0.23:
        return rng.choice(["", "   ", "\n\t"]), True
    text = adversarial_text(rng, marker)
    return text, len(text.strip()) > MAX_TEXT


def _hop(rng: random.Random, index: int, hop: int) -> tuple[dict[str, Any], bool, bool]:
    subj, bad_s = _label(rng, ENTITY_LABELS, BAD_LABELS)
    obj, bad_o = _label(rng, ENTITY_LABELS, BAD_LABELS)
    rel, bad_r = _label(rng, RELATION_LABELS, BAD_RELATIONS)
    s_text, bad_st = _side_text(rng, f"zq{index:05d}s{hop}")
    o_text, bad_ot = _side_text(rng, f"zq{index:05d}o{hop}")
    search = {
        "subject_label": subj,
        "subject_similarity_search": s_text,
        "relation_label": rel,
        "object_label": obj,
        "object_similarity_search": o_text,
        "negated": rng.random() < 0.2,
        "bidirectional": rng.random() < 0.3,
        "count": rng.random() < 0.15,
    }
    return search, bad_s or bad_o or bad_r, bad_st or bad_ot


def payloads(count: int, seed: int = 20240607) -> list[Payload]:
    """``count`` deterministic adversarial payloads (about 1 in 8 is a two-hop chain)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if rng.random() < 0.12:
            hops = [_hop(rng, i, h) for h in range(2)]
            for h in hops:
                h[0]["negated"] = False
            search: dict[str, Any] = {"hops": [h[0] for h in hops]}
            out.append(Payload(search, any(h[1] for h in hops), any(h[2] for h in hops)))
        else:
            hop, bad_label, bad_text = _hop(rng, i, 0)
            out.append(Payload(hop, bad_label, bad_text))
    return out
