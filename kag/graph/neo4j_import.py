"""First load of a large graph into an EMPTY Neo4j database with Neo4j's offline importer.

``neo4j-admin database import full`` writes the store files directly, without transactions,
locks or per-row index updates; it is the fastest way Neo4j offers to load a graph, and the
only sensible one for a first load of millions of rows. It has three preconditions:

* the target database must not be running: stop the server, or import into the data
  directory of a server that has not started yet (on Neo4j Community only the default
  ``neo4j`` database exists, so this is an offline first-load tool, not an online ingest);
* the target database must be empty: ``overwrite=True`` replaces whatever is there;
* every relation's endpoints must be among the imported nodes.

Constraints and indexes are not imported: start the server and open the knowledge base
(``ensure_schema`` creates kag's constraints and vector indexes, which Neo4j then populates
from the imported nodes in one pass). After that, write with ``KnowledgeBase.upsert`` as
usual. Use the online path (``Neo4jGraphStore.upsert`` / ``bulk_upsert``) for anything that
is not a first load of an empty database.

The CSVs follow the schema ``Neo4jGraphStore`` writes: nodes carry the labels
``KagEntity`` and their own label, the properties ``id``, ``kag_ns`` (the namespace) and
``embedding`` (``double[]``, the same type an online write stores) plus their flat
properties; relations carry ``id``, ``kag_ns`` and their properties. The importer parses
line-break aware (one thread per file) only when some cell holds a line break. Command line::

    python -m kag.graph.neo4j_import --store kb.json --home .neo4j/home --lib .neo4j/lib

reads a saved memory store (``MemoryGraphStore.save``) and imports it into the server home
``--home`` (its ``conf/neo4j.conf`` names the data directory) with the jars in ``--lib``
(``deploy/neo4j/neo4j.sh install`` puts both in place).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kag.errors import ConfigError, InvalidInputError, StoreError
from kag.graph.base import NodeRecord, RelationRecord
from kag.graph.memory import MemoryGraphStore
from kag.graph.neo4j import ENTITY
from kag.query.cypher import NAMESPACE, quote
from kag.validation import DEFAULT_NAMESPACE, check_namespace

ARRAY_DELIMITER = "\x1f"  # unit separator: never inside kag ids, labels or property texts
_LINES = 8192  # CSV lines joined per write
_SCALARS: dict[type, str] = {bool: "boolean", int: "long", float: "double", str: "string"}
# JVM flags the importer needs on Java 17/21 (page cache and direct buffers), as in deploy/neo4j/neo4j.sh
_JAVA_FLAGS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
)


@dataclass(frozen=True)
class ImportFiles:
    """The CSV files of one import: one file per node label and per relation type."""

    nodes: list[Path] = field(default_factory=list)
    relations: list[Path] = field(default_factory=list)
    node_count: int = 0
    relation_count: int = 0
    # the files with a line break inside a cell: the importer must parse them line-break aware
    multiline: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class ImportResult:
    """What an import wrote and how long each step took."""

    nodes: int
    relations: int
    csv_seconds: float
    import_seconds: float


def _column_type(label: str, key: str, values: Sequence[Any]) -> str:
    """The importer's type of a property column: one scalar type or an array of one (ints widen to float)."""
    kinds: set[str] = set()
    array = False
    # one pass over the value types (a million relations share a handful); lists are opened after
    for kind_of in {type(value) for value in values}:
        if kind_of is type(None):
            continue
        if kind_of is list or kind_of is tuple:
            array = True
            continue
        kinds.add(_scalar_kind(label, key, kind_of))
    if array:
        for value in values:
            if isinstance(value, (list, tuple)):
                kinds.update(_scalar_kind(label, key, type(item)) for item in value)
    if kinds == {"long", "double"}:
        kinds = {"double"}
    if len(kinds) > 1:
        raise InvalidInputError(f"{label}.{key} mixes {sorted(kinds)}; give the property one type.")
    kind = kinds.pop() if kinds else "string"
    return kind + "[]" if array else kind


def _scalar_kind(label: str, key: str, kind_of: type) -> str:
    kind = _SCALARS.get(kind_of)
    if kind is None:
        raise InvalidInputError(
            f"{label}.{key} holds a {kind_of.__name__}; Neo4j properties are numbers, texts, "
            "booleans or lists of one of them."
        )
    return kind


def _cell(value: Any, kind: str, owner: str, key: str) -> str:
    """The CSV text of one property value (``owner.key`` names it in errors)."""
    kind_of = type(value)
    # fast paths for the scalar cells a large load is made of
    if kind_of is str:
        return _text(value, owner, key)
    if kind_of is int and kind == "long":
        return str(value)
    if value is None:
        return ""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, float) or kind.startswith("double"):
            number = float(item)
            if not math.isfinite(number):
                raise InvalidInputError(f"{owner}.{key} is not a finite number.")
            out.append(repr(number))
        else:
            out.append(_text(str(item), owner, key))
    return ARRAY_DELIMITER.join(out)


def _text(text: str, owner: str, key: str) -> str:
    """``text`` as a CSV cell: it must not hold the importer's array delimiter."""
    if ARRAY_DELIMITER in text:
        raise InvalidInputError(f"{owner}.{key} contains the control character U+001F.")
    return text


def _write(path: Path, header: list[str], rows: Iterable[list[str]]) -> bool:
    """Write one CSV file; True when a cell holds a line break (the file then needs multiline parsing)."""
    broken = False
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        writer.writerow(header)
        plain: list[str] = []

        def flush() -> None:
            if plain:
                fh.write("\n".join(plain) + "\n")
                plain.clear()

        for row in rows:
            line = ",".join(row)
            if line.count(",") == len(row) - 1 and '"' not in line and "\n" not in line and "\r" not in line:
                # no cell needs quoting: the bytes the csv module would write, at a third of its cost
                plain.append(line)
                if len(plain) >= _LINES:
                    flush()
                continue
            flush()  # rows stay in order
            broken = broken or "\n" in line or "\r" in line
            writer.writerow(row)
        flush()
    return broken


def _property_columns(label: str, items: Sequence[dict[str, Any]], reserved: set[str]) -> list[tuple[str, str]]:
    keys = sorted({k for props in items for k in props} - reserved)
    for key in keys:
        quote(key)  # the same identifier rule as every Cypher name kag writes
    return [(key, _column_type(label, key, [props.get(key) for props in items])) for key in keys]


def write_csvs(
    nodes: Sequence[NodeRecord],
    relations: Sequence[RelationRecord],
    directory: Path,
    namespace: str = DEFAULT_NAMESPACE,
) -> ImportFiles:
    """Write the importer's CSV files for ``nodes`` and ``relations`` of ``namespace`` into ``directory``.

    Raises:
        InvalidInputError: a property value Neo4j cannot store, a duplicate id, or a relation
            whose endpoint is not among ``nodes``.
    """
    namespace = check_namespace(namespace)
    directory.mkdir(parents=True, exist_ok=True)
    by_label: dict[str, list[NodeRecord]] = defaultdict(list)
    seen: set[str] = set()
    dims = None
    for node in nodes:
        if node.id in seen:
            raise InvalidInputError(f"node id {node.id!r} appears twice; the importer needs unique ids.")
        seen.add(node.id)
        vec = np.asarray(node.embedding, dtype=np.float32).reshape(-1)
        if dims is None:
            dims = vec.shape[0]
        if vec.shape[0] != dims:
            raise InvalidInputError(f"node {node.id!r} has {vec.shape[0]} dimensions, the others {dims}.")
        by_label[node.label].append(node)
    files = ImportFiles()
    for number, (label, group) in enumerate(sorted(by_label.items())):
        quote(label)
        cols = _property_columns(label, [n.properties for n in group], {"id", "embedding", NAMESPACE})
        header = ["id:ID", ":LABEL", f"{NAMESPACE}:string", *[f"{k}:{t}" for k, t in cols], "embedding:double[]"]
        labels = ARRAY_DELIMITER.join([ENTITY, label])

        def node_rows(
            group: list[NodeRecord] = group, cols: list[tuple[str, str]] = cols, labels: str = labels
        ) -> Iterable[list[str]]:
            for n in group:
                vec = np.asarray(n.embedding, dtype=np.float32).reshape(-1)
                if not np.isfinite(vec).all():
                    raise InvalidInputError(f"node {n.id!r} has a non-finite embedding.")
                yield [
                    n.id,
                    labels,
                    namespace,
                    *[_cell(n.properties.get(k), t, n.id, k) for k, t in cols],
                    ARRAY_DELIMITER.join(map(repr, vec.tolist())),
                ]

        path = directory / f"nodes_{number}.csv"
        if _write(path, header, node_rows()):
            files.multiline.append(path)
        files.nodes.append(path)
    by_type: dict[str, list[RelationRecord]] = defaultdict(list)
    rel_ids: set[str] = set()
    for rel in relations:
        if rel.start not in seen or rel.end not in seen:
            missing = rel.start if rel.start not in seen else rel.end
            raise InvalidInputError(f"relation {rel.id!r} refers to {missing!r}, which is not among the nodes.")
        if rel.id in rel_ids:
            raise InvalidInputError(f"relation id {rel.id!r} appears twice; the importer needs unique ids.")
        rel_ids.add(rel.id)
        by_type[rel.label].append(rel)
    for number, (label, rgroup) in enumerate(sorted(by_type.items())):
        quote(label)
        cols = _property_columns(label, [r.properties for r in rgroup], {"id", NAMESPACE})
        header = [":START_ID", ":END_ID", ":TYPE", "id:string", f"{NAMESPACE}:string", *[f"{k}:{t}" for k, t in cols]]

        def rel_rows(rgroup: list[RelationRecord] = rgroup, cols: list[tuple[str, str]] = cols) -> Iterable[list[str]]:
            for r in rgroup:
                cells = [_cell(r.properties.get(k), t, r.id, k) for k, t in cols]
                yield [r.start, r.end, r.label, r.id, namespace, *cells]

        path = directory / f"relations_{number}.csv"
        if _write(path, header, rel_rows()):
            files.multiline.append(path)
        files.relations.append(path)
    return ImportFiles(files.nodes, files.relations, len(seen), len(rel_ids), files.multiline)


def import_command(
    files: ImportFiles,
    *,
    lib: Path,
    database: str = "neo4j",
    overwrite: bool = False,
    report_file: Path | None = None,
    java: str = "java",
    heap: str = "1g",
) -> list[str]:
    """The ``java ... org.neo4j.cli.AdminTool database import full`` command line for ``files``."""
    cmd = [java, f"-Xmx{heap}", *_JAVA_FLAGS, "-cp", f"{lib}/*", "org.neo4j.cli.AdminTool", "database", "import"]
    # the database name comes first: the file lists after --nodes/--relationships take every later word
    # line-break-aware parsing reads each file in one thread (measured: 12 s instead of 8.7 s for a million
    # relations), so it is on only when some cell holds a line break
    multiline = "true" if files.multiline else "false"
    cmd += ["full", database, "--id-type=string", "--array-delimiter=U+001F", f"--multiline-fields={multiline}"]
    cmd += ["--skip-bad-relationships=false", "--skip-duplicate-nodes=false"]
    if overwrite:
        cmd.append("--overwrite-destination=true")
    if report_file is not None:
        cmd.append(f"--report-file={report_file}")
    cmd += [f"--nodes={p}" for p in files.nodes]
    cmd += [f"--relationships={p}" for p in files.relations]
    return cmd


def import_records(
    nodes: Sequence[NodeRecord],
    relations: Sequence[RelationRecord],
    *,
    home: str | os.PathLike[str],
    lib: str | os.PathLike[str],
    conf: str | os.PathLike[str] | None = None,
    database: str = "neo4j",
    overwrite: bool = False,
    java: str | None = None,
    heap: str = "1g",
    workdir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    namespace: str = DEFAULT_NAMESPACE,
) -> ImportResult:
    """Load ``nodes`` and ``relations`` into the stopped or not yet started server at ``home``.

    ``home`` is the server's home directory (``conf`` defaults to ``home/conf``, whose
    ``neo4j.conf`` names the data directory); ``lib`` holds the Neo4j jars. The CSVs go to
    ``workdir`` (a temporary directory, removed afterwards, when not given). Every node and
    relation is written in ``namespace`` (see :mod:`kag.graph.neo4j`).

    Raises:
        InvalidInputError: the records cannot be imported as given (see :func:`write_csvs`).
        ConfigError: no Java, no jars in ``lib`` or no configuration in ``conf``.
        StoreError: the importer failed (the message holds the end of its output); a
            database that already holds data needs ``overwrite=True`` (which replaces it).
    """
    home_path, lib_path = Path(home), Path(lib)
    conf_path = Path(conf) if conf is not None else home_path / "conf"
    if not any(lib_path.glob("neo4j-*.jar")):
        raise ConfigError(f"no Neo4j jars in {lib_path}; run deploy/neo4j/neo4j.sh install (or pass lib=).")
    if not (conf_path / "neo4j.conf").exists():
        raise ConfigError(f"no neo4j.conf in {conf_path}; run deploy/neo4j/neo4j.sh install (or pass conf=).")
    java_bin = java or _java()
    with tempfile.TemporaryDirectory(prefix="kag-import-") as tmp:
        target = Path(workdir) if workdir is not None else Path(tmp)
        started = time.perf_counter()
        files = write_csvs(nodes, relations, target, namespace)
        csv_seconds = time.perf_counter() - started
        cmd = import_command(
            files,
            lib=lib_path,
            database=database,
            overwrite=overwrite,
            report_file=target / "import.report",
            java=java_bin,
            heap=heap,
        )
        env = {**os.environ, "NEO4J_HOME": str(home_path), "NEO4J_CONF": str(conf_path)}
        started = time.perf_counter()
        try:
            done = subprocess.run(
                cmd, cwd=home_path, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError as exc:
            raise ConfigError(f"cannot run {java_bin!r} ({exc}); install Java 17 or 21 or set JAVA_HOME.") from exc
        except subprocess.TimeoutExpired as exc:
            raise StoreError(f"neo4j-admin database import did not finish within {timeout} s.") from exc
        import_seconds = time.perf_counter() - started
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if not ln.startswith("\tat ")]
            tail = "\n".join(lines)[-2000:]
            raise StoreError(
                f"neo4j-admin database import failed (exit {done.returncode}); is the server stopped, and is "
                f"the database empty (overwrite=True replaces it)? Output:\n{tail}"
            )
    return ImportResult(files.node_count, files.relation_count, csv_seconds, import_seconds)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    return "java"


def read_store_file(path: str | os.PathLike[str]) -> tuple[list[NodeRecord], list[RelationRecord]]:
    """The records of a saved memory store (``MemoryGraphStore.save``, any format version it reads)."""
    return MemoryGraphStore.load(path).records()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: import a saved memory store into a stopped Neo4j server's empty database."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", required=True, help="a saved kag memory store (MemoryGraphStore.save)")
    parser.add_argument("--home", required=True, help="the Neo4j server home (with conf/neo4j.conf)")
    parser.add_argument("--lib", required=True, help="the directory of the Neo4j jars")
    parser.add_argument("--database", default="neo4j")
    parser.add_argument("--overwrite", action="store_true", help="replace a database that holds data")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="the namespace the graph is loaded into")
    args = parser.parse_args(argv)
    nodes, relations = read_store_file(args.store)
    result = import_records(
        nodes,
        relations,
        home=args.home,
        lib=args.lib,
        database=args.database,
        overwrite=args.overwrite,
        heap=args.heap,
        namespace=args.namespace,
    )
    print(
        f"imported {result.nodes} nodes and {result.relations} relations into {args.database} "
        f"(CSV {result.csv_seconds:.1f} s, import {result.import_seconds:.1f} s); start the server and "
        "open the knowledge base to create kag's constraints and indexes."
    )
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
