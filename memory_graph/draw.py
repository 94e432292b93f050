"""Draw the memory graph as a PNG: the DAG of reasoning steps, each node's energy, and its evidence.

Layered layout: a node's row is its depth, the longest path from the root, so every edge points down.
Rows wider than `max_width` wrap; within a row nodes are ordered by the mean position of their parents
(one barycenter sweep), which keeps most edges short and uncrossed. Nodes are rounded boxes coloured by
kind, showing id, kind, query, summary and energy E (the mean Omega of its items, energy.energy). Under
each node sit thumbnails of its memorized items with the pixels `energy.allocate` gave them: amber frames
are in the visual memory, faded ones are shown to the model as text only.

Everything is drawn at 2x and downsampled, so lines and text come out antialiased. All text is fitted to
its box (wrapped, then cut with an ellipsis), so nothing overlaps however long the queries are.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from PIL import Image, ImageDraw, ImageFont, ImageOps

from memory_graph.energy import Allocation, allocate, energy
from memory_graph.graph import Item, MemoryGraph, Node

Thumbnails = Callable[[Item], "Image.Image | None"]

# kind -> (header colour, body fill)
KIND_COLOURS = {
    "root": ((55, 71, 79), (236, 239, 241)),
    "search": ((30, 111, 217), (232, 241, 253)),
    "crop": ((224, 122, 16), (253, 241, 228)),
    "scale": ((123, 79, 208), (242, 236, 252)),
    "memory": ((120, 120, 120), (243, 243, 243)),
    "answer": ((30, 158, 90), (230, 246, 236)),
}
BACKGROUND = (250, 250, 251)
INK = (31, 35, 40)
MUTED = (106, 115, 125)
EDGE = (150, 160, 175)
SHADOW = (220, 224, 230)
MEMORY = (242, 176, 5)  # frame of items that hold pixels in the context
TEXT_ONLY = (190, 196, 204)

# geometry in output pixels (scaled by the supersampling factor when drawing)
MARGIN, NODE_W, H_GAP, V_GAP = 24, 248, 28, 58
HEADER_H, BAR_H, PAD, RADIUS = 30, 5, 10, 10
THUMB_W, THUMB_H, CELL_GAP, CAPTION_H = 70, 54, 6, 30
MAX_THUMBS = 12  # per node; more become a "+N" cell
QUERY_LINES, SUMMARY_LINES, TITLE_LINES = 2, 2, 3


# -- fonts ------------------------------------------------------------------------------------------------
def _mpl_font_dir() -> Path | None:
    # find matplotlib's bundled DejaVu fonts without importing matplotlib (and building its font cache)
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.origin:
        return None
    d = Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf"
    return d if d.is_dir() else None


@lru_cache(maxsize=64)
def _font(size: int, style: str = "") -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVuSans[-Bold|-Oblique] from matplotlib's mpl-data, else PIL's default font."""
    d = _mpl_font_dir()
    name = {"": "DejaVuSans.ttf", "bold": "DejaVuSans-Bold.ttf", "italic": "DejaVuSans-Oblique.ttf"}[style]
    if d is not None and (d / name).is_file():
        return ImageFont.truetype(str(d / name), size)
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def _width(text: str, font) -> float:
    return font.getlength(text)


def _truncate(text: str, font, max_w: float) -> str:
    if _width(text, font) <= max_w:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix that fits with the ellipsis
        mid = (lo + hi + 1) // 2
        if _width(text[:mid].rstrip() + "…", font) <= max_w:
            lo = mid
        else:
            hi = mid - 1
    return (text[:lo].rstrip() + "…") if lo else ""


def _wrap(text: str, font, max_w: float, max_lines: int) -> list[str]:
    """Word-wrap into at most max_lines lines of at most max_w; the last one ends in … when cut."""
    words = " ".join(str(text).split()).split(" ")
    lines: list[str] = []
    cur = ""
    i = 0
    while i < len(words) and len(lines) < max_lines:
        w = words[i]
        cand = f"{cur} {w}" if cur else w
        if _width(cand, font) <= max_w:
            cur, i = cand, i + 1
        elif cur:
            lines.append(cur)
            cur = ""
        else:  # one word wider than the line: break it by characters
            cut = max(1, len(_truncate(w, font, max_w).rstrip("…")))
            lines.append(w[:cut])
            words[i] = w[cut:]
    if cur and len(lines) < max_lines:
        lines.append(cur)
        cur = ""
    if (i < len(words) or cur) and lines:
        lines[-1] = _truncate(lines[-1] + " …", font, max_w)
    return [ln for ln in lines if ln]


def _fmt_px(px: int) -> str:
    if px >= 1_000_000:
        return f"{px / 1e6:.1f}M px"
    if px >= 1000:
        return f"{round(px / 1000)}k px"
    return f"{px} px"


def _blend(c: tuple, towards: tuple, t: float) -> tuple:
    return tuple(int(round(a + (b - a) * t)) for a, b in zip(c, towards))


# -- layout -----------------------------------------------------------------------------------------------
def depths(graph: MemoryGraph) -> dict[str, int]:
    """Longest path from the root to each node (parents always come before children in index order)."""
    d: dict[str, int] = {}
    for node in sorted(graph.nodes.values(), key=lambda n: n.index):
        d[node.id] = max((d[p] + 1 for p in node.parents if p in d), default=0)
    return d


@dataclass
class _NodeView:
    node: Node
    lines_q: list[str]
    lines_s: list[str]
    cells: int  # thumbnail cells (items shown, plus one "+N" cell when cut)
    h: int = 0
    x: int = 0
    y: int = 0
    row_bottom: int = 0  # bottom of the tallest box in this node's row: edges turn only below it


class _Canvas:
    """Everything measured and drawn in device pixels (output pixels times the supersampling factor s)."""

    def __init__(
        self,
        graph: MemoryGraph,
        allocations: list[Allocation] | None,
        thumbnails: Thumbnails | None,
        max_width: int,
        s: int,
    ) -> None:
        self.g, self.thumbs, self.s = graph, thumbnails, s
        self.alloc = {
            (a.node_id, a.item_index): a for a in (allocations if allocations is not None else allocate(graph))
        }
        om = energy(graph)  # visual memory only: a node without any has no energy to show
        mean = {n.id: [om[(n.id, j)] for j in range(len(n.items)) if (n.id, j) in om] for n in graph.nodes.values()}
        self.node_e = {n: (sum(v) / len(v) if v else None) for n, v in mean.items()}
        self.max_e = max([e for e in self.node_e.values() if e is not None], default=0.0) or 1.0
        u = self.u
        self.node_w = u(max(140, min(NODE_W, max_width - 2 * MARGIN)))
        self.max_w = u(max(max_width, 140 + 2 * MARGIN))
        self.f_title, self.f_head = _font(u(17), "bold"), _font(u(14), "bold")
        self.f_body, self.f_sum = _font(u(12)), _font(u(11), "italic")
        self.f_small, self.f_small_b = _font(u(10)), _font(u(10), "bold")
        self.lh_body, self.lh_sum, self.lh_small = u(16), u(15), u(13)
        inner = self.node_w - 2 * u(PAD)
        self.per_row = max(1, (inner + u(CELL_GAP)) // (u(THUMB_W) + u(CELL_GAP)))
        self.thumb_w = (inner - (self.per_row - 1) * u(CELL_GAP)) // self.per_row  # fill the node's width

    def u(self, v: float) -> int:
        return int(round(v * self.s))

    # measuring -------------------------------------------------------------------------------------------
    def _view(self, node: Node) -> _NodeView:
        inner = self.node_w - 2 * self.u(PAD)
        q = node.query or ("(question)" if node.kind == "root" else "")
        prefix = {"search": "Q: ", "answer": "A: "}.get(node.kind, "")
        lines_q = _wrap(prefix + q, self.f_body, inner, QUERY_LINES) if q else []
        lines_s = _wrap(node.summary, self.f_sum, inner, SUMMARY_LINES) if node.summary else []
        n = len(node.items)
        cells = n if n <= MAX_THUMBS else MAX_THUMBS  # the last cell becomes "+N"
        v = _NodeView(node, lines_q, lines_s, cells)
        rows = math.ceil(cells / self.per_row)
        v.h = (
            self.u(HEADER_H + BAR_H)
            + self.u(PAD)
            + len(lines_q) * self.lh_body
            + len(lines_s) * self.lh_sum
            + (self.u(4) if lines_s and lines_q else 0)
            + rows * (self.u(THUMB_H + CAPTION_H) + self.u(CELL_GAP))
            + (self.u(4) if rows else 0)
            + self.u(PAD)
            - (self.u(CELL_GAP) if rows else 0)
        )
        v.h = max(v.h, self.u(HEADER_H + BAR_H + 2 * PAD + 8))
        return v

    def layout(self) -> None:
        u = self.u
        d = depths(self.g)
        layers: dict[int, list[Node]] = {}
        for node in sorted(self.g.nodes.values(), key=lambda n: n.index):
            layers.setdefault(d[node.id], []).append(node)
        cols = max(1, (self.max_w - 2 * u(MARGIN) + u(H_GAP)) // (self.node_w + u(H_GAP)))
        widest = min(cols, max(len(v) for v in layers.values()))
        self.W = min(self.max_w, max(u(560), widest * (self.node_w + u(H_GAP)) - u(H_GAP) + 2 * u(MARGIN)))
        self.views: dict[str, _NodeView] = {}
        self.rows: list[tuple[int, int, list[tuple[int, int]]]] = []  # (y0, y1, node x-spans) per drawn row
        self.lanes: list[float] = []
        self._title()
        y = self.title_h
        cx: dict[str, float] = {}
        for depth in sorted(layers):
            nodes = layers[depth]
            if depth:  # barycenter: sit under the mean position of the parents
                nodes.sort(key=lambda n: (sum(cx[p] for p in n.parents) / max(1, len(n.parents)), n.index))
            for start in range(0, len(nodes), cols):
                row = [self._view(n) for n in nodes[start : start + cols]]
                row_w = len(row) * self.node_w + (len(row) - 1) * u(H_GAP)
                x = (self.W - row_w) // 2
                for v in row:
                    v.x, v.y = x, y
                    cx[v.node.id] = x + self.node_w / 2
                    self.views[v.node.id] = v
                    x += self.node_w + u(H_GAP)
                row_h = max(v.h for v in row)
                for v in row:
                    v.row_bottom = y + row_h
                self.rows.append((y, y + row_h, [(v.x, v.x + self.node_w) for v in row]))
                y += row_h + u(V_GAP)
        self.H = y - u(V_GAP) + u(MARGIN)

    def _title(self) -> None:
        u = self.u
        width = self.W - 2 * u(MARGIN)
        self.title_lines = _wrap(f"Question: {self.g.question}", self.f_body, width, TITLE_LINES)
        # legend entries: (chip colour, label); laid out left to right, wrapping
        entries = [(KIND_COLOURS[k][0], k) for k in KIND_COLOURS]
        entries += [(MEMORY, "in visual memory (pixels)"), (TEXT_ONLY, "text summary only")]
        self.legend: list[tuple[int, int, tuple, str]] = []
        x, y = 0, 0
        for colour, label in entries:
            w = u(14 + 6) + int(_width(label, self.f_small)) + u(16)
            if x and x + w > width:
                x, y = 0, y + u(18)
            self.legend.append((x, y, colour, label))
            x += w
        self.title_h = u(MARGIN) + u(24) + len(self.title_lines) * self.lh_body + u(8) + y + u(18) + u(MARGIN)

    # drawing ---------------------------------------------------------------------------------------------
    def draw(self) -> Image.Image:
        img = Image.new("RGB", (self.W, self.H), BACKGROUND)
        dr = ImageDraw.Draw(img)
        self._draw_title(dr)
        for child in self.views.values():
            for p in child.node.parents:
                if p in self.views:
                    self._edge(dr, self.views[p], child)
        for v in self.views.values():
            self._node(img, dr, v)
        return img

    def _draw_title(self, dr: ImageDraw.ImageDraw) -> None:
        u, x0 = self.u, self.u(MARGIN)
        n_items = sum(len(n.items) for n in self.g.nodes.values())
        n_mem = sum(1 for a in self.alloc.values() if a.pixels > 0)
        px = sum(a.pixels for a in self.alloc.values())
        head = f"VimRAG memory graph · {len(self.g.nodes)} nodes · {n_items} items · {n_mem} in visual memory"
        if px:
            head += f" ({_fmt_px(px)})"
        dr.text((x0, u(MARGIN)), _truncate(head, self.f_title, self.W - 2 * x0), font=self.f_title, fill=INK)
        y = u(MARGIN) + u(24)
        for line in self.title_lines:
            dr.text((x0, y), line, font=self.f_body, fill=MUTED)
            y += self.lh_body
        y += u(8)
        for lx, ly, colour, label in self.legend:
            dr.rounded_rectangle((x0 + lx, y + ly + u(1), x0 + lx + u(14), y + ly + u(13)), radius=u(3), fill=colour)
            dr.text((x0 + lx + u(20), y + ly), label, font=self.f_small, fill=MUTED)

    def _channel(self, sy: int, ey: int, want: float) -> tuple[float, int, int] | None:
        """For an edge that would cross node rows between sy and ey: a free vertical lane x and its span."""
        u = self.u
        rows = [r for r in self.rows if r[0] > sy and r[1] < ey]
        if not rows:
            return None
        clear = u(10)
        blocked = sorted((x0 - clear, x1 + clear) for _, _, xs in rows for x0, x1 in xs)
        free, cur = [], u(8)
        for b0, b1 in blocked:
            if b0 > cur:
                free.append((cur, b0))
            cur = max(cur, b1)
        if cur < self.W - u(8):
            free.append((cur, self.W - u(8)))
        best = min(free, key=lambda f: abs(min(max(want, f[0]), f[1]) - want))
        x = min(max(want, best[0]), best[1])
        for _ in range(6):  # lanes shared by several long edges sit side by side, not on top of each other
            if all(abs(x - used) >= u(6) for used in self.lanes):
                break
            x = x + u(6) if x + u(6) <= best[1] else x - u(6)
        self.lanes.append(x)
        return x, min(r[0] for r in rows) - u(6), max(r[1] for r in rows) + u(6)

    @staticmethod
    def _bezier(x0: float, y0: float, x1: float, y1: float, n: int = 24) -> list[tuple[float, float]]:
        """A cubic curve leaving (x0, y0) straight down and arriving at (x1, y1) straight down."""
        dy = y1 - y0
        pts = []
        for i in range(n + 1):
            t = i / n
            a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
            pts.append(((a + b) * x0 + (c + d) * x1, a * y0 + b * (y0 + dy * 0.55) + c * (y1 - dy * 0.55) + d * y1))
        return pts

    def _edge(self, dr: ImageDraw.ImageDraw, parent: _NodeView, child: _NodeView) -> None:
        u = self.u
        # spread the ends over the boxes' edges, ordered by where the other end sits, so edges fan out
        kids = sorted(
            (self.views[c] for c in self.g.children(parent.node.id) if c in self.views), key=lambda v: (v.x, v.y)
        )
        pars = sorted((self.views[p] for p in child.node.parents if p in self.views), key=lambda v: (v.x, v.y))
        sx = parent.x + self.node_w * (kids.index(child) + 1) / (len(kids) + 1)
        ex = child.x + self.node_w * (pars.index(parent) + 1) / (len(pars) + 1)
        sy, ey = parent.row_bottom, child.y - u(2)
        lane = self._channel(sy, ey, (sx + ex) / 2)
        start = [(sx, parent.y + parent.h)]  # straight down past taller neighbours before turning
        if lane is None:  # adjacent rows: one curve across the gap
            pts = start + self._bezier(sx, sy, ex, ey)
        else:  # skip rows through a free lane, so the edge never runs under another node
            x, y_top, y_bot = lane
            pts = start + self._bezier(sx, sy, x, y_top) + self._bezier(x, y_bot, ex, ey)
        colour = _blend(KIND_COLOURS.get(child.node.kind, KIND_COLOURS["search"])[0], EDGE, 0.55)
        dr.line(pts[:-2], fill=colour, width=u(2), joint="curve")
        ah, aw = u(10), u(5.5)
        dr.polygon([(ex, ey), (ex - aw, ey - ah), (ex + aw, ey - ah)], fill=colour)

    def _node(self, img: Image.Image, dr: ImageDraw.ImageDraw, v: _NodeView) -> None:
        u, node = self.u, v.node
        head, fill = KIND_COLOURS.get(node.kind, KIND_COLOURS["search"])
        x0, y0, x1, y1 = v.x, v.y, v.x + self.node_w, v.y + v.h
        r = u(RADIUS)
        dr.rounded_rectangle((x0 + u(2), y0 + u(3), x1 + u(2), y1 + u(3)), radius=r, fill=SHADOW)
        dr.rounded_rectangle((x0, y0, x1, y1), radius=r, fill=fill, outline=head, width=u(1.5))
        dr.rounded_rectangle((x0, y0, x1, y0 + u(HEADER_H)), radius=r, fill=head, corners=(True, True, False, False))
        # header: id and kind on the left, the energy pill on the right
        e = self.node_e[node.id]
        pill = f"E={e:.2f}" if e is not None else "E –"
        pw = int(_width(pill, self.f_small_b)) + u(12)
        cy = y0 + u(HEADER_H) // 2
        dr.rounded_rectangle((x1 - u(PAD) - pw, cy - u(9), x1 - u(PAD), cy + u(9)), radius=u(9), fill=(255, 255, 255))
        dr.text((x1 - u(PAD) - pw // 2, cy), pill, font=self.f_small_b, fill=head, anchor="mm")
        room = self.node_w - 2 * u(PAD) - pw - u(8)
        kind = f"  {node.kind}" if node.kind != node.id else ""
        id_room = max(u(20), room - int(_width(kind, self.f_small)))
        ident = _truncate(node.id, self.f_head, id_room)
        dr.text((x0 + u(PAD), cy), ident, font=self.f_head, fill=(255, 255, 255), anchor="lm")
        kx = x0 + u(PAD) + int(_width(ident, self.f_head))
        dr.text(
            (kx, cy + u(1)),
            _truncate(kind, self.f_small, room - (kx - x0 - u(PAD))),
            font=self.f_small,
            fill=_blend(head, (255, 255, 255), 0.7),
            anchor="lm",
        )
        # energy bar: this node's E relative to the most energetic node
        by = y0 + u(HEADER_H)
        dr.rectangle((x0 + u(1.5), by, x1 - u(1.5), by + u(BAR_H)), fill=_blend(fill, head, 0.12))
        if e is not None:
            bw = int((self.node_w - u(3)) * min(1.0, e / self.max_e))
            dr.rectangle((x0 + u(1.5), by, x0 + u(1.5) + bw, by + u(BAR_H)), fill=_blend(head, fill, 0.35))
        y = by + u(BAR_H) + u(PAD) - u(2)
        for line in v.lines_q:
            dr.text((x0 + u(PAD), y), line, font=self.f_body, fill=INK)
            y += self.lh_body
        if v.lines_s and v.lines_q:
            y += u(4)
        for line in v.lines_s:
            dr.text((x0 + u(PAD), y), line, font=self.f_sum, fill=MUTED)
            y += self.lh_sum
        if v.cells:
            self._thumbs(img, dr, v, y + u(4))

    def _thumbs(self, img: Image.Image, dr: ImageDraw.ImageDraw, v: _NodeView, y: int) -> None:
        u, node = self.u, v.node
        tw, th = self.thumb_w, u(THUMB_H)
        extra = len(node.items) - v.cells + 1 if len(node.items) > v.cells else 0
        for j in range(v.cells):
            col, row = j % self.per_row, j // self.per_row
            x = v.x + u(PAD) + col * (tw + u(CELL_GAP))
            ty = y + row * (th + u(CAPTION_H) + u(CELL_GAP))
            if extra and j == v.cells - 1:
                dr.rounded_rectangle((x, ty, x + tw, ty + th), radius=u(4), fill=(255, 255, 255), outline=TEXT_ONLY)
                dr.text((x + tw // 2, ty + th // 2), f"+{extra}", font=self.f_head, fill=MUTED, anchor="mm")
                dr.text((x + tw // 2, ty + th + u(2)), "more items", font=self.f_small, fill=MUTED, anchor="ma")
                continue
            item = node.items[j]
            a = self.alloc.get((node.id, j))
            px = a.pixels if a is not None else 0
            in_mem = px > 0
            thumb = self.thumbs(item) if self.thumbs is not None else None
            dr.rectangle((x, ty, x + tw, ty + th), fill=(255, 255, 255))
            if thumb is not None:
                t = ImageOps.contain(
                    thumb.convert("RGB"), (max(1, tw - u(4)), max(1, th - u(4))), Image.Resampling.LANCZOS
                )
                if not in_mem:  # compressed to text in the context: fade it
                    t = Image.blend(t, Image.new("RGB", t.size, (255, 255, 255)), 0.55)
                img.paste(t, (x + (tw - t.width) // 2, ty + (th - t.height) // 2))
            else:
                dr.text(
                    (x + tw // 2, ty + th // 2), item.modality.upper(), font=self.f_small_b, fill=TEXT_ONLY, anchor="mm"
                )
            if item.modality == "video":  # a small play mark
                px0, py0 = x + u(5), ty + u(5)
                dr.polygon(
                    [(px0, py0), (px0, py0 + u(10)), (px0 + u(9), py0 + u(5))], fill=(255, 255, 255), outline=INK
                )
            dr.rounded_rectangle(
                (x, ty, x + tw, ty + th),
                radius=u(4),
                outline=MEMORY if in_mem else TEXT_ONLY,
                width=u(2.5) if in_mem else u(1),
            )
            if a is None:  # allocate leaves out items the model marked not useful
                cap = "not useful" if not item.useful else "–"
            else:
                cap = _fmt_px(px) if in_mem else "text"
            dr.text(
                (x + tw // 2, ty + th + u(2)),
                _truncate(item.info_id, self.f_small, tw),
                font=self.f_small,
                fill=INK,
                anchor="ma",
            )
            dr.text(
                (x + tw // 2, ty + th + u(2) + self.lh_small),
                _truncate(cap, self.f_small_b, tw),
                font=self.f_small_b,
                fill=(160, 110, 0) if in_mem else MUTED,
                anchor="ma",
            )


def layout(
    graph: MemoryGraph, allocations: list[Allocation] | None = None, max_width: int = 1600
) -> dict[str, tuple[int, int, int, int]]:
    """Node boxes (x0, y0, x1, y1) in output pixels, as draw_graph places them."""
    c = _Canvas(graph, allocations, None, max_width, 1)
    c.layout()
    return {k: (v.x, v.y, v.x + c.node_w, v.y + v.h) for k, v in c.views.items()}


def draw_graph(
    graph: MemoryGraph,
    allocations: list[Allocation] | None = None,
    thumbnails: Thumbnails | None = None,
    path: str | Path | None = None,
    max_width: int = 1600,
) -> Image.Image:
    """A PNG-ready picture of the DAG; `allocations` default to energy.allocate(graph) with its defaults."""
    probe = _Canvas(graph, allocations, thumbnails, max_width, 1)
    probe.layout()
    # draw at 2x and downsample for antialiasing, unless the picture is huge (a 40-node chain is tall)
    s = 2 if probe.W * probe.H <= 6_000_000 else 1
    canvas = probe if s == 1 else _Canvas(graph, allocations, thumbnails, max_width, s)
    if s != 1:
        canvas.layout()
    img = canvas.draw()
    if s != 1:
        img = img.resize((canvas.W // s, canvas.H // s), Image.Resampling.LANCZOS)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        img.save(path, format="PNG")
    return img
