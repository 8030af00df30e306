"""Rewards and optimizers as JSON: ``{"class": ..., "config": {...}}``, and back.

The shape of Keras's serialized objects, kept small: ``class`` is the class name of a built-in
(``"BootstrapFewShot"``, ``"ExactMatch"``) or the import path ``"package.module:QualName"`` of
any other class, ``config`` what its ``get_config()`` wrote; ``from_config`` rebuilds it. A
function (a :class:`~kag.training.rewards.FunctionReward`'s) is kept by its import path.
Rebuilding imports the modules a config names: only load configs you trust.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kag.errors import ConfigError

__all__ = ["class_key", "deserialize", "function_path", "import_function", "resolve_class", "serialize"]

T = TypeVar("T")


def _import_path(obj: Any) -> str | None:
    """``"package.module:QualName"`` of a class or function, ``None`` where it cannot be imported back."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname:  # <locals>, <lambda>: not importable
        return None
    return f"{module}:{qualname}"


def class_key(cls: type, builtins: Mapping[str, type]) -> str:
    """The ``class`` a config names ``cls`` by: its name when it is a built-in, else its import path."""
    if builtins.get(cls.__name__) is cls:
        return cls.__name__
    path = _import_path(cls)
    if path is None:
        raise ConfigError(
            f"{cls.__qualname__} cannot be saved by import path: define it at module level "
            "(not inside a function) so that it can be imported when loading."
        )
    return path


def _import(path: str, what: str) -> Any:
    if path.count(":") != 1:
        raise ConfigError(
            f"{what}: expected a built-in name or an import path 'package.module:QualName', got {path!r}."
        )
    module_name, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"{what}: cannot import {path!r} ({exc}); make it importable or pass it in custom_objects."
        ) from exc
    return obj


def resolve_class(
    key: Any,
    base: type[T],
    builtins: Mapping[str, type[T]],
    custom_objects: Mapping[str, Any] | None,
    what: str,
) -> type[T]:
    """The class a config's ``class`` names: from ``custom_objects`` (by path or bare name), a
    built-in, or imported; it must subclass ``base``."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{what}: 'class' must be a class name or an import path, got {key!r}.")
    found: Any = None
    for name in (key, key.rpartition(":")[2]):
        if custom_objects and name in custom_objects:
            found = custom_objects[name]
            break
    if found is None:
        found = builtins.get(key)
    if found is None:
        if ":" not in key:
            raise ConfigError(
                f"{what}: unknown class {key!r}; use one of {sorted(builtins)}, an import path "
                "'package.module:QualName', or pass the class in custom_objects."
            )
        found = _import(key, what)
    if not (isinstance(found, type) and issubclass(found, base)):
        raise ConfigError(f"{what}: {key!r} is not a subclass of {base.__name__}; refusing to build it.")
    return found


def serialize(obj: Any, builtins: Mapping[str, type]) -> dict[str, Any]:
    """``{"class": ..., "config": obj.get_config()}``, checked to be JSON."""
    spec = {"class": class_key(type(obj), builtins), "config": obj.get_config()}
    try:
        json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the config of {obj!r} is not JSON ({exc}); make its get_config() return JSON.") from exc
    return spec


def deserialize(
    spec: Any,
    base: type[T],
    builtins: Mapping[str, type[T]],
    custom_objects: Mapping[str, Any] | None,
    what: str,
    build: Callable[[type[T], Mapping[str, Any]], T] | None = None,
) -> T:
    """The object :func:`serialize` wrote (``build(cls, config)`` instead of ``cls.from_config``)."""
    if not isinstance(spec, Mapping) or "class" not in spec:
        raise ConfigError(
            f"{what} config must be a dict {{'class': <name or import path>, 'config': {{...}}}}, got {spec!r}."
        )
    unknown = sorted(set(spec) - {"class", "config"})
    if unknown:
        raise ConfigError(f"{what} config has unknown keys {unknown}; it takes 'class' and 'config'.")
    cls = resolve_class(spec["class"], base, builtins, custom_objects, what)
    config = spec.get("config") or {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{what} config: 'config' must be a dict of {cls.__name__}'s arguments, got {config!r}.")
    try:
        if build is not None:
            return build(cls, config)
        return cls.from_config(config)  # type: ignore[attr-defined]
    except TypeError as exc:
        raise ConfigError(
            f"{what} config does not fit {cls.__name__} ({exc}); give the arguments {cls.__name__}(...) takes, "
            "as its get_config() writes them."
        ) from exc
    except ConfigError as exc:
        raise ConfigError(f"{what} config: {exc}") from exc


def function_path(function: Any) -> str | None:
    """The import path of a module-level function, ``None`` for a lambda or a nested function."""
    return _import_path(function)


def import_function(path: Any, custom_objects: Mapping[str, Any] | None, what: str) -> Callable[..., Any]:
    """The function saved by :func:`function_path` (or given in ``custom_objects`` by path or name)."""
    if not isinstance(path, str) or not path:
        raise ConfigError(
            f"{what}: its function was not saved (a lambda or a nested function cannot be imported); "
            "pass it in custom_objects={name: function}, or define it at module level."
        )
    for name in (path, path.rpartition(":")[2]):
        if custom_objects and name in custom_objects:
            found = custom_objects[name]
            break
    else:
        found = _import(path, what)
    if not callable(found):
        raise ConfigError(f"{what}: {path!r} is not a function.")
    return found
