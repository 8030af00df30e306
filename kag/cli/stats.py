"""``kag stats``: the node and relation counts of a knowledge base."""

from __future__ import annotations

import argparse
from typing import TextIO

from kag.cli.service import open_service, prepare, print_json

__all__ = ["stats_command"]


async def stats_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag stats``."""
    service = open_service(args)
    try:
        await prepare(service, args, err)
        health = await service.health()
    finally:
        await service.aclose()
    if args.json:
        print_json(health, out)
        return 0
    print(f"{health['uri']} ({health['backend']})", file=out)
    width = max((len(k) for k in health["counts"]), default=5)
    for key, value in health["counts"].items():
        print(f"  {key:<{width}}  {value}", file=out)
    return 0
