"""What a program must offer the :class:`~kag.training.trainer.Trainer`, as typed protocols.

``Program`` inherits the trainer and provides these members; the trainer reaches the program
only through them, so the contract between the two is written down here rather than found by
reading ``fit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from kag.training.variables import Variable

__all__ = ["Teachable", "TrainableModule", "TrainableProgram"]


@runtime_checkable
class TrainableModule(Protocol):
    """A module that holds a :class:`Variable` (instructions and demos) an optimizer may change."""

    name: str
    variable: Variable | None

    def set_variable(self, variable: Variable) -> None:
        """Take ``variable``'s instructions and demos (checking that they fit this module)."""
        ...


@runtime_checkable
class Teachable(Protocol):
    """A module whose model a teacher may replace during training runs (``Optimizer(teacher=...)``)."""

    language_model: Any


@runtime_checkable
class TrainableProgram(Protocol):
    """The members a program gives the trainer (``Program`` has them all)."""

    name: str

    async def call(self, inputs: Any) -> Any:
        """Run the program on one input: its output model (a list for several outputs)."""
        ...

    def trainable_modules(self) -> Mapping[str, TrainableModule]:
        """``{name: module}`` of the modules holding a variable, in call order."""
        ...

    def output_model(self) -> type[BaseModel]:
        """The data model of the program's single output (what labels must fit)."""
        ...

    def module_info(self, name: str) -> dict[str, Any]:
        """A trainable module's type, description and effective instructions."""
        ...

    def _bind(self, inputs: Any) -> Any:
        """Validate one input into the program's input model(s); a ``KagError`` where it does not fit."""
        ...
