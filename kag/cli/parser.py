"""The argument parser of ``kag``: every command's arguments, and the ``type=`` checks they share.

Commands are run by the modules named for them (:mod:`kag.cli.ingest`, :mod:`kag.cli.query`, ...);
``kag train`` declares its own arguments in :mod:`kag.cli.train`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from kag.cli.train import add_train_parser
from kag.server.specs import EXAMPLE_SCHEMAS

__all__ = ["build_parser"]

_DESCRIPTION = "kag: typed knowledge graphs, triplet search compiled to Cypher, RAG on the same graph."


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
