"""``kag train``: fit a saved program on labelled questions and write its trained variables.

``kag train program.json --data questions.jsonl --out variables.json`` loads the program
(``Program.save`` output), opens its knowledge base (``--kb``, or the one the program was
saved with; ``--example`` loads a bundled dataset first), fits it and writes the variables
(``Program.load_variables`` reads them back). Each data line is ``{"x": {...}, "y": {...}}``
(``input``/``output`` are accepted too); a bad line is reported with its number.

An extraction program (one whose output is a ``KnowledgeExtractor``'s ``ExtractionReport``) trains
on labelled passages, the same JSONL as ``kag ingest --extract --examples``: each ``x`` a passage's
``text``, each ``y`` its ``entities`` and ``relations``. The reward is ``relation_f1``, the labelled
passages are the optimizer's teacher (:class:`~kag.programs.extractor.LabelledPassages`), so the
optimizer chooses which of them each chunk is shown, and nothing is written to the knowledge base.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from kag.errors import ConfigError, UsageError
from kag.programs.extractor import ExtractionReport, LabelledPassages, training_data
from kag.programs.program import Program
from kag.server.service import Service
from kag.training.optimizers import get_optimizer
from kag.training.rewards import get_reward

__all__ = ["add_train_parser", "read_dataset", "train_command"]

OPTIMIZERS = ("bootstrap_few_shot", "random_few_shot", "knn_few_shot")
REWARDS = ("exact_match", "f1", "relation_f1")


def add_train_parser(sub: Any, kb_options: Any, positive_int: Any, unit: Any) -> None:
    """Declare ``kag train`` on the ``sub`` parsers (the common ``--kb``/``--lm`` options from ``kb_options``)."""
    train = sub.add_parser("train", help="fit a saved program on labelled questions; write its variables")
    train.add_argument("program", help="a program saved with Program.save (JSON)")
    train.add_argument("--data", required=True, metavar="FILE", help='JSONL: one {"x": {...}, "y": {...}} per line')
    train.add_argument("--out", required=True, metavar="FILE", help="where to write the trained variables (JSON)")
    kb_options(train, lm=True, example=True)
    train.set_defaults(lm=None)  # keep the program's own model unless --lm is given
    train.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap_few_shot", help="(default %(default)s)")
    train.add_argument(
        "--reward", choices=REWARDS, default=None, help="(default: relation_f1 for an extraction program, else f1)"
    )
    train.add_argument("--epochs", type=positive_int, default=2, metavar="N", help="(default %(default)s)")
    train.add_argument("--batch-size", type=positive_int, default=16, metavar="N", help="(default %(default)s)")
    train.add_argument("--demos", type=positive_int, default=4, metavar="N", help="demos per module (default 4)")
    train.add_argument("--validation-split", type=unit, default=0.25, metavar="X", help="(default %(default)s)")
    train.add_argument("--seed", type=int, default=0, metavar="N", help="(default %(default)s)")
    train.add_argument("--concurrency", type=positive_int, default=4, metavar="N", help="(default %(default)s)")
    train.add_argument("--json", action="store_true", help="print the history as JSON")


def read_dataset(path: Path) -> tuple[list[Any], list[Any]]:
    """``(x, y)`` from a JSONL file of ``{"x", "y"}`` (or ``{"input", "output"}``) objects."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    x: list[Any] = []
    y: list[Any] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not valid JSON ({exc.msg}).") from None
        given = row.get("x", row.get("input")) if isinstance(row, dict) else None
        wanted = row.get("y", row.get("output")) if isinstance(row, dict) else None
        if not isinstance(given, dict) or not isinstance(wanted, dict):
            raise UsageError(f'{path}:{number}: expected an object {{"x": {{...}}, "y": {{...}}}}.')
        x.append(given)
        y.append(wanted)
    if not x:
        raise UsageError(f"{path} holds no examples.")
    return x, y


def read_labelled_passages(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(passage, extraction)`` pairs for ``kag ingest --extract --examples``: the same JSONL as
    ``--data``, each ``x`` holding the passage's ``text`` and each ``y`` its entities and relations."""
    x, y = read_dataset(path)
    pairs = []
    for number, (given, wanted) in enumerate(zip(x, y, strict=True), 1):
        if not isinstance(given.get("text"), str):
            raise UsageError(f'{path}: example {number}: "x" needs a "text" string (the labelled passage).')
        pairs.append((given["text"], wanted))
    return pairs


async def train_command(
    args: argparse.Namespace, out: TextIO, err: TextIO, service: Service, prepare: Callable[..., Awaitable[None]]
) -> int:
    """Run ``kag train`` on an opened service (closed at the end); ``prepare`` loads ``--example`` first."""
    try:
        await prepare(service, args, err)
        return await _train(args, out, err, service)
    finally:
        await service.aclose()


async def _train(args: argparse.Namespace, out: TextIO, err: TextIO, service: Service) -> int:
    x, y = read_dataset(Path(args.data))
    try:
        program = Program.load(
            args.program,
            knowledge_base=service.kb,
            language_model=service.language_model if args.lm is not None else None,
        )
    except ConfigError as exc:
        raise UsageError(f"cannot load the program {args.program!r}: {exc}") from None
    optimizer = get_optimizer(args.optimizer)
    for attribute in ("max_demos", "k"):
        if hasattr(optimizer, attribute):
            setattr(optimizer, attribute, args.demos)
    optimizer.seed = args.seed
    reward = args.reward or "f1"
    if _extracts(program):
        pairs = _labelled_pairs(Path(args.data), x, y)
        x, y = training_data(pairs)
        reward = args.reward or "relation_f1"
        # the labelled passages make the training runs: the optimizer chooses which each chunk is shown
        optimizer.teacher = LabelledPassages(pairs)
    program.compile(reward=get_reward(reward), optimizer=optimizer, concurrency=args.concurrency)
    split = args.validation_split if 0.0 < args.validation_split < 1.0 else None
    history = await program.fit(
        x,
        y,
        epochs=args.epochs,
        batch_size=args.batch_size,
        validation_split=split,
        seed=args.seed,
        verbose=1 if err.isatty() else 0,
    )
    program.save_variables(args.out)
    if args.json:
        print(json.dumps(history.to_dict(), indent=2), file=out)
        return 0
    for epoch, logs in zip(history.epoch, _rows(history.history), strict=True):
        shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items())
        print(f"epoch {epoch + 1}: {shown}", file=out)
    print(f"wrote {args.out}", file=out)
    return 0


def _extracts(program: Program) -> bool:
    """Whether ``program``'s output is an extraction report (a ``KnowledgeExtractor`` program)."""
    try:
        return issubclass(program.output_model(), ExtractionReport)
    except Exception:  # a program with several outputs: fit refuses it with its own message
        return False


def _labelled_pairs(path: Path, x: list[Any], y: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The data lines of an extraction program as ``(passage, extraction)`` pairs; a ``y`` may give
    the labelled ``relations`` (and ``entities``) or the report's ``extracted`` list."""
    pairs = []
    for number, (given, wanted) in enumerate(zip(x, y, strict=True), 1):
        relations = wanted.get("relations", wanted.get("extracted"))
        if not isinstance(given.get("text"), str) or not isinstance(relations, list):
            raise UsageError(
                f'{path}: example {number}: an extraction program trains on labelled passages: {{"x": {{"text": '
                '...}, "y": {"entities": [...], "relations": [...]}}.'
            )
        pairs.append((given["text"], {"entities": list(wanted.get("entities", [])), "relations": relations}))
    return pairs


def _rows(history: dict[str, list[Any]]) -> list[dict[str, Any]]:
    count = max((len(v) for v in history.values()), default=0)
    return [{k: v[i] for k, v in history.items() if i < len(v)} for i in range(count)]
