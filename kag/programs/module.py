"""``Module``, symbolic data models and ``Input``: the building blocks of programs.

A module is an async callable from pydantic models to a pydantic model. Called
on *data* it runs (``await module(Query(...))``); called on a *symbolic* tensor
(an :class:`Input`, or another module's symbolic output) it records a node of
the program graph and returns a new symbolic tensor, without running anything.
Symbolic tensors are awaitable (they resolve to themselves), so the same
``x = await module(inputs)`` line works while tracing and while running.

This module also holds the configuration helpers shared by every module:
import paths (``"module:QualName"``), secret scrubbing, and rebuilding language
models and knowledge bases from configs.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import re
import urllib.parse
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import pydantic
from pydantic import BaseModel

from kag.datamodels.base import DataModel
from kag.errors import ConfigError, InvalidInputError
from kag.training.variables import Variable

if TYPE_CHECKING:
    from kag.knowledge.base import KnowledgeBase
    from kag.lm.base import LanguageModel

__all__ = [
    "Input",
    "Module",
    "Node",
    "SymbolicDataModel",
    "concat_models",
    "import_object",
    "is_symbolic",
    "object_path",
    "scrub_secrets",
]

_counters: dict[str, itertools.count[int]] = {}
_SNAKE_1 = re.compile(r"(.)([A-Z][a-z]+)")
_SNAKE_2 = re.compile(r"([a-z0-9])([A-Z])")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.@-]{0,127}$")
# Keys never written to a config, whatever object produced them (defence in depth:
# language models already leave their keys out of get_config()).
# Whole-key match, so that e.g. "max_tokens" is kept while "access_token" is dropped.
_SECRET_KEY = re.compile(
    r"(?i)^(.*[_-])?(api[_-]?key|apikey|password|passwd|secret|token|authorization|"
    r"credentials?|cookie|private[_-]?key|auth)$"
)


def _snake(name: str) -> str:
    return _SNAKE_2.sub(r"\1_\2", _SNAKE_1.sub(r"\1_\2", name)).lower()


def unique_name(base: str) -> str:
    """``base``, then ``base_1``, ``base_2``... (process-wide, like Keras layer names)."""
    counter = _counters.setdefault(base, itertools.count())
    n = next(counter)
    return base if n == 0 else f"{base}_{n}"


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"{what} {name!r} is not a valid name: use letters, digits, '_', '.', '-' "
            "(starting with a letter or '_', at most 128 characters)."
        )
    return name


class SymbolicDataModel:
    """A placeholder for a value flowing through a program graph being traced.

    ``data_model`` is the pydantic model the value will have; ``node`` is the
    call that produces it (``None`` for an :class:`Input`).
    """

    def __init__(self, data_model: type[BaseModel], *, name: str, node: Node | None = None) -> None:
        if not (isinstance(data_model, type) and issubclass(data_model, BaseModel)):
            raise ConfigError(f"data_model must be a pydantic model class, got {data_model!r}.")
        self.data_model = data_model
        self.name = _check_name(name, "tensor name")
        self.node = node

    def __await__(self) -> Generator[Any, None, SymbolicDataModel]:
        # Awaiting a symbolic tensor yields the tensor itself: tracing code may
        # write `x = await module(inputs)` exactly like code that runs.
        return self
        yield  # pragma: no cover - unreachable; makes this method a generator

    @property
    def fields(self) -> tuple[str, ...]:
        """The field names of ``data_model``."""
        return tuple(self.data_model.model_fields)

    def __repr__(self) -> str:
        producer = self.node.module.name if self.node is not None else "input"
        return f"<SymbolicDataModel {self.name!r} {self.data_model.__name__} from {producer}>"


class Input(SymbolicDataModel):
    """A program input: ``inputs = kag.Input(data_model=Query)``."""

    def __init__(self, data_model: type[BaseModel], *, name: str | None = None) -> None:
        super().__init__(data_model, name=name or unique_name("input"))


class Node:
    """One recorded module call: ``module(inbound) -> output``."""

    def __init__(self, module: Module, inbound: tuple[SymbolicDataModel, ...], multi: bool) -> None:
        self.module = module
        self.inbound = inbound
        self.multi = multi  # called with a list (the module receives a list of models)
        self.output: SymbolicDataModel  # set right after construction

    def __repr__(self) -> str:
        return f"<Node {self.module.name}({', '.join(t.name for t in self.inbound)})>"


def is_symbolic(inputs: Any) -> bool:
    """True for a symbolic tensor or a non-empty list/tuple of them (mixing is refused)."""
    if isinstance(inputs, SymbolicDataModel):
        return True
    if isinstance(inputs, list | tuple) and inputs:
        flags = [isinstance(x, SymbolicDataModel) for x in inputs]
        if any(flags) and not all(flags):
            raise InvalidInputError(
                "a module was called with a mix of symbolic tensors and data; pass only "
                "symbolic tensors (to build a program) or only data (to run)."
            )
        return all(flags)
    return False


class Module:
    """Base class of program steps: an async ``call(inputs) -> pydantic model``.

    Subclasses implement :meth:`call` and :meth:`compute_output_model` (the
    output model for given input models, needed to trace a program), and
    override :meth:`get_config` / :meth:`from_config` to be saved and loaded.

    ``await module(data)`` runs :meth:`call`; ``module(symbolic)`` traces.
    """

    variable: Variable | None = None
    """The trainable state (instructions and demos) of a module that learns; ``None`` for the others."""

    def __init__(self, *, name: str | None = None, description: str | None = None) -> None:
        self.name = _check_name(name, "module name") if name is not None else unique_name(_snake(type(self).__name__))
        self.description = description
        self._calls = 0

    @property
    def trainable(self) -> bool:
        """Whether optimizers may change this module's variable (``False`` for a module without one)."""
        return self.variable is not None and self.variable.trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        if self.variable is None:
            if value:
                raise ConfigError(f"{type(self).__name__} holds no trainable variable.")
            return
        self.variable.trainable = bool(value)

    def set_variable(self, variable: Variable) -> None:
        """Take ``variable``'s instructions and demos (subclasses check that they fit first)."""
        if self.variable is None:
            raise ConfigError(f"{type(self).__name__} {self.name!r} holds no trainable variable.")
        self.variable.assign(variable)

    def restore_variable(self, config: Mapping[str, Any]) -> Self:
        """Take the ``"variable"`` a saved config holds (``from_config`` calls it); returns ``self``."""
        saved = config.get("variable")
        if saved is not None:
            variable = Variable.from_config(saved, f"{self.name}.variable")
            self.set_variable(variable)
            self.trainable = variable.trainable
        return self

    async def call(self, inputs: Any) -> BaseModel:
        """Run the module on data: one pydantic model (or a list of them)."""
        raise NotImplementedError(f"{type(self).__name__} must implement `async def call(self, inputs)`.")

    def compute_output_model(self, input_models: Sequence[type[BaseModel]]) -> type[BaseModel]:
        """The model :meth:`call` returns for inputs of ``input_models`` (used while tracing)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement compute_output_model(input_models) to be used in a traced Program."
        )

    def __call__(self, inputs: Any) -> Any:
        """Trace on symbolic tensors (returns one); run on data (returns a coroutine to await)."""
        if is_symbolic(inputs):
            return self._trace(inputs)
        return self.call(inputs)

    def _trace(self, inputs: SymbolicDataModel | Sequence[SymbolicDataModel]) -> SymbolicDataModel:
        multi = not isinstance(inputs, SymbolicDataModel)
        inbound: tuple[SymbolicDataModel, ...] = (inputs,) if isinstance(inputs, SymbolicDataModel) else tuple(inputs)
        model = self.compute_output_model([t.data_model for t in inbound])
        node = Node(self, inbound, multi)
        name = self.name if self._calls == 0 else f"{self.name}@{self._calls}"
        self._calls += 1
        node.output = SymbolicDataModel(model, name=name, node=node)
        return node.output

    def get_config(self) -> dict[str, Any]:
        """JSON-serializable constructor arguments (never credentials, clients or callables)."""
        return {"name": self.name, "description": self.description}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **runtime: Any) -> Self:
        """Rebuild from :meth:`get_config` output; ``runtime`` holds objects configs cannot hold."""
        return cls(**dict(config))

    def summary_fields(self) -> str:
        """A short description of the module's settings for ``Program.summary()``."""
        return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


# -- models ----------------------------------------------------------------------------


def concat_models(
    name: str, models: Sequence[type[BaseModel]], extra: Mapping[str, tuple[Any, Any]] | None = None
) -> type[BaseModel]:
    """A new model with the fields of ``models`` then ``extra`` (``name -> (type, default or FieldInfo)``).

    A field name used twice is refused (rename it, or turn ``return_inputs`` off).
    """
    fields: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for model in models:
        for field_name, info in model.model_fields.items():
            if field_name in fields:
                raise ConfigError(
                    f"field {field_name!r} is defined by both {origin[field_name]} and "
                    f"{model.__name__}; rename one of them or set return_inputs=False."
                )
            fields[field_name] = (info.annotation, copy.copy(info))
            origin[field_name] = model.__name__
    for field_name, spec in (extra or {}).items():
        if field_name in fields:
            raise ConfigError(
                f"the input field {field_name!r} (from {origin[field_name]}) clashes with an output "
                "field of the same name; rename the input field or set return_inputs=False."
            )
        fields[field_name] = spec
        origin[field_name] = name
    created: type[BaseModel] = pydantic.create_model(name, __base__=DataModel, **fields)
    return created


def as_model(value: Any, model: type[BaseModel]) -> BaseModel:
    """``value`` (a model instance, another model, or a dict) validated as ``model``."""
    if isinstance(value, model):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"expected a {model.__name__} (or a dict of its fields), got {type(value).__name__}.")
    try:
        return model.model_validate(dict(value))
    except pydantic.ValidationError as exc:
        raise InvalidInputError(f"invalid {model.__name__}: {exc}") from exc


def as_list(inputs: Any) -> list[Any]:
    """Inputs of a module call as a list (one model, or a list/tuple of models)."""
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]


# -- configs ---------------------------------------------------------------------------


def object_path(obj: Any) -> str:
    """``"package.module:QualName"`` of a class, refusing what cannot be imported back."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or "<" in qualname:
        raise ConfigError(
            f"{obj!r} cannot be saved by import path: define it at module level "
            "(not inside a function) so that it can be imported when loading."
        )
    return f"{module}:{qualname}"


def import_object(path: Any, base: type, custom_objects: Mapping[str, Any] | None = None) -> Any:
    """Import ``"module:QualName"`` and check it is a subclass of ``base``.

    Loading a config imports the modules it names: only load configs you trust.
    ``custom_objects`` maps paths (or bare class names) to objects to use instead.
    """
    if custom_objects:
        for key in (path, str(path).rpartition(":")[2]):
            if key in custom_objects:
                obj = custom_objects[key]
                break
        else:
            obj = None
        if obj is not None:
            if not (isinstance(obj, type) and issubclass(obj, base)):
                raise ConfigError(f"custom object {path!r} is not a {base.__name__} subclass.")
            return obj
    if not isinstance(path, str) or path.count(":") != 1:
        raise ConfigError(f"expected an import path 'package.module:QualName', got {path!r}.")
    module_name, _, qualname = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {path!r} ({exc}); make it importable or pass it in custom_objects.") from exc
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ConfigError(f"{path!r} is not a {base.__name__} subclass; refusing to load it.")
    return obj


def scrub_secrets(value: Any) -> Any:
    """A deep copy of a JSON-like config without credential-like keys (api_key, password...)."""
    if isinstance(value, Mapping):
        return {str(k): scrub_secrets(v) for k, v in value.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [scrub_secrets(v) for v in value]
    return value


def safe_uri(uri: str) -> str:
    """``uri`` without user info and without credential-like query parameters."""
    parts = urllib.parse.urlsplit(uri)
    params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in params if not _SECRET_KEY.search(k)]
    if "@" not in parts.netloc and len(kept) == len(params):
        return uri  # nothing to remove; keep the URI byte for byte (memory:///path stays valid)
    netloc = parts.netloc.rpartition("@")[2]
    query = f"?{urllib.parse.urlencode(kept)}" if kept else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}{fragment}"


def runtime_for(value: Any, module_name: str) -> Any:
    """A runtime object given to ``from_config``: one object, or a ``{module_name: object}`` dict."""
    if isinstance(value, Mapping):
        return value.get(module_name)
    return value


def language_model_config(lm: Any) -> dict[str, Any]:
    """The config of a language model (its own ``get_config``, scrubbed of secrets)."""
    get_config = getattr(lm, "get_config", None)
    if get_config is None:
        raise ConfigError(f"language model {lm!r} has no get_config(); it cannot be saved.")
    config = get_config()
    if not isinstance(config, Mapping):
        raise ConfigError(f"{type(lm).__name__}.get_config() must return a dict.")
    result: dict[str, Any] = scrub_secrets(config)
    return result


def rebuild_language_model(
    config: Mapping[str, Any] | None,
    language_model: LanguageModel | None,
    knowledge_base: KnowledgeBase | None,
) -> LanguageModel:
    """The language model to use when loading: the runtime one, else one rebuilt from ``config``."""
    if language_model is not None:
        return language_model
    if not isinstance(config, Mapping):
        raise ConfigError("no language model config was saved: pass language_model=... to load.")
    if config.get("type") == "lexical":
        from kag.lm.lexical import LexicalLM

        return LexicalLM.from_config(config, knowledge_base=knowledge_base)
    from kag.lm import language_model_from_config

    try:
        return language_model_from_config(config)
    except ConfigError as exc:
        raise ConfigError(f"{exc} Pass language_model=... to load with an existing model.") from exc


def knowledge_base_config(kb: Any) -> dict[str, Any]:
    """URI (without credentials), model import paths and embedder settings of a knowledge base."""
    from kag.rag.embedders import HashEmbedder

    embedder = getattr(kb, "embedder", None)
    if isinstance(embedder, HashEmbedder):
        emb: dict[str, Any] = {
            "type": "hash",
            "dimensions": embedder.dimensions,
            "trigram_weight": embedder.trigram_weight,
        }
    else:
        emb = {"type": "custom", "name": str(getattr(embedder, "name", type(embedder).__name__))}
    return {
        "uri": safe_uri(str(kb.uri)),
        "entity_models": [object_path(m) for m in kb.schema.entity_models],
        "relation_models": [object_path(m) for m in kb.schema.relation_models],
        "embedder": emb,
    }


def rebuild_knowledge_base(
    config: Mapping[str, Any] | None,
    knowledge_base: KnowledgeBase | None,
    custom_objects: Mapping[str, Any] | None = None,
) -> KnowledgeBase:
    """The knowledge base to use when loading: the runtime one, else one reopened from ``config``."""
    if knowledge_base is not None:
        return knowledge_base
    if not isinstance(config, Mapping):
        raise ConfigError("no knowledge base config was saved: pass knowledge_base=... to load.")
    from kag.datamodels.base import Entity, Relation
    from kag.knowledge.base import KnowledgeBase
    from kag.rag.embedders import HashEmbedder

    uri = str(config.get("uri", ""))
    if uri in ("memory://", ""):
        raise ConfigError(
            "the knowledge base was an in-process memory:// store, which cannot be reopened: "
            "pass knowledge_base=... to load."
        )
    emb = config.get("embedder") or {}
    if emb.get("type") != "hash":
        raise ConfigError(
            f"the knowledge base used a custom embedder ({emb.get('name')!r}), which is not "
            "serialized: pass knowledge_base=... to load."
        )
    return KnowledgeBase(
        uri,
        entity_models=[import_object(p, Entity, custom_objects) for p in config.get("entity_models", [])],
        relation_models=[import_object(p, Relation, custom_objects) for p in config.get("relation_models", [])],
        embedder=HashEmbedder(int(emb["dimensions"]), trigram_weight=float(emb.get("trigram_weight", 1.0))),
    )
