"""``kag demo``: answer geography questions over the bundled world graph, offline."""

from __future__ import annotations

import argparse

from kag.server.specs import check_kb_uri

__all__ = ["demo_command"]


def demo_command(args: argparse.Namespace) -> int:
    """Run ``kag demo`` (synchronous: the demo runs its own event loop)."""
    from kag.demo import main as demo_main

    return int(demo_main(args.questions, kb_uri=check_kb_uri(args.kb)))
