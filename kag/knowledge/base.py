"""``KnowledgeBase``: a declared schema + a graph store + an embedder.

This is the layer users talk to: it validates models against the schema,
embeds entity texts in batches, writes records to the store, plans and runs
triplet and similarity searches, and turns stored rows back into models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kag._sync import LoopLock, SyncFacade, blocking
from kag.datamodels.base import Entity, Relation, check_storable, per_class
from kag.datamodels.schema import GraphSchema
from kag.errors import ConfigError, CypherUnsupportedError, EmbeddingError, InvalidInputError, SchemaError
from kag.graph import open_store
from kag.graph.base import DIRECT, SOURCES, GraphStore, NodeRecord, PlanRow, RelationRecord, flatten, unflatten
from kag.graph.factory import passage_store_for
from kag.graph.memory import MemoryGraphStore
from kag.graph.neo4j import Neo4jGraphStore
from kag.knowledge.hits import EntityHit, TripletHit, TripletResults
from kag.knowledge.html import SubgraphView
from kag.knowledge.mentions import entity_names
from kag.query.cypher import CompiledQuery, compile_plan
from kag.query.plan import NodeSpec, QueryPlan, plan_similarity_search, plan_triplet_search
from kag.query.triplet import TripletChain, TripletSearch
from kag.rag.embedders import Embedder, HashEmbedder, check_matrix
from kag.ranking.linking import LinkSettings, NameIndex, as_float32, link, name_key, rank
from kag.runtime import paused_gc
from kag.validation import DEFAULT_NAMESPACE

WRITE_LOG = 64  # writes remembered, so that name caches refresh what they wrote instead of reloading


def refresh_limit(cached: int) -> int:
    """How many written ids a name cache of ``cached`` entities refreshes one by one before reloading whole."""
    return max(1000, cached // 5)


def _lists_entities(store: GraphStore) -> bool:
    return isinstance(store, MemoryGraphStore | Neo4jGraphStore)


SearchInput = TripletSearch | TripletChain | Sequence[TripletSearch] | dict[str, Any]


class KnowledgeBase:
    """Typed knowledge graph over ``memory://`` or ``neo4j://``.

    Without ``uri`` the store is ``$KAG_KB``, else ``$NEO4J_URI``, else ``memory://``. Neo4j
    settings not passed as keywords (``username``, ``password``, ``database``, a caller's own
    ``driver``) come from ``NEO4J_USERNAME``, ``NEO4J_PASSWORD`` and ``NEO4J_DATABASE``.

    >>> kb = KnowledgeBase("memory://", entity_models=[City, Country], relation_models=[IsCapitalOf])
    >>> await kb.upsert([IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))])
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        entity_models: Sequence[type[Entity]] = (),
        relation_models: Sequence[type[Relation]] = (),
        embedder: Embedder | None = None,
        store: GraphStore | None = None,
        batch_size: int = 512,
        linking: LinkSettings | bool = True,
        **store_options: Any,
    ) -> None:
        self.schema = GraphSchema(list(entity_models), list(relation_models))
        self.embedder: Embedder = embedder if embedder is not None else HashEmbedder(dimensions=384)
        if not isinstance(self.embedder, Embedder):
            raise ConfigError("embedder must have `dimensions`, `name` and an async `embed(texts)` method.")
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1.")
        self.batch_size = batch_size
        self.store: GraphStore = store if store is not None else open_store(uri, **store_options)
        self.uri = self.store.uri
        self._ready = False
        self._ready_lock = LoopLock()  # per event loop: a knowledge base outlives an asyncio.run
        self.revision = 0  # bumped by every write, so caches built from the graph can tell they are stale
        # revision -> the ids that write touched, for the last WRITE_LOG writes made by upsert/delete
        self._writes: dict[int, frozenset[str]] = {}
        self._sync: KnowledgeBaseSync | None = None
        if not isinstance(linking, LinkSettings | bool):
            raise ConfigError("linking must be True, False or a kag.ranking.linking.LinkSettings.")
        self.linking: LinkSettings | None = (LinkSettings() if linking is True else linking) or None
        self._names: NameIndex | None = None
        self._names_revision = -1

    # -- lifecycle ------------------------------------------------------------
    @property
    def namespace(self) -> str:
        """The namespace (tenant) of the store: everything this knowledge base reads and writes."""
        return str(getattr(self.store, "namespace", DEFAULT_NAMESPACE))

    @property
    def sync(self) -> KnowledgeBaseSync:
        """Blocking facade: ``kb.sync.triplet_search(...)`` (refuses inside an event loop)."""
        if self._sync is None:
            self._sync = KnowledgeBaseSync(self)
        return self._sync

    @property
    def entity_models(self) -> tuple[type[Entity], ...]:
        return tuple(self.schema.entity_models)

    @property
    def relation_models(self) -> tuple[type[Relation], ...]:
        return tuple(self.schema.relation_models)

    async def ensure_ready(self) -> None:
        """Create constraints and indexes once (idempotent; called by every operation)."""
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                await self.store.ensure_schema(
                    self.schema.entity_labels, self.schema.relation_labels, self.embedder.dimensions
                )
                self._ready = True

    async def aclose(self) -> None:
        """Close the store's connections."""
        await self.store.aclose()

    async def __aenter__(self) -> KnowledgeBase:
        await self.ensure_ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- writes ---------------------------------------------------------------
    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in batches, validating shape and finiteness."""
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            out = await self.embedder.embed(batch)
            parts.append(check_matrix(out, len(batch), self.embedder.dimensions, self.embedder.name))
        if not parts:
            return np.zeros((0, self.embedder.dimensions), dtype=np.float32)
        matrix = parts[0] if len(parts) == 1 else np.concatenate(parts)
        # check_matrix leaves a zero row zero (every other row has norm 1)
        if not matrix.any(axis=1).all():
            raise EmbeddingError(f"{self.embedder.name} returned an all-zero vector; it cannot be compared.")
        return matrix

    def records(self, items: Iterable[Entity | Relation]) -> tuple[list[Entity], list[Relation]]:
        """Validate ``items`` against the schema; return entities (endpoints included) and relations."""
        entities, relations = self._records(items)
        return list(entities.values()), list(relations.values())

    def _records(self, items: Iterable[Entity | Relation]) -> tuple[dict[str, Entity], dict[str, Relation]]:
        """:meth:`records` by id (each id computed once)."""
        entities: dict[str, Entity] = {}
        relations: dict[str, Relation] = {}
        checked: set[int] = set()  # entity objects checked already (a city is the endpoint of many relations)

        def storable(entity: Entity) -> None:
            if id(entity) not in checked:
                check_storable(entity)
                checked.add(id(entity))

        if isinstance(items, Entity | Relation):
            items = [items]
        for item in items:
            if isinstance(item, Relation):
                self.schema.check_relation(item)
                check_storable(item)
                relations[item.id] = item
                for end in (item.subj, item.obj):
                    storable(end)
                    entities.setdefault(end.id, end)
            elif isinstance(item, Entity):
                self.schema.check_entity(item)
                storable(item)
                entities[item.id] = item  # an explicit entity wins over a relation endpoint
            else:
                raise InvalidInputError(f"upsert() takes Entity and Relation models, got {type(item).__name__}.")
        return entities, relations

    async def upsert(
        self,
        items: Iterable[Entity | Relation] | Entity | Relation,
        *,
        sources: Mapping[str, Iterable[str]] | None = None,
    ) -> dict[str, int]:
        """Insert or merge entities and relations (relation endpoints are upserted too).

        Only the fields a model set explicitly overwrite stored values, so an
        endpoint ``City(name="Paris")`` never erases a stored population.
        ``sources`` maps entity/relation ids to the ids of the chunks they were
        found in; they are added to the stored provenance (see :meth:`provenance`).
        An item without sources is marked as upserted directly: deleting or
        re-indexing documents never removes it (an extracted item is removed
        once the last chunk it came from is deleted).
        """
        await self.ensure_ready()
        with paused_gc():  # many small objects, no cycles: see paused_gc
            entities, relations = self._records(items)  # type: ignore[arg-type]
            texts = [e.search_text() for e in entities.values()]
        vectors = await self.embed(texts)
        extra = await self._merged_sources(sources or {}, entities.keys(), relations.keys())
        # an item written without provenance was asserted directly: deleting documents never removes it
        direct = {DIRECT: True}
        with paused_gc():
            nodes = [
                NodeRecord(i, e.label, flatten(e, include=_set_fields(e)) | extra.get(i, direct), vectors[n])
                for n, (i, e) in enumerate(entities.items())
            ]
            rels = [
                RelationRecord(
                    i, r.label, r.subj.id, r.obj.id, flatten(r, include=_set_fields(r)) | extra.get(i, direct)
                )
                for i, r in relations.items()
            ]
        try:
            await self.store.upsert(nodes, rels)
        finally:  # a failed large upsert may have written some batches: the caches refresh them too
            self._wrote(n.id for n in nodes)
        return {"entities": len(nodes), "relations": len(rels)}

    def _wrote(self, ids: Iterable[str]) -> None:
        """Bump :attr:`revision` for a write that touched the entities ``ids`` (see :meth:`written_since`)."""
        self.revision += 1
        self._writes[self.revision] = frozenset(ids)
        self._writes.pop(self.revision - WRITE_LOG, None)

    def written_since(self, revision: int, limit: int) -> frozenset[str] | None:
        """The ids of the entities this knowledge base wrote or deleted after ``revision``,
        or ``None`` when that is not known (another kind of write, such as deleting documents, or too
        long ago) or more than ``limit`` ids: then a cache built at ``revision`` is rebuilt whole."""
        changed: set[str] = set()
        for r in range(revision + 1, self.revision + 1):
            ids = self._writes.get(r)
            if ids is None:
                return None
            changed |= ids
            if len(changed) > limit:
                return None
        return frozenset(changed)

    async def _merged_sources(
        self, sources: Mapping[str, Iterable[str]], entity_ids: Iterable[str], relation_ids: Iterable[str]
    ) -> dict[str, dict[str, Any]]:
        if not sources:
            return {}
        node_ids = [i for i in entity_ids if i in sources]
        rel_ids = [i for i in relation_ids if i in sources]
        stored: dict[str, Any] = {i: p.get(SOURCES) for i, p in (await self.store.get_nodes(node_ids)).items()}
        stored.update({i: v[2].get(SOURCES) for i, v in (await self.store.get_relations(rel_ids)).items()})
        return {
            item_id: {SOURCES: sorted(set(stored.get(item_id) or []) | {str(x) for x in sources[item_id]})}
            for item_id in (*node_ids, *rel_ids)
        }

    async def provenance(self, ref: str | Entity | Relation) -> list[str]:
        """Ids of the chunks an entity or relation was extracted from (sorted)."""
        await self.ensure_ready()
        item_id = ref if isinstance(ref, str) else ref.id
        if item_id.startswith("r_"):
            rels = await self.store.get_relations([item_id])
            return list(rels[item_id][2].get(SOURCES) or []) if item_id in rels else []
        nodes = await self.store.get_nodes([item_id])
        return list(nodes[item_id].get(SOURCES) or []) if item_id in nodes else []

    async def delete(self, refs: Iterable[str | Entity | Relation] | str | Entity | Relation) -> int:
        """Delete entities (and their relations) or relations; return how many existed."""
        await self.ensure_ready()
        if isinstance(refs, str | Entity | Relation):
            refs = [refs]
        ids = [r if isinstance(r, str) else r.id for r in refs]
        try:
            return await self.store.delete(ids)
        finally:  # relation ids name no entity
            self._wrote(i for i in ids if not i.startswith("r_"))

    async def get(self, ref: str | Entity | Relation) -> Entity | Relation | None:
        """The stored entity or relation with this id (or of this model's identity), else None."""
        await self.ensure_ready()
        item_id = ref if isinstance(ref, str) else ref.id
        if item_id.startswith("r_"):
            rels = await self.store.get_relations([item_id])
            if item_id not in rels:
                return None
            start, end, props = rels[item_id]
            nodes = await self.store.get_nodes([start, end])
            return self._relation(props, self._entity(nodes[start]), self._entity(nodes[end]))
        nodes = await self.store.get_nodes([item_id])
        return self._entity(nodes[item_id]) if item_id in nodes else None

    async def counts(self) -> dict[str, int]:
        """Node and relation counts per label and in total."""
        await self.ensure_ready()
        return await self.store.counts()

    async def save(self, path: str | None = None) -> str:
        """Persist a memory store to its file (or ``path``)."""
        save = getattr(self.store, "save", None)
        if save is None:
            raise ConfigError(f"{self.uri} persists on its own; save() is for memory:// stores.")
        return str(save(path))

    # -- reads ----------------------------------------------------------------
    def plan(
        self,
        search: SearchInput,
        *,
        k: int = 10,
        threshold: float = 0.7,
        schema: GraphSchema | None = None,
        candidates: int | None = None,
    ) -> QueryPlan:
        """Validate a triplet search against the schema and build its (unbound) plan.

        ``schema`` restricts the search to a subset of the knowledge base's models
        (``"*"`` then means "any of those"); it must not add labels of its own.
        """
        if schema is not None:
            for label in (*schema.entity_labels, *schema.relation_labels):
                if label not in self.schema.entities and label not in self.schema.relations:
                    raise SchemaError(f"label {label!r} is not declared by this knowledge base.")
        plan = plan_triplet_search(search, schema or self.schema, k=k, threshold=threshold, candidates=candidates)
        # the store's namespace, shown in the compiled query (a Neo4j store enforces its own anyway)
        return replace(plan, namespace=self.namespace)

    async def bind(self, plan: QueryPlan, *, linked: bool | None = None) -> QueryPlan:
        """Embed the plan's texts and attach the vectors; linked (the default when linking is on),
        also link each text to the entities it names (see :mod:`kag.ranking.linking`)."""
        texts = plan.texts()
        bound = plan.bind(await self.embed(texts)) if texts else plan.bind([])
        if self.linking is None or linked is False or not texts:
            return bound
        index = await self.names()
        links = []
        for node in bound.nodes:
            for text, vector in zip(node.texts, node.vectors, strict=True):
                nearest = await self._nearest(node.labels, text, vector, bound.candidates)
                links.append(link(text, node.labels, nearest, index, self.linking))
        return bound.link(links)

    async def names(self) -> NameIndex:
        """The name keys of every entity (key text and aliases), rebuilt after this knowledge base writes.

        Writes made by another process to a shared Neo4j are seen after :meth:`invalidate_names`.
        """
        if self._names is not None and self._names_revision != self.revision and _lists_entities(self.store):
            revision = self.revision
            changed = self.written_since(self._names_revision, refresh_limit(len(self._names)))
            if changed is not None:  # refresh only the entities written since (one query, not every entity)
                rows = await passage_store_for(self.store).entities(sorted(changed)) if changed else []
                for entity_id in changed:
                    self._names.remove(entity_id)
                for eid, label, props in rows:
                    self._names.add(eid, label, entity_names(self.schema, label, props))
                self._names_revision = revision
        if self._names is None or self._names_revision != self.revision:
            revision = self.revision
            rows = await passage_store_for(self.store).entities() if _lists_entities(self.store) else []
            self._names = NameIndex((eid, label, entity_names(self.schema, label, props)) for eid, label, props in rows)
            self._names_revision = revision
        return self._names

    def invalidate_names(self) -> None:
        """Forget the cached entity names (call after another writer changed the graph)."""
        self._names = None

    async def _nearest(
        self, labels: tuple[str, ...], text: str, vector: np.ndarray, candidates: int | None = None
    ) -> dict[str, float]:
        """The embedding's nearest entities of ``labels`` (skipped when a name matches exactly).

        With ``candidates`` (approximate mode), Neo4j takes them from the label's vector index.
        """
        assert self.linking is not None
        if (await self.names()).exact(name_key(text), labels):
            return {}
        k = self.linking.candidates
        approximate = None if candidates is None or len(labels) != 1 else max(candidates, k)
        nearest = QueryPlan(
            nodes=(NodeSpec(labels, (text,), (vector,)),), hops=(), k=k, threshold=0.0, candidates=approximate
        )
        rows = (await self.store.execute(nearest)).rows
        return {row.node_ids[0]: as_float32(row.score) for row in rows}

    async def compile(
        self, search: SearchInput, *, k: int = 10, threshold: float = 0.7, schema: GraphSchema | None = None
    ) -> CompiledQuery:
        """The Cypher (text, params) a triplet search compiles to, on any backend."""
        return compile_plan(await self.bind(self.plan(search, k=k, threshold=threshold, schema=schema)))

    async def triplet_search(
        self,
        search: SearchInput,
        *,
        k: int = 10,
        threshold: float = 0.7,
        schema: GraphSchema | None = None,
        candidates: int | None = None,
    ) -> TripletResults:
        """Exact top-k facts matching a triplet search (or chain), best first.

        ``subject``/``object`` of a hit are the pattern's positions (for a
        bidirectional match the relation itself keeps its true direction).
        ``candidates=N`` opts into approximate search on Neo4j: the scored anchor
        side is taken from its vector index (N nearest) instead of an exact scan —
        much faster on large labels, but it may miss matches. The memory store is
        always exact.
        """
        await self.ensure_ready()
        plan = await self.bind(self.plan(search, k=k, threshold=threshold, schema=schema, candidates=candidates))
        result = await self.store.execute(plan)
        if result.count is not None:
            return TripletResults([], count=result.count, query=result.query, plan=plan)
        ends = plan.row_ends
        return TripletResults([self._triplet(row, ends) for row in result.rows], query=result.query, plan=plan)

    async def similarity_search(
        self, label: str, text: str, *, k: int = 10, threshold: float = 0.0, linked: bool | None = None
    ) -> list[EntityHit]:
        """Entities of ``label`` (or ``"*"``) most similar to ``text``, best first.

        Linked (the knowledge base's default): entities named exactly ``text`` first at 1.0,
        then the nearest by ``max(embedding, name similarity)``. ``linked=False``: the
        embedding's cosine alone (entity resolution compares embeddings this way).
        """
        await self.ensure_ready()
        plan = plan_similarity_search(label, text, self.schema, k=k, threshold=threshold)
        node = plan.nodes[0]
        if self.linking is None or linked is False:
            # embed() checked the vector (finite, not zero): bound here rather than re-checked by plan.bind
            vector = (await self.embed(node.texts))[0]
            bound = QueryPlan(
                nodes=(NodeSpec(node.labels, node.texts, (vector,)),), hops=(), k=plan.k, threshold=plan.threshold
            )
            result = await self.store.execute(bound)
            return [EntityHit(self._entity(row.node_props[0]), row.score) for row in result.rows]
        # linked: exact names first, then the nearest entities by max(embedding, name similarity)
        vector = (await self.embed([text]))[0]
        nearest = QueryPlan(
            nodes=(NodeSpec(node.labels, node.texts, (vector,)),),
            hops=(),
            k=max(k, self.linking.candidates),
            threshold=0.0,
        )
        rows = (await self.store.execute(nearest)).rows
        embedding = {row.node_ids[0]: as_float32(row.score) for row in rows}
        ranked = [
            (i, s) for i, s in rank(text, node.labels, embedding, await self.names(), self.linking) if s >= threshold
        ]
        top = ranked[:k]
        props = {row.node_ids[0]: row.node_props[0] for row in rows}
        missing = [i for i, _ in top if i not in props]
        if missing:
            props.update(await self.store.get_nodes(missing))
        return [EntityHit(self._entity(props[i]), s) for i, s in top if i in props]

    async def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a read-only Cypher query on Neo4j, for what the triplet language cannot say.

        The query runs only when Neo4j's ``EXPLAIN`` classifies it read-only (values go in
        ``params``, never into the text); rows come back as dicts, nodes and relationships
        as their property maps. It works on any Neo4j graph, kag's or not.

        Raises:
            UnsafeQueryError: the query writes (or Neo4j cannot prove it does not); nothing ran.
            CypherUnsupportedError: the store is not Neo4j (``memory://`` runs no Cypher).
        """
        if not isinstance(self.store, Neo4jGraphStore):
            raise CypherUnsupportedError(
                f"query() runs Cypher on Neo4j; {self.uri} is not a Neo4j store. Open the knowledge base "
                "on neo4j://..., or use triplet_search(), which runs on every backend."
            )
        return await self.store.query(cypher, params)

    async def execute(self, plan: QueryPlan) -> list[PlanRow]:
        """Run a bound plan and return raw rows (ids, properties, scores)."""
        await self.ensure_ready()
        return (await self.store.execute(plan)).rows

    async def subgraph(
        self, refs: Iterable[str | Entity] | str | Entity, depth: int = 1, limit: int = 60
    ) -> SubgraphView:
        """The entities within ``depth`` hops of ``refs``, as a view that draws itself in Jupyter."""
        await self.ensure_ready()
        if isinstance(refs, str | Entity):
            refs = [refs]
        ids = [r if isinstance(r, str) else r.id for r in refs]
        if not 0 <= depth <= 3 or not 1 <= limit <= 500:
            raise InvalidInputError("subgraph depth must be in 0..3 and limit in 1..500.")
        neighborhood = getattr(self.store, "neighborhood", None)
        if neighborhood is None:
            raise ConfigError(f"{type(self.store).__name__} cannot list neighborhoods.")
        nodes, edges = await neighborhood(ids, depth=depth, limit=limit)
        view = SubgraphView(max_nodes=limit, focus=ids[0] if ids else None)
        for node_id, props in nodes.items():
            entity = self._entity(props)
            view.nodes[node_id] = (entity.label, entity.search_text())
        view.edges = list(edges)
        return view

    # -- hydration ------------------------------------------------------------
    def _entity(self, props: dict[str, Any]) -> Entity:
        model = self.schema.entity_model(props.get("label", ""))
        return model.model_validate(unflatten(model, props))

    def _relation(self, props: dict[str, Any], subj: Entity, obj: Entity) -> Relation:
        spec = self.schema.relation_spec(props.get("label", ""))
        data = unflatten(spec.model, props)
        return spec.model.model_validate({**data, "subj": subj, "obj": obj})

    def _triplet(self, row: PlanRow, ends: tuple[tuple[int, int], ...] = ()) -> TripletHit:
        """A row as a hit; ``ends`` (the plan's ``row_ends``) says which row nodes each relation joins."""
        path = tuple(self._entity(p) for p in row.node_props)
        ends = ends or tuple((i, i + 1) for i in range(len(row.rel_props)))
        rels = []
        for i, props in enumerate(row.rel_props):
            a, b = path[ends[i][0]], path[ends[i][1]]
            subj, obj = (a, b) if row.rel_forward[i] else (b, a)
            rels.append(self._relation(props, subj, obj))
        if not rels:
            return TripletHit(path[0], None, None, row.score, path, ())
        obj = path[-1] if len(rels) == 1 else path[1]
        return TripletHit(path[0], rels[0], obj, row.score, path, tuple(rels), ends)


_ENDS = frozenset({"subj", "obj"})


def _set_fields(model: Entity | Relation) -> set[str]:
    """The fields a write stores: those set explicitly, the key fields and the label."""
    cls = type(model)
    always = per_class(cls, "_kag_always_set", lambda: frozenset({*cls.key_fields(), "label"}) - _ENDS)
    return (model.model_fields_set - _ENDS) | always


class KnowledgeBaseSync(SyncFacade[KnowledgeBase]):
    """``kb.sync``: every coroutine method of :class:`KnowledgeBase`, blocking."""

    ensure_ready = blocking(KnowledgeBase.ensure_ready)
    aclose = blocking(KnowledgeBase.aclose)
    embed = blocking(KnowledgeBase.embed)
    upsert = blocking(KnowledgeBase.upsert)
    provenance = blocking(KnowledgeBase.provenance)
    delete = blocking(KnowledgeBase.delete)
    get = blocking(KnowledgeBase.get)
    counts = blocking(KnowledgeBase.counts)
    save = blocking(KnowledgeBase.save)
    bind = blocking(KnowledgeBase.bind)
    compile = blocking(KnowledgeBase.compile)
    triplet_search = blocking(KnowledgeBase.triplet_search)
    similarity_search = blocking(KnowledgeBase.similarity_search)
    names = blocking(KnowledgeBase.names)
    execute = blocking(KnowledgeBase.execute)
    query = blocking(KnowledgeBase.query)
    subgraph = blocking(KnowledgeBase.subgraph)
