"""``History``: what ``fit`` returns, the logs of every epoch."""

from __future__ import annotations

from typing import Any

from kag.training.callbacks import Callback, Logs

__all__ = ["History"]


class History(Callback):
    """The per-epoch logs of a ``fit``: ``history.history["val_reward"]`` is one number per epoch.

    Attributes:
        epoch: the epochs run (0-based); history: ``{log key: [value per epoch]}``;
        params: the fit's parameters (epochs, steps, samples, validation).
    """

    def __init__(self) -> None:
        super().__init__()
        self.epoch: list[int] = []
        self.history: dict[str, list[Any]] = {}

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)

    def to_dict(self) -> dict[str, Any]:
        """``{"epoch": [...], "history": {...}, "params": {...}}`` as JSON data."""
        return {
            "epoch": list(self.epoch),
            "history": {k: list(v) for k, v in self.history.items()},
            "params": self.params,
        }

    def __repr__(self) -> str:
        last = {k: v[-1] for k, v in self.history.items() if v}
        return f"History(epochs={len(self.epoch)}, last={last})"
