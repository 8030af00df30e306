"""``kag schema``: Entity/Relation models (Python source) of an existing Neo4j graph's labels and types."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from kag.errors import UsageError
from kag.files import atomic_write_text
from kag.server.specs import public_uri

__all__ = ["schema_command"]


async def schema_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag schema``: print the models, or write them to ``--output``."""
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
