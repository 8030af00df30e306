"""What the commands share: the service ``--kb``/``--schema``/``--lm``/``--namespace`` open, ``--example``
loaded into it, the checks of its schema and of required text, and how results are printed."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from kag.errors import SchemaError, UsageError
from kag.server.service import Service
from kag.server.specs import EXAMPLE_SCHEMAS, default_kb_uri

__all__ = ["check_schema_fits", "counts_line", "one_line", "open_service", "prepare", "print_json", "require_text"]


def open_service(args: argparse.Namespace, **options: Any) -> Service:
    """The service of ``--kb`` (default ``$KAG_KB``), ``--schema`` (or ``--example``'s), ``--lm``, ``--namespace``."""
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


async def prepare(service: Service, args: argparse.Namespace, err: TextIO) -> None:
    """Load ``--example``'s dataset into ``service`` first, if one is named (reported on ``err``)."""
    example = getattr(args, "example", None)
    if example is not None:
        result = await service.load_example(example)
        print(f"loaded example {example!r}: {result['entities']} entities, {result['relations']} relations", file=err)


async def check_schema_fits(service: Service) -> None:
    """A store written with other models than ``--schema``'s is a usage error, as an unknown ``--label`` is."""
    try:
        await service.check_schema_fits()
    except SchemaError as exc:
        raise UsageError(str(exc)) from None


def require_text(value: str, name: str) -> None:
    """A blank positional argument is a usage error naming it."""
    if not value.strip():
        raise UsageError(f"{name} must not be empty.")


def one_line(text: str, limit: int = 160) -> str:
    """``text`` on one line, whitespace collapsed, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def counts_line(counts: dict[str, int]) -> str:
    """``"N nodes, M relations (Label n, ...)"``."""
    labels = ", ".join(f"{k} {v}" for k, v in counts.items() if k not in ("nodes", "relations"))
    line = f"{counts.get('nodes', 0)} nodes, {counts.get('relations', 0)} relations"
    return line + (f" ({labels})" if labels else "")


def print_json(data: Any, out: TextIO) -> None:
    """``data`` as indented JSON on ``out`` (what ``--json`` prints)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=out)
