"""``kag search``: facts and passages like a text, or entities of one ``--label``."""

from __future__ import annotations

import argparse
from typing import TextIO

from kag.cli.service import check_schema_fits, one_line, open_service, prepare, print_json, require_text
from kag.errors import KagError, UsageError

__all__ = ["search_command"]


async def search_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag search``."""
    require_text(args.text, "TEXT")
    if args.label is not None and args.mode is not None:
        raise UsageError("--mode ranks passages; it cannot be combined with --label (an entity search).")
    service = open_service(args)
    try:
        if args.label is not None and args.where is not None:
            raise UsageError("--where filters passages; it cannot be combined with --label (an entity search).")
        if args.label is not None:
            try:
                service.check_label(args.label)
            except KagError as exc:
                raise UsageError(f"--label: {exc}") from None
        await prepare(service, args, err)
        if args.label is None:
            await check_schema_fits(service)
        hits = await service.search(args.text, k=args.k, label=args.label, where=args.where, mode=args.mode)
    finally:
        await service.aclose()
    if args.json:
        print_json(hits, out)
        return 0
    if not hits:
        print("no results", file=out)
    for i, hit in enumerate(hits, 1):
        where = "" if hit["kind"] != "passage" else f" {hit['source']}:"
        print(f"{i:>3}. [{hit['kind']} {hit['score']:.3f}]{where} {one_line(hit['text'])}", file=out)
    return 0
