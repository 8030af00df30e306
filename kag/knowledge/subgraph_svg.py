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

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field

import kag.knowledge.svg_shapes as shapes
from kag.knowledge.svg_shapes import (
    ARROW,
    EDGE_COLOUR,
    EDGE_FONT,
    FOCUS_CHARS,
    LEGEND_FONT,
    NAME_CHARS,
    NODE_FONT,
    PALETTE,
    PARALLEL_STEP,
    R_FOCUS,
    R_NODE,
    RELATION_CHARS,
    Point,
    TextBox,
    label_colour,
    text_width,
)

__all__ = ["PALETTE", "SubgraphView", "TextBox", "label_colour", "text_width"]


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

    def _tree(self) -> tuple[dict[str, shapes.Item], list[str], int]:
        """Items to draw (focus first, breadth first) and how many entities they leave out."""
        focus = self._focus()
        links: dict[str, list[tuple[str, str, bool]]] = defaultdict(list)  # id -> (other, type, outgoing)
        for start, end, kind in self.edges:
            if start in self.nodes and end in self.nodes and start != end:
                links[start].append((end, kind, True))
                links[end].append((start, kind, False))
        label, name = self.nodes[focus]
        items = {focus: shapes.Item(focus, label, name, 0, None)}
        order, seen = [focus], {focus}
        queue = [focus]
        while queue:
            parent = queue.pop(0)
            depth = items[parent].depth + 1
            groups: dict[tuple[str | None, bool, str], list[str]] = defaultdict(list)
            for other, kind, outgoing in sorted(
                links[parent],
                key=lambda x: (x[1], not x[2], self.nodes[x[0]][0], shapes.natural_key(self.nodes[x[0]][1])),
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
                    items[node_id] = shapes.Item(node_id, *self.nodes[node_id], depth, parent)
                    items[parent].children.append(node_id)
                    order.append(node_id)
                    queue.append(node_id)
                rest = members[keep:]
                if rest:
                    key = f"\x00summary{len(items)}"
                    via = f" via {rel}" if rel else ""
                    text = f"+{len(rest)} {lab}{via}" if lab else f"+{len(rest)} more"
                    items[key] = shapes.Item(key, lab, text, depth, parent, rest, rel, outgoing)
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
    def _layout(self, items: dict[str, shapes.Item], order: list[str]) -> None:
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
            incoming = max(
                text_width(shapes.clip(self._relation_of(i, items), RELATION_CHARS), EDGE_FONT) for i in ring
            )
            inner = [i for i in items.values() if i.depth == d - 1 and i.children and i.depth > 0]
            inner_label = max((text_width(shapes.clip(i.name, NAME_CHARS), NODE_FONT) for i in inner), default=0.0)
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

    def _relation_of(self, item: shapes.Item, items: dict[str, shapes.Item]) -> str:
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
        canvas = shapes.Canvas()
        marker = "kag-arrow-" + hashlib.blake2s(repr((self.nodes, self.edges)).encode(), digest_size=4).hexdigest()
        for item in items.values():
            x, y = item.pos
            canvas.circles[item.key] = TextBox(x, y, 2 * item.radius + 2, 2 * item.radius + 2)
            canvas.taken.add(canvas.circles[item.key], item.key)
            canvas.grow((x - item.radius, y - item.radius), (x + item.radius, y + item.radius))
        # geometry first, so that names can keep clear of every curve
        pairs, loops = self._edge_groups(items)
        curves = [
            shapes.edge_curve(items, pair, start, end, kind, (i - (len(group) - 1) / 2) * PARALLEL_STEP, summary)
            for pair, group in pairs.items()
            for i, (start, end, kind, summary) in enumerate(group)
        ]
        for key, kinds in loops.items():
            curves += shapes.loop_curves(items[key], kinds, self._neighbour_points(items[key], items))
        self._node_labels(items, canvas, [c.segments() for c in curves])
        for curve in curves:
            self._draw_curve(items, canvas, marker, curve)
        for key in order:
            self._node(items[key], canvas)
        return self._assemble(items, canvas, marker, hidden, size)

    def _node_labels(self, items: dict[str, shapes.Item], canvas: shapes.Canvas, curves: list[list[TextBox]]) -> None:
        """Place every node's name where it covers no other name or node and crosses the fewest curves.

        Leaves put their names outward, horizontal when all of them fit that way,
        else along the radius (one style for the whole ring reads best). A node
        with edges on several sides (the focus, a node with children) tries the
        widest gap between its edges and sixteen directions around it. A name
        that still collides is shortened, and as a last resort left to the
        node's tooltip, so names never overprint.
        """
        text = {i.key: shapes.clip(i.name, FOCUS_CHARS if i.depth == 0 else NAME_CHARS) for i in items.values()}
        leaves = [i for i in items.values() if i.depth > 0 and not i.children]
        horizontal = {i.key: shapes.box_beside(i, text[i.key], i.angle) for i in leaves}
        radial: set[int] = set()  # rings whose leaves write along the radius
        for n, a in enumerate(leaves):
            box = horizontal[a.key]
            if any(box.overlaps(horizontal[b.key]) for b in leaves[n + 1 :] if b.depth == a.depth) or any(
                box.overlaps(c) for k, c in canvas.circles.items() if k != a.key
            ):
                radial.add(a.depth)
        lines = shapes.Grid()
        for n, curve in enumerate(curves):
            for seg in curve:
                lines.add(seg, n)
        for item in items.values():  # breadth first: the focus, then ring by ring
            chosen: tuple[str, TextBox] | None = None
            for name in shapes.shorter_cuts(text[item.key]):
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

    def _label_candidates(
        self, item: shapes.Item, items: dict[str, shapes.Item], text: str, radial: bool
    ) -> list[TextBox]:
        """Places for a node's name, best first."""
        if item.depth > 0 and not item.children:
            spread = [item.angle + d for d in (0.0, 0.3, -0.3, 0.6, -0.6)]
            along = [shapes.box_along(item, text, a, extra) for extra in (0.0, 8.0) for a in spread[:3]]
            beside = [shapes.box_beside(item, text, a, extra) for extra in (0.0, 8.0) for a in spread]
            return [*along, *beside] if radial else [*beside, *along]
        x, y = item.pos
        ends = [math.atan2(p[1] - y, p[0] - x) for p in self._neighbour_points(item, items)]
        gap = shapes.widest_gap(ends) if ends else math.pi / 2
        directions = [gap, *(math.pi / 8 * k for k in (4, 0, 8, 12, 2, 6, 10, 14, *range(1, 16, 2)))]
        if item.depth == 0:  # under the focus is where a reader looks first
            directions.insert(1, math.pi / 2)
        return [shapes.box_beside(item, text, phi, extra) for extra in (0.0, 10.0, 24.0) for phi in directions]

    def _edge_groups(
        self, items: dict[str, shapes.Item]
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

    def _draw_curve(
        self, items: dict[str, shapes.Item], canvas: shapes.Canvas, marker: str, curve: shapes.Curve
    ) -> None:
        """The curve, its arrowhead, and its label at the first free place along it."""
        canvas.grow(*curve.points, curve.tip)
        start, end = items[curve.start].name, items[curve.end].name
        full = f"{start} -[{curve.kind}]-> {end}" if curve.kind else f"{start} - {end}"
        dash = ' stroke-dasharray="4 3"' if curve.summary else ""
        cls = "kag-edge kag-loop" if curve.start == curve.end else "kag-edge"
        head = f' marker-end="url(#{marker})"' if curve.kind else ""  # no relation, no direction: a summary's tie
        canvas.edges.append(
            f'<path class="{cls}" d="{curve.path()}" fill="none" stroke="{EDGE_COLOUR}" stroke-width="1.3"{dash}'
            f"{head}><title>{shapes.esc(full)}</title></path>"
        )
        if not curve.kind:
            return
        text = shapes.clip(curve.kind, RELATION_CHARS)
        if curve.start != curve.end:  # a label longer than its edge is cut to fit (the tooltip has it whole)
            room = math.dist(curve.points[0], curve.points[-1]) - 6
            while text_width(text, EDGE_FONT) > room and len(text) > 4:
                text = shapes.clip(text, len(text) - 1)
        width = text_width(text, EDGE_FONT)
        for cx, cy, angle in curve.label_spots(width):
            box = TextBox(cx, cy, width, EDGE_FONT * 1.3, shapes.upright_angle(angle))
            if canvas.free(box):
                self._text(canvas, box, text, EDGE_FONT, full, cls="kag-edge-label", fill="#555", plate=True)
                return

    def _neighbour_points(self, item: shapes.Item, items: dict[str, shapes.Item]) -> list[Point]:
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

    def _node(self, item: shapes.Item, canvas: shapes.Canvas) -> None:
        x, y = item.pos
        colour = label_colour(item.label) if item.label else EDGE_COLOUR
        initial = item.label[:1].upper()
        if item.summary:
            names = ", ".join(sorted((self.nodes[m][1] for m in item.members), key=shapes.natural_key)[:12])
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
            ink = shapes.ink_for(colour)
            shape = (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{item.radius:g}" fill="{colour}" stroke="#fff" '
                'stroke-width="1.5"/>'
            )
        font = item.radius * 1.05
        letter = (
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{font:.1f}" font-weight="700" text-anchor="middle" '
            f'dominant-baseline="central" fill="{ink}" pointer-events="none">{shapes.esc(initial)}</text>'
            if initial
            else ""
        )
        canvas.nodes.append(
            f'<g class="{cls}" data-label="{shapes.esc(item.label)}">'
            f"<title>{shapes.esc(title)}</title>{shape}{letter}</g>"
        )

    def _text(
        self,
        canvas: shapes.Canvas,
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
        halo = "" if plate else f" {shapes.HALO}"
        canvas.labels.append(
            f'<text class="{cls}" x="{box.cx:.1f}" y="{box.cy:.1f}" font-size="{font:g}" text-anchor="middle" '
            f'dominant-baseline="central" fill="{fill}"{weight}{halo}{rotate}>'
            f"<title>{shapes.esc(full)}</title>{shapes.esc(text)}</text>"
        )

    def _assemble(
        self, items: dict[str, shapes.Item], canvas: shapes.Canvas, marker: str, hidden: int, size: int
    ) -> str:
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
                f'<g class="kag-legend" data-label="{shapes.esc(label)}"><circle cx="{lx + 5:.1f}" cy="{ly:.1f}" r="5" '
                f'fill="{label_colour(label)}"/><text x="{lx + 14:.1f}" y="{ly:.1f}" font-size="{LEGEND_FONT:g}" '
                f'dominant-baseline="central" fill="#333">{shapes.esc(label)}</text></g>'
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
                f'fill="#777">{shapes.esc(note)}</text>'
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
