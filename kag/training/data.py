"""The checks ``fit``, ``evaluate`` and ``predict`` run on their data before any model call.

Inputs must be a non-empty list that fits the program's input; labels one non-empty dict (or
model) per input, of fields the program's output has, each value of that field's type. A
mistake is a :class:`~kag.errors.TrainingError` that names the example and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import BaseModel

from kag.errors import KagError, TrainingError

__all__ = ["FitData", "as_json", "check_inputs", "check_labels"]


def as_json(value: Any) -> Any:
    """``value`` as plain JSON (a model dumped, anything else through ``json`` with ``str`` fallback)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


def check_inputs(x: Any, what: str, bind: Callable[[Any], Any] | None) -> list[Any]:
    """``x`` as a list, each item checked by ``bind`` (the program's input binding)."""
    if isinstance(x, str | bytes | Mapping | BaseModel) or not isinstance(x, Sequence):
        raise TrainingError(f"{what}: x must be a list of inputs (models or dicts), got {type(x).__name__}.")
    if not x:
        raise TrainingError(f"{what}: the dataset is empty; give at least one input.")
    checked = list(x)
    if bind is not None:
        for i, item in enumerate(checked):
            try:
                bind(item)
            except KagError as exc:
                raise TrainingError(f"{what}: x[{i}] does not fit the program's input: {exc}") from exc
    return checked


def check_labels(y: Any, n: int, what: str, model: type[BaseModel]) -> list[dict[str, Any]]:
    """``y`` as one JSON dict per input, each field one of ``model``'s and of its type."""
    if y is None:
        raise TrainingError(f"{what} needs labels: pass y=[expected output, ...] beside x.")
    if isinstance(y, str | bytes | Mapping | BaseModel) or not isinstance(y, Sequence):
        raise TrainingError(f"{what}: y must be a list of expected outputs, got {type(y).__name__}.")
    if len(y) != n:
        raise TrainingError(f"{what}: x has {n} inputs but y has {len(y)} labels; give one label per input.")
    fields = model.model_fields
    checked: list[dict[str, Any]] = []
    for i, label in enumerate(y):
        if isinstance(label, BaseModel):
            label = label.model_dump(mode="json", exclude_unset=True)
        if not isinstance(label, Mapping) or not label:
            raise TrainingError(
                f"{what}: y[{i}] must be a non-empty dict (or model) of {model.__name__} fields, got {label!r}."
            )
        row: dict[str, Any] = {}
        for key, value in label.items():
            if key not in fields:
                raise TrainingError(
                    f"{what}: y[{i}] has field {key!r}, which the program's output {model.__name__} does not "
                    f"have; its fields are {list(fields)}."
                )
            try:
                pydantic.TypeAdapter(fields[key].annotation or Any).validate_python(value)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]["msg"] if exc.errors() else str(exc)
                raise TrainingError(
                    f"{what}: y[{i}] field {key!r} does not fit {model.__name__}.{key}: {first}."
                ) from exc
            row[str(key)] = as_json(value)
        checked.append(row)
    return checked


@dataclass
class FitData:
    """The checked data of one ``fit``: training examples and the held-out validation examples."""

    x: list[Any]
    y: list[dict[str, Any]]
    val_x: list[Any]
    val_y: list[dict[str, Any]]

    @property
    def has_validation(self) -> bool:
        """Whether there are validation examples (``val_*`` logs, candidates scored on them)."""
        return bool(self.val_x)

    @property
    def scoring(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """The examples candidates are scored on: the validation data, else the training data."""
        return (self.val_x, self.val_y) if self.val_x else (self.x, self.y)
