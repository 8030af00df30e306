"""The durable embedded store: the memory store, written through to one SQLite file.

:class:`SQLiteGraphStore` is a :class:`~kag.graph.memory.MemoryGraphStore` whose
every write (upsert, delete, and the provenance retraction a document delete
causes) is also committed to SQLite as **one transaction**, and which loads its
namespace from the file when opened; :class:`SQLitePassageStore` does the same for
documents, chunks and ``MENTIONS``. Searches run on the in-memory copy, so they give
exactly the rows the memory store gives.

A write is applied in memory and committed under the store's lock before any
search or other write can see it; if the commit fails, the transaction is rolled
back and the in-memory copy is reloaded from the file, so memory never holds what
the file does not.

Durability: WAL journal with ``synchronous=FULL``. In WAL mode ``NORMAL`` survives a
process crash but may lose the last commits on power loss or an OS crash; ``FULL``
syncs the WAL at every commit, so a write that returned survives both. Writes come
in batches (one transaction per batch), so the one fsync per commit is cheap.

Namespaces: many knowledge bases share one file; every row carries its namespace
and a store reads and writes only its own. One process should write a namespace at
a time (each open store holds its own in-memory copy).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

import numpy as np

from kag.errors import ConfigError, EmbeddingError, InvalidInputError, StoreFormatError
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.memory import MemoryGraphStore, run_locked
from kag.graph.passages import ChunkRecord, DocumentRecord, Mention
from kag.graph.passages_memory import MemoryPassageStore
from kag.validation import DEFAULT_NAMESPACE, check_namespace

__all__ = ["DEFAULT_NAMESPACE", "SCHEME", "SQLiteGraphStore", "SQLitePassageStore", "parse_sqlite_uri", "sqlite_uri"]

SCHEME = "sqlite://"
FORMAT = "kag-sqlite-store"
VERSION = 1

_R = TypeVar("_R")

_SCHEMA = """
CREATE TABLE kag_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE kag_namespaces (name TEXT PRIMARY KEY, graph_dims INTEGER, passage_dims INTEGER);
CREATE TABLE kag_nodes (
    ns TEXT NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL, props TEXT NOT NULL, embedding BLOB NOT NULL,
    PRIMARY KEY (ns, id)
);
CREATE TABLE kag_relations (
    ns TEXT NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL, start TEXT NOT NULL, "end" TEXT NOT NULL,
    props TEXT NOT NULL, PRIMARY KEY (ns, id)
);
CREATE INDEX kag_relations_start ON kag_relations (ns, start);
CREATE INDEX kag_relations_end ON kag_relations (ns, "end");
CREATE TABLE kag_documents (ns TEXT NOT NULL, id TEXT NOT NULL, props TEXT NOT NULL, PRIMARY KEY (ns, id));
CREATE TABLE kag_chunks (
    ns TEXT NOT NULL, id TEXT NOT NULL, document_id TEXT NOT NULL, props TEXT NOT NULL, embedding BLOB NOT NULL,
    PRIMARY KEY (ns, id)
);
CREATE INDEX kag_chunks_document ON kag_chunks (ns, document_id);
CREATE TABLE kag_mentions (
    ns TEXT NOT NULL, chunk_id TEXT NOT NULL, entity_id TEXT NOT NULL, PRIMARY KEY (ns, chunk_id, entity_id)
);
CREATE INDEX kag_mentions_entity ON kag_mentions (ns, entity_id);
"""


def sqlite_uri(path: str | os.PathLike[str], namespace: str = DEFAULT_NAMESPACE) -> str:
    """The store URI of ``path`` and ``namespace`` (``sqlite:///abs/kb.db?namespace=x``)."""
    namespace = check_namespace(namespace)
    return f"{SCHEME}{quote(os.path.abspath(os.fspath(path)))}?namespace={quote(namespace, safe='')}"


def parse_sqlite_uri(uri: str) -> tuple[Path, str]:
    """``(path, namespace)`` of ``sqlite://path[?namespace=x]`` (``sqlite:///abs/path`` is absolute)."""
    if not uri.startswith(SCHEME):
        raise ConfigError(f"{uri!r} is not a sqlite:// URI; use e.g. 'sqlite:///path/to/kb.db?namespace=docs'.")
    parts = urlsplit(uri)
    path = unquote(parts.netloc + parts.path)
    if not path:
        raise ConfigError(f"{uri!r} names no file; use e.g. 'sqlite:///path/to/kb.db?namespace=docs'.")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"namespace"})
    if unknown:
        raise ConfigError(f"{uri!r}: unknown parameters {unknown}; sqlite:// takes only ?namespace=...")
    namespace = query.get("namespace", [DEFAULT_NAMESPACE])[-1]
    return Path(path).expanduser(), check_namespace(namespace)


def _blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype="<f4").reshape(-1).tobytes()


def _vector(blob: bytes, dims: int | None, what: str) -> np.ndarray:
    vec = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    if (dims is not None and vec.shape != (dims,)) or not np.isfinite(vec).all():
        raise StoreFormatError(f"{what} has a bad embedding; the sqlite store is damaged (restore a backup).")
    return vec


class SQLiteGraphStore(MemoryGraphStore):
    """A memory store whose namespace lives in a SQLite file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], namespace: str = DEFAULT_NAMESPACE) -> None:
        super().__init__(None)
        self.db_path = Path(path).expanduser()
        self.namespace = check_namespace(namespace)
        self.uri = sqlite_uri(self.db_path, self.namespace)
        self._passages: SQLitePassageStore | None = None
        # graph items changed by a retraction (called by the passage store, committed with its write)
        self._pending_nodes: set[str] = set()
        self._pending_rels: set[str] = set()
        self.conn = _connect(self.db_path)
        try:
            self._load_graph()
        except BaseException:
            self.conn.close()
            raise

    # -- opening ---------------------------------------------------------------
    def _load_graph(self) -> None:
        conn, ns = self.conn, self.namespace
        try:
            row = conn.execute("SELECT graph_dims FROM kag_namespaces WHERE name = ?", (ns,)).fetchone()
            dims = None if row is None or row[0] is None else int(row[0])
            nodes = [
                NodeRecord(i, label, json.loads(props), _vector(emb, dims, f"node {i!r}"))
                for i, label, props, emb in conn.execute(
                    "SELECT id, label, props, embedding FROM kag_nodes WHERE ns = ? ORDER BY rowid", (ns,)
                )
            ]
            rels = [
                RelationRecord(i, label, start, end, json.loads(props))
                for i, label, start, end, props in conn.execute(
                    'SELECT id, label, start, "end", props FROM kag_relations WHERE ns = ? ORDER BY rowid', (ns,)
                )
            ]
        except (sqlite3.DatabaseError, json.JSONDecodeError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"{self.db_path} is a damaged kag sqlite store ({exc}); restore a backup.") from exc
        if dims is not None:
            self.apply_schema((), dims)
        self.apply_upsert(nodes, rels)

    def passage_store(self) -> SQLitePassageStore:
        """The passage store of this store's namespace (one per store; loaded on first use)."""
        if self._passages is None:
            self._passages = SQLitePassageStore(self)
        return self._passages

    def _reload(self) -> None:
        """Rebuild the in-memory copy from the file (after a failed commit); call holding :attr:`lock`."""
        self.reset()
        self._pending_nodes.clear()
        self._pending_rels.clear()
        self._load_graph()
        if self._passages is not None:
            self._passages.reset()
            self._passages.load_rows()

    # -- transactions ------------------------------------------------------------
    def _transact(self, apply: Callable[[], _R], persist: Callable[[sqlite3.Connection], None]) -> _R:
        """``apply()`` in memory, then ``persist`` in one transaction; reload from the file on failure.

        ``apply`` raising one of the input errors the memory store checks before it changes
        anything propagates as is; anything else failing reloads the in-memory copy.
        """
        try:
            result = apply()
        except (StoreFormatError, EmbeddingError, InvalidInputError):
            self._pending_nodes.clear()
            self._pending_rels.clear()
            raise
        except BaseException:
            self._reload()
            raise
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                persist(self.conn)
                self._persist_graph(self.conn, self._pending_nodes, self._pending_rels)
                self._persist_dims(self.conn)
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
        except BaseException:
            self._reload()
            raise
        finally:
            self._pending_nodes.clear()
            self._pending_rels.clear()
        return result

    def _persist_dims(self, conn: sqlite3.Connection) -> None:
        passage_dims = self._passages.dimensions if self._passages is not None else None
        conn.execute(
            "INSERT INTO kag_namespaces (name, graph_dims, passage_dims) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET graph_dims = coalesce(excluded.graph_dims, graph_dims), "
            "passage_dims = coalesce(excluded.passage_dims, passage_dims)",
            (self.namespace, self.dimensions, passage_dims),
        )

    def _persist_graph(self, conn: sqlite3.Connection, node_ids: Iterable[str], rel_ids: Iterable[str]) -> None:
        """Write the current state of ``node_ids`` and ``rel_ids`` (rows of items gone are deleted)."""
        ns = self.namespace
        node_rows, gone = [], []
        for node_id in node_ids:
            node = self.node_at(node_id)
            if node is None:
                gone.append((ns, node_id))
            else:
                label, props, embedding = node
                node_rows.append((ns, node_id, label, json.dumps(props), _blob(embedding)))
        conn.executemany("INSERT OR REPLACE INTO kag_nodes VALUES (?, ?, ?, ?, ?)", node_rows)
        if gone:  # an entity goes with its relationships and its MENTIONS (as DETACH DELETE)
            conn.executemany("DELETE FROM kag_nodes WHERE ns = ? AND id = ?", gone)
            conn.executemany("DELETE FROM kag_relations WHERE ns = ? AND start = ?", gone)
            conn.executemany('DELETE FROM kag_relations WHERE ns = ? AND "end" = ?', gone)
            conn.executemany("DELETE FROM kag_mentions WHERE ns = ? AND entity_id = ?", gone)
        rel_rows, rel_gone = [], []
        for rel_id in rel_ids:
            pos = self.relation_pos(rel_id)
            if pos is None:
                rel_gone.append((ns, rel_id))
                continue
            _, label, start, end, props = self.relation_at(pos)
            rel_rows.append((ns, rel_id, label, start, end, json.dumps(props)))
        conn.executemany("INSERT OR REPLACE INTO kag_relations VALUES (?, ?, ?, ?, ?, ?)", rel_rows)
        conn.executemany("DELETE FROM kag_relations WHERE ns = ? AND id = ?", rel_gone)

    # -- writes ----------------------------------------------------------------
    async def ensure_schema(
        self, entity_labels: Sequence[str], relation_labels: Sequence[str], dimensions: int
    ) -> None:
        labels = (*entity_labels, *relation_labels)
        await run_locked(self.lock, self._transact, lambda: self.apply_schema(labels, dimensions), lambda conn: None)

    async def upsert(self, nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord]) -> None:
        def persist(conn: sqlite3.Connection) -> None:
            self._persist_graph(conn, dict.fromkeys(n.id for n in nodes), dict.fromkeys(r.id for r in relations))

        await run_locked(self.lock, self._transact, lambda: self.apply_upsert(nodes, relations), persist)

    async def delete(self, ids: Sequence[str]) -> int:
        unique = list(dict.fromkeys(ids))

        def persist(conn: sqlite3.Connection) -> None:
            # an id that named a node is gone from both maps now: delete it (with its edges) as a node
            # and as a relation
            self._persist_graph(conn, unique, unique)

        return await run_locked(self.lock, self._transact, lambda: self.apply_delete(unique), persist)

    def retract(self, chunk_ids: Collection[str]) -> dict[str, int]:
        """As :meth:`MemoryGraphStore.retract`; the items it changes are committed with the caller's write."""
        if chunk_ids:
            nodes, rels = self.provenance_of(chunk_ids)
            self._pending_nodes.update(nodes)
            self._pending_rels.update(rels)
        return super().retract(chunk_ids)

    # -- persistence -------------------------------------------------------------
    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Not needed: every write is committed to the file when it returns."""
        raise ConfigError(f"{self.uri} commits every write as it happens; there is nothing to save().")

    async def aclose(self) -> None:
        self.conn.close()


class SQLitePassageStore(MemoryPassageStore):
    """Documents, chunks and ``MENTIONS`` of one :class:`SQLiteGraphStore` namespace."""

    def __init__(self, graph_store: SQLiteGraphStore) -> None:
        super().__init__(graph_store)
        self.store = graph_store
        self.load_rows()

    def load_rows(self) -> None:
        """Load this namespace's documents, chunks and mentions from the file (into an empty store)."""
        conn, ns, path = self.store.conn, self.store.namespace, self.store.db_path
        try:
            row = conn.execute("SELECT passage_dims FROM kag_namespaces WHERE name = ?", (ns,)).fetchone()
            dims = None if row is None or row[0] is None else int(row[0])
            documents = [
                DocumentRecord.from_properties(json.loads(props))
                for (props,) in conn.execute("SELECT props FROM kag_documents WHERE ns = ? ORDER BY id", (ns,))
            ]
            chunks = [
                ChunkRecord.from_properties(json.loads(props), _vector(emb, dims, f"chunk {cid!r}"))
                for cid, props, emb in conn.execute("SELECT id, props, embedding FROM kag_chunks WHERE ns = ?", (ns,))
            ]
            mentions = conn.execute("SELECT chunk_id, entity_id FROM kag_mentions WHERE ns = ?", (ns,)).fetchall()
        except (sqlite3.DatabaseError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"{path} is a damaged kag sqlite store ({exc}); restore a backup.") from exc
        self.load_records(documents, chunks, [(c, e) for c, e in mentions], dims)

    def _persist_mentions(self, conn: sqlite3.Connection, chunk_ids: Iterable[str]) -> None:
        """Replace the stored MENTIONS of ``chunk_ids`` by their live links."""
        ns = self.store.namespace
        ids = list(dict.fromkeys(chunk_ids))
        conn.executemany("DELETE FROM kag_mentions WHERE ns = ? AND chunk_id = ?", [(ns, c) for c in ids])
        conn.executemany(
            "INSERT INTO kag_mentions VALUES (?, ?, ?)",
            [(ns, c, e) for c, e in self.live_mentions(ids)],
        )

    def _delete_documents_rows(
        self, conn: sqlite3.Connection, doc_ids: Sequence[str], chunk_ids: Sequence[str]
    ) -> None:
        ns = self.store.namespace
        conn.executemany("DELETE FROM kag_mentions WHERE ns = ? AND chunk_id = ?", [(ns, c) for c in chunk_ids])
        conn.executemany("DELETE FROM kag_chunks WHERE ns = ? AND document_id = ?", [(ns, d) for d in doc_ids])

    # -- writes ----------------------------------------------------------------
    async def ensure_schema(self, dimensions: int) -> None:
        await run_locked(
            self.store.lock, self.store._transact, lambda: self.apply_schema(dimensions), lambda conn: None
        )

    async def write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        doc_ids = list(dict.fromkeys(d.id for d in documents))
        old_chunks: list[str] = []

        def apply() -> None:
            old_chunks[:] = [c for d in doc_ids for c in self.chunk_ids(d)]  # under the lock
            self.apply_write(documents, chunks, mentions)

        def persist(conn: sqlite3.Connection) -> None:
            ns = self.store.namespace
            self._delete_documents_rows(conn, doc_ids, old_chunks)
            conn.executemany(
                "INSERT OR REPLACE INTO kag_documents VALUES (?, ?, ?)",
                [(ns, d.id, json.dumps(d.properties())) for d in documents],
            )
            conn.executemany(
                "INSERT OR REPLACE INTO kag_chunks VALUES (?, ?, ?, ?, ?)",
                [(ns, c.id, c.document_id, json.dumps(c.properties()), _blob(c.embedding)) for c in chunks],
            )
            self._persist_mentions(conn, [*(c.id for c in chunks), *(m[0] for m in mentions)])

        await run_locked(self.store.lock, self.store._transact, apply, persist)

    async def delete_documents(self, ids: Sequence[str]) -> int:
        """As :meth:`MemoryPassageStore.delete_documents`, committed in one transaction."""
        found: list[str] = []
        chunk_ids: list[str] = []

        def apply() -> int:
            found[:], chunk_ids[:] = self.apply_delete_documents(ids)  # retracts through self.store.retract
            return len(found)

        def persist(conn: sqlite3.Connection) -> None:
            self._delete_documents_rows(conn, found, chunk_ids)
            conn.executemany(
                "DELETE FROM kag_documents WHERE ns = ? AND id = ?", [(self.store.namespace, d) for d in found]
            )

        return await run_locked(self.store.lock, self.store._transact, apply, persist)

    async def link(self, mentions: Sequence[Mention]) -> int:
        return await run_locked(
            self.store.lock,
            self.store._transact,
            lambda: self.apply_link(mentions),
            lambda conn: self._persist_mentions(conn, [m[0] for m in mentions]),
        )

    async def clear(self) -> None:
        def persist(conn: sqlite3.Connection) -> None:
            for table in ("kag_documents", "kag_chunks", "kag_mentions"):
                conn.execute(f"DELETE FROM {table} WHERE ns = ?", (self.store.namespace,))

        await run_locked(self.store.lock, self.store._transact, self.apply_clear, persist)

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Not needed: every write is committed to the file when it returns."""
        raise ConfigError(f"{self.store.uri} commits every write as it happens; there is nothing to save().")


def _connect(path: Path) -> sqlite3.Connection:
    """Open (creating when new) a kag sqlite file: WAL, synchronous=FULL, schema checked."""
    if path.is_dir():
        raise ConfigError(f"sqlite store {path} is a directory; name a file such as {path / 'kb.db'}.")
    if not path.parent.is_dir():
        raise ConfigError(f"sqlite store {path}: the directory {path.parent} does not exist; create it first.")
    try:
        # writes run in worker threads, one at a time under the store's lock
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open sqlite store {path} ({exc}); check the path and its permissions.") from exc
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            conn.execute("BEGIN IMMEDIATE")
            try:
                _create_schema(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return conn
        if "kag_meta" not in tables:
            raise StoreFormatError(
                f"{path} is a SQLite database but not a kag store; pass another path for the knowledge base."
            )
        meta = dict(conn.execute("SELECT key, value FROM kag_meta").fetchall())
        if meta.get("format") != FORMAT:
            raise StoreFormatError(f"{path} is not a kag sqlite store (no format marker); pass another path.")
        if meta.get("version") != str(VERSION):
            raise StoreFormatError(
                f"{path} has kag sqlite store version {meta.get('version')!r}; this kag reads {VERSION}. "
                "Open it with the kag version that wrote it, or re-index into a new file."
            )
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreFormatError(
            f"{path} is not a kag sqlite store ({exc}); pass another path, or move the file away to start a new store."
        ) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _create_schema(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.executemany("INSERT INTO kag_meta VALUES (?, ?)", [("format", FORMAT), ("version", str(VERSION))])
