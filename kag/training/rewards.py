"""Rewards: how good one prediction is, as a number in [0, 1].

A reward is called as ``await reward(y_true, y_pred)`` with the expected output
(a dict of the fields the label gives) and the program's prediction (a dict, or
``None`` when the program failed on that input). Field masks choose what is
compared: ``in_mask`` keeps only those fields, ``out_mask`` drops those; by
default the fields present in ``y_true`` are compared.

Strings are compared the way kag matches names (case, accents and spacing
folded); lists of strings are compared as sets, since answers name entities in
no particular order. Any ``(y_true, y_pred) -> float`` callable, sync or async,
is a reward too (:func:`get_reward` wraps it); what it returns is checked:
NaN, a value outside [0, 1] or a non-number raises :class:`~kag.errors.RewardError`.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from kag.errors import ConfigError, RewardError
from kag.text import normalize_text
from kag.training.serialization import deserialize, function_path, import_function, serialize

__all__ = [
    "AnswerSetF1",
    "CosineSimilarity",
    "ExactMatch",
    "FunctionReward",
    "LMAsJudge",
    "RelationF1",
    "Reward",
    "check_reward_value",
    "get_reward",
    "serialize_reward",
]

RewardFn = Callable[[Mapping[str, Any], Mapping[str, Any] | None], float | Awaitable[float]]


def check_reward_value(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1], or a :class:`RewardError` that names the reward."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, int | float):
        raise RewardError(f"reward {name!r} returned {type(value).__name__} {value!r}; return a number in [0, 1].")
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise RewardError(f"reward {name!r} returned {value!r}; a reward must be a number in [0, 1] (not NaN).")
    return float(value)


def _fold(value: Any) -> Any:
    """A comparable form: folded strings, lists of scalars as sorted sets, dicts field by field."""
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, Mapping):
        return {str(k): _fold(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_fold(v) for v in value]
        if all(isinstance(v, str | int | float | bool) or v is None for v in items):
            return sorted({json.dumps(v) for v in items})
        return items
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class Reward:
    """Base class: subclasses implement :meth:`compute` on the masked dicts.

    Args:
        name: the name logged in the history (default: the snake-case class name).
        in_mask: compare only these fields. out_mask: never compare these fields.
    """

    default_name: ClassVar[str] = "reward"

    def __init__(
        self, *, name: str | None = None, in_mask: Sequence[str] | None = None, out_mask: Sequence[str] | None = None
    ) -> None:
        self.name = name or self.default_name
        self.in_mask = list(in_mask) if in_mask is not None else None
        self.out_mask = list(out_mask) if out_mask is not None else None

    def fields(self, y_true: Mapping[str, Any]) -> list[str]:
        """The fields compared for this label."""
        names = list(self.in_mask) if self.in_mask is not None else list(y_true)
        dropped = set(self.out_mask or ())
        return [n for n in names if n not in dropped]

    async def __call__(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any] | None) -> float:
        """The checked reward of one prediction (``0.0`` when there is no prediction)."""
        if y_pred is None:
            return 0.0
        value = self.compute(y_true, y_pred)
        if inspect.isawaitable(value):
            value = await value
        return check_reward_value(value, self.name)

    def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float | Awaitable[float]:
        """The reward of a prediction (``y_pred`` is never ``None`` here)."""
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments as JSON."""
        return {"name": self.name, "in_mask": self.in_mask, "out_mask": self.out_mask}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Reward:
        """Rebuild from :meth:`get_config`; ``runtime`` holds objects a config cannot (an embedder, a model)."""
        return cls(**dict(config), **runtime)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class ExactMatch(Reward):
    """1.0 when every compared field equals the label (strings folded, string lists as sets), else 0.0."""

    default_name = "exact_match"

    def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float:
        return float(all(_fold(y_true.get(f)) == _fold(y_pred.get(f)) for f in self.fields(y_true)))


def _set_f1(want: Any, got: Any) -> float:
    if not isinstance(want, list | tuple) or not isinstance(got, list | tuple):
        return float(_fold(want) == _fold(got))
    expected = {json.dumps(_fold(v)) for v in want}
    found = {json.dumps(_fold(v)) for v in got}
    if not expected and not found:
        return 1.0
    overlap = len(expected & found)
    if not overlap:
        return 0.0
    precision, recall = overlap / len(found), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


class AnswerSetF1(Reward):
    """F1 of the predicted names against the labelled names, per list field, averaged over fields.

    Two empty lists score 1.0 (the program rightly found nothing); a scalar field counts 1.0 when equal.
    """

    default_name = "f1"

    def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float:
        names = self.fields(y_true)
        if not names:
            return 1.0
        return sum(_set_f1(y_true.get(f), y_pred.get(f)) for f in names) / len(names)


class CosineSimilarity(Reward):
    """Cosine similarity of the embedded fields (as JSON text), clipped to [0, 1].

    Args:
        embedder: any kag embedder (``async embed(texts) -> matrix``), e.g. the knowledge base's.
    """

    default_name = "cosine_similarity"

    def __init__(self, embedder: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not callable(getattr(embedder, "embed", None)):
            raise ConfigError("CosineSimilarity needs embedder=... (an object with async embed(texts)).")
        self.embedder = embedder

    async def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float:
        names = self.fields(y_true)
        texts = [
            json.dumps({f: side.get(f) for f in names}, ensure_ascii=False, sort_keys=True, default=str)
            for side in (y_true, y_pred)
        ]
        vectors = np.asarray(await self.embedder.embed(texts), dtype=np.float64)
        norms = float(np.linalg.norm(vectors[0]) * np.linalg.norm(vectors[1]))
        if norms == 0.0:
            return 0.0
        return min(1.0, max(0.0, float(vectors[0] @ vectors[1]) / norms))


_JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "One sentence: why this score.", "maxLength": 300},
        "score": {"type": "number", "minimum": 0, "maximum": 1, "description": "1 right, 0 wrong, between: partly."},
    },
    "required": ["reason", "score"],
    "additionalProperties": False,
}

_JUDGE_INSTRUCTIONS = (
    "You grade a program's answer against the expected answer. Compare only the meaning of the "
    "fields shown. Reply with a short reason and a score between 0 (wrong) and 1 (fully right)."
)


class LMAsJudge(Reward):
    """A language model grades each prediction against the label (a score in [0, 1] and a reason).

    Args:
        language_model: any kag language model; instructions: the grader's system message.
    """

    default_name = "lm_as_judge"

    def __init__(self, language_model: Any = None, *, instructions: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not callable(getattr(language_model, "generate", None)):
            raise ConfigError("LMAsJudge needs language_model=... (a kag language model).")
        self.language_model = language_model
        self.instructions = instructions or _JUDGE_INSTRUCTIONS

    async def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float:
        names = self.fields(y_true)
        shown = {
            "expected": {f: y_true.get(f) for f in names},
            "answer": {f: y_pred.get(f) for f in names},
        }
        messages = [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": json.dumps(shown, ensure_ascii=False, sort_keys=True, default=str)},
        ]
        verdict = await self.language_model.generate(messages, _JUDGE_SCHEMA, schema_name="judgement")
        return float(verdict["score"])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "instructions": self.instructions}


class FunctionReward(Reward):
    """A reward from any ``(y_true, y_pred) -> float`` function (sync or async)."""

    def __init__(self, function: RewardFn | None = None, **kwargs: Any) -> None:
        if not callable(function):
            raise ConfigError("FunctionReward needs function=... (a callable (y_true, y_pred) -> float).")
        kwargs.setdefault("name", getattr(function, "__name__", "reward"))
        super().__init__(**kwargs)
        self.function = function

    def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float | Awaitable[float]:
        names = self.fields(y_true)
        if self.in_mask is None and self.out_mask is None:
            return self.function(y_true, y_pred)
        return self.function({f: y_true.get(f) for f in names}, {f: y_pred.get(f) for f in names})

    def get_config(self) -> dict[str, Any]:
        """Its settings and the function's import path (``None`` for a lambda or a nested function)."""
        return {**super().get_config(), "function": function_path(self.function)}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Reward:
        """Rebuild, importing the saved function unless ``runtime`` gives ``function=``."""
        settings = dict(config)
        path = settings.pop("function", None)
        if "function" not in runtime:
            runtime["function"] = import_function(path, None, f"reward {settings.get('name')!r}")
        return cls(**settings, **runtime)


def _relation_key(item: Any) -> str | None:
    """A relation (``{"label", "subject": {"label", "name"}, "object": {...}}``) as a comparable key."""
    if not isinstance(item, Mapping):
        return None
    subject, obj = item.get("subject"), item.get("object")
    if not isinstance(subject, Mapping) or not isinstance(obj, Mapping):
        return None
    return json.dumps(
        [
            str(item.get("label", "")),
            str(subject.get("label", "")),
            normalize_text(str(subject.get("name", ""))),
            str(obj.get("label", "")),
            normalize_text(str(obj.get("name", ""))),
        ]
    )


class RelationF1(Reward):
    """F1 of extracted relations against the labelled ones (graph extraction).

    Each relation is compared by its label and its ends' labels and names (folded: case, accents
    and spacing aside), as sets: a relation found twice counts once. Compares the ``field`` of both
    sides (default ``extracted``, a ``KnowledgeExtractor``'s :class:`ExtractionReport` field); two
    empty sets score 1.0 (nothing stated, nothing found).
    """

    default_name = "relation_f1"

    def __init__(self, field: str = "extracted", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(field, str) or not field:
            raise ConfigError(f"field must be a field name, got {field!r}.")
        self.field = field

    def compute(self, y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> float:
        want, got = y_true.get(self.field), y_pred.get(self.field)
        if not isinstance(want, list | tuple):
            raise RewardError(f"reward {self.name!r}: the label has no list {self.field!r} of relations.")
        expected = {k for k in map(_relation_key, want) if k is not None}
        found = {k for k in map(_relation_key, got if isinstance(got, list | tuple) else []) if k is not None}
        if not expected and not found:
            return 1.0
        overlap = len(expected & found)
        if not overlap:
            return 0.0
        precision, recall = overlap / len(found), overlap / len(expected)
        return 2 * precision * recall / (precision + recall)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "field": self.field}


_NAMED: dict[str, Callable[[], Reward]] = {
    "exact_match": ExactMatch,
    "accuracy": lambda: ExactMatch(name="accuracy"),
    "f1": AnswerSetF1,
    "answer_set_f1": AnswerSetF1,
    "relation_f1": RelationF1,
}


_CLASSES: dict[str, type[Reward]] = {
    cls.__name__: cls for cls in (ExactMatch, AnswerSetF1, CosineSimilarity, LMAsJudge, FunctionReward, RelationF1)
}


def _build(cls: type[Reward], config: Mapping[str, Any], custom_objects: Mapping[str, Any] | None) -> Reward:
    """``cls`` from its config; a function reward's function may come from ``custom_objects`` by its name."""
    name = config.get("name")
    if issubclass(cls, FunctionReward) and custom_objects and isinstance(name, str) and name in custom_objects:
        settings = {k: v for k, v in config.items() if k != "function"}
        return cls.from_config(settings, function=custom_objects[name])
    return cls.from_config(config)


def serialize_reward(reward: Reward) -> dict[str, Any]:
    """``{"class": ..., "config": ...}`` of a reward (what :func:`get_reward` takes back)."""
    return serialize(reward, _CLASSES)


def get_reward(spec: Any, what: str = "reward", *, custom_objects: Mapping[str, Any] | None = None) -> Reward:
    """A :class:`Reward` from a reward, a name (``"exact_match"``, ``"accuracy"``, ``"f1"``,
    ``"relation_f1"``), a config dict (``{"class": "ExactMatch", "config": {"in_mask": ["answer"]}}``,
    what :func:`serialize_reward` writes) or a callable.

    ``custom_objects`` maps class names, import paths or function rewards' names to the objects a
    config names but cannot import.
    """
    if isinstance(spec, Reward):
        return spec
    if isinstance(spec, str):
        if spec not in _NAMED:
            raise ConfigError(
                f"unknown {what} {spec!r}; use one of {sorted(_NAMED)}, a Reward, a config dict or a function."
            )
        return _NAMED[spec]()
    if isinstance(spec, Mapping):
        return deserialize(
            spec, Reward, _CLASSES, custom_objects, what, lambda cls, config: _build(cls, config, custom_objects)
        )
    if callable(spec):
        return FunctionReward(spec)
    raise ConfigError(
        f"{what} must be a Reward, a name, a config dict or a callable (y_true, y_pred) -> float, got {spec!r}."
    )
