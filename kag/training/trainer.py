"""``Trainer``: compile, fit, evaluate and predict, inherited by every ``Program``.

The shape is Keras's: ``compile(reward=, optimizer=, metrics=)`` sets how a
program is judged and changed, ``await fit(x, y, epochs=...)`` trains it and
returns a :class:`History`, ``await evaluate(x, y)`` scores it, ``await
predict(x)`` runs it. What changes is not weights but each trainable module's
:class:`~kag.training.variables.Variable` (instructions and demos).

The trainer's state is set up once per program (:meth:`Trainer._init_training_state`, a
:class:`~kag.training.state.TrainingState`); what it needs from the program is the
:class:`~kag.training.protocols.TrainableProgram` protocol. ``get_compile_config`` /
``compile_from_config`` save and restore the compile settings (``Program.save`` / ``load``).

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
from typing import Any, TypeVar, cast

from kag._sync import SyncFacade, blocking
from kag.errors import CheckpointError, ConfigError, KagError, RewardError, TrainingError
from kag.files import atomic_write_json
from kag.training.callbacks import Callback, CallbackList, ProgressBar
from kag.training.compile_config import compile_arguments, compile_config
from kag.training.data import FitData, as_json, check_inputs, check_labels
from kag.training.explore import ExploreReport, SearchBudget
from kag.training.history import History
from kag.training.optimizers import Candidate, Optimizer, OptimizerContext, Outcome, get_optimizer
from kag.training.protocols import Teachable, TrainableProgram
from kag.training.reruns import check_aliases, rerun_failed
from kag.training.rewards import Reward, get_reward
from kag.training.state import DEFAULT_CONCURRENCY, TrainingState
from kag.training.trace import forcing, tracing
from kag.training.variables import FORMAT, VERSION, Variable, check_variables_document
from kag.validation import check_int

__all__ = ["Trainer", "TrainerSync"]

T = TypeVar("T")
log = logging.getLogger(__name__)
Scored = list[tuple[Outcome, dict[str, float]]]


async def _bounded(items: Sequence[T], run: Callable[[T], Awaitable[Any]], concurrency: int) -> list[Any]:
    """``run`` over ``items``, at most ``concurrency`` at once, results in the items' order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: T) -> Any:
        async with gate:
            return await run(item)

    return list(await asyncio.gather(*(one(item) for item in items)))


class _CandidateScores:
    """Each distinct candidate's scored runs on the scoring data of one ``fit``, computed once.

    Optimizers score the same candidate more than once (the current variables each epoch); a
    candidate is keyed by its variables' configs, and the program's variables are put back after.
    """

    def __init__(self, trainer: Trainer, data: FitData, concurrency: int) -> None:
        self._trainer = trainer
        self._x, self._y = data.scoring
        self._concurrency = concurrency
        self._cache: dict[str, Scored] = {}

    async def runs(self, candidate: Candidate) -> Scored:
        """The program's scored runs on the scoring data with ``candidate``'s variables."""
        key = json.dumps({n: v.get_config() for n, v in sorted(candidate.items())}, sort_keys=True)
        if key not in self._cache:
            saved = self._trainer._candidate()
            self._trainer._assign(candidate)
            try:
                self._cache[key] = await self._trainer._score_examples(
                    range(len(self._x)), self._x, self._y, trace=False, concurrency=self._concurrency
                )
            finally:
                self._trainer._assign(saved)
        return self._cache[key]

    async def reward(self, candidate: Candidate) -> float:
        """The mean reward of ``candidate`` (what :class:`OptimizerContext` ``score`` returns)."""
        return float(self._trainer._summary(await self.runs(candidate))["reward"])


class Trainer:
    """Training for programs (a mixin: ``Program`` inherits it).

    The class using it provides the :class:`~kag.training.protocols.TrainableProgram` members:
    ``call(inputs)``, ``name``, ``trainable_modules()``, ``output_model()``, ``module_info(name)``
    and ``_bind(inputs)``. Its ``__init__`` passes its arguments on (cooperatively, so ``Program``'s
    ``super().__init__`` reaches ``Module``) and sets up the training state.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_training_state()

    def _init_training_state(self) -> None:
        """Give this program its own, empty training state (every attribute the trainer keeps)."""
        if not isinstance(self, TrainableProgram):
            raise TypeError(
                f"{type(self).__name__} inherits Trainer but lacks what training needs "
                "(name, call, trainable_modules, output_model, module_info, _bind)."
            )
        self._training = TrainingState()
        self.stop_training = False
        """Set by a callback (``EarlyStopping``) to end ``fit`` after the current epoch."""
        self._sync_facade: TrainerSync | None = None

    @property
    def _program(self) -> TrainableProgram:
        """This object as the program it is (checked in :meth:`_init_training_state`)."""
        return cast(TrainableProgram, self)

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
            reward: a :class:`~kag.training.rewards.Reward`, a name (``"exact_match"``, ``"f1"``), a
                config dict or a function ``(y_true, y_pred) -> float in [0, 1]`` (async allowed).
            optimizer: a :mod:`kag.training.optimizers` optimizer, its name or a config dict
                (default ``BootstrapFewShot()``; see :func:`~kag.training.optimizers.get_optimizer`).
            metrics: more rewards logged beside ``reward`` (names or rewards): ``["accuracy", "f1"]``.
            concurrency: the most program runs (hence model calls) in flight at once.
        """
        check_int(concurrency, name="concurrency")
        from kag.training.optimizers import BootstrapFewShot

        chosen_reward = get_reward(reward)
        chosen_metrics = [get_reward(m, "metric") for m in metrics or ()]
        names = [chosen_reward.name, *(m.name for m in chosen_metrics)]
        if len(set(names)) != len(names) or "reward" in names[1:]:
            raise ConfigError(f"reward and metrics need distinct names (and no metric named 'reward'), got {names}.")
        self._training = TrainingState(
            reward=chosen_reward,
            optimizer=get_optimizer(optimizer) if optimizer is not None else BootstrapFewShot(),
            metrics=chosen_metrics,
            concurrency=concurrency,
        )

    def get_compile_config(self) -> dict[str, Any] | None:
        """The compile settings as JSON (``None`` before :meth:`compile`), as ``Program.save`` keeps them.

        Raises:
            ConfigError: a reward or optimizer that cannot be saved (a class defined in a function).
        """
        return compile_config(self._training)

    def compile_from_config(
        self, config: Mapping[str, Any], *, custom_objects: Mapping[str, Any] | None = None
    ) -> None:
        """Compile with settings :meth:`get_compile_config` wrote (``Program.load`` calls it).

        ``custom_objects`` maps class names, import paths or function rewards' names to objects the
        config names but cannot import. Raises :class:`~kag.errors.ConfigError` naming the setting
        that cannot be rebuilt; call :meth:`compile` with it instead.
        """
        self.compile(**compile_arguments(config, custom_objects))

    def _restore_compile_config(self, config: Any, custom_objects: Mapping[str, Any] | None) -> None:
        """:meth:`compile_from_config` for a program being loaded: settings that cannot be rebuilt
        leave it uncompiled rather than failing the load (as Keras does); why is logged and named by
        the error of a later ``fit``."""
        try:
            self.compile_from_config(config, custom_objects=custom_objects)
        except ConfigError as exc:
            log.warning("program %r loaded uncompiled: %s", self._program.name, exc)
            self._training = TrainingState(restore_error=str(exc))

    @property
    def compiled(self) -> bool:
        """Whether :meth:`compile` was called."""
        return self._training.compiled

    @property
    def optimizer(self) -> Optimizer | None:
        """The optimizer given to :meth:`compile`."""
        return self._training.optimizer

    @property
    def reward(self) -> Reward | None:
        """The reward given to :meth:`compile`."""
        return self._training.reward

    @property
    def metrics(self) -> list[Reward]:
        """The metrics given to :meth:`compile` (logged beside the reward)."""
        return list(self._training.metrics)

    def _require_compiled(self, what: str) -> Reward:
        reward = self._training.reward
        if reward is None:
            why = self._training.restore_error
            hint = f" (the saved compile settings could not be restored: {why})" if why else ""
            raise TrainingError(f"call program.compile(reward=..., optimizer=...) before {what}(){hint}.")
        return reward

    # -- variables -----------------------------------------------------------------------------
    def _held_variables(self) -> dict[str, Variable]:
        """``{module name: variable}`` of the program's trainable modules, in module order."""
        held: dict[str, Variable] = {}
        for name, module in self._program.trainable_modules().items():
            if module.variable is None:  # trainable_modules() lists only modules holding one
                raise TrainingError(f"module {name!r} is listed as trainable but holds no variable.")
            held[name] = module.variable
        return held

    @property
    def trainable_variables(self) -> list[Variable]:
        """The variables optimizers may change, in module order."""
        return [variable for variable in self._held_variables().values() if variable.trainable]

    def get_variables(self) -> dict[str, dict[str, Any]]:
        """``{module name: variable config}`` of every module that holds a variable."""
        return {name: variable.get_config() for name, variable in self._held_variables().items()}

    def set_variables(self, values: Mapping[str, Any]) -> None:
        """Set variables from :meth:`get_variables` output (configs or :class:`Variable` objects)."""
        modules = self._program.trainable_modules()
        unknown = sorted(set(values) - set(modules))
        if unknown:
            raise ConfigError(
                f"no trainable module named {unknown} in program {self._program.name!r}; it has {sorted(modules)}."
            )
        for name, value in values.items():
            variable = value if isinstance(value, Variable) else Variable.from_config(value, f"variables[{name!r}]")
            modules[name].set_variable(variable)

    def save_variables(self, path: str | os.PathLike[str]) -> Path:
        """Write the variables alone as versioned JSON (atomically: a reader never sees half a file)."""
        document = {
            "format": FORMAT,
            "version": VERSION,
            "program": self._program.name,
            "variables": self.get_variables(),
        }
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
        variables = check_variables_document(document, list(self._program.trainable_modules()), repr(str(path)))
        self.set_variables(variables)

    def _candidate(self) -> Candidate:
        """Copies of the current variables (what an optimizer changes and scores)."""
        return {name: variable.copy() for name, variable in self._held_variables().items()}

    def _assign(self, candidate: Candidate) -> None:
        """Make ``candidate``'s variables the program's."""
        modules = self._program.trainable_modules()
        for name, variable in candidate.items():
            modules[name].set_variable(variable)

    # -- data -------------------------------------------------------------------------------
    def _check_x(self, x: Any, what: str) -> list[Any]:
        """``x`` checked: a non-empty list whose every item fits the program's input."""
        return check_inputs(x, what, self._program._bind)

    def _check_y(self, y: Any, n: int, what: str) -> list[dict[str, Any]]:
        """``y`` checked: one label per input, of the program's output fields (as JSON dicts)."""
        return check_labels(y, n, what, self._program.output_model())

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
        modules = [m for m in self._program.trainable_modules().values() if isinstance(m, Teachable)]
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
                output = await self._program.call(item)
            except RewardError:
                raise
            except KagError as exc:
                return None, tuple(entries) if trace else (), f"{type(exc).__name__}: {exc}"
        if isinstance(output, list):
            raise TrainingError("training needs a program with a single output.")
        return as_json(output), tuple(entries) if trace else (), None

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
            metric_values = {m.name: await m(y[i], y_pred) for m in self._training.metrics}
            return Outcome(i, y[i], y_pred, value, entries, error), metric_values

        return await _bounded(list(indices), one, concurrency)

    async def _forced(
        self, outcome: Outcome, x: Sequence[Any], y: Sequence[dict[str, Any]], outputs: dict[str, dict[str, Any]]
    ) -> Outcome:
        """The example's run with some modules' outputs forced."""
        with forcing(outputs):
            [(found, _)] = await self._score_examples([outcome.index], x, y, trace=True, concurrency=1)
        return found

    def _summary(self, scored: Sequence[tuple[Outcome, dict[str, float]]], prefix: str = "") -> dict[str, Any]:
        n = len(scored)
        logs: dict[str, Any] = {f"{prefix}reward": sum(o.reward for o, _ in scored) / n if n else math.nan}
        for metric in self._training.metrics:
            logs[f"{prefix}{metric.name}"] = sum(m[metric.name] for _, m in scored) / n if n else math.nan
        logs[f"{prefix}errors"] = sum(1 for o, _ in scored if o.error is not None)
        return logs

    def _concurrency_of(self, concurrency: int | None) -> int:
        """The concurrency given to a call, else the one given to :meth:`compile`."""
        if concurrency is None:
            return self._training.concurrency
        return check_int(concurrency, name="concurrency")

    async def predict(self, x: Sequence[Any], *, concurrency: int | None = None) -> list[Any]:
        """The program's outputs for every input of ``x``, in order (at most ``concurrency`` at once)."""
        items = self._check_x(x, "predict")
        return await _bounded(items, self._program.call, self._concurrency_of(concurrency))

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
        optimizer = self._training.optimizer
        assert optimizer is not None  # compile sets both
        check_int(epochs, name="epochs", error=TrainingError)
        check_int(batch_size, name="batch_size", error=TrainingError)
        data = self._fit_data(x, y, validation_split, validation_data)
        workers = self._concurrency_of(concurrency)
        steps = math.ceil(len(data.x) / batch_size)
        history, callback_list = self._fit_callbacks(callbacks, verbose, epochs=epochs, steps=steps, data=data)
        rng = random.Random(seed)
        optimizer.reset()
        optimizer_rng = random.Random(optimizer.seed if optimizer.seed is not None else (seed or 0))
        scores = _CandidateScores(self, data, workers)
        self.stop_training = False
        logs: dict[str, Any] = {}
        await callback_list.on_train_begin(logs)
        for epoch in range(epochs):
            await callback_list.on_epoch_begin(epoch, {})
            order = list(range(len(data.x)))
            if shuffle:
                rng.shuffle(order)
            logs = await self._train_epoch(order, data, batch_size, workers, optimizer, callback_list)
            logs.update(await self._optimizer_step(epoch, optimizer, data, scores, optimizer_rng, workers))
            if data.has_validation:
                logs.update(self._summary(await scores.runs(self._candidate()), prefix="val_"))
            await callback_list.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        await callback_list.on_train_end(logs)
        return history

    # -- the steps of fit -----------------------------------------------------------------------
    def _fit_data(
        self,
        x: Any,
        y: Any,
        validation_split: float | None,
        validation_data: tuple[Sequence[Any], Sequence[Any]] | None,
    ) -> FitData:
        """The checked training data and its validation part.

        ``validation_split`` holds out that fraction from the end of ``(x, y)``, before any
        shuffling (as Keras does); ``validation_data`` is checked like the training data. Without
        either there is no validation data and candidates are scored on the training data.
        """
        items = self._check_x(x, "fit")
        labels = self._check_y(y, len(items), "fit")
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
            return FitData(items[:cut], labels[:cut], items[cut:], labels[cut:])
        if validation_data is not None:
            if not isinstance(validation_data, tuple | list) or len(validation_data) != 2:
                raise TrainingError("validation_data must be a pair (x_val, y_val).")
            val_x = self._check_x(validation_data[0], "fit (validation_data)")
            val_y = self._check_y(validation_data[1], len(val_x), "fit (validation_data)")
            return FitData(items, labels, val_x, val_y)
        return FitData(items, labels, [], [])

    def _fit_callbacks(
        self, callbacks: Sequence[Callback] | None, verbose: int, *, epochs: int, steps: int, data: FitData
    ) -> tuple[History, CallbackList]:
        """The :class:`History` (always first) and the callbacks of one ``fit``, told the program and
        the run's ``params`` (a progress bar added with ``verbose``)."""
        history = History()
        extra = [ProgressBar()] if verbose else []
        callback_list = CallbackList([history, *extra, *(callbacks or ())])
        callback_list.set_program(self)
        callback_list.set_params(
            {
                "epochs": epochs,
                "steps": steps,
                "samples": len(data.x),
                "validation": data.has_validation,
                "verbose": verbose,
            }
        )
        return history, callback_list

    async def _train_epoch(
        self,
        order: Sequence[int],
        data: FitData,
        batch_size: int,
        workers: int,
        optimizer: Optimizer,
        callback_list: CallbackList,
    ) -> dict[str, Any]:
        """Run the training examples in ``order``, batch by batch, and return the epoch's logs.

        Each batch runs traced (with the optimizer's teacher in place of the modules' models, if
        it has one); the optimizer sees its outcomes, and ``on_batch_end`` the running means.
        """
        done: Scored = []
        steps = math.ceil(len(order) / batch_size)
        for step in range(steps):
            await callback_list.on_batch_begin(step, {})
            batch = order[step * batch_size : (step + 1) * batch_size]
            with self._taught(optimizer.teacher):
                results = await self._score_examples(batch, data.x, data.y, trace=True, concurrency=workers)
            done.extend(results)
            await optimizer.on_batch_end([outcome for outcome, _ in results])
            await callback_list.on_batch_end(step, self._summary(done))
        return self._summary(done)

    async def _optimizer_step(
        self,
        epoch: int,
        optimizer: Optimizer,
        data: FitData,
        scores: _CandidateScores,
        rng: random.Random,
        workers: int,
    ) -> dict[str, Any]:
        """Let the optimizer choose the variables for the next epoch; returns what it logged.

        It proposes candidates and has them scored (``scores``: cached per candidate) and may
        explore failed examples (:meth:`_explore_failures`); it assigns the best itself.
        """
        context = OptimizerContext(
            variables=self._candidate,
            score=scores.reward,
            assign=self._assign,
            describe=self._program.module_info,
            rng=rng,
            explore=lambda failed, threshold, budget: self._explore_failures(
                failed, threshold, budget, data, optimizer.teacher, workers
            ),
        )
        await optimizer.on_epoch_end(epoch, context)
        return context.logs

    async def _explore_failures(
        self,
        failed: Sequence[Outcome],
        threshold: float,
        budget: SearchBudget | None,
        data: FitData,
        teacher: Any,
        workers: int,
    ) -> ExploreReport:
        """Rerun each failed training example with one module's output replaced (``rerun_failed``),
        under the teacher; the runs that reach ``threshold`` and the aliases they need are reported
        (aliases a module cannot keep are dropped)."""
        report = ExploreReport(explored=len(failed))
        with self._taught(teacher):
            modules = self._program.trainable_modules()

            async def forced(outcome: Outcome, outputs: dict[str, dict[str, Any]]) -> Outcome:
                return await self._forced(outcome, data.x, data.y, outputs)

            found = await _bounded(
                list(failed), lambda o: rerun_failed(o, modules, forced, threshold, budget, report), workers
            )
        report.found = [o for o in found if o is not None]
        await check_aliases(report.aliases, self._program.trainable_modules())
        return report

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
        return self._run(self._target._program.call(inputs))

    fit = blocking(Trainer.fit)
    evaluate = blocking(Trainer.evaluate)
    predict = blocking(Trainer.predict)
