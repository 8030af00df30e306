"""The Cypher a Neo4j store writes entities and relations with (values always as parameters).

* every entity node carries the shared label ``ENTITY`` beside its own: one id index serves
  lookups and relation endpoints;
* :func:`write_statements` turns records into batched ``UNWIND ... MERGE`` statements: a node
  statement also bumps its label's write counter in the same transaction
  (:func:`~kag.graph.neo4j_anchor.version_bump`), a relation statement returns how many rows found
  both endpoints, so a missing one (:func:`missing_endpoints`) can fail its transaction;
* provenance (the ``kag_sources`` list property) is merged inside the statement under the item's
  write lock, so concurrent upserts of one item with different sources keep every source;
* :func:`retract_statements` removes chunks from provenance and deletes what is left without any.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.errors import StoreFormatError
from kag.graph.base import DIRECT, SOURCES, NodeRecord, RelationRecord
from kag.graph.neo4j_anchor import version_bump
from kag.query.cypher import IN_NAMESPACE, NAMESPACE, NAMESPACE_MAP, quote

ENTITY = "KagEntity"  # shared label of entity nodes: one id index for lookups and endpoints
_LOCK = "kag_write_lock"  # set then removed in one statement: takes the write lock before provenance is read


class Rows(list[dict[str, Any]]):
    """A statement's ``$rows``: packed as the plain list it is, but with a short ``repr``.

    The driver formats every RUN message's parameters for its debug log whether or not
    debug logging is on; the repr of a batch of 384-d vectors took longer than packing it.
    """

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


@dataclass
class WriteStatements:
    """The statements of one write, in order, and what each is expected to write."""

    statements: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    nodes: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # node statement -> label, node ids
    relations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # relation statement -> its rows


def write_statements(
    nodes: Sequence[NodeRecord], relations: Sequence[RelationRecord], *, batch_size: int, namespace: str
) -> WriteStatements:
    """``MERGE`` statements of ``batch_size`` rows for ``nodes`` (grouped by label), then ``relations``
    (grouped by type), in ``namespace``.

    Raises:
        StoreFormatError: a record has a property named like the namespace property.
    """
    out = WriteStatements()
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for n in nodes:
        check_props(n.properties)
        by_label[n.label].append({"id": n.id, "props": n.properties, "embedding": n.embedding.tolist()})
    for label, rows in by_label.items():
        query = (
            "UNWIND $rows AS row\n"
            f"MERGE (n:{quote(ENTITY)} {{id: row.id, {IN_NAMESPACE}}})\n"
            + _merge_sources("n", rows)
            + f"SET n:{quote(label)}, n += row.props, n.embedding = row.embedding\n"
            + _merged_sources_tail("n", rows)
            + version_bump(label)  # the label's write counter, in the same transaction
        )
        for start in range(0, len(rows), batch_size):
            batch = Rows(rows[start : start + batch_size])
            out.nodes[len(out.statements)] = (label, [row["id"] for row in batch])
            out.statements.append((query, {"rows": batch, "ns": namespace}))
    rels: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in relations:
        check_props(r.properties)
        rels[r.label].append({"id": r.id, "start": r.start, "end": r.end, "props": r.properties})
    for label, rows in rels.items():
        query = (
            "UNWIND $rows AS row\n"
            f"MATCH (a:{quote(ENTITY)} {{id: row.start, {IN_NAMESPACE}}})\n"
            f"MATCH (b:{quote(ENTITY)} {{id: row.end, {IN_NAMESPACE}}})\n"
            f"MERGE (a)-[r:{quote(label)} {{id: row.id, {IN_NAMESPACE}}}]->(b)\n"
            + _merge_sources("r", rows)
            + "SET r += row.props\n"
            + _merged_sources_tail("r", rows)
            + "RETURN count(*) AS n"
        )
        for start in range(0, len(rows), batch_size):
            batch = Rows(rows[start : start + batch_size])
            out.relations[len(out.statements)] = batch
            out.statements.append((query, {"rows": batch, "ns": namespace}))
    return out


def _merge_sources(var: str, rows: Sequence[dict[str, Any]]) -> str:
    """Cypher that write-locks ``var`` and keeps its stored provenance as ``before`` (when rows carry any)."""
    if not any(SOURCES in row["props"] for row in rows):
        return ""
    # the SET takes the write lock, so the read below sees every committed concurrent merge
    return f"SET {var}.{quote(_LOCK)} = true\nWITH {var}, row, {var}.{quote(SOURCES)} AS before\n"


def _merged_sources_tail(var: str, rows: Sequence[dict[str, Any]]) -> str:
    """Cypher that sets ``var``'s provenance to the sorted union of ``before`` and the row's."""
    if not any(SOURCES in row["props"] for row in rows):
        return ""
    src = quote(SOURCES)
    return (
        f"SET {var}.{src} = CASE WHEN row.props.{src} IS NULL THEN before ELSE COLLECT {{ "
        f"UNWIND coalesce(before, []) + row.props.{src} AS s RETURN DISTINCT s ORDER BY s }} END\n"
        f"REMOVE {var}.{quote(_LOCK)}\n"
        f"WITH {var}\n"
    )


async def missing_endpoints(tx: Any, rows: Sequence[dict[str, Any]], namespace: str) -> list[str]:
    """The endpoint ids of relation ``rows`` that no entity of ``namespace`` has, read in ``tx``."""
    ids = sorted({row["start"] for row in rows} | {row["end"] for row in rows})
    result = await tx.run(
        f"UNWIND $ids AS id OPTIONAL MATCH (n:{quote(ENTITY)} {{id: id, {IN_NAMESPACE}}}) "
        "WITH id, n WHERE n IS NULL RETURN id",
        {"ids": ids, "ns": namespace},
    )
    return [record["id"] for record in await result.fetch(2**31 - 1)]


def check_props(props: Mapping[str, Any]) -> None:
    """Refuse a record that would overwrite its namespace (``n += row.props``)."""
    if NAMESPACE in props:
        raise StoreFormatError(f"{NAMESPACE!r} is reserved for the namespace; rename that property.")


def retract_statements(chunks_param: str = "chunks") -> list[tuple[str, str]]:
    """Cypher that removes the chunk ids in ``$<chunks_param>`` from every item's provenance and
    deletes the items left without any that were never upserted directly (entities with their
    relations), in the namespace ``$ns``. Run relations first, then nodes, in one write
    transaction; each returns ``n`` (items deleted) and ``edges`` (relations deleted along with
    the nodes).
    """
    src, direct = quote(SOURCES), quote(DIRECT)
    node = f"{quote(ENTITY)} {NAMESPACE_MAP}"
    chunks = "$" + chunks_param

    def step(match: str, var: str, delete: str) -> str:
        return (
            f"{match} WHERE {var}.{src} IS NOT NULL AND any(s IN {var}.{src} WHERE s IN {chunks})\n"
            f"WITH {var}, [s IN {var}.{src} WHERE NOT s IN {chunks}] AS rest\n"
            f"SET {var}.{src} = CASE WHEN size(rest) = 0 THEN null ELSE rest END\n"
            f"WITH collect(CASE WHEN size(rest) = 0 AND NOT coalesce({var}.{direct}, false) "
            f"THEN {var} END) AS doomed\n" + delete
        )

    rels = step(
        f"MATCH (:{node})-[r]->(:{node})",
        "r",
        "FOREACH (r IN doomed | DELETE r)\nRETURN size(doomed) AS n, 0 AS edges",
    )
    nodes = step(
        f"MATCH (n:{node})",
        "n",
        f"WITH doomed, COLLECT {{ UNWIND doomed AS d MATCH (d)-[x]-(:{node}) RETURN DISTINCT x }} AS xs\n"
        "FOREACH (d IN doomed | DETACH DELETE d)\nRETURN size(doomed) AS n, size(xs) AS edges",
    )
    return [("relations", rels), ("entities", nodes)]
