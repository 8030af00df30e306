"""The subgraph drawing: a focus node at the centre, its neighbourhood on rings around it, as inline SVG.

Layout is a radial tree: the focus sits at the centre, nodes ``d`` hops away on
ring ``d``, each node inside the angular wedge of the node it was reached from.
Relations between the same pair are drawn as Bézier curves with distinct
offsets so their labels never overprint; an edge label that would cover another
label or a node is moved along its curve or left to the edge's tooltip. Beyond
``max_neighbours`` children of one node, the rest are summarised per
(relation, direction, label) as ``+34 City via IsCityOf``. A label's colour is a
hash of its name into the palette, so it is the same in every view.

Every string shown comes from stored data, so all text is escaped; no scripts,
no external assets.
"""

from __future__ import annotations

import functools
import hashlib
import html
import itertools
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["PALETTE", "SubgraphView", "TextBox", "label_colour", "text_width"]

# Distinguishable mid-tone colours; a prime count spreads hashes evenly. Two labels can still
# share a colour, so each node also carries its label's initial.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f",
    "#2f4b7c", "#d45087", "#17becf", "#8cd17d", "#665191", "#bcbd22", "#7f7f7f", "#1b9e77",
)  # fmt: skip

NODE_FONT = 12.0
EDGE_FONT = 10.0
LEGEND_FONT = 12.0
CHAR_EM = 0.6  # average glyph advance of a sans-serif font, in em (estimates text widths)
NAME_CHARS = 28  # longer names are cut with an ellipsis; the full text is in the <title>
FOCUS_CHARS = 40
RELATION_CHARS = 24
ARROW = 8.0  # arrowhead length in px
PARALLEL_STEP = 32.0  # control-point offset between parallel edges (labels 16 px apart)
R_FOCUS, R_NODE, R_SUMMARY = 14.0, 9.0, 11.0
EDGE_COLOUR = "#8c8c8c"
_HALO = 'paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"'
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

Point = tuple[float, float]


def _esc(value: object) -> str:
    # XML 1.0 forbids most control characters even when escaped; they become U+FFFD.
    return html.escape(_XML_BAD.sub("\ufffd", str(value)), quote=True)


def label_colour(label: str) -> str:
    """The palette colour of ``label``: a hash of the name, so every view agrees."""
    digest = hashlib.blake2s(label.encode("utf-8"), digest_size=4).digest()
    return PALETTE[int.from_bytes(digest, "big") % len(PALETTE)]


_NARROW = frozenset("iljtfrI.,:;'!|()[]{} -")


def _advance(c: str) -> float:
    # rough glyph advances of a sans-serif font, in em
    if unicodedata.east_asian_width(c) in "WF":
        return 1.0
    if c in _NARROW:
        return 0.32
    if c in "mwMW@%":
        return 0.86
    return 0.7 if c.isupper() else 0.56


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Estimated rendered width of ``text`` at ``size`` px, never under ``CHAR_EM`` per character.

    Per-glyph classes (narrow, wide, capitals, East Asian) catch names that are
    all capitals; the floor keeps the estimate generous for the rest.
    """
    width = max(sum(_advance(c) for c in text), CHAR_EM * len(text)) * size
    return width * 1.08 if bold else width


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def _upright(degrees: float) -> float:
    """The angle in (-90, 90]: text along a line reads left to right, never upside down."""
    degrees = (degrees + 180.0) % 360.0 - 180.0
    if degrees > 90.0:
        return degrees - 180.0
    if degrees <= -90.0:
        return degrees + 180.0
    return degrees


@dataclass(frozen=True)
class TextBox:
    """A rotated rectangle (centre, size, angle in degrees) that a label or node occupies."""

    cx: float
    cy: float
    w: float
    h: float
    angle: float = 0.0

    @functools.cached_property
    def _corners(self) -> tuple[Point, ...]:
        a = math.radians(self.angle)
        ux, uy, vx, vy = math.cos(a), math.sin(a), -math.sin(a), math.cos(a)
        hw, hh = self.w / 2, self.h / 2
        return tuple(
            (self.cx + sx * hw * ux + sy * hh * vx, self.cy + sx * hw * uy + sy * hh * vy)
            for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))
        )

    def corners(self) -> list[Point]:
        """The four corners, in order."""
        return list(self._corners)

    @functools.cached_property
    def _bounds(self) -> tuple[float, float, float, float]:
        xs, ys = zip(*self._corners, strict=True)
        return min(xs), min(ys), max(xs), max(ys)

    def bounds(self) -> tuple[float, float, float, float]:
        """Axis-aligned bounds ``(x0, y0, x1, y1)``."""
        return self._bounds

    def overlaps(self, other: TextBox) -> bool:
        """Separating-axis test of two rotated rectangles (after a quick test of their bounds)."""
        a, b = self._bounds, other._bounds
        if a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]:
            return False
        mine, theirs = self._corners, other._corners
        for box in (mine, theirs):
            for i in range(2):
                (x0, y0), (x1, y1) = box[i], box[i + 1]
                ax, ay = x1 - x0, y1 - y0
                p = [ax * x + ay * y for x, y in mine]
                q = [ax * x + ay * y for x, y in theirs]
                if max(p) <= min(q) or max(q) <= min(p):
                    return False
        return True


class _Grid:
    """Boxes bucketed by 64 px cells, so a collision test looks only at its neighbourhood."""

    CELL = 64.0

    def __init__(self) -> None:
        self._cells: dict[tuple[int, int], list[tuple[TextBox, object]]] = defaultdict(list)

    def _keys(self, box: TextBox) -> Iterator[tuple[int, int]]:
        x0, y0, x1, y1 = box.bounds()
        for i in range(math.floor(x0 / self.CELL), math.floor(x1 / self.CELL) + 1):
            for j in range(math.floor(y0 / self.CELL), math.floor(y1 / self.CELL) + 1):
                yield i, j

    def add(self, box: TextBox, tag: object = None) -> None:
        for key in self._keys(box):
            self._cells[key].append((box, tag))

    def hits(self, box: TextBox) -> set[object]:
        """Tags of the stored boxes that overlap ``box`` (a box without a tag counts as itself)."""
        found: set[object] = set()
        for key in self._keys(box):
            for other, tag in self._cells.get(key, ()):
                mark = other if tag is None else tag
                if mark not in found and box.overlaps(other):
                    found.add(mark)
        return found


@dataclass
class _Item:
    """One drawn node: an entity, or a summary of several."""

    key: str
    label: str
    name: str
    depth: int
    parent: str | None
    members: list[str] = field(default_factory=list)  # ids a summary stands for
    relation: str | None = None  # a summary's relation type and direction from its parent
    outgoing: bool = True
    children: list[str] = field(default_factory=list)
    angle: float = 0.0
    wedge: float = 0.0
    pos: Point = (0.0, 0.0)

    @property
    def summary(self) -> bool:
        return bool(self.members)

    @property
    def radius(self) -> float:
        return R_FOCUS if self.depth == 0 else R_SUMMARY if self.summary else R_NODE


@dataclass
class _Canvas:
    """What has been drawn so far: SVG fragments per layer, occupied boxes, extents."""

    edges: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    taken: _Grid = field(default_factory=_Grid)  # labels placed so far, and the nodes
    circles: dict[str, TextBox] = field(default_factory=dict)  # node id -> the square around its circle
    extent: list[float] = field(default_factory=lambda: [math.inf, math.inf, -math.inf, -math.inf])

    def grow(self, *points: Point) -> None:
        for x, y in points:
            self.extent = [min(self.extent[0], x), min(self.extent[1], y),
                           max(self.extent[2], x), max(self.extent[3], y)]  # fmt: skip

    def grow_box(self, box: TextBox) -> None:
        x0, y0, x1, y1 = box.bounds()
        self.grow((x0, y0), (x1, y1))

    def free(self, box: TextBox) -> bool:
        return not self.taken.hits(box)


def _degrees(a: Point, b: Point) -> float:
    return math.degrees(math.atan2(b[1] - a[1], b[0] - a[0]))


def _unit(dx: float, dy: float) -> Point:
    n = math.hypot(dx, dy) or 1.0
    return dx / n, dy / n


def _quad(p0: Point, c: Point, p2: Point, t: float) -> tuple[Point, float]:
    """Point and tangent angle (degrees) of a quadratic Bézier at ``t``."""
    s = 1 - t
    x = s * s * p0[0] + 2 * s * t * c[0] + t * t * p2[0]
    y = s * s * p0[1] + 2 * s * t * c[1] + t * t * p2[1]
    dx = 2 * s * (c[0] - p0[0]) + 2 * t * (p2[0] - c[0])
    dy = 2 * s * (c[1] - p0[1]) + 2 * t * (p2[1] - c[1])
    return (x, y), math.degrees(math.atan2(dy, dx))


@dataclass
class SubgraphView:
    """A small graph (nodes with labels, directed typed edges) that draws itself as SVG.

    ``nodes`` maps an id to ``(label, name)``; ``edges`` are ``(start, end, type)``.
    ``focus`` is the id drawn at the centre (default, or when it is not in
    ``nodes``: the first node). At most ``max_nodes`` nodes are drawn and at
    most ``max_neighbours`` around any one node; the rest are summarised.
    """

    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (label, name)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (start, end, type)
    max_nodes: int = 60
    focus: str | None = None
    max_neighbours: int = 16

    def _repr_html_(self) -> str:
        return self.svg()

    # -- structure ------------------------------------------------------------
    def _focus(self) -> str:
        return self.focus if self.focus in self.nodes else next(iter(self.nodes))

    def _tree(self) -> tuple[dict[str, _Item], list[str], int]:
        """Items to draw (focus first, breadth first) and how many entities they leave out."""
        focus = self._focus()
        links: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)  # id -> (other, type, outgoing)
        for start, end, kind in self.edges:
            if start in self.nodes and end in self.nodes and start != end:
                links[start].append((end, kind, True))
                links[end].append((start, kind, False))
        label, name = self.nodes[focus]
        items = {focus: _Item(focus, label, name, 0, None)}
        order, seen = [focus], {focus}
        queue = [focus]
        while queue:
            parent = queue.pop(0)
            depth = items[parent].depth + 1
            groups: dict[tuple[str | None, bool, str], list[str]] = defaultdict(list)
            for other, kind, outgoing in sorted(
                links[parent], key=lambda x: (x[1], not x[2], self.nodes[x[0]][0], _natural(self.nodes[x[0]][1]))
            ):
                if other not in seen:
                    seen.add(other)
                    groups[(kind, outgoing, self.nodes[other][0])].append(other)
            if parent == focus:  # each part not linked to the focus hangs off it by its first node, unlinked
                for root in _component_roots(self.nodes, links, focus):
                    seen.add(root)
                    groups[(None, True, self.nodes[root][0])].append(root)
            budget = self.max_neighbours if depth == 1 else max(2, self.max_neighbours // 2)
            if len(groups) > budget:  # more kinds of neighbour than places: the smallest kinds share one summary
                ranked = sorted(groups, key=lambda g: -len(groups[g]))
                merged = [m for g in ranked[budget - 1 :] for m in groups.pop(g)]
                groups[(None, True, "")] = merged
            for (rel, outgoing, lab), members, keep in _ration(groups, budget):
                for node_id in members[:keep]:
                    items[node_id] = _Item(node_id, *self.nodes[node_id], depth, parent)
                    items[parent].children.append(node_id)
                    order.append(node_id)
                    queue.append(node_id)
                rest = members[keep:]
                if rest:
                    key = f"\x00summary{len(items)}"
                    via = f" via {rel}" if rel else ""
                    text = f"+{len(rest)} {lab}{via}" if lab else f"+{len(rest)} more"
                    items[key] = _Item(key, lab, text, depth, parent, rest, rel, outgoing)
                    items[parent].children.append(key)
                    order.append(key)
        # over max_nodes: drop from the end of the breadth-first order (descendants come after parents)
        while len(order) > max(1, self.max_nodes):
            gone = items.pop(order.pop())
            if gone.parent is not None:
                items[gone.parent].children.remove(gone.key)
        shown = sum(len(i.members) or 1 for i in items.values())
        return items, order, len(self.nodes) - shown

    # -- geometry -------------------------------------------------------------
    def _layout(self, items: dict[str, _Item], order: list[str]) -> None:
        """Angles from leaf counts (radial tree), ring radii from spacing and label lengths."""
        weight: dict[str, float] = {}
        for key in reversed(order):
            weight[key] = max(1.0, sum(weight[c] for c in items[key].children))
        root = items[order[0]]
        root.wedge = 2 * math.pi
        first = root.children[0] if root.children else None
        start = -math.pi * weight[first] / weight[root.key] if first else 0.0  # first child at angle 0 (right)
        stack = [(root.key, start)]
        while stack:
            key, lo = stack.pop()
            item = items[key]
            for child in item.children:
                span = item.wedge * weight[child] / weight[key]
                items[child].wedge = span
                items[child].angle = lo + span / 2
                stack.append((child, lo))
                lo += span
        depths = max(i.depth for i in items.values())
        radius = [0.0]
        units = weight[root.key]
        for d in range(1, depths + 1):
            ring = [i for i in items.values() if i.depth == d]
            incoming = max(text_width(_clip(self._relation_of(i, items), RELATION_CHARS), EDGE_FONT) for i in ring)
            inner = [i for i in items.values() if i.depth == d - 1 and i.children and i.depth > 0]
            inner_label = max((text_width(_clip(i.name, NAME_CHARS), NODE_FONT) for i in inner), default=0.0)
            r = max(
                radius[-1] + (160.0 if d == 1 else 100.0),
                radius[-1] + incoming + R_FOCUS + R_NODE + ARROW + 24,  # the edge label fits its edge
                radius[-1] + inner_label + 36,  # the ring clears the labels of the ring inside it
                18.0 * units / (2 * math.pi),  # neighbours on the ring at least 18 px apart
            )
            radius.append(r)
        for item in items.values():
            r = radius[item.depth]
            item.pos = (r * math.cos(item.angle), r * math.sin(item.angle))

    def _relation_of(self, item: _Item, items: dict[str, _Item]) -> str:
        if item.summary or item.parent is None:
            return item.relation or ""
        kinds = [k for s, e, k in self.edges if {s, e} == {item.key, item.parent}]
        return max(kinds, key=len, default="")

    # -- drawing --------------------------------------------------------------
    def svg(self, size: int = 420) -> str:
        """The drawing as an ``<svg>`` element; ``size`` is the smallest width and height in px.

        The canvas grows with its content so long labels are never clipped.
        """
        if not self.nodes:
            return "<em>empty subgraph</em>"
        items, order, hidden = self._tree()
        self._layout(items, order)
        canvas = _Canvas()
        marker = "kag-arrow-" + hashlib.blake2s(repr((self.nodes, self.edges)).encode(), digest_size=4).hexdigest()
        for item in items.values():
            x, y = item.pos
            canvas.circles[item.key] = TextBox(x, y, 2 * item.radius + 2, 2 * item.radius + 2)
            canvas.taken.add(canvas.circles[item.key], item.key)
            canvas.grow((x - item.radius, y - item.radius), (x + item.radius, y + item.radius))
        # geometry first, so that names can keep clear of every curve
        pairs, loops = self._edge_groups(items)
        curves = [
            _curve(items, pair, start, end, kind, (i - (len(group) - 1) / 2) * PARALLEL_STEP, summary)
            for pair, group in pairs.items()
            for i, (start, end, kind, summary) in enumerate(group)
        ]
        for key, kinds in loops.items():
            curves += _loops(items[key], kinds, self._neighbour_points(items[key], items))
        self._node_labels(items, canvas, [c.segments() for c in curves])
        for curve in curves:
            self._draw_curve(items, canvas, marker, curve)
        for key in order:
            self._node(items[key], canvas)
        return self._assemble(items, canvas, marker, hidden, size)

    def _node_labels(self, items: dict[str, _Item], canvas: _Canvas, curves: list[list[TextBox]]) -> None:
        """Place every node's name where it covers no other name or node and crosses the fewest curves.

        Leaves put their names outward, horizontal when all of them fit that way,
        else along the radius (one style for the whole ring reads best). A node
        with edges on several sides (the focus, a node with children) tries the
        widest gap between its edges and sixteen directions around it. A name
        that still collides is shortened, and as a last resort left to the
        node's tooltip, so names never overprint.
        """
        text = {i.key: _clip(i.name, FOCUS_CHARS if i.depth == 0 else NAME_CHARS) for i in items.values()}
        leaves = [i for i in items.values() if i.depth > 0 and not i.children]
        horizontal = {i.key: _beside(i, text[i.key], i.angle) for i in leaves}
        radial: set[int] = set()  # rings whose leaves write along the radius
        for n, a in enumerate(leaves):
            box = horizontal[a.key]
            if any(box.overlaps(horizontal[b.key]) for b in leaves[n + 1 :] if b.depth == a.depth) or any(
                box.overlaps(c) for k, c in canvas.circles.items() if k != a.key
            ):
                radial.add(a.depth)
        lines = _Grid()
        for n, curve in enumerate(curves):
            for seg in curve:
                lines.add(seg, n)
        for item in items.values():  # breadth first: the focus, then ring by ring
            chosen: tuple[str, TextBox] | None = None
            for name in _shorter(text[item.key]):
                best: tuple[float, TextBox] | None = None
                for n, box in enumerate(self._label_candidates(item, items, name, item.depth in radial)):
                    if canvas.taken.hits(box) - {item.key}:  # a name placed before, or another node
                        continue
                    crossings: float = len(lines.hits(box))
                    if item.depth == 0 and n == 1 and crossings:
                        crossings = 0.5  # edges all around the focus: under it, on its halo, beats a gap too narrow
                    cost = crossings + 0.001 * n
                    if best is None or cost < best[0]:
                        best = (cost, box)
                    if crossings == 0:
                        break
                if best is not None:
                    chosen = (name, best[1])
                    break
            if chosen is None:
                continue  # nowhere to write it: the node's tooltip still names it
            name, box = chosen
            focus = item.depth == 0
            self._text(
                canvas,
                box,
                name,
                NODE_FONT + 1 if focus else NODE_FONT,
                item.name,
                cls="kag-node-label kag-focus-label" if focus else "kag-node-label",
                bold=focus,
            )

    def _label_candidates(self, item: _Item, items: dict[str, _Item], text: str, radial: bool) -> list[TextBox]:
        """Places for a node's name, best first."""
        if item.depth > 0 and not item.children:
            spread = [item.angle + d for d in (0.0, 0.3, -0.3, 0.6, -0.6)]
            along = [_along(item, text, a, extra) for extra in (0.0, 8.0) for a in spread[:3]]
            beside = [_beside(item, text, a, extra) for extra in (0.0, 8.0) for a in spread]
            return [*along, *beside] if radial else [*beside, *along]
        x, y = item.pos
        ends = [math.atan2(p[1] - y, p[0] - x) for p in self._neighbour_points(item, items)]
        gap = _widest_gap(ends) if ends else math.pi / 2
        directions = [gap, *(math.pi / 8 * k for k in (4, 0, 8, 12, 2, 6, 10, 14, *range(1, 16, 2)))]
        if item.depth == 0:  # under the focus is where a reader looks first
            directions.insert(1, math.pi / 2)
        return [_beside(item, text, phi, extra) for extra in (0.0, 10.0, 24.0) for phi in directions]

    def _edge_groups(
        self, items: dict[str, _Item]
    ) -> tuple[dict[tuple[str, str], list[tuple[str, str, str, bool]]], dict[str, list[str]]]:
        """Edges between drawn items per unordered pair (parallel edges together), and self-loops."""
        rank = {key: i for i, key in enumerate(items)}
        pairs: dict[tuple[str, str], list[tuple[str, str, str, bool]]] = defaultdict(list)
        loops: dict[str, list[str]] = defaultdict(list)
        for start, end, kind in self.edges:
            if start not in items or end not in items:
                continue
            if start == end:
                loops[start].append(kind)
                continue
            a, b = sorted((start, end), key=rank.__getitem__)
            pairs[(a, b)].append((start, end, kind, False))
        for item in items.values():
            if item.summary and item.parent is not None:
                start, end = (item.parent, item.key) if item.outgoing else (item.key, item.parent)
                pairs[(item.parent, item.key)].append((start, end, item.relation or "", True))
        for group in pairs.values():
            group.sort(key=lambda e: (e[0], e[2]))
        return pairs, loops

    def _draw_curve(self, items: dict[str, _Item], canvas: _Canvas, marker: str, curve: _Curve) -> None:
        """The curve, its arrowhead, and its label at the first free place along it."""
        canvas.grow(*curve.points, curve.tip)
        start, end = items[curve.start].name, items[curve.end].name
        full = f"{start} -[{curve.kind}]-> {end}" if curve.kind else f"{start} - {end}"
        dash = ' stroke-dasharray="4 3"' if curve.summary else ""
        cls = "kag-edge kag-loop" if curve.start == curve.end else "kag-edge"
        head = f' marker-end="url(#{marker})"' if curve.kind else ""  # no relation, no direction: a summary's tie
        canvas.edges.append(
            f'<path class="{cls}" d="{curve.path()}" fill="none" stroke="{EDGE_COLOUR}" stroke-width="1.3"{dash}'
            f"{head}><title>{_esc(full)}</title></path>"
        )
        if not curve.kind:
            return
        text = _clip(curve.kind, RELATION_CHARS)
        if curve.start != curve.end:  # a label longer than its edge is cut to fit (the tooltip has it whole)
            room = math.dist(curve.points[0], curve.points[-1]) - 6
            while text_width(text, EDGE_FONT) > room and len(text) > 4:
                text = _clip(text, len(text) - 1)
        width = text_width(text, EDGE_FONT)
        for cx, cy, angle in curve.label_spots(width):
            box = TextBox(cx, cy, width, EDGE_FONT * 1.3, _upright(angle))
            if canvas.free(box):
                self._text(canvas, box, text, EDGE_FONT, full, cls="kag-edge-label", fill="#555", plate=True)
                return

    def _neighbour_points(self, item: _Item, items: dict[str, _Item]) -> list[Point]:
        """The other ends of the node's drawn edges (a name or a loop goes where none of them is)."""
        points = []
        for start, end, _ in self.edges:
            if start != end and item.key in (start, end):
                other = items.get(end if start == item.key else start)
                if other is not None:
                    points.append(other.pos)
        if item.parent is not None:
            points.append(items[item.parent].pos)
        points += [items[child].pos for child in item.children]
        return points

    def _node(self, item: _Item, canvas: _Canvas) -> None:
        x, y = item.pos
        colour = label_colour(item.label) if item.label else EDGE_COLOUR
        initial = item.label[:1].upper()
        if item.summary:
            names = ", ".join(sorted((self.nodes[m][1] for m in item.members), key=_natural)[:12])
            more = ", \u2026" if len(item.members) > 12 else ""
            title = f"{len(item.members)} more {item.label or 'nodes'}: {names}{more}"
            cls, ink = "kag-node kag-summary", "#333"
            shape = (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{item.radius:g}" fill="{colour}" fill-opacity="0.3" '
                f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="3 2"/>'
            )
            initial = "+"
        else:
            title = f"{item.label}: {item.name}"
            cls = "kag-node kag-focus" if item.depth == 0 else "kag-node"
            ink = _ink(colour)
            shape = (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{item.radius:g}" fill="{colour}" stroke="#fff" '
                'stroke-width="1.5"/>'
            )
        font = item.radius * 1.05
        letter = (
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{font:.1f}" font-weight="700" text-anchor="middle" '
            f'dominant-baseline="central" fill="{ink}" pointer-events="none">{_esc(initial)}</text>'
            if initial
            else ""
        )
        canvas.nodes.append(
            f'<g class="{cls}" data-label="{_esc(item.label)}"><title>{_esc(title)}</title>{shape}{letter}</g>'
        )

    def _text(
        self,
        canvas: _Canvas,
        box: TextBox,
        text: str,
        font: float,
        full: str,
        cls: str,
        fill: str = "#222",
        bold: bool = False,
        plate: bool = False,
    ) -> None:
        """Text centred in ``box`` (rotated with it) with the full text as a tooltip.

        Node names get a white halo; edge labels (``plate``) sit on a white plate
        that hides the curve running under them.
        """
        canvas.taken.add(box)
        canvas.grow_box(box)
        rotate = f' transform="rotate({box.angle:.1f} {box.cx:.1f} {box.cy:.1f})"' if abs(box.angle) > 0.05 else ""
        weight = ' font-weight="600"' if bold else ""
        if plate:
            canvas.labels.append(
                f'<rect class="kag-label-plate" x="{box.cx - box.w / 2 - 2:.1f}" y="{box.cy - box.h / 2:.1f}" '
                f'width="{box.w + 4:.1f}" height="{box.h:.1f}" rx="3" fill="#fff" fill-opacity="0.92"{rotate}/>'
            )
        halo = "" if plate else f" {_HALO}"
        canvas.labels.append(
            f'<text class="{cls}" x="{box.cx:.1f}" y="{box.cy:.1f}" font-size="{font:g}" text-anchor="middle" '
            f'dominant-baseline="central" fill="{fill}"{weight}{halo}{rotate}>'
            f"<title>{_esc(full)}</title>{_esc(text)}</text>"
        )

    def _assemble(self, items: dict[str, _Item], canvas: _Canvas, marker: str, hidden: int, size: int) -> str:
        x0, y0, x1, y1 = canvas.extent
        width = max(x1 - x0, 300.0)
        # legend rows under the drawing, wrapped to its width
        legend: list[str] = []
        lx, ly = x0, y1 + 22
        for label in sorted({i.label for i in items.values() if i.label}):
            w = 16 + text_width(label, LEGEND_FONT) + 14
            if lx > x0 and lx + w > x0 + width:
                lx, ly = x0, ly + 18
            legend.append(
                f'<g class="kag-legend" data-label="{_esc(label)}"><circle cx="{lx + 5:.1f}" cy="{ly:.1f}" r="5" '
                f'fill="{label_colour(label)}"/><text x="{lx + 14:.1f}" y="{ly:.1f}" font-size="{LEGEND_FONT:g}" '
                f'dominant-baseline="central" fill="#333">{_esc(label)}</text></g>'
            )
            canvas.grow((lx + w, ly + 8))
            lx += w
        drawn = sum(1 for i in items.values() if not i.summary)
        summarised = sum(len(i.members) for i in items.values())
        if summarised or hidden:
            note = f"{drawn} of {len(self.nodes)} nodes drawn"
            note += f", {summarised} summarised" if summarised else ""
            note += f", {hidden} beyond the summaries not shown" if hidden else ""
            ly += 20
            legend.append(
                f'<text class="kag-note" x="{x0:.1f}" y="{ly:.1f}" font-size="11" dominant-baseline="central" '
                f'fill="#777">{_esc(note)}</text>'
            )
            canvas.grow((x0 + text_width(note, 11), ly + 8))
        x0, y0, x1, y1 = canvas.extent
        pad = 12.0
        w, h = x1 - x0 + 2 * pad, y1 - y0 + 2 * pad
        vx, vy = x0 - pad, y0 - pad
        if w < size:  # centre small drawings in the minimum canvas
            vx -= (size - w) / 2
            w = float(size)
        if h < size:
            vy -= (size - h) / 2
            h = float(size)
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="kag-subgraph" width="{w:.0f}" height="{h:.0f}" '
            f'viewBox="{vx:.1f} {vy:.1f} {w:.1f} {h:.1f}" '
            'style="font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:100%;'
            'height:auto;background:#fff">'
            f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="0" refY="5" markerWidth="{ARROW:g}" '
            f'markerHeight="{ARROW:g}" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{EDGE_COLOUR}"/></marker></defs>'
        )
        body = [*canvas.edges, *canvas.nodes, *canvas.labels, *legend]
        return head + "".join(body) + "</svg>"


def _component_roots(
    nodes: dict[str, tuple[str, str]], links: dict[str, list[tuple[str, str, bool]]], focus: str
) -> list[str]:
    """The first node (in ``nodes`` order) of every connected part that does not contain ``focus``."""
    seen, roots = set(), []
    for start in (focus, *nodes):
        if start in seen:
            continue
        if start != focus:
            roots.append(start)
        seen.add(start)
        stack = [start]
        while stack:
            for other, _, _ in links[stack.pop()]:
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
    return roots


@dataclass(frozen=True)
class _Curve:
    """An edge's geometry: a quadratic (3 points) or cubic (4 points) Bézier ending where its arrowhead starts."""

    start: str
    end: str
    kind: str
    summary: bool
    points: tuple[Point, ...]
    tip: Point  # the arrowhead's point, on the target's circle

    def at(self, t: float) -> tuple[Point, float]:
        """Point and tangent angle (degrees) at ``t``."""
        p = self.points
        if len(p) == 3:
            return _quad(p[0], p[1], p[2], t)
        s = 1 - t
        w = (s**3, 3 * s * s * t, 3 * s * t * t, t**3)
        dw = (-3 * s * s, 3 * s * s - 6 * s * t, 6 * s * t - 3 * t * t, 3 * t * t)
        x, y = sum(a * q[0] for a, q in zip(w, p, strict=True)), sum(a * q[1] for a, q in zip(w, p, strict=True))
        dx, dy = sum(a * q[0] for a, q in zip(dw, p, strict=True)), sum(a * q[1] for a, q in zip(dw, p, strict=True))
        return (x, y), math.degrees(math.atan2(dy, dx))

    def path(self) -> str:
        p = self.points
        cmd = "Q" if len(p) == 3 else "C"
        return f"M{p[0][0]:.1f},{p[0][1]:.1f} {cmd}" + " ".join(f"{x:.1f},{y:.1f}" for x, y in p[1:])

    def segments(self) -> list[TextBox]:
        """The curve as thin boxes (four straight pieces plus the arrowhead), for collision tests."""
        pts = [self.at(t / 4)[0] for t in range(5)] + [self.tip]
        return [
            TextBox((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, math.dist(a, b), 2.0, _degrees(a, b))
            for a, b in itertools.pairwise(pts)
            if math.dist(a, b) > 0.1
        ]

    def label_spots(self, width: float) -> list[tuple[float, float, float]]:
        """Where a label ``width`` px wide may go, as (centre x, centre y, angle), best first.

        On an edge: its middle, then further along it, along the curve. On a loop:
        horizontal, just beyond the loop's far end.
        """
        if self.start != self.end:
            return [(*self.at(t)[0], self.at(t)[1]) for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78)]
        (ax, ay), _ = self.at(0.5)
        (sx, sy), (ex, ey) = self.points[0], self.tip
        ux, uy = _unit(ax - (sx + ex) / 2, ay - (sy + ey) / 2)
        h = EDGE_FONT * 1.3
        return [(ax + ux * (3 + d) + ux * width / 2, ay + uy * (3 + d) + uy * h / 2, 0.0) for d in (0.0, 6.0, 12.0)]


def _curve(
    items: dict[str, _Item], pair: tuple[str, str], start: str, end: str, kind: str, offset: float, summary: bool
) -> _Curve:
    """A quadratic Bézier for one of the edges between ``pair``, ``offset`` px off the pair's axis.

    Offsets are measured in the pair's own frame, so an edge and its reverse
    bend to different sides. The curve starts on the source's circle and stops
    ``ARROW`` px short of the target's, where the arrowhead takes over.
    """
    a, b = items[pair[0]], items[pair[1]]
    (ax, ay), (bx, by) = a.pos, b.pos
    nx, ny = _unit(-(by - ay), bx - ax)
    tree_edge = b.parent == a.key or a.parent == b.key
    mx, my = (ax + bx) / 2, (ay + by) / 2
    if not tree_edge and math.hypot(mx, my) < 0.6 * max(math.hypot(ax, ay), math.hypot(bx, by)):
        # a chord across the middle: bend it away from the centre so it clears the focus
        offset += (1.0 if mx * nx + my * ny >= 0 else -1.0) * 0.5 * math.hypot(bx - ax, by - ay)
    p, q = items[start], items[end]
    c = (mx + nx * offset, my + ny * offset)
    ux, uy = _unit(c[0] - p.pos[0], c[1] - p.pos[1])
    p0 = (p.pos[0] + ux * (p.radius + 1), p.pos[1] + uy * (p.radius + 1))
    vx, vy = _unit(c[0] - q.pos[0], c[1] - q.pos[1])
    tip = (q.pos[0] + vx * (q.radius + 1), q.pos[1] + vy * (q.radius + 1))
    tx, ty = _unit(c[0] - tip[0], c[1] - tip[1])
    return _Curve(start, end, kind, summary, (p0, c, (tip[0] + tx * ARROW, tip[1] + ty * ARROW)), tip)


def _loops(item: _Item, kinds: list[str], others: list[Point]) -> list[_Curve]:
    """Self-loops as nested teardrops in the widest free direction around the node.

    A leaf's name goes outward, so its loops keep out of that direction too.
    """
    x, y = item.pos
    taken = [math.atan2(o[1] - y, o[0] - x) for o in others]
    if item.depth > 0 and not item.children:
        taken.append(item.angle)
    phi = _widest_gap(taken) if taken else -math.pi / 2
    r = item.radius
    curves = []
    for j, kind in enumerate(kinds):
        size = 30.0 + 22.0 * j

        def at(dist: float, ang: float) -> Point:
            return x + dist * math.cos(ang), y + dist * math.sin(ang)

        p0, c1, c2, tip = at(r + 1, phi - 0.4), at(r + size, phi - 0.6), at(r + size, phi + 0.6), at(r + 1, phi + 0.4)
        ux, uy = _unit(c2[0] - tip[0], c2[1] - tip[1])
        curves.append(
            _Curve(item.key, item.key, kind, False, (p0, c1, c2, (tip[0] + ux * ARROW, tip[1] + uy * ARROW)), tip)
        )
    return curves


def _natural(text: str) -> list[tuple[int, int | str]]:
    """Sort key that orders "City 2" before "City 10"."""
    return [(0, int(p)) if p.isdigit() else (1, p.casefold()) for p in re.split(r"(\d+)", text) if p]


def _ink(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (#rrggbb)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#222" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"


def _along(item: _Item, text: str, phi: float, extra: float = 0.0) -> TextBox:
    """A box for ``text`` running outward from ``item`` along direction ``phi`` (turned to read upright)."""
    w, h = text_width(text, NODE_FONT), NODE_FONT * 1.25
    d = item.radius + 4 + extra + w / 2
    return TextBox(item.pos[0] + math.cos(phi) * d, item.pos[1] + math.sin(phi) * d, w, h, _upright(math.degrees(phi)))


def _shorter(text: str) -> list[str]:
    """``text``, then shorter cuts of it (a name that cannot fit whole may fit shortened)."""
    cuts = [text]
    for keep in (18, 12, 7):
        if len(cuts[-1]) > keep + 1:
            cuts.append(_clip(text, keep))
    return cuts


def _beside(item: _Item, text: str, phi: float, extra: float = 0.0) -> TextBox:
    """A horizontal box for ``text`` just outside ``item``'s circle (``extra`` px further) in direction ``phi``."""
    size = NODE_FONT + 1 if item.depth == 0 else NODE_FONT
    w, h = text_width(text, size, bold=item.depth == 0), size * 1.25
    x, y = item.pos
    c, s = math.cos(phi), math.sin(phi)
    gap = item.radius + 4 + extra
    if c > 0.34:
        return TextBox(x + gap * c + w / 2, y + gap * s * 0.6, w, h)
    if c < -0.34:
        return TextBox(x + gap * c - w / 2, y + gap * s * 0.6, w, h)
    return TextBox(x + gap * c, y + (gap + h / 2) * (1 if s > 0 else -1), w, h)


def _widest_gap(angles: list[float]) -> float:
    """The direction in the middle of the widest empty sector between ``angles`` (radians)."""
    ordered = sorted(a % (2 * math.pi) for a in angles)
    best, direction = -1.0, -math.pi / 2
    for i, a in enumerate(ordered):
        b = ordered[(i + 1) % len(ordered)] + (2 * math.pi if i == len(ordered) - 1 else 0.0)
        if b - a > best:
            best, direction = b - a, (a + b) / 2
    return direction


def _ration(
    groups: dict[tuple[str | None, bool, str], list[str]], budget: int
) -> list[tuple[tuple[str | None, bool, str], list[str], int]]:
    """How many members of each group to draw so that the drawn nodes plus summaries fit ``budget``.

    The largest cap ``c`` is chosen such that each group shows all of its members
    when it has at most ``c + 1`` (a summary of one would waste its slot), else ``c``
    members and one summary. Small groups are therefore shown whole and large ones
    cut; when even one slot per group is too many, each group is one summary.
    """
    sizes = [len(m) for m in groups.values()]

    def slots(cap: int) -> int:
        return sum(s if s <= cap + 1 else cap + 1 for s in sizes)

    cap = 0
    if slots(max(sizes, default=0)) <= budget:
        cap = max(sizes, default=0)
    else:
        while slots(cap + 1) <= budget:
            cap += 1
    return [
        (key, members, 0 if not key[2] and len(members) > 1 else len(members) if len(members) <= cap + 1 else cap)
        for key, members in groups.items()
    ]
