"""The grown triplet language gives the same rows on memory and Neo4j, and the right ones.

Each feature runs on both backends over one small hand-made graph: symmetric relations
(also mixed with directed ones under ``"*"``), two or three constraints on one entity
(``subject_from: "first_subject"``), negated hops inside chains, field filters with every
operator, and ordering with a limit. Rows (ids along the row, relationship directions),
their order and scores to 1e-6 must agree, and the answers must be the ones worked out by
hand below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

import kag
from kag.graph.base import PlanRow

pytestmark = pytest.mark.neo4j


class Land(kag.Entity):
    label: Literal["Land"] = "Land"
    name: str
    population: int | None = None
    area: float | None = None
    code: str | None = None


class Zone(kag.Entity):
    label: Literal["Zone"] = "Zone"
    name: str


class Money(kag.Entity):
    label: Literal["Money"] = "Money"
    name: str


class Town(kag.Entity):
    label: Literal["Town"] = "Town"
    name: str
    population: int | None = None


class InZone(kag.Relation):
    subj: Land
    label: Literal["InZone"] = "InZone"
    obj: Zone


class Uses(kag.Relation):
    subj: Land
    label: Literal["Uses"] = "Uses"
    obj: Money


class Neighbours(kag.Relation, symmetric=True):
    subj: Land
    label: Literal["Neighbours"] = "Neighbours"
    obj: Land


class Owes(kag.Relation):  # directed: mixed with Neighbours under "*"
    subj: Land
    label: Literal["Owes"] = "Owes"
    obj: Land


class TownOf(kag.Relation):
    subj: Town
    label: Literal["TownOf"] = "TownOf"
    obj: Land


MODELS: dict[str, Any] = {
    "entity_models": [Land, Zone, Money, Town],
    "relation_models": [InZone, Uses, Neighbours, Owes, TownOf],
}
# name: (population, area, code, zone, money); codes mix ASCII, a high BMP letter (U+FB00)
# and an astral one (U+1D518), whose order differs between code points and UTF-16 units
LANDS: dict[str, tuple[int | None, float | None, str | None, str, str]] = {
    "Austria": (9_000_000, 83_871.0, "AT", "Europe", "Euro"),
    "Germany": (83_000_000, 357_022.0, "DE", "Europe", "Euro"),
    "Switzerland": (9_000_000, 41_285.0, "CH", "Europe", "Franc"),  # ties Austria's population
    "Hungary": (9_700_000, 93_028.0, "HU", "Europe", "Forint"),
    "Liechtenstein": (39_000, 160.0, "\ufb00", "Europe", "Franc"),
    "Reunion": (860_000, None, "RE", "Africa", "Euro"),
    "Mayotte": (320_000, 374.0, "\U0001d518", "Africa", "Euro"),
    "Senegal": (None, 196_722.0, "SN", "Africa", "Franc"),
    "Japan": (125_000_000, 377_975.0, None, "Asia", "Yen"),
}
NEIGHBOURS = [  # stored once per pair
    ("Austria", "Germany"),
    ("Austria", "Switzerland"),
    ("Hungary", "Austria"),
    ("Germany", "Switzerland"),
    ("Switzerland", "Liechtenstein"),
    ("Austria", "Liechtenstein"),
]
OWES = [("Hungary", "Austria"), ("Japan", "Germany")]
TOWNS: dict[str, tuple[str, int | None]] = {
    "Vienna": ("Austria", 1_900_000),
    "Graz": ("Austria", 290_000),
    "Berlin": ("Germany", 3_600_000),
    "Hamburg": ("Germany", 1_800_000),
    "Munich": ("Germany", 1_500_000),
    "Zurich": ("Switzerland", 420_000),
    "Geneva": ("Switzerland", None),
    "Tokyo": ("Japan", 14_000_000),
    "Yokohama": ("Japan", 3_700_000),
    "Osaka": ("Japan", 2_700_000),
    "Dakar": ("Senegal", 1_100_000),
}


def land(name: str) -> Land:
    population, area, code, _, _ = LANDS[name]
    return Land(name=name, population=population, area=area, code=code)


def facts() -> list[kag.Relation]:
    out: list[kag.Relation] = []
    for name, (_, _, _, zone, money) in LANDS.items():
        out.append(InZone(subj=land(name), obj=Zone(name=zone)))
        out.append(Uses(subj=land(name), obj=Money(name=money)))
    out += [Neighbours(subj=land(a), obj=land(b)) for a, b in NEIGHBOURS]
    out += [Owes(subj=land(a), obj=land(b)) for a, b in OWES]
    out += [TownOf(subj=Town(name=t, population=p), obj=land(c)) for t, (c, p) in TOWNS.items()]
    return out


def hop(subject: str, subject_text: str, relation: str, obj: str, object_text: str, **extra: Any) -> dict[str, Any]:
    return {
        "subject_label": subject,
        "subject_similarity_search": subject_text,
        "relation_label": relation,
        "object_label": obj,
        "object_similarity_search": object_text,
        **extra,
    }


def where(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


EUROPE = hop("Land", "*", "InZone", "Zone", "Europe")
AFRICA = hop("Land", "*", "InZone", "Zone", "Africa")
USES_EURO = hop("Land", "*", "Uses", "Money", "Euro", subject_from="first_subject")
NOT_EURO = {**USES_EURO, "negated": True}
NEIGHBOURS_OF_AUSTRIA = sorted(
    {b for a, b in NEIGHBOURS if a == "Austria"} | {a for a, b in NEIGHBOURS if b == "Austria"}
)


@pytest.fixture
async def pair(neo4j_kb_factory: Callable[..., Any]) -> tuple[kag.KnowledgeBase, kag.KnowledgeBase]:
    mem = kag.KnowledgeBase("memory://", **MODELS)
    neo = await neo4j_kb_factory(**MODELS)
    for kb in (mem, neo):
        await kb.upsert(facts())
    return mem, neo


def key(row: PlanRow) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
    return row.node_ids, row.rel_ids, row.rel_forward


async def same_rows(
    pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase], search: dict[str, Any], *, k: int = 50
) -> list[PlanRow]:
    """Run ``search`` on both backends; rows, order, directions and scores must agree. Memory's rows."""
    mem, neo = pair
    a = await mem.execute(await mem.bind(mem.plan(search, k=k)))
    b = await neo.execute(await neo.bind(neo.plan(search, k=k)))
    assert [key(r) for r in a] == [key(r) for r in b], search
    assert [r.score for r in b] == pytest.approx([r.score for r in a], abs=1e-6), search
    # Neo4j keeps the id among the properties as well
    assert [r.node_props for r in a] == [tuple(_no_id(p) for p in r.node_props) for r in b], search
    return a


async def same_count(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase], search: dict[str, Any]) -> int:
    mem, neo = pair
    a = await mem.triplet_search(search, k=50)
    b = await neo.triplet_search(search, k=50)
    assert a.count is not None and a.count == b.count, search
    return a.count


async def same_hits(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase], search: dict[str, Any], k: int = 50) -> None:
    """Path-shaped searches also hydrate to the same facts through ``triplet_search``."""
    mem, neo = pair
    a = await mem.triplet_search(search, k=k)
    b = await neo.triplet_search(search, k=k)
    assert [h.text() for h in a] == [h.text() for h in b], search
    assert a.query is not None and b.query is not None and a.query.text == b.query.text


def _no_id(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k != "id"}


def names(rows: list[PlanRow], at: int = 0) -> list[str]:
    return [r.node_props[at]["name"] for r in rows]


async def test_symmetric_relation_from_either_end(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    as_object = hop("Land", "*", "Neighbours", "Land", "Austria")
    as_subject = hop("Land", "Austria", "Neighbours", "Land", "*")
    assert sorted(names(await same_rows(pair, as_object))) == NEIGHBOURS_OF_AUSTRIA
    assert sorted(names(await same_rows(pair, as_subject), 1)) == NEIGHBOURS_OF_AUSTRIA
    await same_hits(pair, as_object)
    # "*" over Land -> Land mixes the symmetric Neighbours with the directed Owes: Owes only forward
    rows = await same_rows(pair, hop("Land", "*", "*", "Land", "Hungary"))
    assert names(rows) == ["Austria"] and rows[0].node_props[0]["name"] == "Austria"
    rows = await same_rows(pair, hop("Land", "Hungary", "*", "Land", "*"))
    assert sorted(names(rows, 1)) == ["Austria", "Austria"]  # neighbour (stored Hungary -> Austria) and Owes
    await same_hits(pair, hop("Land", "*", "*", "Land", "Austria"))
    # negated: lands with no neighbour at all
    lonely = await same_rows(pair, hop("Land", "*", "Neighbours", "Land", "*", negated=True))
    assert sorted(names(lonely)) == ["Japan", "Mayotte", "Reunion", "Senegal"]
    assert await same_count(pair, hop("Land", "*", "Neighbours", "Land", "*", count=True)) == 2 * len(NEIGHBOURS)


async def test_two_and_three_constraints_on_one_entity(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    rows = await same_rows(pair, {"hops": [EUROPE, USES_EURO]})
    assert sorted(names(rows)) == ["Austria", "Germany"]
    assert {r.node_props[1]["name"] for r in rows} == {"Europe"} and {r.node_props[2]["name"] for r in rows} == {"Euro"}
    assert sorted(names(await same_rows(pair, {"hops": [AFRICA, USES_EURO]}))) == ["Mayotte", "Reunion"]
    border = hop("Land", "*", "Neighbours", "Land", "Switzerland", subject_from="first_subject")
    assert sorted(names(await same_rows(pair, {"hops": [EUROPE, USES_EURO, border]}))) == ["Austria", "Germany"]
    # previous_object after a first_subject hop is that hop's object: here the neighbour (Switzerland)
    towns = hop("Land", "*", "TownOf", "Town", "*", bidirectional=True)
    rows = await same_rows(pair, {"hops": [EUROPE, USES_EURO, border, towns]})
    assert sorted({r.node_props[4]["name"] for r in rows}) == ["Geneva", "Zurich"]
    assert await same_count(pair, {"hops": [EUROPE, {**USES_EURO, "count": True}]}) == 2
    for k in (1, 3):
        await same_rows(pair, {"hops": [EUROPE, USES_EURO, border]}, k=k)


async def test_negated_hop_inside_a_chain(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    want = ["Hungary", "Liechtenstein", "Switzerland"]
    assert sorted(names(await same_rows(pair, {"hops": [EUROPE, NOT_EURO]}))) == want
    # the path form of the benchmark: (Zone Europe) -InZone- (Land) and the Land does not use the Euro
    path = {
        "hops": [
            hop("Zone", "Europe", "InZone", "Land", "*", bidirectional=True),
            hop("Land", "*", "Uses", "Money", "Euro", negated=True),
        ]
    }
    rows = await same_rows(pair, path)
    assert sorted(names(rows, 1)) == want
    await same_hits(pair, path)
    # negated first, then a constraint (previous_object after a negated hop: still the first subject)
    first_negated = {"hops": [{**NOT_EURO, "subject_from": "previous_object"}, EUROPE]}
    assert sorted(names(await same_rows(pair, first_negated))) == want
    assert await same_count(pair, {"hops": [EUROPE, {**NOT_EURO, "count": True}]}) == 3
    # towns of lands that do not use the Euro: the negated hop filters the path's last node
    towns = {
        "hops": [
            hop("Town", "*", "TownOf", "Land", "*"),
            hop("Land", "*", "Uses", "Money", "Euro", negated=True),
        ]
    }
    assert sorted(names(await same_rows(pair, towns))) == ["Dakar", "Geneva", "Osaka", "Tokyo", "Yokohama", "Zurich"]
    # the negated object may carry conditions: lands with no town above 3 million
    no_big_town = hop(
        "Land", "*", "TownOf", "Town", "*", bidirectional=True, negated=True,
        object_where=[where("population", ">", 3_000_000)],
    )  # fmt: skip
    rows = await same_rows(pair, no_big_town)
    assert sorted(names(rows)) == sorted(set(LANDS) - {"Germany", "Japan"})
    # a negated hop over a symmetric relation: European lands that do not border Germany
    not_near_germany = hop("Land", "*", "Neighbours", "Land", "Germany", subject_from="first_subject", negated=True)
    rows = await same_rows(pair, {"hops": [EUROPE, not_near_germany]})
    assert sorted(names(rows)) == ["Germany", "Hungary", "Liechtenstein"]


@pytest.mark.parametrize(
    ("condition", "want"),
    [
        (where("population", ">", 1_500_000), ["Berlin", "Hamburg", "Osaka", "Tokyo", "Vienna", "Yokohama"]),
        (where("population", ">=", 1_500_000), ["Berlin", "Hamburg", "Munich", "Osaka", "Tokyo", "Vienna", "Yokohama"]),
        (where("population", "<", 420_000), ["Graz"]),
        (where("population", "<=", "420000"), ["Graz", "Zurich"]),  # a numeric string is read as a number
        (where("population", "=", 1_500_000), ["Munich"]),
        (where("population", "!=", 1_500_000), sorted(set(TOWNS) - {"Munich", "Geneva"})),  # unset never passes
        (
            where("population", ">", 1_499_999.5),
            ["Berlin", "Hamburg", "Munich", "Osaka", "Tokyo", "Vienna", "Yokohama"],
        ),
        (where("population", "<", 290_000.5), ["Graz"]),
        (where("name", "=", "Zurich"), ["Zurich"]),
        (where("name", "<", "H"), ["Berlin", "Dakar", "Geneva", "Graz"]),
        (where("name", ">=", "Tokyo"), ["Tokyo", "Vienna", "Yokohama", "Zurich"]),
    ],
)
async def test_town_filters(
    pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase], condition: dict[str, Any], want: list[str]
) -> None:
    search = hop("Town", "*", "TownOf", "Land", "*", subject_where=[condition])
    assert sorted(names(await same_rows(pair, search))) == want
    await same_hits(pair, search)


async def test_land_filters_on_several_fields_and_sides(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    # floats, strings beyond the BMP, two conditions, conditions on the object side
    small = hop("Land", "*", "InZone", "Zone", "*", subject_where=[where("area", "<=", 41_285.0)])
    assert sorted(names(await same_rows(pair, small))) == ["Liechtenstein", "Mayotte", "Switzerland"]
    band = [where("population", ">=", 860_000), where("population", "<", 9_700_000)]
    assert sorted(names(await same_rows(pair, hop("Land", "*", "InZone", "Zone", "*", subject_where=band)))) == [
        "Austria",
        "Reunion",
        "Switzerland",
    ]
    # string conditions compare UTF-16 code units, as Neo4j compares a property with a parameter:
    # U+1D518 is the units D835 DD18, below U+FAFF, and above U+10000 (D800 DC00) like U+FB00
    high = hop("Land", "*", "InZone", "Zone", "*", subject_where=[where("code", ">", "\ufaff")])
    assert names(await same_rows(pair, high)) == ["Liechtenstein"]
    astral = hop("Land", "*", "InZone", "Zone", "*", subject_where=[where("code", ">=", "\U00010000")])
    assert sorted(names(await same_rows(pair, astral))) == ["Liechtenstein", "Mayotte"]
    big_home = hop("Town", "*", "TownOf", "Land", "*", object_where=[where("population", ">", 50_000_000)])
    assert sorted(names(await same_rows(pair, big_home))) == [
        "Berlin",
        "Hamburg",
        "Munich",
        "Osaka",
        "Tokyo",
        "Yokohama",
    ]
    # a condition on a star label: only the labels that declare the field can pass
    any_label = hop("*", "*", "TownOf", "*", "*", subject_where=[where("population", ">", 3_000_000)])
    assert sorted(names(await same_rows(pair, any_label))) == ["Berlin", "Tokyo", "Yokohama"]
    # a hostile string is a parameter like any other value: it only fails to match
    hostile = hop("Town", "*", "TownOf", "Land", "*", subject_where=[where("name", "=", "x` OR 1=1 //")])
    assert await same_rows(pair, hostile) == []


async def test_order_and_limit(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    most = hop(
        "Town", "*", "TownOf", "Land", "Japan",
        order_by={"side": "subject", "field": "population", "direction": "desc"}, limit=1,
    )  # fmt: skip
    assert names(await same_rows(pair, most)) == ["Tokyo"]
    await same_hits(pair, most)
    least = {**most, "order_by": {**most["order_by"], "direction": "asc"}}
    assert names(await same_rows(pair, least)) == ["Osaka"]
    # unset values last in both directions; k and limit: the smaller wins
    swiss = hop("Town", "*", "TownOf", "Land", "Switzerland")
    for direction in ("asc", "desc"):
        ordered = {**swiss, "order_by": {"side": "subject", "field": "population", "direction": direction}}
        assert names(await same_rows(pair, ordered)) == ["Zurich", "Geneva"]
    every = hop(
        "Town", "*", "TownOf", "Land", "*", order_by={"side": "subject", "field": "population", "direction": "desc"}
    )
    rows = await same_rows(pair, every)
    assert names(rows) == sorted(TOWNS, key=lambda t: -(TOWNS[t][1] or -1))
    assert names(await same_rows(pair, {**every, "limit": 3}, k=2)) == ["Tokyo", "Yokohama"]
    # ties (Austria and Switzerland, 9 million) fall back to score, then ids: the same on both
    lands = hop(
        "Land", "*", "InZone", "Zone", "Europe", order_by={"side": "subject", "field": "population", "direction": "asc"}
    )
    rows = await same_rows(pair, lands)
    assert names(rows)[0] == "Liechtenstein" and set(names(rows)[1:3]) == {"Austria", "Switzerland"}
    # by a string field: code points, unset last (Japan has no code)
    by_code = hop("Land", "*", "InZone", "Zone", "*", order_by={"side": "subject", "field": "code", "direction": "asc"})
    assert names(await same_rows(pair, by_code)) == [
        "Austria", "Switzerland", "Germany", "Hungary", "Reunion", "Senegal", "Liechtenstein", "Mayotte", "Japan",
    ]  # fmt: skip
    by_code_desc = {**by_code, "order_by": {**by_code["order_by"], "direction": "desc"}}
    assert names(await same_rows(pair, by_code_desc))[:2] == ["Mayotte", "Liechtenstein"]
    # by the object's field, in a chain, with k smaller than the rows
    by_home = hop("Town", "*", "TownOf", "Land", "*", order_by={"side": "object", "field": "area", "direction": "desc"})
    first_four = names(await same_rows(pair, by_home, k=4))
    assert sorted(first_four[:3]) == ["Osaka", "Tokyo", "Yokohama"] and first_four[3] in {"Berlin", "Hamburg", "Munich"}
    # the superlative of two constraints: the most populous European land that uses the Euro
    top_euro = {
        "hops": [
            EUROPE,
            {**USES_EURO, "order_by": {"side": "subject", "field": "population", "direction": "desc"}, "limit": 1},
        ]
    }
    assert names(await same_rows(pair, top_euro)) == ["Germany"]
    # a count of an ordered, limited search counts at most `limit` rows
    counted = {**every, "limit": 4, "count": True}
    assert await same_count(pair, counted) == 4
    assert await same_count(pair, {**counted, "limit": 100}) == len(TOWNS)


async def test_old_searches_are_unchanged(pair: tuple[kag.KnowledgeBase, kag.KnowledgeBase]) -> None:
    # without the new fields (dicts as before): the same plan, text and rows as with their defaults spelled out
    old = {"subject_label": "Town", "relation_label": "TownOf", "object_similarity_search": "Japan"}
    spelled = {
        **old,
        "subject_from": "previous_object",
        "subject_where": [],
        "object_where": [],
        "order_by": None,
        "limit": None,
    }
    mem, _ = pair
    assert mem.plan(old) == mem.plan(spelled)
    assert await same_rows(pair, old) == await same_rows(pair, spelled)
    assert sorted(names(await same_rows(pair, old))) == ["Osaka", "Tokyo", "Yokohama"]
