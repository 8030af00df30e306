"""The pieces of the subgraph drawing: text measurement, label boxes and their collision grid, edge curves.

:mod:`kag.knowledge.subgraph_svg` lays a subgraph out and draws it with these: widths of text in
a sans-serif font (estimated per glyph class), rotated boxes and a grid that finds the boxes a
new one would cover, the nodes and canvas of one drawing, and the Bézier curves of edges and
self-loops with the places their labels may go. Every string drawn goes through :func:`esc`.
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

__all__ = [
    "ARROW",
    "CHAR_EM",
    "EDGE_COLOUR",
    "EDGE_FONT",
    "FOCUS_CHARS",
    "HALO",
    "LEGEND_FONT",
    "NAME_CHARS",
    "NODE_FONT",
    "PALETTE",
    "PARALLEL_STEP",
    "RELATION_CHARS",
    "Canvas",
    "Curve",
    "Grid",
    "Item",
    "Point",
    "TextBox",
    "box_along",
    "box_beside",
    "clip",
    "edge_curve",
    "esc",
    "ink_for",
    "label_colour",
    "loop_curves",
    "natural_key",
    "shorter_cuts",
    "text_width",
    "upright_angle",
    "widest_gap",
]

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
HALO = 'paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"'
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

Point = tuple[float, float]


def esc(value: object) -> str:
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


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def upright_angle(degrees: float) -> float:
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


class Grid:
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
class Item:
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
class Canvas:
    """What has been drawn so far: SVG fragments per layer, occupied boxes, extents."""

    edges: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    taken: Grid = field(default_factory=Grid)  # labels placed so far, and the nodes
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


@dataclass(frozen=True)
class Curve:
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


def edge_curve(
    items: dict[str, Item], pair: tuple[str, str], start: str, end: str, kind: str, offset: float, summary: bool
) -> Curve:
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
    return Curve(start, end, kind, summary, (p0, c, (tip[0] + tx * ARROW, tip[1] + ty * ARROW)), tip)


def loop_curves(item: Item, kinds: list[str], others: list[Point]) -> list[Curve]:
    """Self-loops as nested teardrops in the widest free direction around the node.

    A leaf's name goes outward, so its loops keep out of that direction too.
    """
    x, y = item.pos
    taken = [math.atan2(o[1] - y, o[0] - x) for o in others]
    if item.depth > 0 and not item.children:
        taken.append(item.angle)
    phi = widest_gap(taken) if taken else -math.pi / 2
    r = item.radius
    curves = []
    for j, kind in enumerate(kinds):
        size = 30.0 + 22.0 * j

        def at(dist: float, ang: float) -> Point:
            return x + dist * math.cos(ang), y + dist * math.sin(ang)

        p0, c1, c2, tip = at(r + 1, phi - 0.4), at(r + size, phi - 0.6), at(r + size, phi + 0.6), at(r + 1, phi + 0.4)
        ux, uy = _unit(c2[0] - tip[0], c2[1] - tip[1])
        curves.append(
            Curve(item.key, item.key, kind, False, (p0, c1, c2, (tip[0] + ux * ARROW, tip[1] + uy * ARROW)), tip)
        )
    return curves


def natural_key(text: str) -> list[tuple[int, int | str]]:
    """Sort key that orders "City 2" before "City 10"."""
    return [(0, int(p)) if p.isdigit() else (1, p.casefold()) for p in re.split(r"(\d+)", text) if p]


def ink_for(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (#rrggbb)."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#222" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"


def box_along(item: Item, text: str, phi: float, extra: float = 0.0) -> TextBox:
    """A box for ``text`` running outward from ``item`` along direction ``phi`` (turned to read upright)."""
    w, h = text_width(text, NODE_FONT), NODE_FONT * 1.25
    d = item.radius + 4 + extra + w / 2
    return TextBox(
        item.pos[0] + math.cos(phi) * d, item.pos[1] + math.sin(phi) * d, w, h, upright_angle(math.degrees(phi))
    )


def shorter_cuts(text: str) -> list[str]:
    """``text``, then shorter cuts of it (a name that cannot fit whole may fit shortened)."""
    cuts = [text]
    for keep in (18, 12, 7):
        if len(cuts[-1]) > keep + 1:
            cuts.append(clip(text, keep))
    return cuts


def box_beside(item: Item, text: str, phi: float, extra: float = 0.0) -> TextBox:
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


def widest_gap(angles: list[float]) -> float:
    """The direction in the middle of the widest empty sector between ``angles`` (radians)."""
    ordered = sorted(a % (2 * math.pi) for a in angles)
    best, direction = -1.0, -math.pi / 2
    for i, a in enumerate(ordered):
        b = ordered[(i + 1) % len(ordered)] + (2 * math.pi if i == len(ordered) - 1 else 0.0)
        if b - a > best:
            best, direction = b - a, (a + b) / 2
    return direction
