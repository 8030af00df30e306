"""Optimizers: how a program's variables change between epochs.

During an epoch the trainer runs the program on the training batches with
tracing on and hands each batch's :class:`Outcome` (the input, label,
prediction, reward and the trace of every trainable module call) to
:meth:`Optimizer.on_batch_end`. At the end of the epoch
:meth:`Optimizer.on_epoch_end` proposes candidate variables, has each one
scored on the validation data (the training data when there is none) through
the :class:`OptimizerContext`, and keeps the best: the program's current
variables are always one of the candidates, so an epoch never makes the
validation reward worse.

Demos come from the program's own well-rewarded runs (bootstrapped: an epoch
runs the program with the demos chosen so far, so later epochs can find more),
never from hand-written labels alone: a demo of the retriever is the search it
wrote for a question, a demo of the generator the answer it gave to the facts.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kag.errors import ConfigError, LanguageModelError
from kag.training.explore import ExploreReport, SearchBudget
from kag.training.serialization import deserialize, serialize
from kag.training.trace import TraceEntry
from kag.training.variables import Demo, Variable
from kag.validation import check_int, check_number

__all__ = [
    "BootstrapFewShot",
    "InstructionOptimizer",
    "KNNFewShot",
    "Optimizer",
    "OptimizerContext",
    "Outcome",
    "RandomFewShot",
    "get_optimizer",
    "serialize_optimizer",
]

Candidate = dict[str, Variable]


@dataclass(frozen=True)
class Outcome:
    """One training example's run: its position, label, prediction, reward and trace."""

    index: int
    y_true: dict[str, Any]
    y_pred: dict[str, Any] | None
    reward: float
    traces: tuple[TraceEntry, ...] = ()
    error: str | None = None


@dataclass
class OptimizerContext:
    """What the trainer gives an optimizer at the end of an epoch.

    ``variables()`` copies of the current variables by module name; ``score(candidate)`` the mean
    validation reward of the program with those variables (cached per distinct candidate);
    ``assign(candidate)`` makes them the program's; ``describe(name)`` the module's effective
    instructions, type and description; ``explore(outcomes, threshold)`` reruns failed examples
    with one module's output replaced by each of its variants (``module.output_variants``) and, with a
    :class:`~kag.training.explore.SearchBudget`, by outputs found from the label
    (``module.outputs_for_answer``); it reports the runs that reached ``threshold`` and the cost.
    """

    variables: Callable[[], Candidate]
    score: Callable[[Candidate], Awaitable[float]]
    assign: Callable[[Candidate], None]
    describe: Callable[[str], dict[str, Any]]
    rng: random.Random
    explore: Callable[[Sequence[Outcome], float, SearchBudget | None], Awaitable[ExploreReport]] | None = None
    logs: dict[str, Any] = field(default_factory=dict)


class Optimizer:
    """Base class: collect outcomes per batch, choose variables per epoch.

    Args:
        seed: the seed of every random choice (``None``: the ``seed`` given to ``fit``, else 0).
        teacher: a language model that makes the training runs in place of each trainable
            module's own (demos bootstrapped by a stronger or rule-based model, for example the
            offline ``LexicalLM`` teaching a small local model); candidates are still scored with
            the program's own models, so a teacher's demos are kept only where they help the
            student. Not saved with the optimizer's config (pass it again after ``from_config``).
    """

    name: ClassVar[str] = "optimizer"

    def __init__(self, *, seed: int | None = None, teacher: Any = None) -> None:
        if seed is not None:
            check_int(seed, name="seed (or None)", minimum=None)
        if teacher is not None and not callable(getattr(teacher, "generate", None)):
            raise ConfigError(
                f"teacher must be a language model (an object with an async generate()), got {type(teacher).__name__}."
            )
        self.seed = seed
        self.teacher = teacher
        self.outcomes: dict[int, Outcome] = {}
        self.aliases: dict[str, dict[str, dict[str, str]]] = {}  # per module, learned from labels

    def reset(self) -> None:
        """Forget what was collected (``fit`` calls it before training)."""
        self.outcomes = {}
        self.aliases = {}

    async def on_batch_end(self, outcomes: Sequence[Outcome]) -> None:
        """Keep each example's best-rewarded run so far (a later, equal run replaces it: fresher demos)."""
        for outcome in outcomes:
            kept = self.outcomes.get(outcome.index)
            if kept is None or outcome.reward >= kept.reward:
                self.outcomes[outcome.index] = outcome

    async def on_epoch_end(self, epoch: int, context: OptimizerContext) -> None:
        """Choose the variables for the next epoch (the default keeps them)."""

    async def choose(self, context: OptimizerContext, candidates: Sequence[Candidate]) -> None:
        """Score the current variables and ``candidates``; keep the best.

        A tie on the validation reward (a few validation questions tie often) goes to the variables
        with more demos earned on the training data, so what training found is not thrown away by a
        tie; then to the earliest. Aliases learned from labels are kept whatever is chosen.
        """
        current = self._with_aliases(context.variables())
        best, best_key = current, (await context.score(current), _evidence(current))
        for candidate in candidates:
            candidate = self._with_aliases(candidate)
            key = (await context.score(candidate), _evidence(candidate))
            if key > best_key:
                best, best_key = candidate, key
        context.logs["candidates"] = len(candidates) + 1
        context.assign(best)

    def _with_aliases(self, candidate: Candidate) -> Candidate:
        """``candidate`` with the aliases learned so far merged into its variables."""
        if not self.aliases:
            return candidate
        out: Candidate = {}
        for name, variable in candidate.items():
            learned = self.aliases.get(name)
            if learned and variable.trainable:
                variable = variable.copy()
                variable.aliases = {**variable.aliases, **learned}
            out[name] = variable
        return out

    async def explore_failures(
        self, context: OptimizerContext, threshold: float, limit: int, search: SearchBudget | None = None
    ) -> None:
        """Rerun up to ``limit`` failed examples with variants of their calls and, with a ``search``
        budget, with outputs found from their labels; keep the runs that pass.

        The failed examples are chosen at random (the context's seeded generator), so each epoch
        explores others; a found run replaces the failed one and so yields demos. The epoch's logs
        get ``explored``, ``found``, ``found_from_answer``, ``searches`` (run on the knowledge
        base) and ``search_budget_spent`` (examples whose budget or deadline ran out).
        """
        if not limit or context.explore is None:
            return
        failed = [o for _, o in sorted(self.outcomes.items()) if o.reward < threshold and o.traces]
        chosen = sorted(context.rng.sample(failed, min(limit, len(failed))), key=lambda o: o.index)
        report = await context.explore(chosen, threshold, search)
        for outcome in report.found:
            self.outcomes[outcome.index] = outcome
        for module, aliases in report.aliases.items():
            self.aliases.setdefault(module, {}).update(aliases)
        context.logs.update(report.logs())

    def passing(self, threshold: float) -> list[Outcome]:
        """The kept outcomes whose reward is at least ``threshold`` (and above 0), in dataset order."""
        return [o for _, o in sorted(self.outcomes.items()) if o.reward >= threshold and o.reward > 0]

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments as JSON."""
        return {"seed": self.seed}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Optimizer:
        """Rebuild from :meth:`get_config` (``runtime``: objects a config cannot hold, e.g. a language model)."""
        return cls(**dict(config), **runtime)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_config()})"


def _evidence(candidate: Candidate) -> int:
    """How many demos earned on the training data a candidate's trainable variables hold."""
    return sum(
        1 for variable in candidate.values() if variable.trainable for demo in variable.demos if demo.reward is not None
    )


def _check_search(value: Any) -> SearchBudget | None:
    """``search=``: ``True`` (the default budget), ``False``/``None`` (off), a budget or its config."""
    if value is True:
        return SearchBudget()
    if value is False or value is None:
        return None
    if isinstance(value, SearchBudget):
        return value
    if isinstance(value, Mapping):
        return SearchBudget.from_config(value)
    raise ConfigError(f"search must be True, False, a SearchBudget or its config, got {value!r}.")


def _demos_of(outcomes: Sequence[Outcome], module: str) -> list[Demo]:
    """The calls of ``module`` in ``outcomes`` as demos (each with its run's reward), without repeats."""
    seen: set[str] = set()
    demos: list[Demo] = []
    for outcome in outcomes:
        for entry in outcome.traces:
            if entry.module != module:
                continue
            demo = Demo(entry.input, entry.output, outcome.reward)
            if demo.key not in seen:
                seen.add(demo.key)
                demos.append(demo)
    return demos


def _check_count(value: Any, name: str) -> int:
    return check_int(value, name=name)


def _check_budget(value: Any) -> int:
    return check_int(value, name="explore", minimum=0)


def _check_threshold(value: Any, name: str = "threshold") -> float:
    return check_number(value, name=name, minimum=0.0, maximum=1.0)


def _with_demos(current: Candidate, demos: Mapping[str, list[Demo]], nearest: int | None = None) -> Candidate:
    candidate: Candidate = {}
    for name, variable in current.items():
        copy = variable.copy()
        if variable.trainable and name in demos:
            copy.demos = list(demos[name])
            copy.nearest = nearest
        candidate[name] = copy
    return candidate


class RandomFewShot(Optimizer):
    """Demos sampled at random among the rewarded predictions; the best candidate on validation is kept.

    Args:
        max_demos: demos per module in a candidate. num_candidates: random candidates per epoch.
        min_reward: the reward a run needs for its calls to be sampled (rewarded: above 0 by default).
    """

    name = "random_few_shot"

    def __init__(self, max_demos: int = 4, num_candidates: int = 4, *, min_reward: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_demos = _check_count(max_demos, "max_demos")
        self.num_candidates = _check_count(num_candidates, "num_candidates")
        self.min_reward = _check_threshold(min_reward, "min_reward")

    async def on_epoch_end(self, epoch: int, context: OptimizerContext) -> None:
        # sampling among the program's own rewarded predictions only: no exploration
        rewarded = self.passing(self.min_reward)
        current = context.variables()
        pools = {name: _demos_of(rewarded, name) for name in current}
        candidates = []
        for _ in range(self.num_candidates):
            chosen = {
                name: context.rng.sample(pool, min(self.max_demos, len(pool))) for name, pool in pools.items() if pool
            }
            if chosen:
                candidates.append(_with_demos(current, chosen))
        await self.choose(context, candidates)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "max_demos": self.max_demos,
            "num_candidates": self.num_candidates,
            "min_reward": self.min_reward,
        }


class BootstrapFewShot(Optimizer):
    """Whole successful runs become demos for every module they called; random search over demo sets.

    A run whose reward reaches ``threshold`` gives each module in its trace a demo (the retriever's
    question -> search, the generator's facts -> answer), so the demos of one candidate agree with
    each other. Each epoch runs the program with the demos chosen so far, which bootstraps more
    successful runs from the questions it failed before.

    Where the program failed, it also explores: up to ``explore`` failed examples per epoch are
    rerun with one call's output replaced by each of its variants (for a knowledge retriever: the
    search with ``bidirectional``, the direction, the negation or the count flipped); a variant
    that makes the answer right becomes a demo. This is how a model learns a search it never
    writes by itself.

    Args:
        max_demos: runs per candidate. num_candidates: random candidates per epoch.
        threshold: the reward a run needs (1.0: only fully right answers).
        explore: failed examples explored per epoch (0: none).
        search: also search for the output from each explored example's label (``True``: the default
            :class:`~kag.training.explore.SearchBudget`; a budget or its config; ``False``: variants only).
    """

    name = "bootstrap_few_shot"

    def __init__(
        self,
        max_demos: int = 4,
        num_candidates: int = 4,
        *,
        threshold: float = 1.0,
        explore: int = 16,
        search: bool | SearchBudget | Mapping[str, Any] | None = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.max_demos = _check_count(max_demos, "max_demos")
        self.num_candidates = _check_count(num_candidates, "num_candidates")
        self.threshold = _check_threshold(threshold)
        self.explore = _check_budget(explore)
        self.search = _check_search(search)

    async def on_epoch_end(self, epoch: int, context: OptimizerContext) -> None:
        await self.explore_failures(context, self.threshold, self.explore, self.search)
        runs = self.passing(self.threshold)
        current = context.variables()
        candidates = []
        if runs:
            # the first candidate is the earliest runs, the rest random sets of runs
            sets = [runs[: self.max_demos]]
            sets += [context.rng.sample(runs, min(self.max_demos, len(runs))) for _ in range(self.num_candidates - 1)]
            seen: set[str] = set()
            for chosen in sets:
                ordered = sorted(chosen, key=lambda o: o.index)
                key = json.dumps([o.index for o in ordered])
                if key in seen:
                    continue
                seen.add(key)
                candidates.append(_with_demos(current, {name: _demos_of(ordered, name) for name in current}))
        await self.choose(context, candidates)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "max_demos": self.max_demos,
            "num_candidates": self.num_candidates,
            "threshold": self.threshold,
            "explore": self.explore,
            "search": self.search.get_config() if self.search is not None else False,
        }


class KNNFewShot(Optimizer):
    """Every successful call becomes a demo in a pool; each call at inference sees its ``k`` nearest.

    The similarity is the module's embedder (a knowledge retriever uses its knowledge base's) over
    the demo inputs as the prompt renders them. Small models gain most from this on text-to-query
    tasks: the demos shown are the questions most like the one asked.

    Args:
        k: demos shown per call. threshold: the reward a run needs. max_pool: the most demos kept
            per module (the earliest runs; ``None``: all). explore: failed examples explored per
            epoch, as ``BootstrapFewShot`` does (0: none). search: outputs searched from the labels
            of explored examples, as ``BootstrapFewShot`` does.
    """

    name = "knn_few_shot"

    def __init__(
        self,
        k: int = 4,
        *,
        threshold: float = 1.0,
        max_pool: int | None = None,
        explore: int = 16,
        search: bool | SearchBudget | Mapping[str, Any] | None = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.k = _check_count(k, "k")
        self.threshold = _check_threshold(threshold)
        self.max_pool = None if max_pool is None else _check_count(max_pool, "max_pool")
        self.explore = _check_budget(explore)
        self.search = _check_search(search)

    async def on_epoch_end(self, epoch: int, context: OptimizerContext) -> None:
        await self.explore_failures(context, self.threshold, self.explore, self.search)
        runs = self.passing(self.threshold)
        current = context.variables()
        candidates = []
        if runs:
            pools = {name: _demos_of(runs, name)[: self.max_pool] for name in current}
            candidates.append(_with_demos(current, {n: p for n, p in pools.items() if p}, nearest=self.k))
        await self.choose(context, candidates)

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "k": self.k,
            "threshold": self.threshold,
            "max_pool": self.max_pool,
            "explore": self.explore,
            "search": self.search.get_config() if self.search is not None else False,
        }


_VARIANTS_SCHEMA_DOC = "Instruction variants, each a complete replacement of the current instructions."

_INSTRUCTION_PROMPT = (
    "You improve the instructions of one step of a program that calls a language model. You see the "
    "current instructions and runs of the step with the reward each run earned (1 right, 0 wrong). "
    "Write {n} different instructions that would make the wrong runs right and keep the right runs "
    "right. Each must be complete on its own, short (at most 5 sentences) and general: never name the "
    "entities of the examples."
)


class InstructionOptimizer(Optimizer):
    """A language model proposes instruction variants from the scored runs; the best on validation is kept.

    Args:
        language_model: the model that writes the variants (any kag language model).
        num_candidates: variants asked for per module and epoch. max_examples: runs shown, split
            between the best and the worst rewarded.
    """

    name = "instruction_optimizer"

    def __init__(
        self, language_model: Any = None, num_candidates: int = 3, *, max_examples: int = 6, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if not callable(getattr(language_model, "generate", None)):
            raise ConfigError("InstructionOptimizer needs language_model=... (the model that writes instructions).")
        self.language_model = language_model
        self.num_candidates = _check_count(num_candidates, "num_candidates")
        self.max_examples = _check_count(max_examples, "max_examples")

    def _shown_runs(self, module: str) -> list[dict[str, Any]]:
        runs = sorted(self.outcomes.values(), key=lambda o: (-o.reward, o.index))
        half = max(1, self.max_examples // 2)
        picked = runs[:half] + [o for o in runs[-half:] if o not in runs[:half]]
        shown = []
        for outcome in picked:
            calls = [e for e in outcome.traces if e.module == module]
            if calls:
                shown.append({"input": calls[0].input, "output": calls[0].output, "reward": outcome.reward})
        return shown

    async def _variants(self, name: str, info: Mapping[str, Any]) -> list[str]:
        schema = {
            "type": "object",
            "properties": {
                "variants": {
                    "type": "array",
                    "description": _VARIANTS_SCHEMA_DOC,
                    "items": {"type": "string", "maxLength": 1200},
                    "minItems": 1,
                    "maxItems": self.num_candidates,
                }
            },
            "required": ["variants"],
            "additionalProperties": False,
        }
        shown = {
            "step": {"name": name, "type": info.get("type"), "description": info.get("description")},
            "current_instructions": info.get("instructions"),
            "runs": self._shown_runs(name),
        }
        messages = [
            {"role": "system", "content": _INSTRUCTION_PROMPT.format(n=self.num_candidates)},
            {"role": "user", "content": json.dumps(shown, ensure_ascii=False, default=str)},
        ]
        try:
            answer = await self.language_model.generate(messages, schema, schema_name="instruction_variants")
        except LanguageModelError:
            return []  # no variants this epoch; the current instructions stay
        return [v.strip() for v in answer.get("variants", []) if isinstance(v, str) and v.strip()]

    async def on_epoch_end(self, epoch: int, context: OptimizerContext) -> None:
        current = context.variables()
        variants = {
            name: await self._variants(name, context.describe(name)) for name, var in current.items() if var.trainable
        }
        candidates = []
        for j in range(self.num_candidates):
            candidate = {name: var.copy() for name, var in current.items()}
            changed = False
            for name, texts in variants.items():
                if j < len(texts):
                    candidate[name].instructions = texts[j]
                    changed = True
            if changed:
                candidates.append(candidate)
        await self.choose(context, candidates)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "num_candidates": self.num_candidates, "max_examples": self.max_examples}


_OPTIMIZERS: dict[str, type[Optimizer]] = {
    cls.name: cls for cls in (RandomFewShot, BootstrapFewShot, KNNFewShot, InstructionOptimizer)
}
# a config's "class": the class name (what serialize_optimizer writes) or the short name
_CLASSES: dict[str, type[Optimizer]] = {**{cls.__name__: cls for cls in _OPTIMIZERS.values()}, **_OPTIMIZERS}
_BY_NAME = sorted(n for n in _OPTIMIZERS if n != InstructionOptimizer.name)  # built with no argument


def serialize_optimizer(optimizer: Optimizer) -> dict[str, Any]:
    """``{"class": ..., "config": ...}`` of an optimizer (what :func:`get_optimizer` takes back).

    Its ``teacher`` and an ``InstructionOptimizer``'s ``language_model`` are not in it: a config
    holds no model.
    """
    return serialize(optimizer, _CLASSES)


def get_optimizer(spec: Any, *, custom_objects: Mapping[str, Any] | None = None) -> Optimizer:
    """An :class:`Optimizer` from an instance, a name (``"bootstrap_few_shot"``, ``"knn_few_shot"``,
    ``"random_few_shot"``) or a config dict: ``{"class": "KNNFewShot", "config": {"k": 2}}`` (what
    :func:`serialize_optimizer` writes; ``class`` may be a short name or an import path
    ``"package.module:QualName"``, which ``custom_objects`` may map to the class instead).

    Raises:
        ConfigError: an unknown name or class, or settings the optimizer does not take; the
            message names what it accepts.
    """
    if isinstance(spec, Optimizer):
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _OPTIMIZERS[spec]()
    if isinstance(spec, Mapping):
        return deserialize(spec, Optimizer, _CLASSES, custom_objects, "optimizer")
    hint = (
        " (it needs language_model=...: pass InstructionOptimizer(language_model) itself)"
        if spec == InstructionOptimizer.name
        else ""
    )
    raise ConfigError(
        f"optimizer must be a kag.training optimizer, one of {_BY_NAME}, or a config dict "
        f"{{'class': 'BootstrapFewShot', 'config': {{...}}}}, got {spec!r}{hint}."
    )
