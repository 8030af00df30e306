"""The trainable state of a module: its instructions and its demos.

Training never changes a model's weights. What a program learns is what each
language-model call is shown: the instructions of its system message and the
worked examples (demos) placed before the question. A :class:`Variable` holds
both for one module, with the reward each demo earned when it was produced, and
``nearest``: when set, the demos are a pool and each call is shown only the
``nearest`` demos most similar to its own input (k-nearest-neighbour few-shot).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kag.errors import ConfigError
from kag.validation import check_int

__all__ = ["FORMAT", "VERSION", "Demo", "TextEmbedder", "Variable"]

FORMAT = "kag-variables"
VERSION = 1


class TextEmbedder(Protocol):
    """What k-nearest demo selection needs from an embedder (kag's ``Embedder`` protocol fits)."""

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def _json_copy(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False, default=str))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be JSON data: {exc}") from exc


@dataclass(frozen=True)
class Demo:
    """One worked example: the module's ``input`` and ``output`` (JSON dicts), and the reward it earned.

    ``reward`` is ``None`` for a demo written by hand (the module's ``examples=``).
    """

    input: dict[str, Any]
    output: dict[str, Any]
    reward: float | None = None

    def get_config(self) -> dict[str, Any]:
        """``{"input", "output", "reward"}`` as JSON."""
        return {"input": self.input, "output": self.output, "reward": self.reward}

    @classmethod
    def from_config(cls, config: Any, where: str = "demo") -> Demo:
        """A demo from :meth:`get_config` output (or an ``[input, output]`` pair)."""
        if isinstance(config, list | tuple) and len(config) == 2:
            config = {"input": config[0], "output": config[1]}
        if not isinstance(config, Mapping):
            raise ConfigError(f"{where} must be an object with 'input' and 'output', got {type(config).__name__}.")
        given_in, given_out = config.get("input"), config.get("output")
        if not isinstance(given_in, Mapping) or not isinstance(given_out, Mapping):
            raise ConfigError(f"{where} needs 'input' and 'output' objects.")
        reward = config.get("reward")
        if reward is not None and (
            isinstance(reward, bool) or not isinstance(reward, int | float) or not 0.0 <= reward <= 1.0
        ):
            raise ConfigError(f"{where} has reward {reward!r}; a reward is a number in [0, 1] or null.")
        return cls(
            _json_copy(dict(given_in), f"{where} input"),
            _json_copy(dict(given_out), f"{where} output"),
            None if reward is None else float(reward),
        )

    @property
    def key(self) -> str:
        """A stable identity of the demo (its input and output as sorted JSON)."""
        return json.dumps([self.input, self.output], sort_keys=True, ensure_ascii=False)


@dataclass
class Variable:
    """The trainable state of one module.

    Attributes:
        instructions: the system message's instructions (``None``: the module's default).
        demos: worked examples, in the order they are shown.
        nearest: ``None`` shows every demo on every call; an integer ``k`` shows each call
            only the ``k`` demos whose input is most similar to its own (the pool is ``demos``).
        trainable: whether optimizers may change this variable.
        aliases: other names learned from labels, ``{name key: {"label": ..., "name": ...}}``: a
            search that quotes the key (a long form, a translation, a former name the graph lacks)
            is run with the entity's name (see ``KnowledgeRetriever``). Never written to the graph.
    """

    instructions: str | list[str] | None = None
    demos: list[Demo] = field(default_factory=list)
    nearest: int | None = None
    trainable: bool = True
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    _pool_key: tuple[int, str] | None = field(default=None, init=False, repr=False, compare=False)
    _pool_vectors: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.nearest is not None:
            check_int(self.nearest, name="nearest (or None)")
        if self.instructions is not None and not isinstance(self.instructions, str | list):
            raise ConfigError("instructions must be a string, a list of strings, or None.")
        self.aliases = check_aliases(self.aliases, "aliases")

    # -- state -----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The variable as JSON: instructions, demos (with rewards), nearest, trainable."""
        instructions = list(self.instructions) if isinstance(self.instructions, list) else self.instructions
        config: dict[str, Any] = {
            "instructions": instructions,
            "demos": [d.get_config() for d in self.demos],
            "nearest": self.nearest,
            "trainable": self.trainable,
        }
        if self.aliases:  # only where some were learned: older files read the same
            config["aliases"] = {key: dict(value) for key, value in sorted(self.aliases.items())}
        return config

    @classmethod
    def from_config(cls, config: Any, where: str = "variable") -> Variable:
        """Rebuild from :meth:`get_config` output; unknown keys are refused."""
        if not isinstance(config, Mapping):
            raise ConfigError(f"{where} must be an object, got {type(config).__name__}.")
        unknown = sorted(set(config) - {"instructions", "demos", "nearest", "trainable", "aliases"})
        if unknown:
            raise ConfigError(f"{where} has unknown key(s) {unknown}.")
        demos = config.get("demos") or []
        if not isinstance(demos, list):
            raise ConfigError(f"{where}.demos must be a list.")
        instructions = config.get("instructions")
        if isinstance(instructions, list) and not all(isinstance(s, str) for s in instructions):
            raise ConfigError(f"{where}.instructions must be a string or a list of strings.")
        return cls(
            instructions=instructions,
            demos=[Demo.from_config(d, f"{where}.demos[{i}]") for i, d in enumerate(demos)],
            nearest=config.get("nearest"),
            trainable=bool(config.get("trainable", True)),
            aliases=check_aliases(config.get("aliases") or {}, f"{where}.aliases"),
        )

    def copy(self) -> Variable:
        """An independent copy (demos are immutable and shared)."""
        return Variable(
            instructions=copy.copy(self.instructions),
            demos=list(self.demos),
            nearest=self.nearest,
            trainable=self.trainable,
            aliases={key: dict(value) for key, value in self.aliases.items()},
        )

    def assign(self, other: Variable) -> None:
        """Take ``other``'s instructions, demos, ``nearest`` and aliases (``trainable`` stays)."""
        self.instructions = copy.copy(other.instructions)
        self.demos = list(other.demos)
        self.nearest = other.nearest
        self.aliases = {key: dict(value) for key, value in other.aliases.items()}
        self._pool_key = None
        self._pool_vectors = None

    # -- what a call is shown ----------------------------------------------------------------
    async def demos_for(
        self,
        text: str,
        embedder: TextEmbedder | None,
        render: Any = None,
        *,
        tiebreak: tuple[str, Any] | None = None,
    ) -> list[Demo]:
        """The demos one call is shown: all of them, or the ``nearest`` most similar to ``text``.

        ``render(demo) -> str`` gives the text a demo is compared by (default: its input as JSON);
        similarity is the cosine of ``embedder``'s vectors. ``tiebreak=(text2, render2)`` ranks
        demos equally similar by ``text`` by a second comparison (a question's skeleton first,
        then its words). The chosen demos come least similar first, so the most similar one is
        shown last, just before the question (on a full tie the earlier demo of the pool counts
        as more similar).
        """
        if self.nearest is None or len(self.demos) <= self.nearest:
            return list(self.demos)
        if embedder is None:
            raise ConfigError("k-nearest demos need an embedder; give the module one (or set nearest=None).")
        key = (id(embedder), json.dumps([d.key for d in self.demos]))
        if self._pool_key != key or self._pool_vectors is None:
            texts = [render(d) if render is not None else json.dumps(d.input, sort_keys=True) for d in self.demos]
            if tiebreak is not None:
                texts += [tiebreak[1](d) for d in self.demos]
            self._pool_vectors = np.asarray(await embedder.embed(texts), dtype=np.float64)
            self._pool_key = key
        n = len(self.demos)
        queries = [text] if tiebreak is None else [text, tiebreak[0]]
        vectors = np.asarray(await embedder.embed(queries), dtype=np.float64)
        scores = [_cosines(self._pool_vectors[i * n : (i + 1) * n], vectors[i]) for i in range(len(queries))]
        second = scores[1] if len(scores) > 1 else np.zeros(n)
        # stable: the highest score first, the earlier demo on a tie
        order = sorted(range(n), key=lambda i: (-_finite(float(scores[0][i])), -_finite(float(second[i])), i))
        # shown most similar last, next to the question: a small model copies the nearest example most
        return [self.demos[i] for i in reversed(order[: self.nearest])]


def check_aliases(aliases: Any, where: str) -> dict[str, dict[str, str]]:
    """``{name key: {"label", "name"}}`` checked: non-empty strings, an alias naming one entity."""
    if not isinstance(aliases, Mapping):
        raise ConfigError(f"{where} must be an object {{alias: {{'label': ..., 'name': ...}}}}, got {aliases!r}.")
    out: dict[str, dict[str, str]] = {}
    for key, value in aliases.items():
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"{where} has an empty or non-string alias {key!r}.")
        if (
            not isinstance(value, Mapping)
            or set(value) != {"label", "name"}
            or not all(isinstance(v, str) and v.strip() for v in value.values())
        ):
            raise ConfigError(
                f"{where}[{key!r}] must be {{'label': <entity label>, 'name': <entity name>}}, got {value!r}."
            )
        out[key] = {"label": str(value["label"]), "name": str(value["name"])}
    return out


def _cosines(pool: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(pool, axis=1) * (np.linalg.norm(query) or 1.0)
    dots = pool @ query
    return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)


def _finite(value: float) -> float:
    return float(value) if math.isfinite(value) else -1.0


def check_variables_document(document: Any, names: Sequence[str], where: str) -> dict[str, Variable]:
    """The ``{module: Variable}`` of a saved variables document, checked against the module ``names``."""
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise ConfigError(f"{where} is not a kag variables file (expected format {FORMAT!r}).")
    if document.get("version") != VERSION:
        raise ConfigError(f"{where} has version {document.get('version')!r}; this kag reads version {VERSION}.")
    variables = document.get("variables")
    if not isinstance(variables, Mapping):
        raise ConfigError(f"{where} has no 'variables' object.")
    unknown = sorted(set(variables) - set(names))
    missing = sorted(set(names) - set(variables))
    if unknown or missing:
        raise ConfigError(
            f"{where} does not fit this program: it has variables for {sorted(variables)}, the program's "
            f"trainable modules are {sorted(names)}"
            + (f" (unknown: {unknown})" if unknown else "")
            + (f" (missing: {missing})" if missing else "")
            + "; load it into the program it was saved from (same module names)."
        )
    return {name: Variable.from_config(variables[name], f"{where}: variables[{name!r}]") for name in names}
