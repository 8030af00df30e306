"""Write ``kag/data/kgqa.jsonl``: the KGQA questions as ``kag.datasets.load_kgqa`` ships them.

The packaged file keeps what a user trains and evaluates on (id, type, subtype, question, answer,
gold search); ``tests/datasets`` checks that it matches ``questions.jsonl``. Run after
regenerating the questions::

    .venv/bin/python -m benchmarks.kgqa.export_dataset
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.kgqa.make_questions import OUTPUT as QUESTIONS

PACKAGED = Path(__file__).resolve().parents[2] / "kag" / "data" / "kgqa.jsonl"
KEPT = ("id", "type", "subtype", "question", "answer", "gold_search", "answer_node")


def packaged_rows(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    """The packaged form of every question in ``path``."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{key: row[key] for key in KEPT} for row in rows]


def render(rows: list[dict[str, Any]]) -> str:
    """One compact JSON object per line."""
    return "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)


def main() -> None:
    PACKAGED.write_text(render(packaged_rows()), encoding="utf-8")
    print(f"wrote {PACKAGED} ({PACKAGED.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
