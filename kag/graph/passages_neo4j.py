"""Passages on Neo4j: ``Document``/``Chunk`` nodes next to the entities of a ``Neo4jGraphStore``.

* constraints on ``Document.id`` and ``Chunk.id``, a vector index
  ``kag_chunk_embedding`` on ``Chunk.embedding`` and a fulltext index
  ``kag_chunk_text`` on ``Chunk.text``, all ``IF NOT EXISTS``;
* a write is one managed write transaction of batched ``UNWIND ... MERGE``
  statements: old chunks of the written documents are removed first, so a
  re-written document never keeps stale chunks;
* chunk metadata is stored twice: as JSON (``metadata``, exact round trip) and
  flattened into ``meta__*`` properties that filters compile to
  (:func:`kag.query.filters.compile_cypher`, always parameterized);
* every read goes through the store's EXPLAIN-guarded ``read``.

Vector search is exact by default and agrees with the memory store: numpy screens the chunk
embeddings kept beside the driver as a float32 matrix and Neo4j scores the few chunks near the
``k``-th best, so rows, order and scores are those of the full scan
(:mod:`kag.graph.passages_neo4j_vectors`). Consistency rule: every passage write and delete
bumps the ``Chunk`` write counter in its own transaction, and each search first
compares the counter and the chunk count with the cached matrix's (one query),
reloading it when either changed; an embedding rewritten by raw Cypher without
a kag write and without adding or removing chunks is seen after
``anchor_scorer.invalidate(["Chunk"])``.

``candidates=N`` opts into approximate search. By default (``approximate="pca"``)
a screen over that same chunk matrix projected onto its 192 main directions
(:class:`kag.graph.ann.ProjectedIndex`) picks the ``8 * N`` most promising
chunks, numpy scores those in full and keeps the ``N`` best; these are screened as
above and the few near the cut scored by Neo4j, so every returned score is exact
and only chunks the projection ranks too low can be missed (a larger ``N`` trades
time for recall). The directions are computed in a worker thread on the first
approximate search (under a second at 100k chunks); a matrix reload is projected
onto the same directions (chunks added, removed or re-embedded included), which
are recomputed once the chunk count moved by more than a fifth since. With
``approximate="ivf"`` an IVF index (:class:`kag.graph.ann.IVFIndex`) picks the
``N`` instead: the best rows of the lists holding about ``32 * N`` rows. It is
carried over matrix reloads by chunk id (a reload may order rows differently):
chunks added or re-embedded since the build are scanned exactly with the probed
lists, deleted ones dropped, and it is rebuilt under the same fifth rule. On real
text its recall varied with the build (see the README), which the projection's
does not. The version check and reload are those of exact search, so a
write by any kag store is seen by the next search. With a ``where`` filter the
search is restricted to the filtered chunks and is exact; with ``ids=`` the
listed chunks are scanned in Cypher (exact). Neo4j's HNSW index (built without
quantization; ``N`` nearest, filtered, rescored exactly) answers instead when no
chunk matrix can be used (no chunks of this namespace, vectors of another
length, or a filtered screen keeping over ``RESCORE_CAP`` near-ties) and always
with ``approximate="hnsw"``.

Keyword search runs Lucene (BM25 similarity, analyzer ``standard-no-stop-words``)
over the words of the query, OR-ed; its scores are not those of the memory
store's BM25.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kag.errors import ConfigError, EmbeddingError, InvalidInputError
from kag.graph.neo4j import ENTITY, Neo4jGraphStore
from kag.graph.neo4j_anchor import version_bump
from kag.graph.passages import ChunkRecord, DocumentRecord, Mention, PassageRow
from kag.graph.passages_neo4j_vectors import (
    APPROXIMATE_MODES,
    CHUNK,
    CHUNK_ROW,
    IVF_OVERSAMPLE,
    PCA_DIMS,
    PCA_OVERSAMPLE,
    RESCORE_CAP,
    Approximate,
    ChunkMatrixSearch,
    VectorSearch,
    chunk_rows,
)
from kag.query.cypher import IN_NAMESPACE, NAMESPACE, NAMESPACE_MAP
from kag.query.filters import SCOPED_FILTER_DEPTH, compile_cypher, flatten_metadata, validate_filter
from kag.validation import check_k

# with the names that moved to kag.graph.passages_neo4j_vectors, still importable from here
__all__ = [
    "APPROXIMATE_MODES",
    "CHUNK",
    "ENTITY_BATCH",
    "FULLTEXT_INDEX",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "IVF_OVERSAMPLE",
    "MAX_QUERY_TERMS",
    "PCA_DIMS",
    "PCA_OVERSAMPLE",
    "RESCORE_CAP",
    "VECTOR_INDEX",
    "Approximate",
    "Neo4jPassageStore",
    "lucene_query",
]

log = logging.getLogger(__name__)

VECTOR_INDEX = "kag_chunk_embedding"
FULLTEXT_INDEX = "kag_chunk_text"
MAX_QUERY_TERMS = 64
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200
ENTITY_BATCH = 256  # entities per record when the name caches read them
# the Chunk write counter, bumped in every transaction that writes or deletes chunks
_BUMP = "UNWIND [0] AS bump\n" + version_bump(CHUNK)
_TERM = re.compile(r"\w+", re.UNICODE)


def lucene_query(text: str) -> str:
    """A Lucene query OR-ing the quoted words of ``text`` (no operators, nothing to escape)."""
    terms = list(dict.fromkeys(t.casefold() for t in _TERM.findall(text)))[:MAX_QUERY_TERMS]
    return " OR ".join(f'"{t}"' for t in terms)


class Neo4jPassageStore:
    """Documents and chunks on the server of ``graph_store`` (see the module docstring).

    ``approximate`` picks what ``candidates=N`` searches use: ``"pca"`` (default) a screen over the
    chunk matrix kept beside the driver, projected onto its main directions, or ``"ivf"`` an IVF
    index over it, both falling back to Neo4j's HNSW index when no matrix can be used; ``"hnsw"``
    always Neo4j's HNSW index.
    """

    def __init__(self, graph_store: Neo4jGraphStore, *, approximate: Approximate = "pca") -> None:
        if approximate not in APPROXIMATE_MODES:
            raise ConfigError(f"approximate must be one of {', '.join(APPROXIMATE_MODES)}, got {approximate!r}.")
        self.graph_store = graph_store
        self._dims: int | None = None
        self._warned = False
        # the searches numpy answers from the chunk matrix beside the driver
        self.vectors = ChunkMatrixSearch(graph_store, approximate)

    @property
    def approximate(self) -> Approximate:
        """What ``candidates=N`` searches use (see the class docstring)."""
        return self.vectors.approximate

    @approximate.setter
    def approximate(self, mode: Approximate) -> None:
        self.vectors.approximate = mode

    # -- schema ---------------------------------------------------------------
    async def ensure_schema(self, dimensions: int) -> None:
        dims = int(dimensions)
        run = self.graph_store.run
        constraints = {
            "kag_document_ns_id": f"FOR (d:Document) REQUIRE (d.id, d.{NAMESPACE}) IS UNIQUE",
            "kag_chunk_ns_id": f"FOR (c:Chunk) REQUIRE (c.id, c.{NAMESPACE}) IS UNIQUE",
        }
        statements = [
            # documents and chunks are content-addressed: two tenants may hold the same id
            "DROP CONSTRAINT kag_document_id IF EXISTS",
            "DROP CONSTRAINT kag_chunk_id IF EXISTS",
            *(f"CREATE CONSTRAINT {name} IF NOT EXISTS {body}" for name, body in constraints.items()),
            # quantization off and a denser HNSW graph: with Neo4j's defaults (quantized vectors, m=16)
            # the index alone caps recall well below what approximate search with exact rescoring needs
            f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (c:Chunk) ON c.embedding OPTIONS "
            f"{{indexConfig: {{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine', "
            f"`vector.quantization.enabled`: false, `vector.hnsw.m`: {HNSW_M}, "
            f"`vector.hnsw.ef_construction`: {HNSW_EF_CONSTRUCTION}}}}}",
            f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS FOR (c:Chunk) ON EACH [c.text]",
        ]
        for stmt in statements:
            await run(stmt, None, write=True, what="creating passage constraints and indexes")
        # what keyword and exact search need; the vector index populates in the background and the
        # first HNSW (candidates=) search waits for it
        await self.graph_store.await_indexes([*constraints, FULLTEXT_INDEX], "waiting for passage indexes")
        res = await run(
            "SHOW VECTOR INDEXES YIELD name, options WHERE name = $name RETURN options",
            {"name": VECTOR_INDEX},
            write=False,
            what="reading passage index settings",
        )
        for record in res.records:
            config = (record["options"] or {}).get("indexConfig", {})
            have = config.get("vector.dimensions")
            if config.get("vector.quantization.enabled") and not self._warned:
                self._warned = True  # an index an older kag created: exact search is unaffected
                log.warning(
                    "Neo4j index %s stores quantized vectors, which caps the recall of candidates= searches; "
                    "run DROP INDEX %s and kag recreates it without quantization on the next start",
                    VECTOR_INDEX,
                    VECTOR_INDEX,
                )
            if have is not None and int(have) != dims:
                raise EmbeddingError(
                    f"Neo4j index {VECTOR_INDEX} holds {have}-dimensional vectors but the embedder gives "
                    f"{dims}; use the same embedder, or drop the index and the chunks and re-index."
                )
        self._dims = dims

    async def rebuild_vector_index(self) -> None:
        """Drop and re-create the chunk vector index, then wait until Neo4j has populated it.

        Call it after a large load. Every transaction adds its own small Lucene segments, and a
        ``candidates=`` search visits each segment's HNSW graph, so after a large load it is many
        times slower. One population pass writes far fewer, larger segments, and it costs less than
        the per-transaction index updates it replaces. While it runs, ``candidates=`` searches fail,
        and exact searches are unaffected.
        """
        if self._dims is None:
            raise InvalidInputError("call ensure_schema() before rebuild_vector_index().")
        await self.graph_store.run(
            f"DROP INDEX {VECTOR_INDEX} IF EXISTS", None, write=True, what="dropping the chunk vector index"
        )
        self.graph_store.forget_index(VECTOR_INDEX)
        await self.ensure_schema(self._dims)
        await self.graph_store.await_indexes([VECTOR_INDEX], "populating the chunk vector index")

    # -- writes ---------------------------------------------------------------
    async def _write_tx(self, statements: list[tuple[str, dict[str, Any]]], what: str) -> list[int]:
        """Run ``statements`` in one managed write transaction; return each one's first ``n``."""
        store = self.graph_store

        async def work(tx: Any) -> list[int]:
            out = []
            for query, params in statements:
                result = await tx.run(query, {**params, "ns": store.namespace})
                record = await result.single()
                out.append(int(record.data().get("n", 0)) if record is not None else 0)
            return out

        async def call() -> list[int]:
            async with store.session() as session:
                result: list[int] = await session.execute_write(work)
                return result

        return await store.retry(what, call, write=True)

    async def write(
        self, documents: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord], mentions: Sequence[Mention]
    ) -> None:
        doc_ids = {d.id for d in documents}
        for c in chunks:
            if c.document_id not in doc_ids:
                raise InvalidInputError(f"chunk {c.id} belongs to {c.document_id}, which is not being written.")
            if self._dims is not None and c.embedding.shape[0] != self._dims:
                raise EmbeddingError(f"chunk {c.id} has {c.embedding.shape[0]} dimensions, the index {self._dims}.")
        batch = self.graph_store.batch_size
        stmts: list[tuple[str, dict[str, Any]]] = []
        doc_rows = [{"id": d.id, "props": _props(d.properties(), d.metadata)} for d in documents]
        ids = [d.id for d in documents]
        stmts.append(
            (
                f"UNWIND $ids AS id MATCH (:Document {{id: id, {IN_NAMESPACE}}})"
                f"-[:HAS_CHUNK]->(c:Chunk {NAMESPACE_MAP}) "
                "DETACH DELETE c RETURN count(*) AS n",
                {"ids": ids},
            )
        )
        for start in range(0, len(doc_rows), batch):
            stmts.append(
                (
                    f"UNWIND $rows AS row MERGE (d:Document {{id: row.id, {IN_NAMESPACE}}}) "
                    f"SET d = row.props, d.{NAMESPACE} = $ns RETURN count(*) AS n",
                    {"rows": doc_rows[start : start + batch]},
                )
            )
        chunk_rows = [
            {
                "id": c.id,
                "document_id": c.document_id,
                "props": _props(c.properties(), c.metadata),
                "embedding": [float(x) for x in c.embedding],
            }
            for c in chunks
        ]
        for start in range(0, len(chunk_rows), batch):
            stmts.append(
                (
                    f"UNWIND $rows AS row MATCH (d:Document {{id: row.document_id, {IN_NAMESPACE}}}) "
                    f"MERGE (c:Chunk {{id: row.id, {IN_NAMESPACE}}}) SET c = row.props, c.embedding = row.embedding, "
                    f"c.{NAMESPACE} = $ns MERGE (d)-[:HAS_CHUNK]->(c) RETURN count(*) AS n",
                    {"rows": chunk_rows[start : start + batch]},
                )
            )
        ordered = sorted(chunks, key=lambda c: (c.document_id, c.index))
        next_rows = [{"a": a.id, "b": b.id} for a, b in itertools.pairwise(ordered) if a.document_id == b.document_id]
        for start in range(0, len(next_rows), batch):
            stmts.append(
                (
                    f"UNWIND $rows AS row MATCH (a:Chunk {{id: row.a, {IN_NAMESPACE}}}) "
                    f"MATCH (b:Chunk {{id: row.b, {IN_NAMESPACE}}}) "
                    "MERGE (a)-[:NEXT]->(b) RETURN count(*) AS n",
                    {"rows": next_rows[start : start + batch]},
                )
            )
        stmts.extend(self._mention_statements(mentions))
        stmts.append((_BUMP, {}))
        with self.graph_store.anchor_scorer.writes.writing([CHUNK]) as done:  # see kag.graph.neo4j_write_counters
            await self._write_tx(stmts, "writing documents and chunks")
            done[CHUNK] = (1, [c.id for c in chunks])

    def _mention_statements(self, mentions: Sequence[Mention]) -> list[tuple[str, dict[str, Any]]]:
        rows = [{"chunk": c, "entity": e} for c, e in dict.fromkeys(mentions)]
        batch = self.graph_store.batch_size
        return [
            (
                f"UNWIND $rows AS row MATCH (c:Chunk {{id: row.chunk, {IN_NAMESPACE}}}) "
                f"MATCH (e:{ENTITY} {{id: row.entity, {IN_NAMESPACE}}}) "
                "MERGE (c)-[:MENTIONS]->(e) RETURN count(*) AS n",
                {"rows": rows[start : start + batch]},
            )
            for start in range(0, len(rows), batch)
        ]

    async def link(self, mentions: Sequence[Mention]) -> int:
        stmts = self._mention_statements(mentions)
        if not stmts:
            return 0
        return sum(await self._write_tx(stmts, "linking chunks to entities"))

    async def delete_documents(self, ids: Sequence[str]) -> int:
        """Delete documents, their chunks and MENTIONS, and retract the provenance the chunks gave,
        in one transaction: entities and relations left without provenance (and never upserted
        directly) are deleted too (see :meth:`Neo4jGraphStore.retract_statements`).
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        # the chunk ids are collected first, so the retraction sees them after the chunks are gone
        collect = (
            f"UNWIND $ids AS id MATCH (d:Document {{id: id, {IN_NAMESPACE}}}) "
            "OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk) "
            "WITH collect(c.id) AS chunks RETURN chunks"
        )
        delete = (
            f"UNWIND $ids AS id MATCH (d:Document {{id: id, {IN_NAMESPACE}}}) "
            "OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk) "
            "WITH d, collect(c) AS chunks FOREACH (c IN chunks | DETACH DELETE c) "
            "DETACH DELETE d RETURN count(*) AS n"
        )
        retract = [query for _, query in self.graph_store.retract_statements()]
        store = self.graph_store
        ns = store.namespace

        async def work(tx: Any) -> int:
            record = await (await tx.run(collect, {"ids": ids, "ns": ns})).single()
            chunk_ids = list(record["chunks"]) if record is not None else []
            done = await (await tx.run(delete, {"ids": ids, "ns": ns})).single()
            await (await tx.run(_BUMP, {})).consume()
            if chunk_ids:
                for query in retract:
                    await (await tx.run(query, {"chunks": chunk_ids, "ns": ns})).consume()
            return int(done["n"]) if done is not None else 0

        async def call() -> int:
            async with store.session() as session:
                found: int = await session.execute_write(work)
                return found

        with store.anchor_scorer.writes.writing([CHUNK]) as done:  # deleted chunks leave the label's id list
            found = await store.retry("deleting documents", call, write=True)
            done[CHUNK] = (1, [])
        return found

    async def clear(self) -> None:
        store = self.graph_store
        query = (
            f"MATCH (n {NAMESPACE_MAP}) WHERE n:Document OR n:Chunk "
            "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
        )

        async def call() -> None:
            async with store.session() as session:
                await (await session.run(query, {"ns": store.namespace})).consume()

        await store.retry("clearing documents and chunks", call)

    # -- reads ----------------------------------------------------------------
    async def vector_search(
        self,
        vector: np.ndarray,
        k: int,
        where: Mapping[str, Any] | None = None,
        ids: Sequence[str] | None = None,
        *,
        candidates: int | None = None,
    ) -> list[PassageRow]:
        k = check_k(k, minimum=0)
        if candidates is not None:
            candidates = check_k(candidates, name="candidates")
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._dims is not None and vec.shape[0] != self._dims:
            raise EmbeddingError(f"query vector has {vec.shape[0]} dimensions, the passages {self._dims}.")
        if not np.isfinite(vec).all() or not np.linalg.norm(vec):
            raise EmbeddingError("the query vector is zero or not finite; it cannot be compared.")
        if k == 0 or (ids is not None and not ids):
            return []
        params: dict[str, Any] = {"vector": [float(x) for x in vec], "k": k, "ns": self.graph_store.namespace}
        cond = f"c.{NAMESPACE} = $ns AND " + compile_cypher(where, "c", params)
        if ids is not None:
            params["ids"] = list(dict.fromkeys(ids))
            cond = f"c.id IN $ids AND {cond}"
        if ids is None and (candidates is None or self.approximate != "hnsw"):
            found = await self.vectors.search(VectorSearch(vec, k, where, cond, params, candidates))
            if found is not None:
                return found
        if candidates is not None and ids is None:
            # approximate: the nearest chunks from the HNSW index, then the filter and exact scores
            params["index"] = VECTOR_INDEX
            params["candidates"] = max(candidates, k)
            await self.graph_store.await_indexes([VECTOR_INDEX], "waiting for the chunk vector index")
            source = (
                f"CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node AS c\nWITH c WHERE {cond}\n"
            )
        else:
            source = f"MATCH (c:Chunk {NAMESPACE_MAP}) WHERE {cond}\n"
        query = (
            source + "WITH c, vector.similarity.cosine(c.embedding, $vector) AS score\n"
            "ORDER BY score DESC, c.id ASC LIMIT $k\n" + CHUNK_ROW
        )
        res = await self.graph_store.read(query, params, "searching chunks by vector")
        return chunk_rows(res.records)

    async def keyword_search(self, text: str, k: int, where: Mapping[str, Any] | None = None) -> list[PassageRow]:
        k = check_k(k, minimum=0)
        if not isinstance(text, str):
            raise InvalidInputError(f"keyword_search() takes str, got {type(text).__name__}.")
        validate_filter(where, max_depth=SCOPED_FILTER_DEPTH)
        lucene = lucene_query(text)
        if k == 0 or not lucene:
            return []
        params: dict[str, Any] = {"index": FULLTEXT_INDEX, "query": lucene, "k": k, "ns": self.graph_store.namespace}
        # the fulltext index spans every namespace: its hits are checked here
        cond = f"c.{NAMESPACE} = $ns AND " + compile_cypher(where, "c", params)
        query = (
            "CALL db.index.fulltext.queryNodes($index, $query) YIELD node, score\n"
            f"WITH node AS c, score WHERE c:Chunk AND {cond}\n"
            "WITH c, score ORDER BY score DESC, c.id ASC LIMIT $k\n" + CHUNK_ROW
        )
        res = await self.graph_store.read(query, params, "searching chunks by keyword")
        return chunk_rows(res.records)

    async def chunk_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        res = await self.graph_store.read(
            f"UNWIND $ids AS id MATCH (c:Chunk {{id: id, {IN_NAMESPACE}}}) RETURN c.id AS id, c.embedding AS embedding",
            {"ids": list(dict.fromkeys(ids)), "ns": self.graph_store.namespace},
            "reading chunk vectors",
        )
        return {r["id"]: np.asarray(r["embedding"], dtype=np.float32) for r in res.records}

    async def get_chunks(self, ids: Sequence[str]) -> list[PassageRow]:
        if not ids:
            return []
        res = await self.graph_store.read(
            f"UNWIND $ids AS id MATCH (c:Chunk {{id: id, {IN_NAMESPACE}}}) WITH c, 0.0 AS score\n" + CHUNK_ROW,
            {"ids": list(dict.fromkeys(ids)), "ns": self.graph_store.namespace},
            "reading chunks",
        )
        found = {r["id"]: PassageRow.from_properties(r["props"], r["score"], r["mentions"]) for r in res.records}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    async def mentioned_by(self, entity_ids: Sequence[str], where: Mapping[str, Any] | None) -> set[str]:
        if not entity_ids:
            return set()
        params: dict[str, Any] = {"ids": list(dict.fromkeys(entity_ids)), "ns": self.graph_store.namespace}
        cond = compile_cypher(where, "c", params)
        res = await self.graph_store.read(
            f"MATCH (c:Chunk {NAMESPACE_MAP})-[:MENTIONS]->(e:{ENTITY} {NAMESPACE_MAP}) WHERE e.id IN $ids AND {cond} "
            "RETURN DISTINCT e.id AS id",
            params,
            "reading mentioned entities",
        )
        return {r["id"] for r in res.records}

    async def entities(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        source = (
            f"MATCH (n:{ENTITY} {NAMESPACE_MAP}) "
            if ids is None
            else f"UNWIND $ids AS id MATCH (n:{ENTITY} {{id: id, {IN_NAMESPACE}}}) "
        )
        # ENTITY_BATCH entities per record, read on the blocking driver: 34k entities in 0.7-0.8 s, where
        # one record per entity on the async driver took 1.8 s (the driver's cost per record)
        query = (
            source + "WITH n ORDER BY n.id WITH collect(n) AS nodes\n"
            "UNWIND range(0, size(nodes) - 1, $batch) AS start WITH nodes[start..start + $batch] AS part\n"
            f"RETURN [n IN part | [n.id, n {{.*, embedding: null, {NAMESPACE}: null}}]] AS rows"
        )
        params = {"ns": self.graph_store.namespace, "ids": list(dict.fromkeys(ids or ())), "batch": ENTITY_BATCH}
        parts = await self.graph_store.read_rows(query, params, "reading entity names", _first)
        out = []
        for part in parts:
            for entity_id, raw in part:
                props = {k: v for k, v in (raw or {}).items() if v is not None and k != "embedding"}
                out.append((str(entity_id), str(props.get("label", "")), props))
        return out

    async def chunk_texts(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        res = await self.graph_store.read(
            f"MATCH (c:Chunk {NAMESPACE_MAP}) WHERE $after IS NULL OR c.id > $after "
            "RETURN c.id AS id, c.text AS text ORDER BY id LIMIT $limit",
            {"after": after, "limit": max(0, int(limit)), "ns": self.graph_store.namespace},
            "reading chunk texts",
        )
        return [(r["id"], r["text"]) for r in res.records]

    async def list_documents(
        self,
        *,
        ids: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        origins: Sequence[str] | None = None,
    ) -> list[DocumentRecord]:
        res = await self.graph_store.read(
            f"MATCH (d:Document {NAMESPACE_MAP}) WHERE ($ids IS NULL OR d.id IN $ids) "
            "AND ($sources IS NULL OR d.source IN $sources) "
            f"AND ($origins IS NULL OR d.origin IN $origins) RETURN d {{.*, {NAMESPACE}: null}} AS props ORDER BY d.id",
            {
                "ns": self.graph_store.namespace,
                "ids": None if ids is None else list(ids),
                "sources": None if sources is None else list(sources),
                "origins": None if origins is None else list(origins),
            },
            "listing documents",
        )
        return [DocumentRecord.from_properties(r["props"]) for r in res.records]

    async def counts(self) -> dict[str, int]:
        res = await self.graph_store.read(
            f"CALL () {{ MATCH (d:Document {NAMESPACE_MAP}) RETURN count(d) AS documents }} "
            f"CALL () {{ MATCH (c:Chunk {NAMESPACE_MAP}) RETURN count(c) AS chunks }} "
            f"CALL () {{ MATCH (:Chunk {NAMESPACE_MAP})-[m:MENTIONS]->() RETURN count(m) AS mentions }} "
            "RETURN documents, chunks, mentions",
            {"ns": self.graph_store.namespace},
            "counting passages",
        )
        rec = res.records[0]
        return {"documents": int(rec["documents"]), "chunks": int(rec["chunks"]), "mentions": int(rec["mentions"])}


def _first(values: list[Any]) -> Any:
    """A record's only column."""
    return values[0]


def _props(fixed: dict[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Node properties: the fixed ones plus the flattened, filterable ``meta__*`` metadata."""
    props: dict[str, Any] = dict(flatten_metadata(metadata))
    props.update(fixed)
    return props
