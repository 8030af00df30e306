"""What exploration asks of a trainable module, and what it reports.

When a training example fails, the trainer explores: it reruns the program with one module's
output replaced (:func:`kag.training.trace.forcing`), and a run that earns the reward becomes a
demo. Two sources of replacements, each a protocol a module may implement:

* :class:`Varies`: ``output_variants(output)``, the outputs one edit away from what the model
  wrote (a search read the other way, negated, counted...);
* :class:`FindsFromAnswer`: ``outputs_for_answer(input, label, budget)``, outputs found from the
  label itself (the searches a schema allows, run on the graph, kept where their results hold the
  answer: :mod:`kag.programs.search_space`), with what they need learned (an entity's other name).

Both are bounded: :class:`SearchBudget` caps the searches and the seconds per example, and what
ran out is counted in :class:`ExploreReport`, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kag.errors import ConfigError
from kag.validation import check_int, check_number

__all__ = ["AnswerSearch", "ExploreReport", "FindsFromAnswer", "SearchBudget", "Varies"]


@dataclass(frozen=True)
class SearchBudget:
    """The most one failed example may cost when outputs are searched from its answer.

    Args:
        max_searches: searches run on the knowledge base (each a query, no model call). The
            budget that binds: the same count finds the same searches on every backend.
        deadline: seconds of searching, a safety net only: a slow server (Neo4j on a busy machine
            answers a search in 0.1-0.2 s, the memory store in a few ms) must not find less than
            a fast one, or training would keep other demos on each.
        confirm: candidates confirmed by a whole program run (the simplest first).
    """

    max_searches: int = 400
    deadline: float = 60.0
    confirm: int = 3

    def __post_init__(self) -> None:
        check_int(self.max_searches, name="max_searches")
        check_number(self.deadline, name="deadline (seconds)", minimum=0, maximum=3600, exclusive_minimum=True)
        check_int(self.confirm, name="confirm")

    def get_config(self) -> dict[str, Any]:
        """The budget as JSON."""
        return {"max_searches": self.max_searches, "deadline": self.deadline, "confirm": self.confirm}

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> SearchBudget:
        """A budget from :meth:`get_config` output (``None``: the defaults)."""
        if config is None:
            return cls()
        if not isinstance(config, Mapping) or set(config) - {"max_searches", "deadline", "confirm"}:
            raise ConfigError(f"a search budget is {{max_searches, deadline, confirm}}, got {config!r}.")
        return cls(**dict(config))


@dataclass
class AnswerSearch:
    """Outputs found from one example's label, simplest first, and what each needs learned.

    ``learned[i]``: what the module must keep for ``outputs[i]`` to work beyond this example
    (``{"aliases": {key: {"label", "name"}}}``), merged into its variable when the output is kept.
    """

    outputs: list[dict[str, Any]] = field(default_factory=list)
    learned: list[dict[str, Any]] = field(default_factory=list)
    searches: int = 0
    seconds: float = 0.0
    exhausted: str | None = None


@dataclass
class ExploreReport:
    """One epoch's exploration: the runs that passed and what the search cost.

    ``aliases``: per module, the other names the kept runs needed.
    """

    found: list[Any] = field(default_factory=list)
    explored: int = 0
    searches: int = 0
    exhausted: int = 0
    from_answer: int = 0
    aliases: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    def logs(self) -> dict[str, Any]:
        """What goes into the epoch's logs."""
        return {
            "explored": self.explored,
            "found": len(self.found),
            "found_from_answer": self.from_answer,
            "searches": self.searches,
            "search_budget_spent": self.exhausted,
        }


@runtime_checkable
class Varies(Protocol):
    """A module whose output can be edited into variants that still run."""

    def output_variants(self, output: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Outputs one edit away from ``output`` that can run here."""
        ...


@runtime_checkable
class FindsFromAnswer(Protocol):
    """A module that can search for the output that would earn a label's reward."""

    async def outputs_for_answer(
        self, inputs: Mapping[str, Any], label: Mapping[str, Any], budget: SearchBudget
    ) -> AnswerSearch:
        """Outputs for ``inputs`` whose effect holds ``label``'s answer, simplest first."""
        ...

    async def check_aliases(self, aliases: Mapping[str, Mapping[str, str]]) -> None:
        """Raise :class:`~kag.errors.TrainingError` for learned aliases the module cannot keep."""
        ...
