"""The ``kag`` command line: ``kag demo | ingest | query | search | stats | schema | train | serve``.

Every command that works on a knowledge base takes ``--kb URI`` (``memory://``,
``memory://path/kb.json``, ``neo4j://host:7687``; default ``$KAG_KB`` or
``memory://``) and ``--schema SPEC`` (``package.module:ATTR`` or
``package.module`` with ``ENTITY_MODELS``/``RELATION_MODELS``; default the
world-geography models of :mod:`kag.examples.world`). Neo4j credentials come
from ``NEO4J_USERNAME`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``. ``--lm`` is
``lexical`` (offline, default), ``local`` (the packaged GGUF model), ``llama:PATH.gguf``,
``openai:MODEL[@BASE_URL]`` (key in ``$OPENAI_API_KEY``) or ``ollama:MODEL[@BASE_URL]``.

Exit codes: 0 ok; 1 runtime failure (``error: <message>`` on stderr, no
traceback); 2 usage error (bad arguments, ``--schema``, ``--kb``, label).
A ``memory://path.json`` knowledge base is saved after ``ingest``.

``kag serve`` requires ``Authorization: Bearer <key>`` when API keys are given
(``--api-keys FILE`` or ``$KAG_API_KEYS``, entries ``KEY:SCOPES``); a ``--host``
that is not loopback without keys exits 2 unless ``--insecure-no-auth``. Each
request is logged on ``kag.server.access`` (``--no-access-log``); ``GET /metrics``
needs the ``metrics`` extra (``--no-metrics``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from kag.cli.train import add_train_parser, read_labelled_passages, train_command
from kag.datamodels.text import pattern_text
from kag.errors import ConfigError, KagError, SchemaError, UsageError
from kag.files import atomic_write_text
from kag.rag.loaders import Source
from kag.server.service import Service
from kag.server.specs import EXAMPLE_SCHEMAS, backend_name, check_kb_uri, default_kb_uri, public_uri

__all__ = ["build_parser", "main"]

_DESCRIPTION = "kag: typed knowledge graphs, triplet search compiled to Cypher, RAG on the same graph."


# --------------------------------------------------------------------------- parser


def _kb_options(parser: argparse.ArgumentParser, *, lm: bool = False, example: bool = True) -> None:
    parser.add_argument(
        "--kb",
        metavar="URI",
        default=None,
        help="knowledge base: memory://, memory://path/kb.json or neo4j://host:7687 (default: $KAG_KB or memory://)",
    )
    parser.add_argument(
        "--namespace",
        metavar="NAME",
        default=os.environ.get("KAG_NAMESPACE") or None,
        help="namespace (tenant) to read and write (default: $KAG_NAMESPACE or 'default'); "
        "kag serve: the one used by requests that name none",
    )
    parser.add_argument(
        "--schema",
        metavar="SPEC",
        default=None,
        help="models: package.module:ATTR (list of Entity/Relation classes) or package.module "
        "with ENTITY_MODELS/RELATION_MODELS (default: kag.examples.world)",
    )
    if example:
        parser.add_argument(
            "--example",
            choices=sorted(EXAMPLE_SCHEMAS),
            default=None,
            help="load a bundled example dataset first (its schema is the default --schema)",
        )
    if lm:
        parser.add_argument(
            "--lm",
            metavar="SPEC",
            default="lexical",
            help="language model: lexical (offline, default), local (the packaged model, offline; extra local), "
            "llama:PATH.gguf (a GGUF file), openai:MODEL[@BASE_URL] ($OPENAI_API_KEY), ollama:MODEL[@BASE_URL]",
        )


def _checked(convert: Callable[[str], Any], ok: Callable[[Any], bool], expected: str, bad: str) -> Any:
    """An argparse ``type=``: convert the text, then check the value (messages say what is expected)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{bad}, got {value}")
        return value

    return parse


_positive_int = _checked(int, lambda v: v >= 1, "an integer", "expected an integer >= 1")
_port = _checked(int, lambda v: 0 <= v <= 65535, "a port number", "port must be in 0..65535")
_unit = _checked(float, lambda v: 0.0 <= v <= 1.0, "a number", "expected a number in [0, 1]")
_seconds = _checked(float, lambda v: v > 0, "seconds", "expected a positive number of seconds")


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('expected a JSON object such as \'{"lang": "en"}\'')
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kag``."""
    from kag.version import __version__

    parser = argparse.ArgumentParser(prog="kag", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"kag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser("demo", help="answer geography questions over the bundled world graph (offline)")
    demo.add_argument("questions", nargs="*", metavar="QUESTION", help="questions (default: the demo's)")
    demo.add_argument(
        "--kb", default="memory://", help="store the world graph is loaded into (default memory://; or neo4j://...)"
    )

    ingest = sub.add_parser("ingest", help="load files, directories or URLs into a knowledge base")
    ingest.add_argument("sources", nargs="*", metavar="SOURCE", help="files, directories or http(s) URLs")
    _kb_options(ingest, lm=True)
    ingest.add_argument("--text", action="append", default=[], metavar="TEXT", help="inline text (repeatable)")
    ingest.add_argument(
        "--extract", action="store_true", help="extract entities and relations from the chunks with --lm (a real model)"
    )
    ingest.add_argument(
        "--examples",
        metavar="FILE",
        help='labelled passages for --extract: JSONL of {"x": {"text": ...}, "y": {"entities": [...], '
        '"relations": [...]}} (the format of kag train --data)',
    )
    ingest.add_argument(
        "--nearest",
        type=_positive_int,
        metavar="K",
        help="with --examples: show each chunk only the K labelled passages written most like it",
    )
    ingest.add_argument(
        "--chunk-size", type=_positive_int, default=1000, metavar="N", help="characters per chunk (default 1000)"
    )
    ingest.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="with --extract: where the model runs: local (this process, default) or ray (a Ray Data job; "
        "pip install 'graph-kag[ray]')",
    )
    ingest.add_argument(
        "--address",
        metavar="ADDR",
        default=None,
        help="with --engine ray: the Ray cluster, auto or ray://HOST:PORT (default: a local Ray on this machine)",
    )
    ingest.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="with --engine ray: extraction workers, one model each (default 2)",
    )
    ingest.add_argument("--json", action="store_true", help="print the report as JSON")

    query = sub.add_parser("query", help="answer a question: Input -> KnowledgeRetriever -> Generator")
    query.add_argument("question")
    _kb_options(query, lm=True)
    query.add_argument("--k", type=_positive_int, default=10, metavar="N", help="facts to retrieve (default 10)")
    query.add_argument(
        "--threshold",
        type=_unit,
        default=None,
        metavar="X",
        help="similarity threshold in [0, 1] (default 0.9 lexical, 0.7 otherwise)",
    )
    query.add_argument("--max-hops", type=_positive_int, default=2, metavar="N", help="longest chain (default 2)")
    query.add_argument(
        "--mode",
        choices=("graph", "rag"),
        default="graph",
        help="graph: triplet-search program (default); rag: answer from facts + passages with citations",
    )
    query.add_argument("--json", action="store_true", help="print the result as JSON")

    search = sub.add_parser("search", help="search facts and passages (or entities of one --label)")
    search.add_argument("text")
    _kb_options(search)
    search.add_argument("--label", default=None, help="search entities of this label by similarity ('*': any)")
    search.add_argument("--k", type=_positive_int, default=5, metavar="N", help="results per kind (default 5)")
    search.add_argument(
        "--mode",
        choices=("hybrid", "vector", "keyword"),
        default=None,
        help="passage ranking (default: the knowledge's, hybrid)",
    )
    search.add_argument(
        "--where",
        type=_json_object,
        default=None,
        metavar="JSON",
        help='metadata filter on passages, e.g. \'{"source": "notes.md"}\'',
    )
    search.add_argument("--json", action="store_true", help="print the hits as JSON")

    stats = sub.add_parser("stats", help="node and relation counts")
    _kb_options(stats)
    stats.add_argument("--json", action="store_true", help="print the counts as JSON")

    adopt = sub.add_parser(
        "adopt",
        help="make an existing Neo4j graph's nodes of the --schema models searchable in place (ids, embeddings)",
    )
    _kb_options(adopt, example=False)
    adopt.add_argument("--batch-size", type=int, default=500, help="nodes per transaction (default 500)")
    adopt.add_argument("--json", action="store_true", help="print the report as JSON")

    schema = sub.add_parser(
        "schema", help="print Entity/Relation models (Python) of an existing Neo4j graph's labels and types"
    )
    schema.add_argument(
        "--from",
        dest="source",
        metavar="URI",
        default=None,
        help="the Neo4j graph: neo4j://host:7687 or bolt://... (default: $NEO4J_URI; "
        "credentials from NEO4J_USERNAME / NEO4J_PASSWORD / NEO4J_DATABASE)",
    )
    schema.add_argument(
        "--sample",
        type=_checked(int, lambda n: n >= 1, "a positive int", "expected a positive int"),
        default=None,
        metavar="N",
        help="read at most N relationships of each type to find endpoint labels (default: all)",
    )
    schema.add_argument("--output", "-o", metavar="FILE", default=None, help="write the module to FILE")

    add_train_parser(sub, _kb_options, _positive_int, _unit)

    serve = sub.add_parser("serve", help="serve the HTTP API and MCP (or MCP over stdio)")
    _kb_options(serve, lm=True)
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument(
        "--max-body",
        type=_positive_int,
        default=1024 * 1024,
        metavar="BYTES",
        help="largest request body (default 1 MiB)",
    )
    serve.add_argument(
        "--max-header",
        type=_positive_int,
        default=16 * 1024,
        metavar="BYTES",
        help="largest request head (default 16 KiB)",
    )
    serve.add_argument(
        "--timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="time allowed to receive a request (default 30)",
    )
    serve.add_argument(
        "--max-connections",
        type=_positive_int,
        default=1024,
        metavar="N",
        help="open connections at most; idle ones are closed first, then busy clients get 503 (default 1024)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=15.0,
        metavar="SECONDS",
        help="close a keep-alive connection idle this long (default 15)",
    )
    serve.add_argument("--name", default="knowledge", help="knowledge name; the MCP tool is search_<name>")
    serve.add_argument("--description", default="", help="what the knowledge holds (shown to models)")
    serve.add_argument(
        "--source-root",
        action="append",
        default=[],
        metavar="DIR",
        help="let POST /ingest read files under DIR (default: URLs only)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="browser Origin allowed besides localhost (repeatable)",
    )
    serve.add_argument("--no-mcp", action="store_true", help="do not serve MCP at /mcp")
    serve.add_argument(
        "--mcp-stdio",
        action="store_true",
        help="speak MCP (newline-delimited JSON-RPC) on stdin/stdout instead of HTTP",
    )
    serve.add_argument(
        "--api-keys",
        metavar="FILE",
        default=None,
        help="require API keys (Authorization: Bearer KEY) from FILE, lines KEY:SCOPES with scopes "
        "read, ingest, admin (default: $KAG_API_KEYS; none: no authentication)",
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow serving a non-loopback --host without API keys (anyone who reaches it can read and write)",
    )
    serve.add_argument("--no-metrics", action="store_true", help="do not serve GET /metrics")
    serve.add_argument(
        "--max-namespaces",
        type=int,
        default=64,
        metavar="N",
        help="namespaces (tenants) served at most, each opened on first use (default 64)",
    )
    serve.add_argument(
        "--no-access-log", action="store_true", help="do not log each request (logger kag.server.access)"
    )
    serve.add_argument(
        "--write-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each Neo4j write transaction, retries included (default $KAG_NEO4J_WRITE_TIMEOUT, else 30)",
    )
    return parser


# --------------------------------------------------------------------------- helpers


def _service(args: argparse.Namespace, **options: Any) -> Service:
    schema = args.schema
    example = getattr(args, "example", None)
    if schema is None and example is not None:
        schema = EXAMPLE_SCHEMAS[example]
    return Service.open(
        args.kb if args.kb is not None else default_kb_uri(),
        schema,
        lm=getattr(args, "lm", None),
        namespace=getattr(args, "namespace", None),
        **options,
    )


async def _prepare(service: Service, args: argparse.Namespace, err: TextIO) -> None:
    example = getattr(args, "example", None)
    if example is not None:
        result = await service.load_example(example)
        print(f"loaded example {example!r}: {result['entities']} entities, {result['relations']} relations", file=err)


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _counts_line(counts: dict[str, int]) -> str:
    labels = ", ".join(f"{k} {v}" for k, v in counts.items() if k not in ("nodes", "relations"))
    line = f"{counts.get('nodes', 0)} nodes, {counts.get('relations', 0)} relations"
    return line + (f" ({labels})" if labels else "")


def _print_json(data: Any, out: TextIO) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=out)


def _as_source(text: str) -> Source:
    if "://" in text:
        return text  # a URL: the loader checks the scheme and the address
    path = Path(text).expanduser()
    if not path.exists():
        raise UsageError(f"source not found: {text}")
    return path


async def _check_schema_fits(service: Service) -> None:
    """A store written with other models than ``--schema``'s is a usage error, as an unknown ``--label`` is."""
    try:
        await service.check_schema_fits()
    except SchemaError as exc:
        raise UsageError(str(exc)) from None


def _require_text(value: str, name: str) -> None:
    if not value.strip():
        raise UsageError(f"{name} must not be empty.")


def _progress_printer(err: TextIO) -> Callable[[int, int], None]:
    """A one-line progress display for a terminal (rewritten in place with a carriage return)."""

    def show(done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\rindexing: {done}/{total} document(s)", end=end, file=err, flush=True)

    return show


# --------------------------------------------------------------------------- commands


async def _ingest(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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
    service = _service(args, chunk_size=args.chunk_size)
    engine = None
    try:
        await _prepare(service, args, err)
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
        _print_json(report, out)
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
        print(f"  counts    : {_counts_line(report['counts'])}", file=out)
        if report.get("saved"):
            print(f"  saved     : {report['saved']}", file=out)
        elif service.kb.uri == "memory://":
            print("  note      : memory:// is not persisted; use --kb memory://path/kb.json", file=out)
    for item in errors:
        print(f"error: could not load {item['source']}: {item['error']}", file=err)
    return 1 if errors else 0


async def _query(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _require_text(args.question, "QUESTION")
    service = _service(args)
    try:
        await _prepare(service, args, err)
        await _check_schema_fits(service)
        result = await service.ask(
            args.question, k=args.k, threshold=args.threshold, max_hops=args.max_hops, mode=args.mode
        )
    finally:
        await service.aclose()
    if args.json:
        _print_json(result, out)
        return 0
    if result["mode"] == "rag":
        for i, hit in enumerate(result["hits"], 1):
            print(f"[{i}] {hit['kind']} {hit['score']:.2f} {_one_line(hit['text'])}", file=out)
        print(f"answer : {result['answer']}", file=out)
        cited = ", ".join(c["label"] for c in result["citations"]) or "(none)"
        print(f"cited  : {cited}", file=out)
        return 0
    print(f"search : {pattern_text(result['search'])}", file=out)
    print("cypher :", file=out)
    for line in (result["cypher"] or "").splitlines():
        print(f"   {line}", file=out)
    if result["count"] is not None:
        print(f"count  : {result['count']}", file=out)
    else:
        facts = result["facts"]
        print("facts  :" + ("" if facts else " (none)"), file=out)
        for fact in facts:
            print(f"   {fact['text']}  (score {fact['score']:.2f})", file=out)
    print(f"answer : {result['answer']}", file=out)
    return 0


async def _search(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _require_text(args.text, "TEXT")
    if args.label is not None and args.mode is not None:
        raise UsageError("--mode ranks passages; it cannot be combined with --label (an entity search).")
    service = _service(args)
    try:
        if args.label is not None and args.where is not None:
            raise UsageError("--where filters passages; it cannot be combined with --label (an entity search).")
        if args.label is not None:
            try:
                service.check_label(args.label)
            except KagError as exc:
                raise UsageError(f"--label: {exc}") from None
        await _prepare(service, args, err)
        if args.label is None:
            await _check_schema_fits(service)
        hits = await service.search(args.text, k=args.k, label=args.label, where=args.where, mode=args.mode)
    finally:
        await service.aclose()
    if args.json:
        _print_json(hits, out)
        return 0
    if not hits:
        print("no results", file=out)
    for i, hit in enumerate(hits, 1):
        where = "" if hit["kind"] != "passage" else f" {hit['source']}:"
        print(f"{i:>3}. [{hit['kind']} {hit['score']:.3f}]{where} {_one_line(hit['text'])}", file=out)
    return 0


async def _stats(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    service = _service(args)
    try:
        await _prepare(service, args, err)
        health = await service.health()
    finally:
        await service.aclose()
    if args.json:
        _print_json(health, out)
        return 0
    print(f"{health['uri']} ({health['backend']})", file=out)
    width = max((len(k) for k in health["counts"]), default=5)
    for key, value in health["counts"].items():
        print(f"  {key:<{width}}  {value}", file=out)
    return 0


async def _adopt(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kag.knowledge.adopt import embed_in_place

    service = _service(args)
    try:
        if backend_name(service.kb) != "neo4j":
            raise UsageError("kag adopt works on a Neo4j graph: give --kb neo4j://host:7687 (or set NEO4J_URI).")
        try:
            report = await embed_in_place(service.kb, batch_size=args.batch_size)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    finally:
        await service.aclose()
    if args.json:
        _print_json(report.to_dict(), out)
        return 0
    for kind, counts in (("entities", report.entities), ("relations", report.relations)):
        for label, n in counts.items():
            print(f"adopted {n} {label} {kind}", file=out)
    for label, element_id, reason in report.skipped:
        print(f"skipped {label} {element_id}: {reason}", file=err)
    return 0


async def _schema(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kag.graph.introspect import introspect

    source = args.source or os.environ.get("NEO4J_URI")
    if not source:
        raise UsageError("give --from neo4j://host:7687 (or set NEO4J_URI).")
    if not source.startswith(("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")):
        raise UsageError(f"--from must be a neo4j:// or bolt:// URI, got {public_uri(source)!r}.")
    description = await introspect(source, sample=args.sample)
    text = description.source()
    if args.output:
        atomic_write_text(Path(args.output), text)
        labels, types = len(description.labels), len(description.relation_types)
        print(f"wrote {labels} entity and {types} relation models to {args.output}", file=err)
    else:
        out.write(text)
    return 0


def _stop_event() -> asyncio.Event:
    """An event set by SIGINT/SIGTERM (where the loop supports signal handlers)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kag.server.app import create_app
    from kag.server.auth import APIKeys, check_bind
    from kag.server.http import HTTPServer
    from kag.server.mcp import MCPServer
    from kag.server.wire import LOCAL_HOSTS

    # keys and the bind are checked before the backend is opened: a refusal costs nothing
    keys = APIKeys.from_file(args.api_keys) if args.api_keys is not None else APIKeys.from_env()
    if not args.mcp_stdio:
        warning = check_bind(args.host, keys, insecure_no_auth=args.insecure_no_auth)
        if warning:
            print(f"kag: {warning}", file=err, flush=True)
    logging.getLogger("kag.server.access").setLevel(logging.WARNING if args.no_access_log else logging.INFO)
    service = _service(
        args,
        name=args.name,
        description=args.description,
        source_roots=args.source_root,
        write_timeout=args.write_timeout,
    )
    app = None
    try:
        await _prepare(service, args, err)
        await service.knowledge.ready()
        load = getattr(service.language_model, "load", None)
        if load is not None:  # a local model file that is missing or corrupt fails now, not at the first request
            await load()
        stop = _stop_event()
        if args.mcp_stdio:
            print(f"kag: MCP on stdio for {service.kb.uri} (tool search_{args.name})", file=err)
            stdio = asyncio.create_task(MCPServer(service, max_message_bytes=args.max_body).serve_stdio())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({stdio, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for task in (stdio, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            return 0
        local = args.host in LOCAL_HOSTS or args.host.startswith("127.")
        app = create_app(
            service,
            mcp=not args.no_mcp,
            allowed_origins=args.allow_origin,
            allowed_hosts=LOCAL_HOSTS | {args.host} if local else None,  # public bind: no Host check
            api_keys=keys,
            metrics=not args.no_metrics,
            max_namespaces=args.max_namespaces,
        )
        server = HTTPServer(
            app,
            args.host,
            args.port,
            max_body_bytes=args.max_body,
            max_header_bytes=args.max_header,
            request_timeout=args.timeout,
            keep_alive_timeout=args.idle_timeout,
            max_connections=args.max_connections,
        )
        await server.start()
        mcp = "" if args.no_mcp else f", MCP at {server.url}/mcp"
        auth = f", API keys: {len(keys)}" if keys is not None else ", no authentication"
        print(f"kag serving {public_uri(service.kb.uri)} on {server.url}{mcp}{auth}", file=out, flush=True)
        print(f"port {server.port}", file=out, flush=True)
        serving = asyncio.create_task(server.serve_forever())
        try:
            await stop.wait()
        finally:
            print("kag: shutting down", file=err, flush=True)
            await server.close()
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        return 0
    finally:
        if app is not None:
            await app.tenants.aclose()  # every namespace's service, this one last
        else:
            await service.aclose()


_COMMANDS = {
    "train": lambda args, out, err: train_command(args, out, err, _service(args), _prepare),
    "ingest": _ingest,
    "query": _query,
    "search": _search,
    "stats": _stats,
    "schema": _schema,
    "adopt": _adopt,
    "serve": _serve,
}


def _run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "demo":
        from kag.demo import main as demo_main

        return int(demo_main(args.questions, kb_uri=check_kb_uri(args.kb)))
    return asyncio.run(_COMMANDS[args.command](args, out, err))


def _off_the_running_loop(call: Callable[[], int]) -> int:
    """``call()`` here; inside a running event loop (a notebook cell), on a worker thread, which has none."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kag-cli") as pool:
        return pool.submit(call).result()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kag`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    It works inside a running event loop too (a notebook cell): the command then runs on a worker thread.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # the Neo4j driver logs every retry; the final error is reported once below
        logging.getLogger("neo4j").setLevel(logging.CRITICAL)
    out, err = sys.stdout, sys.stderr
    try:
        return _off_the_running_loop(lambda: _run_command(args, out, err))
    except UsageError as exc:
        print(f"kag {args.command}: error: {exc}", file=err)
        return 2
    except KagError as exc:
        print(f"error: {exc}", file=err)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
