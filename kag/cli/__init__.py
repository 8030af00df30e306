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

The parser is :mod:`kag.cli.parser`; each command runs in the module named for it
(:mod:`kag.cli.ingest`, :mod:`kag.cli.query`, ... :mod:`kag.cli.train`), on the service
:mod:`kag.cli.service` opens. This module dispatches and turns errors into exit codes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from kag.cli.adopt import adopt_command
from kag.cli.demo import demo_command
from kag.cli.ingest import ingest_command
from kag.cli.parser import build_parser
from kag.cli.query import query_command
from kag.cli.schema import schema_command
from kag.cli.search import search_command
from kag.cli.serve import serve_command
from kag.cli.service import open_service, prepare
from kag.cli.stats import stats_command
from kag.cli.train import train_command
from kag.errors import KagError, UsageError

__all__ = ["build_parser", "main"]

_Command = Callable[[argparse.Namespace, TextIO, TextIO], Coroutine[Any, Any, int]]

# each command lives in the module named for it; the parser that declares them in kag.cli.parser
_COMMANDS: dict[str, _Command] = {
    "train": lambda args, out, err: train_command(args, out, err, open_service(args), prepare),
    "ingest": ingest_command,
    "query": query_command,
    "search": search_command,
    "stats": stats_command,
    "schema": schema_command,
    "adopt": adopt_command,
    "serve": serve_command,
}


def _run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "demo":
        return demo_command(args)
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
