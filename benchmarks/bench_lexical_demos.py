"""LexicalLM untrained vs. with demos, on a graph of another domain and on the KGQA split.

Usage::

    .venv/bin/python -m benchmarks.bench_lexical_demos                 # packages graph + KGQA (8 per type)
    .venv/bin/python -m benchmarks.bench_lexical_demos --kgqa-limit 0  # the packages graph only

**The packages graph** is built from the Python distributions installed in this environment
(``importlib.metadata``): ``Package``, ``License`` and ``Author`` entities, ``DependsOn`` (from
``Requires-Dist`` without an ``extra`` marker, installed targets only), ``HasLicense`` (the license
expression, else the classifiers, normalized to short names) and ``WrittenBy`` (the ``Author`` /
``Author-email`` names). The numbers therefore depend on what is installed. The questions were
written for this benchmark by the author of the demo-learning code (templates below, names drawn by
seed); each gold answer is computed from the metadata, never from kag. Families:

* ``depends_out`` "Which packages does X depend on?", ``depends_in`` "Which packages depend on X?";
* ``either_way`` "Which packages are linked to X by a dependency in either direction?" (``bidirectional``);
* ``negation`` "Which packages do not depend on X?" (a negated hop);
* ``chain`` "What licenses do the dependencies of X have?" (two hops);
* ``count`` "How many packages depend on X?";
* ``written_by`` "Which packages were written by A?";
* ``out_of_schema`` "Who maintains X?", "What is the homepage of X?" ... (answer: not found, no entities).

Each family but the last has two phrasings (``PHRASINGS``), used in turn: a demo teaches the phrasing it
shows, so a held-out question whose phrasing no demo shows is answered by the rules.

Each family is split by seed into train and test halves; the demos are at most ``--demos`` questions
drawn by seed from the train halves (round-robin over the families, and within a family one of each
phrasing before a second of any: a user labelling a dozen questions labels each way of asking once;
drawn at random instead, both demos of a family may show one phrasing, and the held-out questions of
the other phrasing are left to the rules), passed as ``examples=`` to the
``KnowledgeRetriever`` with their gold searches (what training would choose); the score is on the
held-out test halves. **KGQA**: the same with the project's questions (``benchmarks/kgqa``), train /
test halves per type, demos from train, at most ``--kgqa-limit`` held-out questions per type.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata as metadata
import json
import random
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from benchmarks.kgqa.make_questions import fold
from benchmarks.kgqa.run import Answer, Query, is_exact, load_questions
from kag.datamodels.base import Entity, Field, Relation
from kag.examples.countries import countries_knowledge_base, load_countries
from kag.knowledge.base import KnowledgeBase
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program
from kag.training import ExactMatch, KNNFewShot

K = 300
THRESHOLD = 0.7
SEED = 0


# -- the packages graph ---------------------------------------------------------------------


class Package(Entity):
    """A Python distribution installed in the environment."""

    label: Literal["Package"] = "Package"
    name: str = Field(description="The distribution name")


class License(Entity):
    """A software license, by its short name."""

    label: Literal["License"] = "License"
    name: str = Field(description="The license's short name, e.g. MIT")


class Author(Entity):
    """A person or organization that wrote a package."""

    label: Literal["Author"] = "Author"
    name: str = Field(description="The author's name")


class DependsOn(Relation):
    """The package requires the other package to be installed."""

    label: Literal["DependsOn"] = "DependsOn"
    subj: Package
    obj: Package


class HasLicense(Relation):
    """The package is distributed under the license."""

    label: Literal["HasLicense"] = "HasLicense"
    subj: Package
    obj: License


class WrittenBy(Relation):
    """The package was written by the author."""

    label: Literal["WrittenBy"] = "WrittenBy"
    subj: Package
    obj: Author


_LICENSES = {
    "mit license": "MIT",
    "mit": "MIT",
    "apache software license": "Apache-2.0",
    "apache 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "apache license version 2.0": "Apache-2.0",
    "apache-2.0": "Apache-2.0",
    "bsd license": "BSD",
    "bsd": "BSD",
    "isc license (iscl)": "ISC",
    "isc license": "ISC",
    "isc": "ISC",
    "python software foundation license": "PSF-2.0",
    "psfl": "PSF-2.0",
    "psf-2.0": "PSF-2.0",
    "mozilla public license 2.0 (mpl 2.0)": "MPL-2.0",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _licenses(meta: Any) -> list[str]:
    text = (meta.get("License-Expression") or meta.get("License") or "").strip()
    parts: list[str] = []
    if text and len(text) < 80 and "\n" not in text and text.upper() != "UNKNOWN":
        parts = [p.strip(" ()") for p in re.split(r"\s+(?:AND|OR|and|or)\s+", text)]
    if not parts:
        parts = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    out = []
    for p in parts:
        short = _LICENSES.get(p.lower(), p)
        if short and short not in out and len(short) < 40:
            out.append(short)
    return out


def _authors(meta: Any) -> list[str]:
    text = meta.get("Author") or ""
    if not text.strip():
        text = ", ".join(re.sub(r"<[^>]*>", "", part).strip() for part in (meta.get("Author-email") or "").split(","))
    names = []
    for part in re.split(r",|\band\b", text):
        name = part.strip().strip('"').strip()
        if name and "@" not in name and len(name) < 60 and name not in names:
            names.append(name)
    return names


@dataclass
class Packages:
    """The metadata as plain maps (the gold answers are computed from these)."""

    names: dict[str, str]  # normalized -> display name
    deps: dict[str, set[str]]  # display name -> display names
    licenses: dict[str, list[str]]
    authors: dict[str, list[str]]

    def rdeps(self, name: str) -> set[str]:
        return {p for p, ds in self.deps.items() if name in ds}


def read_packages() -> Packages:
    names: dict[str, str] = {}
    dists = {}
    for dist in sorted(metadata.distributions(), key=lambda d: str(d.metadata["Name"] or "")):
        name = dist.metadata["Name"]
        if name and _norm(name) not in names:
            names[_norm(name)] = name
            dists[name] = dist
    deps: dict[str, set[str]] = {}
    for name, dist in dists.items():
        targets = set()
        for req in dist.requires or []:
            if "extra ==" in req or "extra==" in req:
                continue
            target = names.get(_norm(re.split(r"[ ;<>=!~\[(]", req.strip(), maxsplit=1)[0]))
            if target and target != name:
                targets.add(target)
        deps[name] = targets
    return Packages(
        names,
        deps,
        {n: _licenses(d.metadata) for n, d in dists.items()},
        {n: _authors(d.metadata) for n, d in dists.items()},
    )


async def packages_graph(pk: Packages) -> KnowledgeBase:
    kb = KnowledgeBase(
        "memory://", entity_models=[Package, License, Author], relation_models=[DependsOn, HasLicense, WrittenBy]
    )
    items: list[Any] = []
    pkgs = {n: Package(name=n) for n in pk.deps}
    lics = {lic: License(name=lic) for ls in pk.licenses.values() for lic in ls}
    auths = {a: Author(name=a) for xs in pk.authors.values() for a in xs}
    items += [*pkgs.values(), *lics.values(), *auths.values()]
    for n, ds in pk.deps.items():
        items += [DependsOn(subj=pkgs[n], obj=pkgs[d]) for d in sorted(ds)]
    for n, ls in pk.licenses.items():
        items += [HasLicense(subj=pkgs[n], obj=lics[lic]) for lic in ls]
    for n, xs in pk.authors.items():
        items += [WrittenBy(subj=pkgs[n], obj=auths[a]) for a in xs]
    await kb.upsert(items)
    return kb


# -- the questions ---------------------------------------------------------------------------


def _hop(s: tuple[str, str], rel: str, o: tuple[str, str], **flags: bool) -> dict[str, Any]:
    return {
        "subject_label": s[0],
        "subject_similarity_search": s[1],
        "relation_label": rel,
        "object_label": o[0],
        "object_similarity_search": o[1],
        "negated": flags.get("negated", False),
        "bidirectional": flags.get("bidirectional", False),
        "count": flags.get("count", False),
    }


ANY_PKG = ("Package", "*")
# two phrasings per family, used in turn
PHRASINGS = {
    "depends_out": ["Which packages does {x} depend on?", "What does {x} depend on?"],
    "depends_in": ["Which packages depend on {x}?", "Which installed packages depend on {x}?"],
    "either_way": [
        "Which packages are linked to {x} by a dependency in either direction?",
        "Which packages share a dependency with {x}, whichever way it points?",
    ],
    "negation": ["Which packages do not depend on {x}?", "Which packages don't depend on {x} at all?"],
    "chain": [
        "What licenses do the dependencies of {x} have?",
        "Under which licenses are the dependencies of {x} distributed?",
    ],
    "count": ["How many packages depend on {x}?", "How many installed packages depend on {x}?"],
    "written_by": ["Which packages were written by {x}?", "Which packages did {x} write?"],
}
_OUT_OF_SCHEMA = [
    ("Who maintains {x}?", "maintains"),
    ("What is the homepage of {x}?", "homepage"),
    ("Which Python versions does {x} support?", "python versions support"),
    ("When was {x} first released?", "first released"),
    ("How many downloads does {x} get per month?", None),
    ("Which company sponsors {x}?", "company sponsors"),
    ("What is the latest release of {x}?", "latest release"),
    ("Which bugs are open in {x}?", "bugs open"),
]


def _clean(name: str) -> bool:
    """A name that reads as a name in a question (no spaces or odd characters; not a common word)."""
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{2,}", name)) and name.lower() not in {
        "packaging",
        "build",
        "wheel",
        "six",
        "mock",
        "more-itertools",
    }


def package_questions(pk: Packages, per_family: int = 8, seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pkgs = sorted(n for n in pk.deps if _clean(n))
    out: list[dict[str, Any]] = []

    def add(family: str, question: str, search: dict[str, Any] | list[dict[str, Any]], answer: Any) -> None:
        gold = {"hops": search} if isinstance(search, list) else search
        # which of the family's phrasings the question uses (phrase() has just counted it)
        phrasing = (seen[family] - 1) % len(PHRASINGS[family]) if family in PHRASINGS else 0
        out.append({"family": family, "phrasing": phrasing, "question": question, "search": gold, "answer": answer})

    seen: dict[str, int] = defaultdict(int)

    def phrase(family: str, name: str) -> str:
        """The family's phrasings in turn: a demo of one does not always match the other word for word."""
        template = PHRASINGS[family][seen[family] % len(PHRASINGS[family])]
        seen[family] += 1
        return template.format(x=name)

    def pick(pool: Sequence[str], n: int = per_family) -> list[str]:
        pool = list(pool)
        rng.shuffle(pool)
        return sorted(pool[:n])

    all_pkgs = set(pk.deps)
    for x in pick([p for p in pkgs if len(pk.deps[p]) >= 2]):
        add(
            "depends_out",
            phrase("depends_out", x),
            _hop(("Package", x), "DependsOn", ANY_PKG),
            sorted(pk.deps[x]),
        )
    with_rdeps = [p for p in pkgs if len(pk.rdeps(p)) >= 2]
    for x in pick(with_rdeps):
        add(
            "depends_in",
            phrase("depends_in", x),
            _hop(ANY_PKG, "DependsOn", ("Package", x)),
            sorted(pk.rdeps(x)),
        )
    for x in pick([p for p in with_rdeps if pk.deps[p]]):
        add(
            "either_way",
            phrase("either_way", x),
            _hop(ANY_PKG, "DependsOn", ("Package", x), bidirectional=True),
            sorted(pk.deps[x] | pk.rdeps(x)),
        )
    for x in pick(with_rdeps):
        add(
            "negation",
            phrase("negation", x),
            _hop(ANY_PKG, "DependsOn", ("Package", x), negated=True),
            sorted(p for p in all_pkgs if x not in pk.deps[p] and p != x),
        )  # X itself is not an answer
    chained = [p for p in pkgs if pk.deps[p] and all(pk.licenses[d] for d in pk.deps[p])]
    for x in pick(chained):
        add(
            "chain",
            phrase("chain", x),
            [_hop(("Package", x), "DependsOn", ANY_PKG), _hop(ANY_PKG, "HasLicense", ("License", "*"))],
            sorted({lic for d in pk.deps[x] for lic in pk.licenses[d]}),
        )
    for x in pick(with_rdeps):
        add(
            "count",
            phrase("count", x),
            _hop(ANY_PKG, "DependsOn", ("Package", x), count=True),
            len(pk.rdeps(x)),
        )
    by_author: dict[str, set[str]] = defaultdict(set)
    for p, xs in pk.authors.items():
        for a in xs:
            by_author[a].add(p)
    prolific = [a for a, ps in by_author.items() if len(ps) >= 2 and re.fullmatch(r"[A-Z][\w. '-]+", a)]
    for a in pick(prolific):
        add(
            "written_by",
            phrase("written_by", a),
            _hop(ANY_PKG, "WrittenBy", ("Author", a)),
            sorted(by_author[a]),
        )
    templates = list(_OUT_OF_SCHEMA)
    for x, (template, free) in zip(pick(pkgs), templates, strict=False):
        if free is None:
            continue  # "how many downloads": a count the schema cannot give, asked without a demo shape
        add("out_of_schema", template.format(x=x), _hop(("*", free), "*", ("Package", x)), None)
    return out


def split(rows: Sequence[dict[str, Any]], key: str, seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """Half of each group (by ``key``) for training, the rest for testing; seeded."""
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    train: list[dict[str, Any]] = []
    test: list[dict[str, Any]] = []
    for name in sorted(groups):
        group = list(groups[name])
        rng.shuffle(group)
        half = len(group) // 2
        train += group[:half]
        test += group[half:]
    return train, test


def choose_demos(
    train: Sequence[dict[str, Any]], key: str, n: int, seed: int = SEED, *, within: str | None = None
) -> list[dict[str, Any]]:
    """At most ``n`` training questions, round-robin over the groups, drawn by seed; with ``within``
    (a second key), each group's questions also take turns by that key (one of each phrasing first)."""
    rng = random.Random(seed + 1)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in train:
        groups[row[key]].append(row)
    queues = []
    for name in sorted(groups):
        group = list(groups[name])
        rng.shuffle(group)
        if within is not None:  # the i-th question of each phrasing before the (i+1)-th of any
            rank: dict[Any, int] = defaultdict(int)
            order = []
            for row in group:
                order.append(rank[row[within]])
                rank[row[within]] += 1
            group = [row for _, row in sorted(zip(order, group, strict=True), key=lambda p: -p[0])]
        queues.append(group)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(queues):
        for queue in queues:
            if queue and len(out) < n:
                out.append(queue.pop())
    return out


# -- running ---------------------------------------------------------------------------------


def build(kb: KnowledgeBase, examples: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> Program:
    lm = LexicalLM(knowledge_base=kb)
    inputs = Input(data_model=Query, name="question")
    facts = KnowledgeRetriever(
        knowledge_base=kb, language_model=lm, k=K, threshold=THRESHOLD, max_hops=2, examples=list(examples)
    )(inputs)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True)(facts)
    return Program(inputs=inputs, outputs=answer, name="lexical_demos")


VERBOSE = False


async def score(program: Program, rows: Sequence[dict[str, Any]], judge: Callable[[dict, Any], bool]) -> list[bool]:
    out = []
    for row in rows:
        try:
            result = await program(Query(query=row["question"]))
            ok = judge(row, result)
            if VERBOSE and not ok:
                print("MISS", row["question"], "->", result.answer[:120], json.dumps(result.search)[:400])
            out.append(ok)
        except Exception as exc:  # a question that errors counts as wrong
            if VERBOSE:
                print("ERROR", row["question"], type(exc).__name__, str(exc)[:200])
            out.append(False)
    return out


def judge_package(row: dict[str, Any], result: Any) -> bool:
    want = row["answer"]
    if want is None:
        return list(result.entities) == [] and result.number is None and "not found" in result.answer.lower()
    if isinstance(want, int):
        return result.number == want
    return {fold(n) for n in result.entities} == {fold(n) for n in want}


def judge_kgqa(row: dict[str, Any], result: Any) -> bool:
    got = result.number if row["answer"]["kind"] == "count" else list(result.entities)
    return is_exact(row, got)


def table(title: str, rows: Sequence[dict[str, Any]], key: str, columns: dict[str, list[bool]]) -> str:
    groups = sorted({r[key] for r in rows})
    head = f"| {key} | n | " + " | ".join(columns) + " |"
    lines = [f"\n{title}", head, "|" + "---|" * (2 + len(columns))]
    for g in [*groups, "all"]:
        idx = [i for i, r in enumerate(rows) if g == "all" or r[key] == g]
        cells = [f"{sum(col[i] for i in idx)}/{len(idx)}" for col in columns.values()]
        lines.append(f"| {g} | {len(idx)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def run_packages(n_demos: int) -> str:
    pk = read_packages()
    kb = await packages_graph(pk)
    rows = package_questions(pk)
    train, test = split(rows, "family")
    demos = choose_demos(train, "family", n_demos, within="phrasing")
    examples = [({"query": d["question"]}, d["search"]) for d in demos]
    t0 = time.perf_counter()
    before = await score(build(kb, []), test, judge_package)
    t1 = time.perf_counter()
    after = await score(build(kb, examples), test, judge_package)
    t2 = time.perf_counter()
    trained = await fitted(kb, demos)
    fit_s = time.perf_counter() - t2
    fit_scores = await score(trained, test, judge_package)
    counts = f"{len(pk.deps)} packages, {sum(map(len, pk.deps.values()))} DependsOn"
    return table(
        f"Packages graph ({counts}); {len(rows)} questions, {len(demos)} demos from {len(train)} train, "
        f"{len(test)} held out; untrained {t1 - t0:.1f} s, with demos {t2 - t1:.1f} s; the same "
        f"{len(demos)} questions with their answers only, through fit (KNNFewShot, exploring): {fit_s:.1f} s",
        test,
        "family",
        {"untrained": before, f"{len(demos)} demos": after, f"fit on {len(demos)} answers": fit_scores},
    )


def answer_label(row: dict[str, Any]) -> dict[str, Any]:
    """What ``fit`` is given: the expected answer only, never the gold search."""
    want = row["answer"]
    if want is None:
        return {"entities": [], "number": None}  # outside the schema: no names, no number
    if isinstance(want, int):
        return {"number": want}
    return {"entities": list(want)}


async def fitted(kb: KnowledgeBase, rows: Sequence[dict[str, Any]]) -> Program:
    """The program trained by ``fit`` on ``rows``' questions and answers (searches found by exploration)."""
    program = build(kb, [])
    program.compile(reward=ExactMatch(), optimizer=KNNFewShot(k=4, explore=len(rows)), concurrency=2)
    await program.fit(
        [{"query": r["question"]} for r in rows], [answer_label(r) for r in rows], epochs=2, seed=SEED, verbose=0
    )
    return program


# written for this benchmark: nothing the countries graph holds answers them ({x}: a country drawn by seed)
COUNTRY_OUT_OF_SCHEMA = [
    "Who is the president of {x}?",
    "What is the GDP of {x}?",
    "What currency symbol does {x} print on its coins?",
    "Which team won the football league of {x}?",
    "What is the national anthem of {x}?",
    "Who founded {x}?",
    "What is the average temperature in {x}?",
    "What is the official religion of {x}?",
    "What is the main export of {x}?",
    "Which time zone is {x} in?",
    "Who is the prime minister of {x}?",
    "What is the literacy rate of {x}?",
]


# written later, after the scope rule for a relation word that only modifies the asked noun
# ("currency symbol") was added for the one miss above; never used to change a rule: not tuned on
COUNTRY_OUT_OF_SCHEMA_FRESH = [
    "What is the calling code of {x}?",
    "How tall is the highest mountain in {x}?",
    "What language school is the best in {x}?",
    "Who won the last election in {x}?",
    "What is the life expectancy in {x}?",
    "Which dishes is {x} famous for?",
    "What is the speed limit on highways in {x}?",
    "Which currency exchange rate does {x} have against the euro?",
    "When did {x} become independent?",
    "What is the voltage of power sockets in {x}?",
    "How many airports does {x} have?",
    "Who is the king of {x}?",
]


def country_names(seed: int = SEED) -> list[str]:
    """The countries the KGQA lookup questions name, shuffled by ``seed``."""
    searches = [r["gold_search"] for r in load_questions(types=["lookup"])]
    names = sorted({g["object_similarity_search"] for g in searches if g.get("object_label") == "Country"} - {"*"})
    random.Random(seed).shuffle(names)
    return names


def country_out_of_schema(seed: int = SEED, templates: Sequence[str] = COUNTRY_OUT_OF_SCHEMA) -> list[dict[str, Any]]:
    names = country_names(seed)
    kind = "out_of_schema" if templates is COUNTRY_OUT_OF_SCHEMA else "out_of_schema_fresh"
    return [{"type": kind, "question": t.format(x=x), "answer": None} for t, x in zip(templates, names, strict=False)]


def judge_kgqa_or_abstain(row: dict[str, Any], result: Any) -> bool:
    if row["answer"] is None:
        return judge_package(row, result)
    return judge_kgqa(row, result)


async def run_kgqa(n_demos: int, limit: int) -> str:
    kb = countries_knowledge_base()
    await load_countries(kb)
    rows = load_questions()
    train, test = split(rows, "type")
    demos = choose_demos(train, "type", n_demos)
    examples = [({"query": d["question"]}, d["gold_search"]) for d in demos]
    by_type: dict[str, int] = defaultdict(int)
    held: list[dict[str, Any]] = []
    for row in test:
        if by_type[row["type"]] < limit:
            by_type[row["type"]] += 1
            held.append(row)
    held += country_out_of_schema() + country_out_of_schema(templates=COUNTRY_OUT_OF_SCHEMA_FRESH)
    before = await score(build(kb, []), held, judge_kgqa_or_abstain)
    after = await score(build(kb, examples), held, judge_kgqa_or_abstain)
    return table(
        f"KGQA: {len(demos)} demos from {len(train)} train, {len(held)} held out ({limit} per type), "
        "plus questions outside the schema written for this benchmark (no demo of them)",
        held,
        "type",
        {"untrained": before, f"{len(demos)} demos": after},
    )


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--demos", type=int, default=16, help="demos from the train split (at most 20)")
    parser.add_argument("--kgqa-limit", type=int, default=8, help="held-out KGQA questions per type (0: skip)")
    parser.add_argument("--verbose", action="store_true", help="print each wrong answer")
    args = parser.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    print(await run_packages(args.demos))
    if args.kgqa_limit > 0:
        print(await run_kgqa(min(args.demos, 20), args.kgqa_limit))


if __name__ == "__main__":
    asyncio.run(main())
