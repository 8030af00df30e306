"""``kag adopt``: make an existing Neo4j graph's nodes of the ``--schema`` models searchable in place."""

from __future__ import annotations

import argparse
from typing import TextIO

from kag.cli.service import open_service, print_json
from kag.errors import ConfigError, UsageError
from kag.server.specs import backend_name

__all__ = ["adopt_command"]


async def adopt_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag adopt`` (ids and embeddings written on the nodes)."""
    from kag.knowledge.adopt import embed_in_place

    service = open_service(args)
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
        print_json(report.to_dict(), out)
        return 0
    for kind, counts in (("entities", report.entities), ("relations", report.relations)):
        for label, n in counts.items():
            print(f"adopted {n} {label} {kind}", file=out)
    for label, element_id, reason in report.skipped:
        print(f"skipped {label} {element_id}: {reason}", file=err)
    return 0
