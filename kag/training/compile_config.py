"""A program's compile settings as JSON, and back (Keras's ``compile_config``).

``Program.save`` writes them beside the program under ``"compile_config"``::

    {"reward": {"class": "AnswerSetF1", "config": {...}},
     "optimizer": {"class": "BootstrapFewShot", "config": {...}},
     "metrics": [{"class": "ExactMatch", "config": {"name": "accuracy", ...}}],
     "concurrency": 4}

and ``Program.load`` compiles the loaded program with them, so it can ``fit`` again at once.
What a config cannot hold (an optimizer's ``teacher``, a language model or an embedder a reward
takes) is not saved: such a setting is passed again with ``compile``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kag.errors import ConfigError
from kag.training.optimizers import get_optimizer, serialize_optimizer
from kag.training.rewards import get_reward, serialize_reward
from kag.training.state import TrainingState

__all__ = ["compile_arguments", "compile_config"]

_KEYS = ("reward", "optimizer", "metrics", "concurrency")


def compile_config(state: TrainingState) -> dict[str, Any] | None:
    """The settings of a compiled program as JSON (``None`` before ``compile``).

    Raises:
        ConfigError: a reward or optimizer that cannot be saved (a class defined inside a
            function, a config that is not JSON).
    """
    if state.reward is None or state.optimizer is None:
        return None
    return {
        "reward": serialize_reward(state.reward),
        "optimizer": serialize_optimizer(state.optimizer),
        "metrics": [serialize_reward(metric) for metric in state.metrics],
        "concurrency": state.concurrency,
    }


def compile_arguments(config: Any, custom_objects: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``compile``'s keyword arguments rebuilt from :func:`compile_config` output.

    Raises:
        ConfigError: a config that is not one, or a setting that cannot be rebuilt (the message
            says which, and what to pass instead).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"compile_config must be a dict with {list(_KEYS)}, got {type(config).__name__}.")
    unknown = sorted(set(config) - set(_KEYS))
    if unknown:
        raise ConfigError(f"compile_config has unknown keys {unknown}; it takes {list(_KEYS)}.")
    if "reward" not in config:
        raise ConfigError("compile_config has no 'reward'; compile the program with program.compile(reward=...).")
    metrics = config.get("metrics") or []
    if not isinstance(metrics, list):
        raise ConfigError(f"compile_config 'metrics' must be a list of reward configs, got {metrics!r}.")
    arguments: dict[str, Any] = {
        "reward": get_reward(config["reward"], custom_objects=custom_objects),
        "metrics": [get_reward(m, "metric", custom_objects=custom_objects) for m in metrics],
    }
    if config.get("optimizer") is not None:
        arguments["optimizer"] = get_optimizer(config["optimizer"], custom_objects=custom_objects)
    if "concurrency" in config:
        arguments["concurrency"] = config["concurrency"]
    return arguments
