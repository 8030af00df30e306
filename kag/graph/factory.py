"""Choosing a store: a graph store from a URI, and the passage store that goes with a graph store.

The one place that knows every backend, so the backends never import each other.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from kag.errors import ConfigError
from kag.graph.base import GraphStore
from kag.graph.memory import MemoryGraphStore
from kag.graph.neo4j import Neo4jGraphStore
from kag.graph.passages import PassageStore
from kag.graph.passages_memory import MemoryPassageStore
from kag.graph.passages_neo4j import Neo4jPassageStore
from kag.graph.sqlite import SCHEME as SQLITE_SCHEME
from kag.graph.sqlite import SQLiteGraphStore, parse_sqlite_uri
from kag.validation import DEFAULT_NAMESPACE, check_namespace

NEO4J_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")


def default_uri() -> str:
    """The store used when none is named: ``$KAG_KB``, else ``$NEO4J_URI``, else ``memory://``."""
    return os.environ.get("KAG_KB") or os.environ.get("NEO4J_URI") or "memory://"


def open_store(uri: str | None = None, **options: Any) -> GraphStore:
    """Open the store a URI names: ``memory://[path]``, ``sqlite://path[?namespace=x]`` or ``neo4j://host:port``.

    ``uri=None`` is :func:`default_uri`; with a caller's ``driver=`` and no URI anywhere, the store
    is on Neo4j through that driver. ``namespace=`` names the tenant the store reads and writes
    (every backend; a memory store holds exactly one namespace, so it is only a name there).
    """
    namespace = options.pop("namespace", None)
    if namespace is not None:
        check_namespace(namespace)
    if uri is None:
        uri = default_uri()
        if uri == "memory://" and options.get("driver") is not None:
            uri = "neo4j://localhost:7687"  # only a label: the caller's driver decides where it connects
    if not isinstance(uri, str):
        raise ConfigError(f"store URI must be a string, got {type(uri).__name__}.")
    if uri.startswith("memory://"):
        path = uri[len("memory://") :]
        if options:
            raise ConfigError(f"memory:// takes no options but namespace=, got {sorted(options)}.")
        memory = MemoryGraphStore(path or None)
        memory.namespace = namespace or DEFAULT_NAMESPACE
        return memory
    if uri.startswith(SQLITE_SCHEME):
        if options:
            raise ConfigError(f"sqlite:// takes no options (the namespace goes in the URI), got {sorted(options)}.")
        db_path, in_uri = parse_sqlite_uri(uri)
        if namespace is not None and "namespace=" in uri and namespace != in_uri:
            raise ConfigError(f"namespace={namespace!r} contradicts the URI's namespace {in_uri!r}.")
        return SQLiteGraphStore(db_path, namespace or in_uri)
    if uri.startswith(NEO4J_SCHEMES):
        return Neo4jGraphStore(uri, namespace=namespace or DEFAULT_NAMESPACE, **options)
    raise ConfigError(
        f"unsupported store URI {uri!r}: use 'memory://', 'memory://path/to/kb.json', "
        "'sqlite:///path/to/kb.db?namespace=docs' or 'neo4j://host:7687'."
    )


_MEMORY_STORES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def passage_store_for(store: Any) -> PassageStore:
    """The passage store of a graph store (memory stores share one side structure per store)."""
    if isinstance(store, SQLiteGraphStore):  # before MemoryGraphStore: it is one
        return store.passage_store()
    if isinstance(store, MemoryGraphStore):
        found = _MEMORY_STORES.get(store)
        if found is None:
            path = None if store.path is None else store.path.with_name(store.path.name + ".passages.json")
            found = _MEMORY_STORES[store] = MemoryPassageStore(store, path=path)
        result: PassageStore = found
        return result
    if isinstance(store, Neo4jGraphStore):
        return Neo4jPassageStore(store)
    raise ConfigError(
        f"{type(store).__name__} has no passage support; pass passage_store=... "
        "(an object implementing kag.graph.passages.PassageStore)."
    )


def open_namespace(store: GraphStore, namespace: str) -> GraphStore:
    """A store of the same backend and settings as ``store``, in ``namespace`` (a tenant).

    Neo4j: the same database through the same driver (it stays owned by ``store``: close
    ``store`` last). SQLite: the same file. Memory: a new, empty in-process store; a
    persistent ``memory://kb.json`` gives ``kb.<namespace>.json`` beside it.
    """
    namespace = check_namespace(namespace)
    if isinstance(store, SQLiteGraphStore):  # before MemoryGraphStore: it is one
        return SQLiteGraphStore(store.db_path, namespace)
    if isinstance(store, MemoryGraphStore):
        path = store.path
        if path is not None and namespace != getattr(store, "namespace", DEFAULT_NAMESPACE):
            path = path.with_name(f"{path.stem}.{namespace}{path.suffix}")
        memory = MemoryGraphStore(path)
        memory.namespace = namespace
        return memory
    if isinstance(store, Neo4jGraphStore):
        return store.in_namespace(namespace)
    raise ConfigError(f"{type(store).__name__} does not support namespaces; open one store per tenant yourself.")
