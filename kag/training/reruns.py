"""Reruns of a failed training example with one module's output replaced (``fit``'s exploration).

A module that :class:`~kag.training.explore.FindsFromAnswer` offers outputs found from the label
(checked against the graph before any model runs); one that :class:`~kag.training.explore.Varies`
offers variants of what it wrote. The first replacement whose whole run reaches the threshold is
kept; what the searches cost and the aliases they need go into the
:class:`~kag.training.explore.ExploreReport`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kag.errors import TrainingError
from kag.training.explore import ExploreReport, FindsFromAnswer, SearchBudget, Varies
from kag.training.optimizers import Outcome
from kag.training.trace import TraceEntry

__all__ = ["Forced", "check_aliases", "rerun_failed"]

log = logging.getLogger(__name__)

Forced = Callable[[Outcome, dict[str, dict[str, Any]]], Awaitable[Outcome]]
"""The example's whole run with some modules' outputs forced (``{module name: output}``)."""


async def rerun_failed(
    outcome: Outcome,
    modules: Mapping[str, Any],
    forced: Forced,
    threshold: float,
    budget: SearchBudget | None,
    report: ExploreReport,
) -> Outcome | None:
    """The first run of a failed example that reaches ``threshold`` with one module's output
    replaced: (with a ``budget``) by an output found from the label itself, checked against the
    graph before any model runs, then by a variant of what it wrote. ``None``: none does. Costs
    and learned aliases go into ``report``."""
    for entry in outcome.traces:
        module = modules.get(entry.module)
        if budget is not None and isinstance(module, FindsFromAnswer):
            found = await _from_answer(module, entry, outcome, forced, threshold, budget, report)
            if found is not None:
                return found
        if isinstance(module, Varies):
            for variant in module.output_variants(entry.output):
                found = await forced(outcome, {entry.module: variant})
                if found.reward >= threshold:
                    return found
    return None


async def _from_answer(
    module: FindsFromAnswer,
    entry: TraceEntry,
    outcome: Outcome,
    forced: Forced,
    threshold: float,
    budget: SearchBudget,
    report: ExploreReport,
) -> Outcome | None:
    """The simplest output found from the label whose whole run reaches ``threshold`` (at most
    ``budget.confirm`` runs); the aliases it needs go into ``report``."""
    search = await module.outputs_for_answer(entry.input, outcome.y_true, budget)
    report.searches += search.searches
    report.exhausted += search.exhausted is not None
    for output, learned in zip(search.outputs[: budget.confirm], search.learned, strict=False):
        found = await forced(outcome, {entry.module: output})
        if found.reward >= threshold:
            report.from_answer += 1
            aliases = learned.get("aliases") or {}
            if aliases:
                report.aliases.setdefault(entry.module, {}).update(aliases)
            return found
    return None


async def check_aliases(aliases: dict[str, dict[str, dict[str, str]]], modules: Mapping[str, Any]) -> None:
    """Drop the learned aliases a module cannot keep (a name another entity already has): a
    search that needed one is still a demo, the alias is not learned."""
    for name, found in aliases.items():
        module = modules.get(name)
        if not isinstance(module, FindsFromAnswer):
            continue
        for key in list(found):
            try:
                await module.check_aliases({key: found[key]})
            except TrainingError as exc:
                log.warning("%s: not learned: %s", name, exc)
                del found[key]
