"""Callbacks: code that runs at the stages of ``fit`` (Keras-shaped).

A callback overrides any of ``on_train_begin/end``, ``on_epoch_begin/end``,
``on_batch_begin/end``; ``logs`` is a dict of the numbers so far (``reward``,
``val_reward``, metrics). Hooks may be plain methods or coroutines. The trainer
sets ``callback.program`` before training starts; a callback may set
``program.stop_training = True`` to end ``fit`` after the current epoch.
"""

from __future__ import annotations

import csv
import importlib.util
import inspect
import io
import math
import os
import re
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kag.errors import CheckpointError, ConfigError, StoreError, TrainingError
from kag.files import atomic_write_text
from kag.validation import check_int

__all__ = [
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "LambdaCallback",
    "ProgramCheckpoint",
    "ProgressBar",
]

Logs = dict[str, Any]
OPTIMIZER_LOGS = ("candidates", "explored", "found")  # keys optimizers add to an epoch's logs
HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_batch_begin", "on_batch_end")


class Callback:
    """Base class; every hook does nothing until overridden."""

    def __init__(self) -> None:
        self.program: Any = None
        self.params: dict[str, Any] = {}

    def set_program(self, program: Any) -> None:
        """Called by the trainer before training."""
        self.program = program

    def set_params(self, params: Mapping[str, Any]) -> None:
        """``epochs``, ``steps`` (batches per epoch), ``samples``, ``validation`` (bool), ``verbose``."""
        self.params = dict(params)

    def on_train_begin(self, logs: Logs | None = None) -> Any:
        """Before the first epoch."""

    def on_train_end(self, logs: Logs | None = None) -> Any:
        """After the last epoch (also after an early stop)."""

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> Any:
        """Before each epoch (0-based)."""

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> Any:
        """After each epoch, with the epoch's ``reward`` and, with validation data, ``val_reward``."""

    def on_batch_begin(self, batch: int, logs: Logs | None = None) -> Any:
        """Before each training batch (0-based within the epoch)."""

    def on_batch_end(self, batch: int, logs: Logs | None = None) -> Any:
        """After each training batch, with the running mean ``reward`` of the epoch."""


class CallbackList(Callback):
    """The callbacks of one ``fit``: each hook runs that hook on every callback in order.

    The trainer calls the hooks by name (``await callbacks.on_epoch_end(epoch, logs)``), never
    through a string; a hook a callback wrote as a coroutine is awaited.
    """

    def __init__(self, callbacks: Sequence[Callback] | None = None) -> None:
        super().__init__()
        self.callbacks: list[Callback] = []
        for cb in callbacks or ():
            if not isinstance(cb, Callback):
                raise ConfigError(f"callbacks must be kag.training.Callback instances, got {type(cb).__name__}.")
            self.callbacks.append(cb)

    def set_program(self, program: Any) -> None:
        super().set_program(program)
        for cb in self.callbacks:
            cb.set_program(program)

    def set_params(self, params: Mapping[str, Any]) -> None:
        super().set_params(params)
        for cb in self.callbacks:
            cb.set_params(params)

    async def on_train_begin(self, logs: Logs | None = None) -> None:
        """Run every callback's ``on_train_begin``."""
        for cb in self.callbacks:
            await _settled(cb.on_train_begin(logs))

    async def on_train_end(self, logs: Logs | None = None) -> None:
        """Run every callback's ``on_train_end``."""
        for cb in self.callbacks:
            await _settled(cb.on_train_end(logs))

    async def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        """Run every callback's ``on_epoch_begin``."""
        for cb in self.callbacks:
            await _settled(cb.on_epoch_begin(epoch, logs))

    async def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        """Run every callback's ``on_epoch_end``."""
        for cb in self.callbacks:
            await _settled(cb.on_epoch_end(epoch, logs))

    async def on_batch_begin(self, batch: int, logs: Logs | None = None) -> None:
        """Run every callback's ``on_batch_begin``."""
        for cb in self.callbacks:
            await _settled(cb.on_batch_begin(batch, logs))

    async def on_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        """Run every callback's ``on_batch_end``."""
        for cb in self.callbacks:
            await _settled(cb.on_batch_end(batch, logs))


async def _settled(result: Any) -> Any:
    """``result`` itself, or what it gives once awaited (a hook may be a plain method or a coroutine)."""
    if inspect.isawaitable(result):
        return await result
    return result


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(self, **hooks: Callable[..., Any]) -> None:
        super().__init__()
        unknown = sorted(set(hooks) - set(HOOKS))
        if unknown:
            raise ConfigError(f"unknown callback hook(s) {unknown}; use {list(HOOKS)}.")
        for hook, function in hooks.items():
            setattr(self, hook, function)


def _better(mode: str, value: float, best: float, min_delta: float = 0.0) -> bool:
    return value > best + min_delta if mode == "max" else value < best - min_delta


def _check_mode(mode: str) -> str:
    if mode not in ("max", "min"):
        raise ConfigError(f"mode must be 'max' or 'min', got {mode!r}.")
    return mode


def _check_monitor(monitor: str, params: Mapping[str, Any], who: str) -> None:
    if monitor.startswith("val_") and not params.get("validation"):
        raise TrainingError(
            f"{who} monitors {monitor!r}, but fit() has no validation data: pass validation_data=... or "
            f"validation_split=..., or monitor={monitor[4:]!r}."
        )


class ProgramCheckpoint(Callback):
    """Saves the program's variables (or the whole program) after an epoch.

    Args:
        filepath: where to write; may contain ``{epoch}`` and log keys (``"ckpt-{epoch:02d}.json"``).
        monitor: the log key compared between epochs (``"val_reward"``).
        save_best_only: write only when ``monitor`` improves (else after every epoch).
        mode: ``"max"`` (rewards) or ``"min"``.
        save_program: write the whole program (``program.save``) instead of its variables.

    Files are replaced atomically (:mod:`kag.files`), so a ``fit`` interrupted or killed at any
    moment leaves the last checkpoint whole. The path is checked before the first model call: a
    missing or read-only folder, a path that is a directory, and a ``{field}`` that is not a log
    key or does not format are refused with a :class:`~kag.errors.CheckpointError` naming the file.
    A folder removed during ``fit`` is a ``CheckpointError`` at the next save.
    """

    def __init__(
        self,
        filepath: str | os.PathLike[str],
        monitor: str = "val_reward",
        *,
        save_best_only: bool = True,
        mode: str = "max",
        save_program: bool = False,
    ) -> None:
        super().__init__()
        self.filepath = str(filepath)
        self.monitor = monitor
        self.save_best_only = bool(save_best_only)
        self.mode = _check_mode(mode)
        self.save_program = bool(save_program)
        self.best = -math.inf if mode == "max" else math.inf
        self.saved: list[Path] = []

    def _path(self, epoch: int, logs: Mapping[str, Any]) -> Path:
        try:
            return Path(self.filepath.format(epoch=epoch + 1, **logs))
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
            raise CheckpointError(f"checkpoint filepath {self.filepath!r} cannot be formatted: {exc}") from exc

    def _log_keys(self) -> list[str]:
        """The keys ``fit`` logs at an epoch's end (for checking ``{field}``s before training)."""
        names = ["reward", "errors", *(m.name for m in getattr(self.program, "metrics", ()))]
        keys = [*names, *OPTIMIZER_LOGS]
        if self.params.get("validation"):
            keys += [f"val_{name}" for name in names]
        return keys

    def _check_template(self) -> Path:
        """The path of the first epoch, formatted with stand-in values; refuses unknown or bad fields."""
        try:
            fields = {name for _, name, _, _ in string.Formatter().parse(self.filepath) if name}
        except ValueError as exc:
            raise CheckpointError(f"checkpoint filepath {self.filepath!r} cannot be formatted: {exc}.") from exc
        allowed = ["epoch", *self._log_keys()]
        unknown = sorted(f for f in fields if re.split(r"[.\[]", f, maxsplit=1)[0] not in allowed)
        if unknown:
            raise CheckpointError(
                f"checkpoint filepath {self.filepath!r} names {unknown}, which fit() does not log; "
                f"use {{epoch}} or one of {allowed[1:]}."
            )
        return self._path(0, {key: 0.5 for key in allowed[1:]})

    def on_train_begin(self, logs: Logs | None = None) -> None:
        _check_monitor(self.monitor, self.params, "ProgramCheckpoint")
        first = self._check_template()
        parent = first.parent
        if not parent.is_dir():
            raise CheckpointError(f"cannot write checkpoints to {self.filepath!r}: {parent} is not a directory.")
        if not os.access(parent, os.W_OK):
            raise CheckpointError(f"cannot write checkpoints to {self.filepath!r}: {parent} is not writable.")
        if first.is_dir():
            raise CheckpointError(
                f"cannot write checkpoint {str(first)!r}: it is a directory; give a file name (e.g. {first}/ckpt.json)."
            )

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        logs = logs or {}
        value = logs.get(self.monitor)
        if self.save_best_only:
            if value is None:
                raise TrainingError(f"ProgramCheckpoint monitors {self.monitor!r}, which fit() does not log.")
            if not _better(self.mode, float(value), self.best):
                return
            self.best = float(value)
        path = self._path(epoch, logs)
        try:
            if self.save_program:
                self.program.save(path)
            else:
                self.program.save_variables(path)
        except CheckpointError:
            raise
        except (OSError, StoreError) as exc:  # a folder removed mid-fit, a full disk: the last checkpoint is whole
            raise CheckpointError(
                f"cannot write checkpoint {str(path)!r}: {exc} The previous checkpoint is unchanged; "
                "make the folder writable again and re-run fit from it (load_variables)."
            ) from exc
        self.saved.append(path)


class EarlyStopping(Callback):
    """Stops ``fit`` when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs.

    With ``restore_best_variables`` the program ends with the variables of its best epoch.
    """

    def __init__(
        self,
        monitor: str = "val_reward",
        *,
        patience: int = 0,
        min_delta: float = 0.0,
        mode: str = "max",
        restore_best_variables: bool = False,
    ) -> None:
        super().__init__()
        self.monitor = monitor
        self.patience = check_int(patience, name="patience", minimum=0)
        self.min_delta = abs(float(min_delta))
        self.mode = _check_mode(mode)
        self.restore_best_variables = bool(restore_best_variables)
        self.wait = 0
        self.best = -math.inf if mode == "max" else math.inf
        self.best_variables: dict[str, Any] | None = None
        self.stopped_epoch: int | None = None

    def on_train_begin(self, logs: Logs | None = None) -> None:
        _check_monitor(self.monitor, self.params, "EarlyStopping")
        self.wait, self.stopped_epoch, self.best_variables = 0, None, None
        self.best = -math.inf if self.mode == "max" else math.inf

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise TrainingError(f"EarlyStopping monitors {self.monitor!r}, which fit() does not log.")
        if _better(self.mode, float(value), self.best, self.min_delta):
            self.best, self.wait = float(value), 0
            if self.restore_best_variables:
                self.best_variables = self.program.get_variables()
            return
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch = epoch
            self.program.stop_training = True

    def on_train_end(self, logs: Logs | None = None) -> None:
        if self.restore_best_variables and self.best_variables is not None:
            self.program.set_variables(self.best_variables)


class CSVLogger(Callback):
    """Writes one CSV row per epoch (``epoch`` then the logs, columns fixed by the first epoch).

    The file is rewritten atomically after each epoch (:mod:`kag.files`): a ``fit`` killed at
    any moment leaves it with every finished epoch's row, never a torn line.
    """

    def __init__(self, filename: str | os.PathLike[str], *, append: bool = False) -> None:
        super().__init__()
        self.filename = Path(filename)
        self.append = bool(append)
        self._keys: list[str] | None = None
        self._text = ""  # the file as written so far (rewritten whole, atomically, each epoch)

    def _write(self, text: str) -> None:
        try:
            atomic_write_text(self.filename, text)
        except (OSError, StoreError) as exc:
            raise CheckpointError(f"cannot write the training log {str(self.filename)!r}: {exc}") from exc
        self._text = text

    def on_train_begin(self, logs: Logs | None = None) -> None:
        if not self.filename.parent.is_dir():
            raise CheckpointError(f"cannot write {str(self.filename)!r}: {self.filename.parent} is not a directory.")
        if self.filename.is_dir():
            raise CheckpointError(f"cannot write {str(self.filename)!r}: it is a directory; give a file name.")
        self._keys = None
        previous = ""
        if self.append and self.filename.exists():
            try:
                previous = self.filename.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CheckpointError(f"cannot append to {str(self.filename)!r}: {exc}") from exc
            if previous and not previous.endswith("\n"):
                previous += "\n"
        self._write(previous)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        logs = {k: v for k, v in (logs or {}).items() if isinstance(v, int | float | str)}
        if self._keys is None:
            self._keys = sorted(logs)
        rows = io.StringIO()
        writer = csv.writer(rows)
        if not self._text:
            writer.writerow(["epoch", *self._keys])
        writer.writerow([epoch, *(logs.get(k, "") for k in self._keys)])
        self._write(self._text + rows.getvalue())


class ProgressBar(Callback):
    """A progress bar over the training batches of each epoch (tqdm; a notebook widget in Jupyter).

    The bar is drawn where it can be redrawn in place: a terminal (tqdm's text bar) or a Jupyter
    kernel with ipywidgets (its widget). Elsewhere (a notebook without ipywidgets, an executed
    notebook's saved output, a log file) every redraw of a text bar would stay as a line of its own,
    so it prints one line per epoch instead, as it does without tqdm installed
    (``pip install 'graph-kag[train]'``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._bar: Any = None

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        tqdm = _bar_class()
        if tqdm is None:
            self._bar = None
            return
        self._bar = tqdm(
            total=self.params.get("steps", 0),
            desc=f"epoch {epoch + 1}/{self.params.get('epochs', '?')}",
            unit="batch",
            leave=True,
        )

    def on_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(_short(logs), refresh=False)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self._bar is not None:
            self._bar.set_postfix(_short(logs), refresh=True)
            self._bar.close()
            self._bar = None
        else:
            # One line per epoch on stderr, where tqdm would have drawn, so stdout stays the
            # program's own output.
            steps = self.params.get("steps", 0)
            shown = ", ".join(f"{k}={v}" for k, v in _short(logs).items())
            print(
                f"epoch {epoch + 1}/{self.params.get('epochs', '?')}: {steps}/{steps} batches, {shown}",
                file=sys.stderr,
            )


def _bar_class() -> Any:
    """tqdm's widget in a Jupyter kernel with ipywidgets, its text bar on a terminal, else ``None``."""
    try:
        import tqdm
    except ImportError:
        return None
    if "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm as widget_or_text

        return widget_or_text
    stream = sys.stderr
    if stream is not None and getattr(stream, "isatty", lambda: False)():
        return tqdm.tqdm
    return None


def _short(logs: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: f"{v:.3f}" if isinstance(v, float) else str(v) for k, v in (logs or {}).items()}
