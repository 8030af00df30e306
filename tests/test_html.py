"""Jupyter views: escaped HTML for hits and answers, and a subgraph drawn as SVG.

The SVG tests parse the drawing and check the layout a reader relies on:
focus in the middle, parallel edges apart, labels that do not overprint,
summaries for large neighbourhoods, stable colours, nothing clipped.
"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from typing import Literal

import pytest

import kag
from kag.errors import InvalidInputError
from kag.knowledge.answer import Citation, RAGAnswer
from kag.knowledge.hits import SearchHit
from kag.knowledge.html import SubgraphView, rag_answer_html, scored_table, table
from tests.helpers.html_tables import tables


class Tag(kag.Entity):
    label: Literal["Tag"] = "Tag"
    name: str


class Near(kag.Relation):
    subj: Tag
    label: Literal["Near"] = "Near"
    obj: Tag


async def test_results_render_escaped_html(kb: kag.KnowledgeBase) -> None:
    hits = await kb.triplet_search(
        {"relation_label": "IsCapitalOf", "object_label": "Country", "object_similarity_search": "France"}
    )
    html = hits._repr_html_()
    assert "Paris -[IsCapitalOf]-&gt; France" in html and "<summary>Cypher</summary>" in html
    assert "1 facts" in html and "1.000" in html
    count = await kb.triplet_search({"relation_label": "IsCityOf", "count": True})
    assert "<b>count</b>: 12" in count._repr_html_()
    sim = await kb.similarity_search("City", "Lyon", k=1)
    assert "Lyon" in sim[0]._repr_html_()


async def test_hostile_names_are_escaped() -> None:
    kb = kag.KnowledgeBase(entity_models=[Tag], relation_models=[Near])
    evil = '<script>alert("x")</script>'
    await kb.upsert(Near(subj=Tag(name=evil), obj=Tag(name="b&b")))
    hits = await kb.triplet_search({"relation_label": "Near"})
    html = hits._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "b&amp;b" in html
    view = await kb.subgraph(Tag(name=evil))
    svg = view._repr_html_()
    assert "<script>" not in svg and "&lt;script&gt;" in svg


async def test_subgraph_view(kb: kag.KnowledgeBase) -> None:
    from kag.examples.seed import Country

    view = await kb.subgraph(Country(name="France"), depth=1)
    names = sorted(name for _, name in view.nodes.values())
    assert names == ["France", "Lyon", "Marseille", "Paris"]
    assert sum(1 for e in view.edges if e[2] == "IsCapitalOf") == 1 and len(view.edges) == 4
    svg = view.svg()
    assert svg.startswith("<svg") and "IsCityOf" in svg
    assert len(_nodes(ET.fromstring(svg))) == 4
    root = ET.fromstring(svg)
    (focus,) = [n for n in _nodes(root) if "kag-focus" in n.get("class", "")]
    assert focus.find("s:title", NS).text == "Country: France"  # type: ignore[union-attr]  # the entity asked for
    two = await kb.subgraph(Country(name="France"), depth=0)
    assert len(two.nodes) == 1 and two.edges == []


def test_empty_view() -> None:
    assert "empty" in SubgraphView()._repr_html_()


async def test_search_hits_and_answers_render() -> None:
    from kag.examples.seed import ENTITY_MODELS, RELATION_MODELS, City, Country, IsCapitalOf

    knowledge = kag.create_knowledge(
        "memory://", name="geo", entity_models=ENTITY_MODELS, relation_models=RELATION_MODELS
    )
    await knowledge.upsert([IsCapitalOf(subj=City(name="Paris"), obj=Country(name="France"))])
    await knowledge.add_text("Paris <b>is</b> the capital of France.", source="p.md")
    hits = await knowledge.search("capital of France", k=3)
    assert {h.kind for h in hits} == {"fact", "passage"}
    passage = next(h for h in hits if h.kind == "passage")
    assert "&lt;b&gt;is&lt;/b&gt;" in passage._repr_html_() and "p.md" in passage._repr_html_()
    answer = await knowledge.ask("capital of France?", language_model=kag.LexicalLM(knowledge_base=knowledge.kb))
    html = answer._repr_html_()
    assert "<b>Q:</b> capital of France?" in html and "geo:1" in html and "cited" in html


# -- the subgraph drawing ----------------------------------------------------------------------------

NS = {"s": "http://www.w3.org/2000/svg"}
EM = 0.6  # the width of an average glyph, in font sizes: how wide a label is estimated to be


def _nodes(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iterfind(".//s:g", NS) if "kag-node" in g.get("class", "").split()]


def _circle(node: ET.Element) -> tuple[float, float, float]:
    c = node.find("s:circle", NS)
    assert c is not None
    return float(c.get("cx", "")), float(c.get("cy", "")), float(c.get("r", ""))


def _text(el: ET.Element) -> str:
    # the drawn text, without the tooltip
    return (el.text or "") + "".join(child.tail or "" for child in el)


def _label_box(el: ET.Element) -> tuple[float, float, float, float, float]:
    """(centre x, centre y, width, height, angle): a centred text's box estimated from its length."""
    size = float(el.get("font-size", ""))
    angle = 0.0
    if m := re.match(r"rotate\(([-\d.]+)", el.get("transform", "")):
        angle = float(m.group(1))
    return float(el.get("x", "")), float(el.get("y", "")), len(_text(el)) * size * EM, size * 1.2, angle


def _corners(box: tuple[float, float, float, float, float]) -> list[tuple[float, float]]:
    cx, cy, w, h, angle = box
    a = math.radians(angle)
    u, v = (math.cos(a), math.sin(a)), (-math.sin(a), math.cos(a))
    return [(cx + sx * w / 2 * u[0] + sy * h / 2 * v[0], cy + sx * w / 2 * u[1] + sy * h / 2 * v[1])
            for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]  # fmt: skip


def _overlap(a: tuple[float, float, float, float, float], b: tuple[float, float, float, float, float]) -> bool:
    """Two rotated rectangles overlap unless one of their four edge normals separates them."""
    ca, cb = _corners(a), _corners(b)
    for box in (ca, cb):
        for (x0, y0), (x1, y1) in itertools.pairwise(box):
            nx, ny = y1 - y0, x0 - x1
            pa, pb = [nx * x + ny * y for x, y in ca], [nx * x + ny * y for x, y in cb]
            if max(pa) <= min(pb) or max(pb) <= min(pa):
                return False
    return True


def _edge_labels(root: ET.Element) -> list[ET.Element]:
    return [t for t in root.iterfind(".//s:text", NS) if "kag-edge-label" in t.get("class", "")]


def _pair_view() -> SubgraphView:
    # two relations Paris -> France, one France -> Paris, and a loop on Paris
    return SubgraphView(
        nodes={"p": ("City", "Paris"), "f": ("Country", "France")},
        edges=[("p", "f", "IsCapitalOf"), ("p", "f", "IsCityOf"), ("f", "p", "HasCapital"), ("p", "p", "TwinnedWith")],
    )


def _star(n: int, **kwargs: object) -> SubgraphView:
    nodes = {"de": ("Country", "Germany")} | {f"c{i}": ("City", f"City {i}") for i in range(n)}
    edges = [(f"c{i}", "de", "IsCityOf") for i in range(n)] + [("de", "eu", "MemberOf")]
    nodes["eu"] = ("Union", "European Union")
    return SubgraphView(nodes=nodes, edges=edges, **kwargs)  # type: ignore[arg-type]


def test_parallel_and_reverse_edges_are_distinct_curves_with_separate_labels() -> None:
    root = ET.fromstring(_pair_view().svg())
    paths = [p for p in root.iterfind(".//s:path", NS) if p.get("class") == "kag-edge"]
    assert len(paths) == 3 and len({p.get("d") for p in paths}) == 3
    labels = _edge_labels(root)
    assert sorted(_text(t) for t in labels) == ["HasCapital", "IsCapitalOf", "IsCityOf", "TwinnedWith"]
    spots = {(t.get("x"), t.get("y")) for t in labels}
    assert len(spots) == 4
    boxes = [_label_box(t) for t in labels] + [
        _label_box(t) for t in root.iterfind(".//s:text", NS) if "kag-node-label" in t.get("class", "")
    ]
    clashes = [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if _overlap(boxes[i], boxes[j])]
    assert clashes == []
    # the loop leaves the node and comes back to it, far enough out to be seen
    loop = root.find(".//s:path[@class='kag-edge kag-loop']", NS)
    assert loop is not None
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", loop.get("d", ""))]
    paris = next(n for n in _nodes(root) if n.get("data-label") == "City")
    x, y, r = _circle(paris)
    ends = [math.dist((numbers[0], numbers[1]), (x, y)), math.dist((numbers[-2], numbers[-1]), (x, y))]
    reach = max(math.dist((numbers[i], numbers[i + 1]), (x, y)) for i in range(0, len(numbers), 2))
    assert all(e <= r + 10 for e in ends) and reach >= r + 20


def test_arrowheads_end_at_the_circle_edge() -> None:
    root = ET.fromstring(_star(5).svg())
    circles = [_circle(n) for n in _nodes(root)]
    marker = root.find(".//s:marker", NS)
    assert marker is not None and marker.get("refX") == "0"  # the head starts where the path ends
    length = float(marker.get("markerWidth", ""))
    for path in root.iterfind(".//s:path[@class='kag-edge']", NS):
        cx, cy, ex, ey = (float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d", ""))[-4:])
        d = math.dist((cx, cy), (ex, ey))
        tip = (ex + (ex - cx) / d * length, ey + (ey - cy) / d * length)
        gap = min(math.dist(tip, (x, y)) - r for x, y, r in circles)
        assert 0 <= gap <= 2.5, gap  # on the edge of the target, not under it


def test_focus_is_drawn_at_the_centre_with_neighbours_on_a_ring() -> None:
    view = _star(6, focus="de")
    view.nodes = {"c0": view.nodes["c0"], **view.nodes}  # the focus is no longer the first node
    root = ET.fromstring(view.svg())
    (focus,) = [n for n in _nodes(root) if "kag-focus" in n.get("class", "")]
    assert focus.get("data-label") == "Country"
    fx, fy, _ = _circle(focus)
    ring = [_circle(n)[:2] for n in _nodes(root) if n is not focus]
    assert len(ring) == 7
    distances = [math.dist(p, (fx, fy)) for p in ring]
    assert max(distances) - min(distances) < 0.5 and min(distances) > 100
    mean = (sum(x for x, _ in ring) / len(ring), sum(y for _, y in ring) / len(ring))
    assert math.dist(mean, (fx, fy)) < 1.0  # evenly around the focus
    default = ET.fromstring(SubgraphView(nodes=view.nodes, edges=view.edges).svg())
    (first,) = [n for n in _nodes(default) if "kag-focus" in n.get("class", "")]
    assert first.get("data-label") == "City"  # without a focus: the first node


def test_second_ring_for_two_hop_nodes() -> None:
    nodes = {"fr": ("Country", "France"), "p": ("City", "Paris"), "d": ("District", "Le Marais")}
    view = SubgraphView(nodes=nodes, edges=[("p", "fr", "IsCityOf"), ("d", "p", "PartOf")])
    root = ET.fromstring(view.svg())
    positions = {n.find("s:title", NS).text: _circle(n) for n in _nodes(root)}  # type: ignore[union-attr]
    fx, fy, _ = positions["Country: France"]
    one = math.dist(positions["City: Paris"][:2], (fx, fy))
    two = math.dist(positions["District: Le Marais"][:2], (fx, fy))
    assert two > one + 60


def test_fifty_neighbours_are_summarised() -> None:
    view = _star(50)
    root = ET.fromstring(view.svg())
    nodes = _nodes(root)
    summaries = [n for n in nodes if "kag-summary" in n.get("class", "")]
    assert len(summaries) == 1 and len(nodes) <= view.max_neighbours + 1
    cities = [n for n in nodes if n.get("data-label") == "City" and n not in summaries]
    names = [t for t in root.iterfind(".//s:text", NS) if "kag-node-label" in t.get("class", "")]
    assert f"+{50 - len(cities)} City via IsCityOf" in [_text(t) for t in names]
    assert any(_text(t) == "European Union" for t in names)  # a small group is not swallowed by a big one
    note = root.find(".//s:text[@class='kag-note']", NS)
    assert note is not None and f"{len(cities) + 2} of 52 nodes drawn" in _text(note)
    small = ET.fromstring(_star(50, max_neighbours=5, max_nodes=4).svg())
    assert len(_nodes(small)) == 4  # max_nodes bounds everything drawn


def test_label_colours_are_the_same_in_every_view() -> None:
    def colours(view: SubgraphView) -> dict[str, str]:
        root = ET.fromstring(view.svg())
        found: dict[str, set[str]] = {}
        for g in root.iterfind(".//s:g", NS):  # nodes and legend entries
            c = g.find("s:circle", NS)
            if g.get("data-label") and c is not None and "kag-summary" not in g.get("class", ""):
                found.setdefault(g.get("data-label", ""), set()).add(c.get("fill", ""))
        assert all(len(fills) == 1 for fills in found.values())  # node and legend agree
        return {label: fills.pop() for label, fills in found.items()}

    one = colours(_star(3))
    # other labels present (one sorting before "City") must not move City's colour
    other = SubgraphView(
        nodes={"a": ("Airport", "CDG"), "b": ("City", "Paris"), "z": ("Zone", "Z1")},
        edges=[("a", "b", "Serves"), ("b", "z", "In")],
    )
    two = colours(other)
    assert one["City"] == two["City"] and set(one) & set(two) == {"City"}


def test_long_names_fit_the_canvas_and_keep_their_full_text() -> None:
    long_name = "The International Bureau of Weights and Measures at the Pavillon de Breteuil"
    view = SubgraphView(
        nodes={"x": ("Organisation", long_name), "y": ("City", "S\u00e8vres"), "z": ("Person", "A" * 60)},
        edges=[("x", "y", "LocatedInTheMunicipalityOfTheTown"), ("z", "x", "Directed")],
        focus="y",
    )
    root = ET.fromstring(view.svg())
    vx, vy, vw, vh = (float(v) for v in root.get("viewBox", "").split())
    assert float(root.get("width", "")) == pytest.approx(vw, abs=1)
    texts = [t for t in root.iterfind(".//s:text", NS) if t.get("font-size") and _text(t).strip()]
    for t in texts:
        size = float(t.get("font-size", ""))
        if t.get("text-anchor") == "middle":
            corners = _corners(_label_box(t))
        else:  # legend entries start at x
            x, y, w = float(t.get("x", "")), float(t.get("y", "")), len(_text(t)) * size * EM
            corners = [(x, y - size / 2), (x + w, y + size / 2)]
        for x, y in corners:
            assert vx <= x <= vx + vw and vy <= y <= vy + vh, (_text(t), x, y)
    drawn = [_text(t) for t in texts]
    cut = [d for d in drawn if d.endswith("\u2026")]
    assert cut and long_name not in drawn and all(len(d) <= 40 for d in drawn)
    assert any(t.text == long_name for t in root.iterfind(".//s:title", NS))  # the full name, on hover
    edge_titles = [p.find("s:title", NS) for p in root.iterfind(".//s:path", NS)]
    assert any(t is not None and "LocatedInTheMunicipalityOfTheTown" in (t.text or "") for t in edge_titles)


def test_svg_escapes_every_name() -> None:
    evil = '<script>alert("x")</script>'
    view = SubgraphView(
        nodes={"a": ("Tag", evil), "b": ('La"bel', "b&b"), "c": ("Tag", "bell\x07 \x00")},
        edges=[("a", "b", "<b>Rel</b>"), ("b", "c", "Near")],
    )
    svg = view.svg()
    assert "<script" not in svg and "<b>" not in svg and "&lt;script&gt;" in svg and "b&amp;b" in svg
    root = ET.fromstring(svg)  # well-formed XML even with control characters in a name
    assert root.find(".//s:script", NS) is None and root.find(".//script") is None
    assert any(g.get("data-label") == 'La"bel' for g in _nodes(root))


# -- tables and the RAG answer -----------------------------------------------------------------------


def _hit(text: str, score: float, source: str = "doc.md", kind: Literal["fact", "passage"] = "passage") -> SearchHit:
    return SearchHit(kind=kind, text=text, score=score, source=source, ids=(f"chunk-{text[:4]}", "doc"))


def test_rag_answer_caption_counts_its_rows_and_every_column_has_a_header() -> None:
    labels = {
        "geo:1": _hit("Paris -[IsCapitalOf]-> France", 0.9, "graph", "fact"),
        "geo:2": _hit("Rome lies on the <Tiber>.", 0.7, "rome.md"),
        "geo:3": _hit("Lyon is in France.", 0.5),
        "geo:4": _hit("Osaka is in Japan.", 0.2),
    }
    cited = [
        Citation(label=k, source=labels[k].source, id=labels[k].id, kind=labels[k].kind) for k in ("geo:1", "geo:2")
    ]
    answer = RAGAnswer(
        text="Paris & Rome.", citations=cited, hits=list(labels.values()), query="capitals?", labels=labels
    )
    html = rag_answer_html(answer)
    assert "<b>Q:</b> capitals?" in html and "Paris &amp; Rome." in html and "&lt;Tiber&gt;" in html
    citations, shown = tables(html)
    for t in (citations, shown):
        assert all(t.headers) and all(len(row) == len(t.headers) for row in t.rows)
        assert t.caption.split()[0] == str(len(t.rows))
    assert citations.caption == "2 citations" and [r[0] for r in citations.rows] == ["geo:1", "geo:2"]
    assert shown.caption == "4 results" and "cited" in shown.headers
    assert [r[shown.headers.index("cited")] for r in shown.rows] == ["yes", "yes", "", ""]
    one = rag_answer_html(RAGAnswer(text="x", citations=cited[:1], hits=[], query="q", labels=labels))
    assert "1 citation<" in one
    none = rag_answer_html(RAGAnswer(text="I do not know.", citations=[], hits=[], query="q"))
    assert "0 citations" in none and "<table" not in none


def test_tables_refuse_rows_that_do_not_match_the_headers() -> None:
    with pytest.raises(InvalidInputError, match="one header per column"):
        table(["a", "b"], [("1", "2", "3")])
    with pytest.raises(InvalidInputError):
        scored_table(["a"], [(("1", "2"), 0.5)])
    assert "3 rows" in table(["a"], [("x",), ("y",), ("z",)], noun=("row", "rows"))


def test_many_kinds_of_neighbour_still_fit_the_ring() -> None:
    nodes = {"hub": ("Hub", "Hub")} | {f"n{i}": (f"Kind{i}", f"Node {i}") for i in range(30)}
    view = SubgraphView(nodes=nodes, edges=[("hub", f"n{i}", f"Rel{i}") for i in range(30)], max_neighbours=10)
    root = ET.fromstring(view.svg())
    drawn = _nodes(root)
    assert len(drawn) == 11  # the hub and ten places around it
    names = [_text(t) for t in root.iterfind(".//s:text", NS) if "kag-node-label" in t.get("class", "")]
    assert "+21 more" in names and sum(n.startswith("Node ") for n in names) == 9
    legend = {g.get("data-label") for g in root.iterfind(".//s:g[@class='kag-legend']", NS)}
    assert "" not in legend and len(legend) == 10  # the hub and the nine kinds drawn
