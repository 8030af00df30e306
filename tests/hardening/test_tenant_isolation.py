"""Generated hostile requests across every route: no namespace reads, writes or deletes another's data.

A real server on 127.0.0.1 with keys bound to namespaces (``alpha``, ``beta``), an unbound
read key and an unbound admin key. Each tenant holds secret names and codes that no request
ever sends; every request (search, triplet search, ask in both modes, ingest, delete and both
MCP tools) is generated with a random key, a random ``X-Kag-Namespace`` header (valid, foreign,
or malformed) and sometimes a ``namespace`` smuggled into the body. An oracle written here
(independently of ``kag.server.tenants``) says which namespace each request must run in, or
which status it must get; then:

* every response's status is the oracle's;
* no response carries a secret of a namespace other than the one the request ran in;
* every write lands in the namespace the oracle names (written names encode it), and no
  delete aimed at another tenant's data deletes anything;
* at the end each tenant's seeded data is intact and holds only its own writes.

Memory runs 10,000 requests (``KAG_HOSTILE_REQUESTS`` changes it); Neo4j, where the compiled
Cypher carries the namespace, runs 10,000 too (``KAG_HOSTILE_REQUESTS_NEO4J``).
"""

from __future__ import annotations

import os
import random
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from kag.datamodels.documents import Document
from kag.examples.seed import City, Country
from kag.server import HTTPServer, Service, create_app
from kag.server.app import App
from kag.server.auth import APIKeys

SEED = "kag.examples.seed"
TENANTS = ("alpha", "beta", "default")
KEYS = {name: f"{name}-{secrets.token_urlsafe(24)}" for name in ("alpha", "beta", "read", "admin")}
KEYS_TEXT = (
    f"{KEYS['alpha']}:read,ingest@alpha\n{KEYS['beta']}:read,ingest@beta\n{KEYS['read']}:read\n{KEYS['admin']}:admin\n"
)
# per tenant: a city, a country and a passage code that no request ever names
SECRETS = {
    ns: {"city": f"Zq{ns.title()}polis", "country": f"Xy{ns.title()}land", "code": f"CODE{ns.upper()}{i}Q"}
    for i, ns in enumerate(TENANTS)
}
HEADERS = [
    *(None, "alpha", "beta", "default", "gamma", "BETA"),  # absent or valid
    *("beta;drop", "beta' OR 1=1 //", "../beta", "béta", "x" * 80),  # malformed
]
ROUTES = [
    *("search", "search_label", "triplet", "ask_graph", "ask_rag"),
    *("ingest", "delete", "mcp_search", "mcp_triplet"),
]
VALID = {"alpha", "beta", "default", "gamma", "BETA"}


def header_ns(header: str | None) -> str | bool | None:
    """The namespace a header names (``None``: none; ``False``: malformed)."""
    if header is None:
        return None
    name = header.strip()
    return name if name in VALID else False


@dataclass
class Expect:
    status: int
    namespace: str | None = None


def oracle(key: str, header: str | None, route: str, smuggled: bool) -> Expect:
    """What must happen, from the documented rules (see kag.server.tenants and kag.server.auth)."""
    if key in ("none", "forged"):
        return Expect(401)
    writes = route in ("ingest", "delete")
    if key == "read" and writes:
        return Expect(403)  # scope first
    named = header_ns(header)
    if named is False:
        return Expect(400)
    if key in ("alpha", "beta"):
        if named is not None and named != key:
            return Expect(403)
        ns = key
    elif key == "read":
        if named is not None and named != "default":
            return Expect(403)
        ns = "default"
    else:  # admin: any namespace
        ns = named if isinstance(named, str) else "default"
    if smuggled and not route.startswith("mcp"):
        return Expect(422, ns)  # bodies refuse unknown fields
    return Expect(200, ns)


def entity_json(name: str, label: str = "City") -> dict[str, Any]:
    return {"label": label, "name": name}


def body_for(route: str, rng: random.Random, i: int, target: Expect, smuggled: bool) -> tuple[str, dict[str, Any]]:
    """A request body: searches are generic (they would only find secrets by crossing tenants)."""
    # writes and deletes aim at another tenant than the one the request must run in
    victim = rng.choice([t for t in TENANTS if t != target.namespace])
    words = rng.choice(["city", "capital country", "*", "CODE", "secret code", "polis", "land", "a"])
    body: dict[str, Any]
    if route == "search":
        path, body = "/search", {"query": words, "k": rng.choice([5, 50])}
    elif route == "search_label":
        text = words if words != "*" else "town"  # a label search needs a text
        path, body = "/search", {"query": text, "k": 50, "label": rng.choice(["City", "Country", "*"])}
    elif route == "triplet":
        path = "/triplet_search"
        body = {
            "subject_label": rng.choice(["City", "*"]),
            "subject_similarity_search": rng.choice(["*", words]),
            "relation_label": rng.choice(["IsCityOf", "*"]),
            "object_label": rng.choice(["Country", "*"]),
            "k": 100,
            "threshold": 0.0,
        }
    elif route in ("ask_graph", "ask_rag"):
        path = "/ask"
        body = {"question": f"Which {words} is there?", "mode": "graph" if route == "ask_graph" else "rag"}
    elif route == "ingest":
        # the name says where the oracle expects it; the text carries no secret
        name = f"W{i}in{target.namespace}"
        path = "/ingest"
        body = {"entities": [entity_json(name)], "texts": [f"Written note {i} about {name}."]}
    elif route == "delete":
        # aimed at another tenant's seeded items (the ids are hashes: no secret is sent)
        s = SECRETS[victim]
        ids = [City(name=s["city"]).id, Country(name=s["country"]).id]
        docs = [Document.from_text(passage(victim), source=f"{victim}.md").id]
        path = "/delete"
        body = rng.choice(
            [{"ids": ids}, {"document_ids": docs}, {"sources": [f"{victim}.md"]}, {"where": {"source": f"{victim}.md"}}]
        )
    else:
        path = "/mcp"
        if route == "mcp_search":
            name, arguments = "search_knowledge", {"query": words, "k": 20}
        else:
            name = "triplet_search"
            arguments = {"subject_label": "City", "relation_label": "*", "object_label": "*", "threshold": 0.0}
        if smuggled:
            arguments["namespace"] = victim
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        return path, body
    if smuggled:
        body["namespace"] = victim
    return path, body


def passage(ns: str) -> str:
    s = SECRETS[ns]
    return f"The archive of {s['city']} in {s['country']} keeps the register {s['code']}."


async def seed(client: httpx.AsyncClient, app: App) -> None:
    for ns in TENANTS:
        s = SECRETS[ns]
        key = KEYS[ns] if ns != "default" else KEYS["admin"]
        body = {
            "entities": [entity_json(s["city"]), entity_json(s["country"], "Country")],
            "relations": [
                {"label": "IsCityOf", "subj": entity_json(s["city"]), "obj": entity_json(s["country"], "Country")}
            ],
            "texts": [],
        }
        r = await client.post("/ingest", json=body, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        # a passage with a fixed source, so that deletes can name it
        service = await tenant_service(app, ns)
        await service.knowledge.add(Document.from_text(passage(ns), source=f"{ns}.md"))


async def tenant_service(app: App, ns: str) -> Service:
    tenant = await app.tenants.get(ns)
    service: Service = tenant.service
    return service


@pytest.fixture(params=["memory", "neo4j"])
def backend(request: pytest.FixtureRequest) -> dict[str, str] | None:
    """The Neo4j settings for the neo4j run (resolved outside the event loop), None for memory."""
    if request.param == "memory":
        return None
    config: dict[str, str] = request.getfixturevalue("neo4j_config")
    return config


@pytest.fixture
async def served(
    backend: dict[str, str] | None, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, int, App]]:
    if backend is not None:
        monkeypatch.setenv("NEO4J_USERNAME", backend["user"])
        monkeypatch.setenv("NEO4J_PASSWORD", backend["password"])
        service = Service.open(backend["uri"], SEED)
        count = int(os.environ.get("KAG_HOSTILE_REQUESTS_NEO4J", "10000"))
    else:
        service = Service.open("memory://", SEED)
        count = int(os.environ.get("KAG_HOSTILE_REQUESTS", "10000"))
    app = create_app(service, api_keys=APIKeys.parse(KEYS_TEXT))
    server = HTTPServer(app, port=0, max_connections=64)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            if backend is not None:  # leftovers of an earlier run in these namespaces
                for ns in (*TENANTS, "BETA", "gamma"):
                    tenant = await app.tenants.get(ns)
                    await tenant.service.knowledge.ready()
                    await tenant.service.kb.store.clear()  # type: ignore[attr-defined]
                    await tenant.service.knowledge.store.clear()
            yield client, count, app
            if backend is not None:  # leave nothing behind on the shared server
                for ns in app.tenants.namespaces:
                    tenant = await app.tenants.get(ns)
                    await tenant.service.kb.store.clear()  # type: ignore[attr-defined]
                    await tenant.service.knowledge.store.clear()
    finally:
        await server.close()
        await app.tenants.aclose()


def foreign_secrets(ns: str | None) -> list[str]:
    return [v for other in TENANTS if other != ns for v in SECRETS[other].values()]


async def test_hostile_requests_never_cross_namespaces(served: tuple[httpx.AsyncClient, int, App]) -> None:
    client, count, app = served
    await seed(client, app)
    rng = random.Random(20261203)
    seen: Counter[tuple[str, int]] = Counter()
    key_names = ["alpha", "beta", "read", "admin", "none", "forged"]
    for i in range(count):
        key, header, route = rng.choice(key_names), rng.choice(HEADERS), rng.choice(ROUTES)
        smuggled = rng.random() < 0.1
        expect = oracle(key, header, route, smuggled)
        path, body = body_for(route, rng, i, expect, smuggled)
        headers: dict[str, str | bytes] = {}
        if key == "forged":
            headers["Authorization"] = f"Bearer {KEYS['alpha']}x"
        elif key != "none":
            headers["Authorization"] = f"Bearer {KEYS[key]}"
        if header is not None:
            headers["X-Kag-Namespace"] = header.encode("utf-8")  # raw bytes: httpx would refuse non-ASCII text
        r = await client.post(path, json=body, headers=headers)
        seen[(route, r.status_code)] += 1
        where = f"request {i}: key={key} header={header!r} route={route} smuggled={smuggled}"
        assert r.status_code == expect.status, f"{where}: {r.status_code} {r.text[:300]}"
        if r.status_code != 200:
            continue
        text = r.text
        for secret in foreign_secrets(expect.namespace):
            assert secret not in text, f"{where}: leaked {secret!r} from another namespace"
        if route == "delete":
            assert r.json()["deleted"] == 0, f"{where}: deleted another tenant's data: {text}"
        if route.startswith("mcp") and smuggled:
            assert r.json()["result"]["isError"] is True, where

    # every namespace is intact and holds only the writes meant for it
    for ns in (*TENANTS, "gamma", "BETA"):
        service = await tenant_service(app, ns)
        names = await entities_of(service)
        written = [n for n in names if n.startswith("W")]
        assert all(n.endswith(f"in{ns}") for n in written), (ns, [n for n in written if not n.endswith(f"in{ns}")])
    for ns in TENANTS:
        service = await tenant_service(app, ns)
        s = SECRETS[ns]
        assert await service.kb.get(City(name=s["city"]).id) is not None, ns
        assert await service.kb.get(Country(name=s["country"]).id) is not None, ns
        assert [d.source for d in await service.knowledge.documents()].count(f"{ns}.md") == 1, ns
    # the generator reached every route with successes and refusals
    for route in ROUTES:
        assert seen[(route, 200)] > 0, route
    assert {status for _, status in seen} >= {200, 400, 401, 403, 422}


async def entities_of(service: Service) -> list[str]:
    """The names of every entity of the service's namespace."""
    await service.knowledge.ready()
    return [str(props.get("name", "")) for _, _, props in await service.knowledge.store.entities()]
