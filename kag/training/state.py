"""``TrainingState``: what ``compile`` sets on a program, held in one place.

A program's trainer reads its reward, optimizer, metrics and concurrency from here; nothing of
it is shared between programs (no class-level defaults). ``restore_error`` keeps why saved
compile settings could not be rebuilt when a program was loaded, so ``fit`` can say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kag.training.optimizers import Optimizer
from kag.training.rewards import Reward

__all__ = ["DEFAULT_CONCURRENCY", "TrainingState"]

DEFAULT_CONCURRENCY = 4


@dataclass
class TrainingState:
    """The compile settings of one program (all empty until ``compile``)."""

    reward: Reward | None = None
    optimizer: Optimizer | None = None
    metrics: list[Reward] = field(default_factory=list)
    concurrency: int = DEFAULT_CONCURRENCY
    restore_error: str | None = None

    @property
    def compiled(self) -> bool:
        """Whether ``compile`` set a reward."""
        return self.reward is not None
