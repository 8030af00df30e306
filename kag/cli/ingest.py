"""``kag ingest``: load files, folders, URLs and text into a knowledge base, and extract facts (``--extract``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from kag.cli.service import counts_line, open_service, prepare, print_json
from kag.cli.train import read_labelled_passages
from kag.errors import UsageError
from kag.rag.loaders import Source

__all__ = ["ingest_command"]


async def ingest_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag ingest``; 1 if a source could not be loaded."""
    sources = [_as_source(s) for s in args.sources]
    if not sources and not args.text and args.example is None:
        raise UsageError("nothing to ingest: give SOURCE paths/URLs, --text or --example.")
    if (args.examples is not None or args.nearest is not None) and not args.extract:
        raise UsageError("--examples and --nearest are for --extract: add --extract, or leave them out.")
    if args.nearest is not None and args.examples is None:
        raise UsageError("--nearest chooses among --examples: give --examples FILE too.")
    if args.engine != "ray" and (args.address is not None or args.workers is not None):
        raise UsageError("--address and --workers are for --engine ray: add --engine ray, or leave them out.")
    if args.engine == "ray" and (not args.extract or not sources or args.text):
        raise UsageError("--engine ray extracts facts from files, folders or URLs: give SOURCE paths and --extract.")
    labelled = read_labelled_passages(Path(args.examples)) if args.examples is not None else []
    service = open_service(args, chunk_size=args.chunk_size)
    engine = None
    try:
        await prepare(service, args, err)
        report: dict[str, Any] = {"kb": service.kb.uri}
        if args.engine == "ray":
            from kag.engines.ray import RayIngest

            engine = await RayIngest(
                service.knowledge,
                str(service.lm_spec),
                workers=args.workers or 2,
                address=args.address,
                examples=labelled,
                nearest=args.nearest,
                stream=err,
            ).run(sources)
            report.update(passages=engine.passages, extraction=engine.extraction(), engine=engine.engine())
            report["counts"] = await service.counts()
            saved = service.persist()
            if saved:
                report["saved"] = saved
        elif sources or args.text:
            if args.extract and service.lm_spec.kind == "lexical":
                print(
                    "note: the lexical model cannot extract facts from text; with --extract use "
                    "--lm local --examples FILE (the packaged model, offline, shown labelled passages), "
                    "--lm openai:MODEL or --lm ollama:MODEL.",
                    file=err,
                )
            progress = _progress_printer(err) if err.isatty() else None
            report.update(
                await service.ingest(
                    texts=args.text,
                    sources=sources,
                    extract=args.extract,
                    extraction_examples=labelled,
                    nearest=args.nearest,
                    progress=progress,
                )
            )
        else:
            report["counts"] = await service.counts()
            saved = service.persist()
            if saved:
                report["saved"] = saved
    finally:
        await service.aclose()
    errors = report.get("passages", {}).get("errors", [])
    if args.json:
        print_json(report, out)
    else:
        if errors:
            written = report.get("passages", {}).get("documents", 0)
            print(
                f"ingest into {report['kb']} failed for {len(errors)} source(s); {written} document(s) written",
                file=out,
            )
        else:
            print(f"ingested into {report['kb']}", file=out)
        if "passages" in report:
            p = report["passages"]
            print(
                f"  passages  : {p['documents']} document(s), {p['chunks']} chunk(s), "
                f"{p['mentions']} mention link(s), {p['skipped']} unchanged",
                file=out,
            )
        if "extraction" in report:
            x = report["extraction"]
            print(
                f"  extraction: {x['chunks']} chunk(s) with {x['model']}: {x['entities']} entities, "
                f"{x['relations']} relations, {x['merged']} merged, {len(x['unresolved'])} unresolved, "
                f"{len(x['failed_chunks'])} failed",
                file=out,
            )
            kinds: dict[str, int] = {}
            for item in x["unresolved"]:
                kinds[item.get("kind") or "other"] = kinds.get(item.get("kind") or "other", 0) + 1
            why = {
                "no_entity": "an end matched no entity: name it in full in the chunk, or add the entity first",
                "no_shared_sentence": "no sentence names both ends: state the relation in one sentence",
                "unstated_name": "an end the chunk does not write: check the labelled passages' names",
                "same_entity": "the same entity on both sides",
                "reading_disagrees": "the sentence writes the relation's words between other names",
                "invalid": "the relation's model refused it",
            }
            for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"    not written: {count} ({kind}) {why.get(kind, '')}".rstrip(), file=out)
            for c in x.get("chunk_reports", [])[:10]:
                refused = ", ".join(f"{n} by {g}" for g, n in sorted(c["refused"].items())) or "none"
                print(
                    f"    chunk {c['chunk_id'][:12]}: {c['proposed']} proposed, refused {refused}, "
                    f"{c['resolved']} resolved, {c['written']} written, {c['seconds']:.1f} s"
                    + (f", failed: {c['error'][:80]}" if c.get("error") else ""),
                    file=out,
                )
            for item in x["unresolved"][:10]:
                print(f"    unresolved {item['label']}: {item['reason']}", file=out)
        if engine is not None:
            print("\n".join(engine.lines()), file=out)
        print(f"  counts    : {counts_line(report['counts'])}", file=out)
        if report.get("saved"):
            print(f"  saved     : {report['saved']}", file=out)
        elif service.kb.uri == "memory://":
            print("  note      : memory:// is not persisted; use --kb memory://path/kb.json", file=out)
    for item in errors:
        print(f"error: could not load {item['source']}: {item['error']}", file=err)
    return 1 if errors else 0


def _as_source(text: str) -> Source:
    if "://" in text:
        return text  # a URL: the loader checks the scheme and the address
    path = Path(text).expanduser()
    if not path.exists():
        raise UsageError(f"source not found: {text}")
    return path


def _progress_printer(err: TextIO) -> Callable[[int, int], None]:
    """A one-line progress display for a terminal (rewritten in place with a carriage return)."""

    def show(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\rindexing: {done}/{total} document(s)", end=end, file=err, flush=True)

    return show
