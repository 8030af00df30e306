"""Run the KGQA benchmark: gold searches, the offline program end to end, and name linking.

Usage::

    .venv/bin/python -m benchmarks.kgqa.run                       # memory backend, every question
    .venv/bin/python -m benchmarks.kgqa.run --limit 10            # the first 10 questions of each type
    .venv/bin/python -m benchmarks.kgqa.run --backend neo4j --clear --json /tmp/kgqa.json
    .venv/bin/python -m benchmarks.kgqa.run --skip-e2e --thresholds 0.7,0.8,0.9

``--backend neo4j`` connects to ``NEO4J_URI`` with ``NEO4J_USER`` / ``NEO4J_PASSWORD``;
``--clear`` empties that database first (never point it at a database you need). A
database that already holds a graph is refused without ``--clear``: the questions would
be scored against it plus the benchmark's graph. ``--reuse`` runs on it as it is (after
an earlier load of this benchmark, say).

Three measurements, each reported by question type:

* **gold** — each question's gold triplet search run by ``kb.triplet_search`` at each
  threshold; a question counts when the answer set (the names at ``answer_node``, or
  the count) equals the gold answer exactly. Every gold search runs through kag's own
  planner, including the negated hops inside chains, ``subject_where``/``object_where``
  and ``order_by`` + ``limit``. For the symmetric questions the same search without
  ``bidirectional`` is also run ("no flag"): what the ``symmetric=True`` declaration of
  ``Borders`` makes correct.
* **e2e** — ``Input(Query) -> KnowledgeRetriever -> Generator(Answer)`` with
  ``kag.LexicalLM`` (offline); exact answer set, or exact number for counts.
* **linking** — for the variant-name questions, the rank of the intended entity in
  ``kb.similarity_search(label, variant_text, k=5)``: hits@1 and hits@5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.kgqa.make_questions import OUTPUT as QUESTIONS
from benchmarks.kgqa.make_questions import TYPES, VARIANT_KINDS, fold
from kag.datamodels.base import DataModel, Field
from kag.examples.countries import countries_knowledge_base, load_countries
from kag.knowledge.base import KnowledgeBase
from kag.lm.lexical import LexicalLM
from kag.programs import Generator, Input, KnowledgeRetriever, Program

GOLD_K = 2_000  # above every answer set, so ride-alongs show up
E2E_K = 300


class Query(DataModel):
    """A user question."""

    query: str = Field(description="The user's question")


class Answer(DataModel):
    """An answer grounded in the retrieved facts."""

    answer: str = Field(description="The answer, using only the retrieved facts")
    entities: list[str] = Field(description="The names of the entities that answer the question")
    number: int | None = Field(description="The number asked for by a 'how many' question, else null")


def load_questions(
    path: Path = QUESTIONS, limit: int | None = None, types: Iterable[str] = TYPES
) -> list[dict[str, Any]]:
    """The questions of ``types``; with ``limit``, at most ``limit`` per type, taken round-robin over subtypes."""
    wanted = set(types)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["type"] in wanted]
    if limit is None:
        return rows
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[r["type"]][r["subtype"]].append(r)
    keep: set[str] = set()
    for subtypes in groups.values():
        queues = [list(reversed(v)) for v in subtypes.values()]
        taken = 0
        while taken < limit and any(queues):
            for queue in queues:
                if queue and taken < limit:
                    keep.add(queue.pop()["id"])
                    taken += 1
    return [r for r in rows if r["id"] in keep]


def expected(q: dict[str, Any]) -> int | frozenset[str]:
    a = q["answer"]
    return int(a["value"]) if a["kind"] == "count" else frozenset(fold(n) for n in a["names"])


def is_exact(q: dict[str, Any], got: int | Iterable[str] | None) -> bool:
    if got is None:
        return False
    want = expected(q)
    if isinstance(want, int):
        return isinstance(got, int) and got == want
    return not isinstance(got, int) and frozenset(fold(n) for n in got) == want


async def gold_answer(kb: KnowledgeBase, search: dict[str, Any], node: int | None, threshold: float) -> Any:
    """What a gold search returns: the count, or the distinct names at path position ``node``."""
    results = await kb.triplet_search(search, k=GOLD_K, threshold=threshold)
    if results.count is not None:
        return results.count
    assert node is not None
    names: list[str] = []
    for hit in results:
        path = hit.path or ((hit.subject,) if hit.object is None else (hit.subject, hit.object))
        if node < len(path):
            name = str(getattr(path[node], "name", path[node].search_text()))
            if name not in names:
                names.append(name)
    return names


def build_program(kb: KnowledgeBase, lm: LexicalLM, *, k: int, threshold: float) -> Program:
    """The demo's program shape, with an answer model that lists entities and a number."""
    inputs = Input(data_model=Query, name="question")
    facts = KnowledgeRetriever(
        knowledge_base=kb, language_model=lm, k=k, threshold=threshold, max_hops=2, name="retriever"
    )(inputs)
    answer = Generator(data_model=Answer, language_model=lm, return_inputs=True, name="answerer")(facts)
    return Program(inputs=inputs, outputs=answer, name="kgqa", description="Country questions over the KGQA graph.")


async def run_gold(kb: KnowledgeBase, questions: Sequence[dict[str, Any]], thresholds: Sequence[float]) -> list[dict]:
    out = []
    for q in questions:
        row: dict[str, Any] = {"id": q["id"], "gold": {}}
        for t in thresholds:
            try:
                got = await gold_answer(kb, q["gold_search"], q["answer_node"], t)
                row["gold"][str(t)] = {"exact": is_exact(q, got), "got": got if isinstance(got, int) else got[:20]}
            except Exception as exc:  # a search the planner refuses counts as wrong, with its reason
                row["gold"][str(t)] = {"exact": False, "error": f"{type(exc).__name__}: {exc}"}
            if q["type"] == "symmetric":
                alt = await gold_answer(kb, q["symmetric_search"], q["answer_node"], t)
                row.setdefault("no_flag", {})[str(t)] = is_exact(q, alt)
        out.append(row)
    return out


async def run_e2e(kb: KnowledgeBase, questions: Sequence[dict[str, Any]], *, k: int, threshold: float) -> list[dict]:
    lm = LexicalLM(knowledge_base=kb)
    program = build_program(kb, lm, k=k, threshold=threshold)
    out = []
    for q in questions:
        t0 = time.perf_counter()
        try:
            result = await program(Query(query=q["question"]))
            got: Any = result.number if q["answer"]["kind"] == "count" else list(result.entities)
            row = {"exact": is_exact(q, got), "got": got if isinstance(got, int | None) else got[:20]}
            row["search"] = result.search
        except Exception as exc:
            row = {"exact": False, "error": f"{type(exc).__name__}: {exc}"}
        row["ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out.append({"id": q["id"], "e2e": row})
    return out


async def run_linking(kb: KnowledgeBase, questions: Sequence[dict[str, Any]]) -> list[dict]:
    out = []
    for q in questions:
        v = q.get("variant")
        if not v:
            continue
        hits = await kb.similarity_search(v["label"], v["text"], k=5)
        names = [str(getattr(h.entity, "name", h.entity.search_text())) for h in hits]
        rank = names.index(v["target"]) + 1 if v["target"] in names else None
        out.append({"id": q["id"], "kind": v["kind"], "rank": rank, "top": names})
    return out


def _pct(hits: int, n: int) -> str:
    return f"{100 * hits / n:.0f}% ({hits}/{n})" if n else "—"


def summarize(
    questions: Sequence[dict[str, Any]],
    gold: Sequence[dict[str, Any]],
    e2e: Sequence[dict[str, Any]] | None,
    linking: Sequence[dict[str, Any]],
    thresholds: Sequence[float],
) -> dict[str, Any]:
    """Counts per type (and per variant kind): exact / expressible / total."""
    by_id = {q["id"]: q for q in questions}
    summary: dict[str, Any] = {
        "gold": {},
        "no_flag": {},
        "e2e": {},
        "e2e_variant": {},
        "gold_variant": {},
        "linking": {},
    }
    for t in thresholds:
        key = str(t)
        table: dict[str, dict[str, int]] = defaultdict(lambda: {"exact": 0, "expressible": 0, "total": 0})
        vtable: dict[str, dict[str, int]] = defaultdict(lambda: {"exact": 0, "expressible": 0, "total": 0})
        flag: dict[str, int] = {"exact": 0, "total": 0}
        for row in gold:
            q = by_id[row["id"]]
            cells = [table[q["type"]], table["all"]] + ([vtable[q["subtype"]]] if q["type"] == "variant" else [])
            for cell in cells:
                cell["total"] += 1
                r = row["gold"][key]
                if r is not None:
                    cell["expressible"] += 1
                    cell["exact"] += int(r["exact"])
            if "no_flag" in row:
                flag["total"] += 1
                flag["exact"] += int(row["no_flag"][key])
        summary["gold"][key] = dict(table)
        summary["gold_variant"][key] = dict(vtable)
        summary["no_flag"][key] = flag
    if e2e is not None:
        etable: dict[str, dict[str, int]] = defaultdict(lambda: {"exact": 0, "total": 0})
        evtable: dict[str, dict[str, int]] = defaultdict(lambda: {"exact": 0, "total": 0})
        for row in e2e:
            q = by_id[row["id"]]
            cells = [etable[q["type"]], etable["all"]] + ([evtable[q["subtype"]]] if q["type"] == "variant" else [])
            for cell in cells:
                cell["total"] += 1
                cell["exact"] += int(row["e2e"]["exact"])
        summary["e2e"] = dict(etable)
        summary["e2e_variant"] = dict(evtable)
    ltable: dict[str, dict[str, int]] = defaultdict(lambda: {"hits1": 0, "hits5": 0, "total": 0})
    for row in linking:
        for cell in (ltable[row["kind"]], ltable["all"]):
            cell["total"] += 1
            cell["hits1"] += int(row["rank"] == 1)
            cell["hits5"] += int(row["rank"] is not None)
    summary["linking"] = dict(ltable)
    return summary


def markdown(summary: dict[str, Any], backend: str, thresholds: Sequence[float], e2e_threshold: float) -> str:
    """The result tables: by type, by variant kind, and linking."""
    lines = [f"### KGQA on `{backend}`", ""]
    head = ["type", "questions"] + [f"gold @{t}" for t in thresholds] + (["LexicalLM e2e"] if summary["e2e"] else [])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for qtype in (*TYPES, "all"):
        total = summary["gold"][str(thresholds[0])].get(qtype, {}).get("total", 0)
        if not total:
            continue
        cells = [qtype if qtype != "all" else "**all**", str(total)]
        for t in thresholds:
            c = summary["gold"][str(t)][qtype]
            if c["expressible"] == 0:
                cells.append("n/e")
            else:
                note = "" if c["expressible"] == c["total"] else f" ({c['total'] - c['expressible']} n/e)"
                cells.append(_pct(c["exact"], c["expressible"]) + note)
        if summary["e2e"]:
            c = summary["e2e"].get(qtype, {"exact": 0, "total": 0})
            cells.append(_pct(c["exact"], c["total"]))
        lines.append("| " + " | ".join(cells) + " |")
    flag = summary["no_flag"][str(thresholds[0])]
    if flag["total"]:
        lines += [
            "",
            "symmetric questions searched without `bidirectional` (what `symmetric=True` must fix): "
            + ", ".join(f"@{t}: {_pct(summary['no_flag'][str(t)]['exact'], flag['total'])}" for t in thresholds),
        ]
    if summary["gold_variant"][str(thresholds[0])]:
        head = ["variant kind", "questions"] + [f"gold @{t}" for t in thresholds]
        head += (["LexicalLM e2e"] if summary["e2e"] else []) + ["linking hits@1", "linking hits@5"]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for kind in (*VARIANT_KINDS, "all"):
            link = summary["linking"].get(kind)
            if not link:
                continue
            if kind == "all":
                gold_cells = [summary["gold"][str(t)]["variant"] for t in thresholds]
            else:
                gold_cells = [summary["gold_variant"][str(t)][kind] for t in thresholds]
            cells = [kind if kind != "all" else "**all**", str(link["total"])]
            cells += [_pct(c["exact"], c["expressible"]) for c in gold_cells]
            if summary["e2e"]:
                c = (
                    summary["e2e"]["variant"]
                    if kind == "all"
                    else summary["e2e_variant"].get(kind, {"exact": 0, "total": 0})
                )
                cells.append(_pct(c["exact"], c["total"]))
            cells += [_pct(link["hits1"], link["total"]), _pct(link["hits5"], link["total"])]
            lines.append("| " + " | ".join(cells) + " |")
    e2e_note = f"; e2e: LexicalLM, k={E2E_K}, threshold {e2e_threshold}, max_hops 2" if summary["e2e"] else ""
    lines += ["", f"gold: `kb.triplet_search(gold, k={GOLD_K}, threshold=t)`, exact answer set{e2e_note}."]
    return "\n".join(lines)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def refusal(counts: Mapping[str, int], uri: str) -> str | None:
    """Why the benchmark must not load into a store that holds ``counts`` as it is (None: it is empty)."""
    nodes, relations = counts.get("nodes", 0), counts.get("relations", 0)
    if not nodes and not relations:
        return None
    return (
        f"{uri} already holds {nodes} nodes and {relations} relations: the questions would be scored against "
        "that graph plus the benchmark's. Pass --clear to empty it first (never on a database you need), or "
        "--reuse to run on it as it is (after an earlier load of this benchmark)."
    )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    questions = load_questions(args.questions, args.limit, args.types.split(",") if args.types else TYPES)
    if args.backend == "neo4j":
        uri = os.environ.get("NEO4J_URI")
        if not uri:
            raise SystemExit("--backend neo4j needs NEO4J_URI (and NEO4J_USER / NEO4J_PASSWORD).")
        kb = countries_knowledge_base(uri)
    else:
        kb = countries_knowledge_base("memory://")
    t0 = time.perf_counter()
    if args.clear:
        clear = getattr(kb.store, "clear", None)
        if clear is None:
            raise SystemExit(f"{kb.uri} cannot be cleared.")
        await kb.ensure_ready()
        await clear()
    elif not args.reuse and (why := refusal(await kb.counts(), kb.uri)) is not None:
        await kb.aclose()
        raise SystemExit(why)
    await load_countries(kb)
    loaded = time.perf_counter() - t0
    counts = await kb.counts()
    print(
        f"{kb.uri}: {counts.get('Country', 0)} countries, {counts.get('City', 0)} cities, "
        f"{counts.get('Province', 0)} provinces, {counts.get('relations', 0)} relations, loaded in {loaded:.1f}s; "
        f"{len(questions)} questions",
        file=sys.stderr,
    )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    gold = await run_gold(kb, questions, args.thresholds)
    timings["gold_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    linking = await run_linking(kb, questions)
    timings["linking_s"] = time.perf_counter() - t0
    e2e = None
    if not args.skip_e2e:
        t0 = time.perf_counter()
        e2e = await run_e2e(kb, questions, k=E2E_K, threshold=args.e2e_threshold)
        timings["e2e_s"] = time.perf_counter() - t0
    await kb.aclose()
    summary = summarize(questions, gold, e2e, linking, args.thresholds)
    print(markdown(summary, args.backend, args.thresholds, args.e2e_threshold))
    print(", ".join(f"{k} {v:.1f}" for k, v in timings.items()), file=sys.stderr)
    per_question: dict[str, dict[str, Any]] = {
        q["id"]: {"type": q["type"], "question": q["question"]} for q in questions
    }
    for rows in (gold, e2e or [], linking):
        for row in rows:
            per_question[row["id"]].update({k: v for k, v in row.items() if k != "id"})
    return {
        "backend": args.backend,
        "uri": kb.uri,
        "thresholds": args.thresholds,
        "e2e_threshold": args.e2e_threshold,
        "python": platform.python_version(),
        "counts": counts,
        "timings": timings,
        "summary": summary,
        "questions": per_question,
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--backend", choices=("memory", "neo4j"), default="memory")
    p.add_argument("--limit", type=int, default=None, help="the first N questions of each type")
    p.add_argument("--types", default="", help="comma-separated question types (default: all)")
    p.add_argument("--json", type=Path, default=None, help="write the summary and per-question results here")
    p.add_argument("--thresholds", type=_floats, default=[0.7, 0.9], help="gold-search thresholds (0.7,0.9)")
    p.add_argument("--e2e-threshold", type=float, default=0.7, help="the retriever's threshold (0.7)")
    p.add_argument("--skip-e2e", action="store_true", help="skip the LexicalLM end-to-end run")
    p.add_argument("--clear", action="store_true", help="empty the store before loading (neo4j)")
    p.add_argument("--reuse", action="store_true", help="load into a store that already holds a graph (neo4j)")
    p.add_argument("--questions", type=Path, default=QUESTIONS)
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if args.clear and args.reuse:
        p.error("give --clear or --reuse, not both")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    if args.json is not None:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
