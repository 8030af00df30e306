"""Extraction from ordinary prose in two made-up domains, with the packaged model.

The passages (``benchmarks/extraction_data/``, models in :mod:`benchmarks.prose_domains`) are
paragraphs of two to four sentences: an org chart (``Leads``, ``MemberOf``, ``ReportsTo``) and a
software project (``DependsOn``, ``Maintains``, ``Replaces``). Names are introduced in full and
then used by first name; relations are often implied by a verb the other way round ("Omar
manages Lucia" is ``Lucia ReportsTo Omar``). Each domain has 10 labelled training passages (the
passages a user writes) and 8 held-out passages written before any tuning and never tuned on.

``--split train``: the tuning set, the training passages after the ``--demos`` shown ones.
``--split heldout``: the held-out passages. ``--fit N``: fit the extractor first on the first
``N`` training passages (``KNNFewShot`` with the labelled passages as the teacher, reward
``relation_f1``, candidates scored on the last 3 of them), then measure.

Each passage is one chunk, extracted in a dry run against an empty knowledge base. Measured:
relation recall and precision (label and both ends' names must match the labelled relation),
failed chunks, seconds per chunk, and where each lost relation went: never proposed, proposed
with the ends swapped or under another label, refused by which guard, or unresolved.

Run ``python -m benchmarks.bench_prose_extraction [--split heldout] [--demos 3] [--fit 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

from benchmarks.common import Report, Result, log
from benchmarks.prose_domains import DOMAINS, knowledge_base, labelled
from kag.text import normalize_text

Triple = tuple[str, str, str]


def _triple(label: str, subject: str, obj: str) -> Triple:
    return label, normalize_text(subject), normalize_text(obj)


def _gold(extraction: dict[str, Any]) -> set[Triple]:
    return {_triple(r["label"], r["subject"]["name"], r["object"]["name"]) for r in extraction["relations"]}


def where_lost(missing: Triple, report: Any) -> str:
    """Where a labelled relation that was not written went, from the chunk's report."""
    proposals = [p for c in report.chunk_reports for p in c.relations]
    read = [
        (p, _triple(p.read_as.label, p.read_as.subject.name, p.read_as.object.name)) for p in proposals if p.read_as
    ]
    for proposal, triple in read:
        if triple == missing:
            return f"{proposal.status}: {proposal.guard}"
    ends = {missing[1], missing[2]}
    for _, triple in read:
        if {triple[1], triple[2]} == ends:
            return "proposed with the ends swapped" if triple[0] == missing[0] else "proposed under another label"
    if report.failed_chunks:
        return "failed chunk"
    return "never proposed"


def why_wrong(extra: Triple, gold: set[Triple]) -> str:
    """Why a written relation is not a labelled one."""
    if (extra[0], extra[2], extra[1]) in gold:
        return "ends swapped"
    if any({g[1], g[2]} == {extra[1], extra[2]} for g in gold):
        return "another label"
    return "not stated"


async def measure(
    lm: Any, domain: str, split: str, demos: int, fit: int, nearest: int | None, unit_chars: int
) -> dict[str, Any]:
    """Recall, precision, losses and seconds over one domain's passages."""
    from kag.programs import Input, Program
    from kag.programs.extractor import KnowledgeExtractor, LabelledPassages, training_data
    from kag.training.optimizers import KNNFewShot

    train = labelled(domain, "train")
    rows = labelled(domain, split)
    if split == "train":
        rows = rows[demos:]
    kb = knowledge_base(domain)
    extractor = KnowledgeExtractor(
        kb, lm, concurrency=1, progress=False, examples=train[:demos], nearest=nearest, max_unit_chars=unit_chars
    )
    fit_seconds = None
    if fit:
        class_inputs = Input(data_model=_passage_model())
        program = Program(inputs=class_inputs, outputs=extractor(class_inputs))
        shown = train[:fit]
        program.compile(
            reward="relation_f1",
            optimizer=KNNFewShot(k=nearest or 3, teacher=LabelledPassages(shown), explore=0),
            concurrency=1,
        )
        x, y = training_data(shown)
        started = time.perf_counter()
        # candidates are scored on the last 3 labelled passages (each never shown as its own example)
        history = await program.fit(x, y, epochs=1, verbose=0, seed=0, validation_data=(x[-3:], y[-3:]))
        fit_seconds = time.perf_counter() - started
        log(
            f"{domain}: fit {fit_seconds:.0f} s, {history.history}, "
            f"demos {len(extractor.examples)}, nearest {extractor.nearest}"
        )
    found = written = right = failed = 0
    total = 0
    lost: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    seconds: list[float] = []
    chars: list[int] = []
    for i, (text, extraction) in enumerate(rows):
        gold = _gold(extraction)
        report = await extractor.ingest([text], dry_run=True)
        mine = {_triple(r.label, r.subject.name, r.object.name) for r in report.extracted}
        failed += len(report.failed_chunks)
        seconds += [c.seconds for c in report.chunk_reports]
        chars.append(len(text))
        total += len(gold)
        found += len(gold & mine)
        written += len(mine)
        right += len(gold & mine)
        for missing in sorted(gold - mine):
            lost[where_lost(missing, report)] += 1
        for extra in sorted(mine - gold):
            wrong[why_wrong(extra, gold)] += 1
        log(
            f"{domain} {split} {i}: {seconds[-1] if seconds else 0:.1f} s, missed {sorted(gold - mine)}, "
            f"extra {sorted(mine - gold)}, refused {[c.refused for c in report.chunk_reports]}"
        )
    return {
        "domain": domain,
        "passages": len(rows),
        "relations": total,
        "found": found,
        "written": written,
        "right": right,
        "failed": failed,
        "lost": dict(lost),
        "wrong": dict(wrong),
        "seconds": seconds,
        "chars": chars,
        "fit_seconds": fit_seconds,
    }


def _passage_model() -> Any:
    import kag

    class Passage(kag.DataModel):
        text: str

    return Passage


async def run(
    split: str = "heldout",
    demos: int = 3,
    fit: int = 0,
    nearest: int | None = None,
    unit_chars: int = 600,
    domains: tuple[str, ...] = tuple(DOMAINS),
    threads: int | None = None,
) -> Report:
    """Measure every domain with the packaged model; one report row per measure."""
    from kag.lm.llamacpp import LOCAL, LlamaCppLM

    lm = LlamaCppLM(LOCAL, n_threads=threads)
    await lm.load()
    rows = [await measure(lm, d, split, demos, fit, nearest, unit_chars) for d in domains]
    await lm.aclose()
    which = "held-out (never tuned on)" if split == "heldout" else "tuning set"
    how = f"{demos} labelled passages shown" + (f", after fit on {fit} labelled passages" if fit else "")
    report = Report(f"Extraction from prose in two made-up domains, packaged model ({which}; {how})")
    total = sum(r["relations"] for r in rows)
    found = sum(r["found"] for r in rows)
    written = sum(r["written"] for r in rows)
    right = sum(r["right"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    seconds = sorted(s for r in rows for s in r["seconds"])
    chars = [c for r in rows for c in r["chars"]]
    recall = found / total if total else float("nan")
    precision = right / written if written else float("nan")
    where = f"{', '.join(domains)}; {sum(r['passages'] for r in rows)} passages, {which}, {how}"
    recall_goal = 0.8 if fit else 0.7
    report.add(
        Result(
            "prose extraction",
            f"relation recall ({found} of {total}; {where})",
            recall,
            "share",
            goal=f">= {recall_goal}",
            met=recall >= recall_goal,
        )
    )
    report.add(
        Result(
            "prose extraction",
            f"relation precision ({right} of {written} written are labelled)",
            precision,
            "share",
            goal=">= 0.9",
            met=precision >= 0.9,
        )
    )
    report.add(Result("prose extraction", "failed chunks", failed, "", goal="0", met=failed == 0))
    if seconds:
        p50 = seconds[len(seconds) // 2]
        report.add(
            Result(
                "prose extraction",
                f"seconds per chunk, p50 (chunks of {min(chars)}-{max(chars)} characters, one at a time)",
                p50,
                "s",
                goal="<= 10 s",
                met=p50 <= 10.0,
                note=f"max {seconds[-1]:.1f} s",
            )
        )
    for r in rows:
        report.notes.append(
            f"{r['domain']}: recall {r['found']}/{r['relations']}, precision {r['right']}/{r['written']}; "
            f"lost: {json.dumps(r['lost'], sort_keys=True)}; wrong: {json.dumps(r['wrong'], sort_keys=True)}"
            + (f"; fit {r['fit_seconds']:.0f} s" if r["fit_seconds"] is not None else "")
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=["train", "heldout"], default="heldout")
    parser.add_argument("--demos", type=int, default=3, help="labelled passages shown (the first N training ones)")
    parser.add_argument("--fit", type=int, default=0, help="fit on the first N training passages first")
    parser.add_argument("--nearest", type=int, default=None, help="show each chunk only the K nearest examples")
    parser.add_argument("--unit-chars", type=int, default=600, help="the most characters one model call reads")
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: every core)")
    args = parser.parse_args()
    report = asyncio.run(
        run(
            args.split,
            args.demos,
            args.fit,
            args.nearest,
            args.unit_chars,
            tuple(args.domains.split(",")),
            args.threads,
        )
    )
    print(report.markdown())


if __name__ == "__main__":
    main()
