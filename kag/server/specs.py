"""Reading what a user names on the command line or in the server's settings.

* :func:`load_schema` reads ``--schema``: ``package.module:ATTR`` (a list of
  ``Entity``/``Relation`` classes, one class, or a ``GraphSchema``) or
  ``package.module`` exposing ``ENTITY_MODELS`` / ``RELATION_MODELS``. The
  default is the world-geography models of :mod:`kag.examples.world`.
* :func:`check_kb_uri` reads ``--kb``; :func:`parse_lm_spec` and
  :func:`build_language_model` read ``--lm`` (``lexical``, ``openai:MODEL[@BASE_URL]``,
  ``ollama:MODEL[@BASE_URL]``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kag.datamodels.base import Entity, Relation
from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError, SchemaError, UsageError
from kag.graph import NEO4J_SCHEMES, default_uri
from kag.graph.memory import MemoryGraphStore
from kag.graph.sqlite import SQLiteGraphStore, parse_sqlite_uri
from kag.knowledge.base import KnowledgeBase
from kag.lm.base import LanguageModel

__all__ = [
    "DEFAULT_SCHEMA",
    "EXAMPLE_SCHEMAS",
    "LMSpec",
    "SchemaSpec",
    "backend_name",
    "build_language_model",
    "check_kb_uri",
    "default_kb_uri",
    "load_schema",
    "parse_lm_spec",
    "public_uri",
]

DEFAULT_SCHEMA = "kag.examples.world"


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class SchemaSpec:
    """The models a ``--schema`` value names."""

    entity_models: tuple[type[Entity], ...]
    relation_models: tuple[type[Relation], ...]
    source: str

    @property
    def graph_schema(self) -> GraphSchema:
        """The validated :class:`GraphSchema` of these models."""
        return GraphSchema(list(self.entity_models), list(self.relation_models))


def _import_module(name: str) -> Any:
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:  # `kag --schema myschema:MODELS` finds modules of the current directory, like `python -m`
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"--schema: cannot import module {name!r} ({exc}).") from None
    except Exception as exc:  # the module itself failed while importing
        raise UsageError(f"--schema: importing {name!r} failed: {type(exc).__name__}: {exc}") from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _split_models(items: Iterable[Any], where: str) -> tuple[list[type[Entity]], list[type[Relation]]]:
    entities: list[type[Entity]] = []
    relations: list[type[Relation]] = []
    for item in items:
        if isinstance(item, type) and issubclass(item, Relation):
            relations.append(item)
        elif isinstance(item, type) and issubclass(item, Entity):
            entities.append(item)
        else:
            raise UsageError(f"--schema: {where} holds {item!r}, which is not an Entity or Relation class.")
    return entities, relations


def load_schema(spec: str | None = None) -> SchemaSpec:
    """Resolve a ``--schema`` value (``None``: :data:`DEFAULT_SCHEMA`).

    ``package.module:ATTR``: ``ATTR`` is a list/tuple of Entity and Relation
    classes, a single class, or a :class:`GraphSchema`. ``package.module``: the
    module's ``ENTITY_MODELS`` and ``RELATION_MODELS``.

    Raises:
        UsageError: the module cannot be imported, the attribute is missing, or it
            does not hold models; or the models do not form a valid schema.
    """
    text = DEFAULT_SCHEMA if spec is None else spec.strip()
    if not text or text.count(":") > 1:
        raise UsageError(f"--schema must be 'package.module:ATTR' or 'package.module', got {spec!r}.")
    module_name, _, attr = text.partition(":")
    if not module_name or (":" in text and not attr):
        raise UsageError(f"--schema must be 'package.module:ATTR' or 'package.module', got {spec!r}.")
    module = _import_module(module_name)
    entities: list[type[Entity]] = []
    relations: list[type[Relation]] = []
    if attr:
        obj: Any = module
        try:
            for part in attr.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--schema: module {module_name!r} has no attribute {attr!r}.") from None
        if isinstance(obj, GraphSchema):
            entities, relations = list(obj.entity_models), list(obj.relation_models)
        elif isinstance(obj, type):
            entities, relations = _split_models([obj], text)
        elif isinstance(obj, list | tuple | set | frozenset):
            entities, relations = _split_models(obj, text)
        else:
            raise UsageError(f"--schema: {text} is a {type(obj).__name__}; expected a list of Entity/Relation classes.")
    else:
        found_e = getattr(module, "ENTITY_MODELS", None)
        found_r = getattr(module, "RELATION_MODELS", None)
        if found_e is None and found_r is None:
            raise UsageError(
                f"--schema: module {module_name!r} defines neither ENTITY_MODELS nor RELATION_MODELS; "
                f"name the models with '{module_name}:ATTR'."
            )
        entities, _ = _split_models(found_e or (), f"{module_name}.ENTITY_MODELS")
        _, relations = _split_models(found_r or (), f"{module_name}.RELATION_MODELS")
    try:
        schema = GraphSchema(entities, relations)
    except SchemaError as exc:
        raise UsageError(f"--schema {text}: {exc}") from None
    if not schema.entity_labels:
        raise UsageError(f"--schema {text} declares no entity model.")
    return SchemaSpec(tuple(schema.entity_models), tuple(schema.relation_models), text)


# --------------------------------------------------------------------------- knowledge base URI


def default_kb_uri() -> str:
    """``$KAG_KB``, else ``$NEO4J_URI``, else ``memory://`` (an explicit ``--kb`` wins over both)."""
    return default_uri()


def check_kb_uri(uri: str) -> str:
    """Check a ``--kb`` value: ``memory://``, ``memory://path.json``, ``sqlite://path.db[?namespace=x]`` or ``neo4j://``."""
    if not isinstance(uri, str) or not uri.strip():
        raise UsageError("--kb must be a URI such as memory://kb.json or neo4j://127.0.0.1:7687.")
    uri = uri.strip()
    if uri.startswith("memory://"):
        path = uri[len("memory://") :]
        if path and Path(path).expanduser().is_dir():
            raise UsageError(f"--kb {uri}: {path} is a directory; name a file such as {path.rstrip('/')}/kb.json.")
        parent = Path(path).expanduser().parent if path else None
        if parent is not None and not parent.is_dir():
            raise UsageError(f"--kb {uri}: the directory {parent} does not exist; create it first (mkdir -p {parent}).")
        return uri
    if uri.startswith("sqlite://"):
        try:
            db_path, _ = parse_sqlite_uri(uri)
        except ConfigError as exc:
            raise UsageError(f"--kb {uri}: {exc}") from exc
        if db_path.is_dir():
            raise UsageError(f"--kb {uri}: {db_path} is a directory; name a file such as {db_path / 'kb.db'}.")
        if not db_path.parent.is_dir():
            raise UsageError(f"--kb {uri}: the directory {db_path.parent} does not exist; create it first.")
        return uri
    if uri.startswith(NEO4J_SCHEMES):
        if not urlsplit(uri).hostname:
            raise UsageError(f"--kb {uri}: no host; use e.g. neo4j://127.0.0.1:7687.")
        return uri
    raise UsageError(
        f"unsupported --kb URI {uri!r}: use memory://, memory://path/to/kb.json, "
        "sqlite:///path/to/kb.db?namespace=docs or neo4j://host:7687."
    )


def public_uri(uri: str) -> str:
    """``uri`` without credentials (``neo4j://user:pw@host`` -> ``neo4j://host``)."""
    if uri.startswith(("memory://", "sqlite://")):
        return uri
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def backend_name(kb: KnowledgeBase) -> str:
    """``"memory"``, ``"sqlite"`` or ``"neo4j"`` (else the store's class name)."""
    if isinstance(kb.store, SQLiteGraphStore):
        return "sqlite"
    if isinstance(kb.store, MemoryGraphStore):
        return "memory"
    if kb.uri.startswith(NEO4J_SCHEMES):
        return "neo4j"
    return type(kb.store).__name__


# --------------------------------------------------------------------------- language model


@dataclass(frozen=True)
class LMSpec:
    """A parsed ``--lm`` value."""

    kind: str  # "lexical", "openai", "ollama", "local" (the packaged GGUF) or "llama" (a GGUF file)
    model: str = ""
    base_url: str | None = None

    def __str__(self) -> str:
        if self.kind in ("lexical", "local"):
            return self.kind
        if self.kind == "llama":
            return f"llama:{self.model}"
        return f"{self.kind}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def parse_lm_spec(spec: str | None) -> LMSpec:
    """Parse ``lexical`` (default), ``local``, ``llama:PATH.gguf``, ``openai:MODEL[@BASE_URL]`` or
    ``ollama:MODEL[@BASE_URL]``."""
    text = (spec or "lexical").strip()
    if text in ("lexical", "local"):
        return LMSpec(text)
    kind, sep, rest = text.partition(":")
    if kind == "llama" and sep:
        if not rest.strip():
            raise UsageError(f"--lm {spec!r}: give the model file, e.g. llama:/models/qwen2.5-1.5b-instruct.gguf.")
        return LMSpec("llama", rest.strip())
    if not sep or kind not in ("openai", "ollama"):
        raise UsageError(
            "--lm must be 'lexical', 'local', 'llama:PATH.gguf', 'openai:MODEL[@BASE_URL]' or "
            f"'ollama:MODEL[@BASE_URL]'; got {spec!r}."
        )
    model, at, base_url = rest.partition("@")
    if not model.strip():
        raise UsageError(f"--lm {spec!r}: the model name is empty (e.g. openai:gpt-4o-mini, ollama:llama3.1:8b).")
    if at and not base_url.strip():
        raise UsageError(f"--lm {spec!r}: the base URL after '@' is empty.")
    return LMSpec(kind, model.strip(), base_url.strip() or None)


def check_lm_credentials(spec: LMSpec) -> None:
    """Refuse, before anything connects, a model that cannot answer: ``openai:MODEL`` on api.openai.com
    without ``$OPENAI_API_KEY`` (a server of your own, ``openai:MODEL@URL``, may need no key).

    Raises:
        UsageError: the key is missing, with what to do about it.
    """
    if spec.kind != "openai" or os.environ.get("OPENAI_API_KEY"):
        return
    host = urlsplit(spec.base_url).hostname if spec.base_url else "api.openai.com"
    if host == "api.openai.com":
        raise UsageError(
            f"--lm {spec}: api.openai.com needs an API key, and OPENAI_API_KEY is not set: export it "
            f"(kag never takes keys on the command line), or name a server of your own with "
            f"--lm openai:{spec.model}@http://HOST:PORT/v1, or use --lm local (offline)."
        )


def build_language_model(spec: LMSpec | str | None, kb: KnowledgeBase) -> LanguageModel:
    """The language model of a ``--lm`` value (``lexical`` looks names up in ``kb``).

    The OpenAI client reads ``$OPENAI_API_KEY``; keys are never taken from the command line.
    """
    parsed = spec if isinstance(spec, LMSpec) else parse_lm_spec(spec)
    try:
        if parsed.kind == "lexical":
            from kag.lm.lexical import LexicalLM

            return LexicalLM(knowledge_base=kb)
        if parsed.kind in ("local", "llama"):
            from kag.lm.llamacpp import LlamaCppLM

            return LlamaCppLM.from_spec(str(parsed))
        if parsed.kind == "openai":
            from kag.lm.openai import OpenAICompatibleLM

            if parsed.base_url:
                return OpenAICompatibleLM(parsed.model, base_url=parsed.base_url)
            return OpenAICompatibleLM(parsed.model)
        from kag.lm.ollama import OllamaLM

        if parsed.base_url:
            return OllamaLM(parsed.model, base_url=parsed.base_url)
        return OllamaLM(parsed.model)
    except ConfigError as exc:
        raise UsageError(f"--lm {parsed}: {exc}") from None


# --------------------------------------------------------------------------- the service


EXAMPLE_SCHEMAS = {"world": "kag.examples.world", "seed": "kag.examples.seed", "countries": "kag.examples.countries"}
