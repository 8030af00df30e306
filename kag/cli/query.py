"""``kag query``: answer a question with the triplet-search program (``--mode graph``) or from facts
and passages with citations (``--mode rag``)."""

from __future__ import annotations

import argparse
from typing import TextIO

from kag.cli.service import check_schema_fits, one_line, open_service, prepare, print_json, require_text
from kag.datamodels.text import pattern_text

__all__ = ["query_command"]


async def query_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kag query``."""
    require_text(args.question, "QUESTION")
    service = open_service(args)
    try:
        await prepare(service, args, err)
        await check_schema_fits(service)
        result = await service.ask(
            args.question, k=args.k, threshold=args.threshold, max_hops=args.max_hops, mode=args.mode
        )
    finally:
        await service.aclose()
    if args.json:
        print_json(result, out)
        return 0
    if result["mode"] == "rag":
        for i, hit in enumerate(result["hits"], 1):
            print(f"[{i}] {hit['kind']} {hit['score']:.2f} {one_line(hit['text'])}", file=out)
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
