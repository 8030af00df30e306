"""An existing Neo4j graph that kag did not create: introspected into models, queried read-only.

The graph is made with plain Cypher through the neo4j driver (labels ``Ix*``, types ``IX_*``,
so it never meets the kag fixtures' data) and removed after each test.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import AsyncGraphDatabase

import kag
from kag.cli import main
from kag.errors import CypherUnsupportedError, UnsafeQueryError
from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS
from kag.graph.introspect import GraphDescription, introspect

pytestmark = pytest.mark.neo4j

GRAPH = """
CREATE (k:IxPerson {name: 'Keanu Reeves', born: 1964, id: 7, `class`: 'lead'}),
       (c:IxPerson:IxActor {name: 'Carrie-Anne Moss', born: 1967, nicknames: ['Trinity']}),
       (l:IxPerson {name: 'Lana Wachowski'}),
       (m:IxMovie {title: 'The Matrix', released: 1999, rating: 8.7, premiere: date('1999-03-31'),
                   location: point({x: 1.0, y: 2.0})}),
       (w:IxMovie {title: 'John Wick', released: 2014}),
       (odd:`Ix Odd` {name: 'odd'}),
       (k)-[:IX_ACTED_IN {roles: ['Neo']}]->(m),
       (c)-[:IX_ACTED_IN {roles: ['Trinity']}]->(m),
       (k)-[:IX_ACTED_IN]->(w),
       (l)-[:IX_DIRECTED {year: 1999}]->(m),
       (k)-[:`IX-LINK`]->(odd)
"""
CLEAN = "MATCH (n) WHERE n:IxPerson OR n:IxMovie OR n:`Ix Odd` DETACH DELETE n"


async def _run(config: dict[str, str], query: str) -> list[dict[str, Any]]:
    driver = AsyncGraphDatabase.driver(config["uri"], auth=(config["user"], config["password"]))
    try:
        result = await driver.execute_query(query, database_=config["database"])
        return [r.data() for r in result.records]
    finally:
        await driver.close()


@pytest.fixture
async def movies(neo4j_config: dict[str, str]) -> AsyncIterator[dict[str, str]]:
    """A graph written by plain Cypher, not by kag."""
    await _run(neo4j_config, CLEAN)
    await _run(neo4j_config, GRAPH)
    yield neo4j_config
    await _run(neo4j_config, CLEAN)


async def describe(config: dict[str, str]) -> GraphDescription:
    return await introspect(
        config["uri"], username=config["user"], password=config["password"], database=config["database"]
    )


def load_module(source: str, path: Path) -> Any:
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[path.stem]
    return module


async def test_labels_types_and_properties_are_introspected(movies: dict[str, str]) -> None:
    d = await describe(movies)
    labels = {i.label: {p.name: (p.types, p.mandatory) for p in i.properties} for i in d.labels}
    assert labels["IxPerson"] == {
        "born": (("Long",), False),  # Lana has no birth year
        "name": (("String",), True),
        "nicknames": (("StringArray",), False),
    }
    assert labels["IxActor"] == {
        "born": (("Long",), True),
        "name": (("String",), True),
        "nicknames": (("StringArray",), True),
    }
    assert labels["IxMovie"] == {
        "location": (("Point",), False),
        "premiere": (("Date",), False),
        "rating": (("Double",), False),
        "released": (("Long",), True),
        "title": (("String",), True),
    }
    types = {r.type: r for r in d.relation_types}
    assert (types["IX_ACTED_IN"].starts, types["IX_ACTED_IN"].ends) == (("IxActor", "IxPerson"), ("IxMovie",))
    assert [(p.name, p.types, p.mandatory) for p in types["IX_ACTED_IN"].properties] == [
        ("roles", ("StringArray",), False)
    ]
    assert [(p.name, p.types, p.mandatory) for p in types["IX_DIRECTED"].properties] == [("year", ("Long",), True)]
    # what kag cannot declare is named, not silently dropped
    assert "Ix Odd" not in labels and "IX-LINK" not in types
    skipped = "\n".join(d.skipped)
    for name in ("'Ix Odd'", "'IX-LINK'", "IxPerson.'id'", "IxPerson.'class'"):
        assert name in skipped


async def test_generated_source_imports_and_models_validate_the_stored_nodes(
    movies: dict[str, str], tmp_path: Path
) -> None:
    d = await describe(movies)
    source = d.source()
    assert "class IxActedIn(Relation):" in source and "title: str = Field(key=True)" in source
    assert "# location: Point has no JSON form; not declared" in source
    module = load_module(source, tmp_path / "ix_models.py")
    schema: kag.GraphSchema = module.SCHEMA
    assert {"IxPerson", "IxActor", "IxMovie"} <= set(schema.entity_labels)
    assert {"IX_ACTED_IN", "IX_DIRECTED"} <= set(schema.relation_labels)
    assert set(d.schema().entity_labels) == set(schema.entity_labels)
    # the models accept every stored node of their label (minus what was not declared)
    for label, model in (("IxPerson", module.IxPerson), ("IxMovie", module.IxMovie)):
        rows = await _run(movies, f"MATCH (n:`{label}`) RETURN n {{.*}} AS props")
        for row in rows:
            props = {k: v for k, v in row["props"].items() if k in model.model_fields}
            props.pop("premiere", None)  # a neo4j Date; declared as text
            model.model_validate(props)
    matrix = module.IxMovie(title="The Matrix", released=1999)
    acted = module.IxActedIn(subj=module.IxPerson(name="Keanu Reeves"), obj=matrix, roles=["Neo"])
    kb = kag.KnowledgeBase("memory://", entity_models=module.ENTITY_MODELS, relation_models=module.RELATION_MODELS)
    await kb.upsert([acted])
    hits = await kb.triplet_search(
        {
            "subject_label": "IxPerson",
            "relation_label": "IX_ACTED_IN",
            "object_label": "IxMovie",
            "object_similarity_search": "The Matrix",
        }
    )
    assert [h.relation.roles for h in hits] == [["Neo"]]  # type: ignore[union-attr]


async def test_query_reads_an_existing_graph(movies: dict[str, str]) -> None:
    kb = kag.KnowledgeBase(
        movies["uri"], username=movies["user"], password=movies["password"], database=movies["database"]
    )
    try:
        rows = await kb.query(
            "MATCH (p:IxPerson)-[r:IX_ACTED_IN]->(m:IxMovie) WHERE m.released < $year "
            "RETURN p.name AS name, r.roles AS roles ORDER BY name",
            {"year": 2000},
        )
        assert rows == [
            {"name": "Carrie-Anne Moss", "roles": ["Trinity"]},
            {"name": "Keanu Reeves", "roles": ["Neo"]},
        ]
        (row,) = await kb.query("MATCH (m:IxMovie {title: $t}) RETURN m", {"t": "John Wick"})
        assert row["m"] == {"title": "John Wick", "released": 2014}
        for write in (
            "CREATE (:IxPerson {name: $n})",
            "MATCH (n:IxPerson) DETACH DELETE n",
            "MATCH (n:IxMovie) SET n.rating = 1",
            "MERGE (n:IxMovie {title: $n}) RETURN n",
        ):
            with pytest.raises(UnsafeQueryError):
                await kb.query(write, {"n": "x"})
        assert await _run(movies, "MATCH (n:IxPerson) RETURN count(n) AS n") == [{"n": 3}]
        assert await _run(movies, "MATCH (n:IxMovie) WHERE n.rating = 1 RETURN count(n) AS n") == [{"n": 0}]
    finally:
        await kb.aclose()


def test_query_sync_and_memory_refusal(neo4j_config: dict[str, str]) -> None:
    import asyncio

    asyncio.run(_run(neo4j_config, CLEAN))
    asyncio.run(_run(neo4j_config, GRAPH))
    kb = kag.KnowledgeBase(
        neo4j_config["uri"],
        username=neo4j_config["user"],
        password=neo4j_config["password"],
        database=neo4j_config["database"],
    )
    try:
        assert kb.sync.query("MATCH (m:IxMovie) RETURN count(m) AS n") == [{"n": 2}]
        with pytest.raises(UnsafeQueryError):
            kb.sync.query("CREATE (:IxMovie {title: 'x'})")
    finally:
        kb.sync.aclose()
        asyncio.run(_run(neo4j_config, CLEAN))
    memory = kag.KnowledgeBase("memory://", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS)
    with pytest.raises(CypherUnsupportedError, match="neo4j://"):
        memory.sync.query("MATCH (n) RETURN n")


def test_cli_schema_prints_importable_models(
    movies: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("NEO4J_USERNAME", movies["user"])
    monkeypatch.setenv("NEO4J_PASSWORD", movies["password"])
    monkeypatch.setenv("NEO4J_DATABASE", movies["database"])
    assert main(["schema", "--from", movies["uri"], "--sample", "1000"]) == 0
    printed = capsys.readouterr().out
    module = load_module(printed, tmp_path / "cli_models.py")
    assert "IX_DIRECTED" in module.SCHEMA.relation_labels
    target = tmp_path / "written.py"
    assert main(["schema", "--from", movies["uri"], "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == printed
    assert main(["schema", "--from", "memory://"]) == 2
    assert "neo4j:// or bolt://" in capsys.readouterr().err


async def test_embed_in_place_makes_the_existing_graph_searchable(movies: dict[str, str]) -> None:
    from kag.knowledge.adopt import embed_in_place

    schema = (await describe(movies)).schema()
    kb = kag.KnowledgeBase(
        movies["uri"],
        entity_models=schema.entity_models,
        relation_models=schema.relation_models,
        username=movies["user"],
        password=movies["password"],
        database=movies["database"],
    )
    try:
        before = await _run(movies, "MATCH (n) WHERE n:IxPerson OR n:IxMovie RETURN count(n) AS n")
        report = await embed_in_place(kb, batch_size=2)  # small batches: the loop pages
        # Keanu holds an `id` of his own: left unchanged, and so are his relationships
        # Carrie-Anne Moss is an IxActor and an IxPerson: adopted once, under the first label
        assert report.entities["IxActor"] + report.entities["IxPerson"] == 2 and report.entities["IxMovie"] == 2
        assert report.relations["IX_ACTED_IN"] == 1 and report.relations["IX_DIRECTED"] == 1
        assert [(label, reason) for label, _, reason in report.skipped] == [
            ("IxPerson", "it already has its own 'id' property")
        ]
        assert report.to_dict()["skipped"][0]["label"] == "IxPerson"
        # nothing was copied: the same nodes, their own labels and properties kept
        assert await _run(movies, "MATCH (n) WHERE n:IxPerson OR n:IxMovie RETURN count(n) AS n") == before
        matrix = await _run(movies, "MATCH (m:IxMovie {title: 'The Matrix'}) RETURN m.premiere AS p, m.rating AS r")
        assert str(matrix[0]["p"]) == "1999-03-31" and matrix[0]["r"] == 8.7
        keanu = await _run(movies, "MATCH (k:IxPerson {name: 'Keanu Reeves'}) RETURN k.id AS id, k.kag_ns AS ns")
        assert keanu == [{"id": 7, "ns": None}]
        hits = await kb.triplet_search(
            {
                "subject_label": "IxPerson",
                "subject_similarity_search": "Carrie-Anne Moss",
                "relation_label": "IX_ACTED_IN",
                "object_label": "IxMovie",
            }
        )
        assert [(h.subject.name, h.object.title, h.relation.roles) for h in hits] == [  # type: ignore[union-attr]
            ("Carrie-Anne Moss", "The Matrix", ["Trinity"])
        ]
        similar = await kb.similarity_search("IxMovie", "John Wick", k=1)
        assert [h.entity.title for h in similar] == ["John Wick"]  # type: ignore[attr-defined]
        # a second run adopts only what is new
        again = await embed_in_place(kb)
        assert sum(again.entities.values()) == 0 and sum(again.relations.values()) == 0
    finally:
        await kb.aclose()


def test_cli_schema_then_adopt(
    movies: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import json

    for name, key in (("USERNAME", "user"), ("PASSWORD", "password"), ("DATABASE", "database")):
        monkeypatch.setenv(f"NEO4J_{name}", movies[key])
    assert main(["schema", "--from", movies["uri"], "-o", str(tmp_path / "movie_models.py")]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    capsys.readouterr()
    assert main(["adopt", "--kb", movies["uri"], "--schema", "movie_models", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entities"]["IxMovie"] == 2 and report["relations"]["IX_DIRECTED"] == 1
    assert [s["reason"] for s in report["skipped"]] == ["it already has its own 'id' property"]
    assert main(["adopt", "--kb", "memory://", "--schema", "movie_models"]) == 2
    assert "Neo4j graph" in capsys.readouterr().err


async def test_sample_bounds_each_type_so_a_large_type_cannot_crowd_out_a_rare_one(movies: dict[str, str]) -> None:
    # 30 IX_RATED edges read before the single IX_DIRECTED one would fill a global sample of 5
    await _run(
        movies,
        "MATCH (k:IxPerson {name: 'Keanu Reeves'}) UNWIND range(1, 30) AS i "
        "CREATE (k)-[:IX_RATED {stars: i}]->(:IxMovie {title: 'Rated ' + toString(i)})",
    )
    description = await introspect(
        movies["uri"], sample=5, username=movies["user"], password=movies["password"], database=movies["database"]
    )
    types = {r.type: r for r in description.relation_types}
    assert {"IX_RATED", "IX_DIRECTED", "IX_ACTED_IN"} <= set(types)
    assert types["IX_DIRECTED"].starts == ("IxPerson",)
    assert types["IX_DIRECTED"].ends == ("IxMovie",)
