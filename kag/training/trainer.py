"""``Trainer``: compile, fit, evaluate and predict, inherited by every ``Program``.

The shape is Keras's: ``compile(reward=, optimizer=, metrics=)`` sets how a
program is judged and changed, ``await fit(x, y, epochs=...)`` trains it and
returns a :class:`History`, ``await evaluate(x, y)`` scores it, ``await
predict(x)`` runs it. What changes is not weights but each trainable module's
:class:`~kag.training.variables.Variable` (instructions and demos).

Model calls of a batch run concurrently, at most ``concurrency`` programs at
once. A prediction that fails with a kag error (a model that could not produce
a valid answer, say) scores 0 and is counted in ``errors``; it does not stop
training. A reward that misbehaves does stop it (:class:`~kag.errors.RewardError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel

from kag._sync import SyncFacade, blocking
from kag.errors import CheckpointError, ConfigError, KagError, RewardError, TrainingError
from kag.files import atomic_write_json
from kag.training.callbacks import Callback, CallbackList, ProgressBar
from kag.training.explore import ExploreReport, FindsFromAnswer, SearchBudget, Varies
from kag.training.history import History
from kag.training.optimizers import Candidate, Optimizer, OptimizerContext, Outcome, get_optimizer
from kag.training.rewards import Reward, get_reward
from kag.training.trace import TraceEntry, forcing, tracing
from kag.training.variables import FORMAT, VERSION, Variable, check_variables_document

__all__ = ["Trainer", "TrainerSync"]

T = TypeVar("T")
log = logging.getLogger(__name__)
DEFAULT_CONCURRENCY = 4


async def _bounded(items: Sequence[T], run: Callable[[T], Awaitable[Any]], concurrency: int) -> list[Any]:
    """``run`` over ``items``, at most ``concurrency`` at once, results in the items' order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: T) -> Any:
        async with gate:
            return await run(item)

    return list(await asyncio.gather(*(one(item) for item in items)))


def _as_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


class Trainer:
    """Training for programs (a mixin: ``Program`` inherits it).

    The class using it provides ``call(inputs)``, ``name``, ``trainable_modules()`` (``{name: module}``
    of the modules holding a ``variable``) and ``output_model()`` (the model of its single output).
    """

    stop_training: bool = False
    _reward: Reward | None = None
    _optimizer: Optimizer | None = None
    _metrics: list[Reward] = []
    _concurrency: int = DEFAULT_CONCURRENCY
    _sync_facade: TrainerSync | None = None

    # -- provided by the program -------------------------------------------------------------
    name: str

    async def call(self, inputs: Any) -> Any:  # pragma: no cover - the program implements it
        raise NotImplementedError

    def trainable_modules(self) -> dict[str, Any]:  # pragma: no cover - the program implements it
        raise NotImplementedError

    def output_model(self) -> type[BaseModel]:  # pragma: no cover - the program implements it
        raise NotImplementedError

    def module_info(self, name: str) -> dict[str, Any]:  # pragma: no cover - the program implements it
        raise NotImplementedError

    # -- compile -----------------------------------------------------------------------------
    def compile(
        self,
        reward: Any = "exact_match",
        optimizer: Any = None,
        metrics: Sequence[Any] | None = None,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        """Set how the program is judged and trained.

        Args:
            reward: a :class:`~kag.training.rewards.Reward`, a name (``"exact_match"``, ``"f1"``) or a
                function ``(y_true, y_pred) -> float in [0, 1]`` (async allowed).
            optimizer: a :mod:`kag.training.optimizers` optimizer or its name (default
                ``BootstrapFewShot()``).
            metrics: more rewards logged beside ``reward`` (names or rewards): ``["accuracy", "f1"]``.
            concurrency: the most program runs (hence model calls) in flight at once.
        """
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}.")
        from kag.training.optimizers import BootstrapFewShot

        self._reward = get_reward(reward)
        self._optimizer = get_optimizer(optimizer) if optimizer is not None else BootstrapFewShot()
        self._metrics = [get_reward(m, "metric") for m in metrics or ()]
        names = [self._reward.name, *(m.name for m in self._metrics)]
        if len(set(names)) != len(names) or "reward" in names[1:]:
            raise ConfigError(f"reward and metrics need distinct names (and no metric named 'reward'), got {names}.")
        self._concurrency = concurrency

    @property
    def compiled(self) -> bool:
        """Whether :meth:`compile` was called."""
        return self._reward is not None

    @property
    def optimizer(self) -> Optimizer | None:
        """The optimizer given to :meth:`compile`."""
        return self._optimizer

    def _require_compiled(self, what: str) -> Reward:
        if self._reward is None:
            raise TrainingError(f"call program.compile(reward=..., optimizer=...) before {what}().")
        return self._reward

    # -- variables -----------------------------------------------------------------------------
    @property
    def trainable_variables(self) -> list[Variable]:
        """The variables optimizers may change, in module order."""
        return [m.variable for m in self.trainable_modules().values() if m.variable.trainable]

    def get_variables(self) -> dict[str, dict[str, Any]]:
        """``{module name: variable config}`` of every module that holds a variable."""
        return {name: module.variable.get_config() for name, module in self.trainable_modules().items()}

    def set_variables(self, values: Mapping[str, Any]) -> None:
        """Set variables from :meth:`get_variables` output (configs or :class:`Variable` objects)."""
        modules = self.trainable_modules()
        unknown = sorted(set(values) - set(modules))
        if unknown:
            raise ConfigError(
                f"no trainable module named {unknown} in program {self.name!r}; it has {sorted(modules)}."
            )
        for name, value in values.items():
            variable = value if isinstance(value, Variable) else Variable.from_config(value, f"variables[{name!r}]")
            modules[name].set_variable(variable)

    def save_variables(self, path: str | os.PathLike[str]) -> Path:
        """Write the variables alone as versioned JSON (atomically: a reader never sees half a file)."""
        document = {"format": FORMAT, "version": VERSION, "program": self.name, "variables": self.get_variables()}
        target = Path(path)
        try:
            return atomic_write_json(target, document)
        except OSError as exc:
            raise CheckpointError(f"cannot write variables to {str(target)!r}: {exc}") from exc

    def load_variables(self, path: str | os.PathLike[str]) -> None:
        """Read variables written by :meth:`save_variables` into this program (same module names)."""
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"cannot read variables from {str(path)!r}: {exc}") from exc
        variables = check_variables_document(document, list(self.trainable_modules()), repr(str(path)))
        self.set_variables(variables)

    def _candidate(self) -> Candidate:
        return {name: module.variable.copy() for name, module in self.trainable_modules().items()}

    def _assign(self, candidate: Candidate) -> None:
        modules = self.trainable_modules()
        for name, variable in candidate.items():
            modules[name].set_variable(variable)

    # -- data -------------------------------------------------------------------------------
    def _check_x(self, x: Any, what: str) -> list[Any]:
        if isinstance(x, str | bytes | Mapping | BaseModel) or not isinstance(x, Sequence):
            raise TrainingError(f"{what}: x must be a list of inputs (models or dicts), got {type(x).__name__}.")
        if not x:
            raise TrainingError(f"{what}: the dataset is empty; give at least one input.")
        checked = list(x)
        bind = getattr(self, "_bind", None)
        if bind is not None:
            for i, item in enumerate(checked):
                try:
                    bind(item)
                except KagError as exc:
                    raise TrainingError(f"{what}: x[{i}] does not fit the program's input: {exc}") from exc
        return checked

    def _check_y(self, y: Any, n: int, what: str) -> list[dict[str, Any]]:
        if y is None:
            raise TrainingError(f"{what} needs labels: pass y=[expected output, ...] beside x.")
        if isinstance(y, str | bytes | Mapping | BaseModel) or not isinstance(y, Sequence):
            raise TrainingError(f"{what}: y must be a list of expected outputs, got {type(y).__name__}.")
        if len(y) != n:
            raise TrainingError(f"{what}: x has {n} inputs but y has {len(y)} labels; give one label per input.")
        model = self.output_model()
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
                row[str(key)] = _as_json(value)
            checked.append(row)
        return checked

    # -- running ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _taught(self, teacher: Any) -> Iterator[None]:
        """Every trainable module calls ``teacher`` instead of its own model inside the block.

        ``fit`` awaits its training runs and its candidate scoring one after the other, so no
        student-scored run happens while the teacher is in place.
        """
        if teacher is None:
            yield
            return
        modules = [m for m in self.trainable_modules().values() if hasattr(m, "language_model")]
        own = [m.language_model for m in modules]
        for module in modules:
            module.language_model = teacher
        try:
            yield
        finally:
            for module, lm in zip(modules, own, strict=True):
                module.language_model = lm

    async def _run(self, item: Any, trace: bool) -> tuple[dict[str, Any] | None, tuple[Any, ...], str | None]:
        """One program run: (prediction as JSON or None, trace entries, error text or None)."""
        with tracing() as entries:
            try:
                output = await self.call(item)
            except RewardError:
                raise
            except KagError as exc:
                return None, tuple(entries) if trace else (), f"{type(exc).__name__}: {exc}"
        if isinstance(output, list):
            raise TrainingError("training needs a program with a single output.")
        return _as_json(output), tuple(entries) if trace else (), None

    async def _score_examples(
        self,
        indices: Sequence[int],
        x: Sequence[Any],
        y: Sequence[dict[str, Any]],
        *,
        trace: bool,
        concurrency: int,
    ) -> list[tuple[Outcome, dict[str, float]]]:
        reward = self._require_compiled("fit")

        async def one(i: int) -> tuple[Outcome, dict[str, float]]:
            y_pred, entries, error = await self._run(x[i], trace)
            value = await reward(y[i], y_pred)
            metric_values = {m.name: await m(y[i], y_pred) for m in self._metrics}
            return Outcome(i, y[i], y_pred, value, entries, error), metric_values

        return await _bounded(list(indices), one, concurrency)

    async def _forced(
        self, outcome: Outcome, x: Sequence[Any], y: Sequence[dict[str, Any]], outputs: dict[str, dict[str, Any]]
    ) -> Outcome:
        """The example's run with some modules' outputs forced."""
        with forcing(outputs):
            [(found, _)] = await self._score_examples([outcome.index], x, y, trace=True, concurrency=1)
        return found

    async def _explore(
        self,
        outcome: Outcome,
        x: Sequence[Any],
        y: Sequence[dict[str, Any]],
        threshold: float,
        budget: SearchBudget | None,
        report: ExploreReport,
    ) -> Outcome | None:
        """The first run of a failed example that reaches ``threshold`` with one module's output
        replaced: (with a ``budget``) by an output found from the label itself, checked against the
        graph before any model runs, then by a variant of what it wrote. ``None``: none does. Costs
        and learned aliases go into ``report``."""
        modules = self.trainable_modules()
        for entry in outcome.traces:
            module = modules.get(entry.module)
            if budget is not None and isinstance(module, FindsFromAnswer):
                found = await self._from_answer(module, entry, outcome, x, y, threshold, budget, report)
                if found is not None:
                    return found
            if isinstance(module, Varies):
                for variant in module.output_variants(entry.output):
                    found = await self._forced(outcome, x, y, {entry.module: variant})
                    if found.reward >= threshold:
                        return found
        return None

    async def _from_answer(
        self,
        module: FindsFromAnswer,
        entry: TraceEntry,
        outcome: Outcome,
        x: Sequence[Any],
        y: Sequence[dict[str, Any]],
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
            found = await self._forced(outcome, x, y, {entry.module: output})
            if found.reward >= threshold:
                report.from_answer += 1
                aliases = learned.get("aliases") or {}
                if aliases:
                    report.aliases.setdefault(entry.module, {}).update(aliases)
                return found
        return None

    async def _check_aliases(self, aliases: dict[str, dict[str, dict[str, str]]]) -> None:
        """Drop the learned aliases a module cannot keep (a name another entity already has): a
        search that needed one is still a demo, the alias is not learned."""
        modules = self.trainable_modules()
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

    def _summary(self, scored: Sequence[tuple[Outcome, dict[str, float]]], prefix: str = "") -> dict[str, Any]:
        n = len(scored)
        logs: dict[str, Any] = {f"{prefix}reward": sum(o.reward for o, _ in scored) / n if n else math.nan}
        for metric in self._metrics:
            logs[f"{prefix}{metric.name}"] = sum(m[metric.name] for _, m in scored) / n if n else math.nan
        logs[f"{prefix}errors"] = sum(1 for o, _ in scored if o.error is not None)
        return logs

    def _concurrency_of(self, concurrency: int | None) -> int:
        if concurrency is None:
            return self._concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}.")
        return concurrency

    async def predict(self, x: Sequence[Any], *, concurrency: int | None = None) -> list[Any]:
        """The program's outputs for every input of ``x``, in order (at most ``concurrency`` at once)."""
        items = self._check_x(x, "predict")
        return await _bounded(items, self.call, self._concurrency_of(concurrency))

    async def evaluate(
        self,
        x: Sequence[Any],
        y: Sequence[Any],
        *,
        groups: Sequence[str] | None = None,
        concurrency: int | None = None,
        return_details: bool = False,
    ) -> dict[str, Any]:
        """Score the program on labelled data without changing it.

        Returns ``{"reward", <metric names>, "errors"}`` (means over the examples; ``errors`` counts
        failed predictions), plus ``"reward/<group>"`` per group when ``groups`` (one name per
        example, e.g. the question type) is given, and ``"details"`` (one row per example: reward,
        prediction, error) with ``return_details``.
        """
        self._require_compiled("evaluate")
        items = self._check_x(x, "evaluate")
        labels = self._check_y(y, len(items), "evaluate")
        if groups is not None and len(groups) != len(items):
            raise TrainingError(f"evaluate: groups has {len(groups)} names for {len(items)} inputs.")
        scored = await self._score_examples(
            range(len(items)), items, labels, trace=False, concurrency=self._concurrency_of(concurrency)
        )
        logs = self._summary(scored)
        if groups is not None:
            totals: dict[str, list[float]] = {}
            for (outcome, _), group in zip(scored, groups, strict=True):
                totals.setdefault(str(group), []).append(outcome.reward)
            for group in sorted(totals):
                logs[f"reward/{group}"] = sum(totals[group]) / len(totals[group])
        if return_details:
            logs["details"] = [
                {"reward": o.reward, "y_pred": o.y_pred, "error": o.error, **metrics} for o, metrics in scored
            ]
        return logs

    async def fit(
        self,
        x: Sequence[Any],
        y: Sequence[Any] | None = None,
        *,
        epochs: int = 1,
        batch_size: int = 32,
        validation_split: float | None = None,
        validation_data: tuple[Sequence[Any], Sequence[Any]] | None = None,
        callbacks: Sequence[Callback] | None = None,
        shuffle: bool = True,
        seed: int | None = None,
        verbose: int = 1,
        concurrency: int | None = None,
    ) -> History:
        """Train the program's variables on ``(x, y)`` and return the :class:`History` of its epochs.

        Args:
            x: inputs (models or dicts of the program's input). y: expected outputs (dicts or models
                with some of the output's fields; the reward compares those).
            epochs: passes over the training data. batch_size: examples per batch (the optimizer
                sees each batch's runs; callbacks' ``on_batch_end`` runs after each).
            validation_split: the fraction in (0, 1) of the data, taken from the end (before any
                shuffling, as Keras does), held out to choose between candidates and log ``val_*``.
            validation_data: ``(x_val, y_val)`` instead. Without either, candidates are scored on the
                training data itself.
            callbacks: :mod:`kag.training.callbacks` instances (a ``History`` is always added).
            shuffle: shuffle the training data each epoch (with ``seed``).
            seed: the seed of the shuffles, and of the optimizer when it was given none.
            verbose: 1 shows a progress bar (tqdm; a widget in Jupyter), 0 nothing.
            concurrency: the most program runs at once (default: the one given to ``compile``).
        """
        self._require_compiled("fit")
        assert self._optimizer is not None
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise TrainingError(f"epochs must be a positive integer, got {epochs!r}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise TrainingError(f"batch_size must be a positive integer, got {batch_size!r}.")
        items = self._check_x(x, "fit")
        labels = self._check_y(y, len(items), "fit")
        val_x: list[Any] = []
        val_y: list[dict[str, Any]] = []
        if validation_split is not None and validation_data is not None:
            raise TrainingError("give validation_split or validation_data, not both.")
        if validation_split is not None:
            if (
                isinstance(validation_split, bool)
                or not isinstance(validation_split, int | float)
                or not (0.0 < validation_split < 1.0)
            ):
                raise TrainingError(f"validation_split must be a number in (0, 1), got {validation_split!r}.")
            cut = len(items) - round(len(items) * validation_split)
            if cut <= 0 or cut >= len(items):
                raise TrainingError(
                    f"validation_split={validation_split} of {len(items)} examples leaves an empty training or "
                    "validation set; use more data or another fraction."
                )
            items, val_x, labels, val_y = items[:cut], items[cut:], labels[:cut], labels[cut:]
        elif validation_data is not None:
            if not isinstance(validation_data, tuple | list) or len(validation_data) != 2:
                raise TrainingError("validation_data must be a pair (x_val, y_val).")
            val_x = self._check_x(validation_data[0], "fit (validation_data)")
            val_y = self._check_y(validation_data[1], len(val_x), "fit (validation_data)")
        workers = self._concurrency_of(concurrency)
        rng = random.Random(seed)
        optimizer = self._optimizer
        optimizer.reset()
        optimizer_rng = random.Random(optimizer.seed if optimizer.seed is not None else (seed or 0))
        score_x, score_y = (val_x, val_y) if val_x else (items, labels)
        cache: dict[str, list[tuple[Outcome, dict[str, float]]]] = {}

        async def scored(candidate: Candidate) -> list[tuple[Outcome, dict[str, float]]]:
            key = json.dumps({n: v.get_config() for n, v in sorted(candidate.items())}, sort_keys=True)
            if key not in cache:
                saved = self._candidate()
                self._assign(candidate)
                try:
                    cache[key] = await self._score_examples(
                        range(len(score_x)), score_x, score_y, trace=False, concurrency=workers
                    )
                finally:
                    self._assign(saved)
            return cache[key]

        async def score(candidate: Candidate) -> float:
            return float(self._summary(await scored(candidate))["reward"])

        async def explore(failed: Sequence[Outcome], threshold: float, budget: SearchBudget | None) -> ExploreReport:
            report = ExploreReport(explored=len(failed))
            with self._taught(optimizer.teacher):
                found = await _bounded(
                    list(failed), lambda o: self._explore(o, items, labels, threshold, budget, report), workers
                )
            report.found = [o for o in found if o is not None]
            await self._check_aliases(report.aliases)
            return report

        history = History()
        extra = [ProgressBar()] if verbose else []
        callback_list = CallbackList([history, *extra, *(callbacks or ())])
        steps = math.ceil(len(items) / batch_size)
        callback_list.set_program(self)
        callback_list.set_params(
            {"epochs": epochs, "steps": steps, "samples": len(items), "validation": bool(val_x), "verbose": verbose}
        )
        self.stop_training = False
        logs: dict[str, Any] = {}
        await callback_list.call("on_train_begin", logs)
        for epoch in range(epochs):
            await callback_list.call("on_epoch_begin", epoch, {})
            order = list(range(len(items)))
            if shuffle:
                rng.shuffle(order)
            done: list[tuple[Outcome, dict[str, float]]] = []
            for step in range(steps):
                await callback_list.call("on_batch_begin", step, {})
                batch = order[step * batch_size : (step + 1) * batch_size]
                with self._taught(optimizer.teacher):
                    results = await self._score_examples(batch, items, labels, trace=True, concurrency=workers)
                done.extend(results)
                await optimizer.on_batch_end([outcome for outcome, _ in results])
                await callback_list.call("on_batch_end", step, self._summary(done))
            logs = self._summary(done)
            context = OptimizerContext(
                variables=self._candidate,
                score=score,
                assign=self._assign,
                describe=self.module_info,
                rng=optimizer_rng,
                explore=explore,
            )
            await optimizer.on_epoch_end(epoch, context)
            logs.update(context.logs)
            if val_x:
                logs.update(self._summary(await scored(self._candidate()), prefix="val_"))
            await callback_list.call("on_epoch_end", epoch, logs)
            if self.stop_training:
                break
        await callback_list.call("on_train_end", logs)
        return history

    # -- blocking facade -------------------------------------------------------------------------
    @property
    def sync(self) -> TrainerSync:
        """Blocking twins for scripts (not inside an event loop): ``program.sync(x)`` runs the program,
        ``program.sync.fit / evaluate / predict`` train and score it."""
        if self._sync_facade is None:
            self._sync_facade = TrainerSync(self)
        return self._sync_facade


class TrainerSync(SyncFacade[Trainer]):
    """``program.sync.fit(...)``: the training methods for blocking callers; ``program.sync(x)`` runs it."""

    def __call__(self, inputs: Any) -> Any:
        """Run the program on ``inputs`` and wait for its output."""
        return self._run(self._target.call(inputs))

    fit = blocking(Trainer.fit)
    evaluate = blocking(Trainer.evaluate)
    predict = blocking(Trainer.predict)
