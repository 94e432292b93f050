"""Reading order: OCR line boxes into text, a pure function shared by every OCR engine.

Whitespace gaps cut the page into blocks (recursive XY-cut: wide horizontal gaps first, then vertical
gutters, which separates the columns of a two-column paper); inside a block, boxes that overlap vertically
form a line, lines go top to bottom, boxes in a line left to right joined by spaces, lines joined by
newlines. Gaps are measured in line heights, so the same thresholds hold at any resolution.

>>> from retrieval.ocr_engine import OcrBox
>>> left = [OcrBox((0, 20 * i, 300, 20 * i + 12), f"left {i}", 1.0) for i in range(3)]
>>> right = [OcrBox((330, 20 * i, 630, 20 * i + 12), f"right {i}", 1.0) for i in range(3)]
>>> layout_text(right + left).splitlines()
['left 0', 'left 1', 'left 2', 'right 0', 'right 1', 'right 2']
>>> layout_text(right + left, columns=False).splitlines()[0]
'left 0 right 0'
"""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.ocr_engine import OcrBox


def reading_order(boxes: list[OcrBox], columns: bool = True) -> list[list[OcrBox]]:
    """Group boxes into lines in reading order.

    With `columns`, whitespace first cuts the page into blocks (XY-cut), so a two-column page is read
    column by column; without it, boxes at the same height are one line across the whole page.
    """
    boxes = [b for b in boxes if b.text.strip()]
    if not boxes:
        return []
    # Gaps are measured in line heights, so the same thresholds hold at any resolution.
    h = max(1.0, median(b.height for b in boxes))
    blocks = _xy_cut(boxes, h) if columns else [boxes]
    return [line for block in blocks for line in _lines(block)]


def layout_text(boxes: list[OcrBox], columns: bool = True) -> str:
    """The text of the boxes in reading order: boxes on a line joined by spaces, lines by newlines."""
    return "\n".join(" ".join(b.text.strip() for b in line) for line in reading_order(boxes, columns))


def _lines(boxes: list[OcrBox]) -> list[list[OcrBox]]:
    """Boxes that overlap vertically by half the smaller height form a line; lines top to bottom."""
    lines: list[tuple[list[OcrBox], list[float]]] = []  # (boxes, [y1, y2] span of the line)
    for b in sorted(boxes, key=lambda b: (b.box[1] + b.box[3]) / 2):
        for members, span in lines:
            overlap = min(span[1], b.box[3]) - max(span[0], b.box[1])
            if overlap >= 0.5 * max(1, min(b.height, span[1] - span[0])):
                members.append(b)
                span[0], span[1] = min(span[0], b.box[1]), max(span[1], b.box[3])
                break
        else:
            lines.append(([b], [b.box[1], b.box[3]]))
    lines.sort(key=lambda m: sum((b.box[1] + b.box[3]) / 2 for b in m[0]) / len(m[0]))
    return [sorted(members, key=lambda b: b.box[0]) for members, _ in lines]


def _gaps(intervals: list[tuple[int, int]], min_gap: float) -> list[float]:
    """Cut positions in the empty stretches (at least `min_gap` wide) between 1-D intervals."""
    cuts, end = [], None
    for a, b in sorted(intervals):
        if end is not None and a - end >= min_gap:
            cuts.append((a + end) / 2)
        end = b if end is None else max(end, b)
    return cuts


def _split(boxes: list[OcrBox], cuts: list[float], axis: int) -> list[list[OcrBox]]:
    parts: list[list[OcrBox]] = [[] for _ in range(len(cuts) + 1)]
    for b in boxes:
        centre = (b.box[axis] + b.box[axis + 2]) / 2
        parts[sum(centre > c for c in cuts)].append(b)
    return [p for p in parts if p]


def _xy_cut(boxes: list[OcrBox], h: float, hgap: float = 0.8, vgap: float = 0.8) -> list[list[OcrBox]]:
    """Recursive XY-cut: split at wide horizontal gaps, else at vertical gutters, else it is one block.

    Horizontal cuts come first so a full-width title is split off before the columns under it;
    inter-line gaps (about 0.2 line heights) are far below `hgap`, paragraph breaks are not. A gutter
    crossed by a few boxes (a centred page number, a full-width equation) still separates columns:
    the crossing boxes become blocks of their own, at their height.
    """
    if len(boxes) < 2:
        return [boxes]
    cuts = _gaps([(b.box[1], b.box[3]) for b in boxes], hgap * h)
    if cuts:
        return [blk for part in _split(boxes, cuts, 1) for blk in _xy_cut(part, h, hgap, vgap)]
    cuts = _gaps([(b.box[0], b.box[2]) for b in boxes], vgap * h)
    parts = _split(boxes, cuts, 0)
    if cuts and all(_is_text_column(p, h) for p in parts):
        return [blk for part in parts for blk in _xy_cut(part, h, hgap, vgap)]
    spanners = _gutter_spanners(boxes, vgap * h, h)
    if not spanners:
        return [boxes]
    spanners.sort(key=lambda b: b.box[1])
    rest = [b for b in boxes if all(b is not s for s in spanners)]
    cuts = [(s.box[1] + s.box[3]) / 2 for s in spanners]
    segments: list[list[OcrBox]] = [[] for _ in range(len(cuts) + 1)]
    for b in rest:
        segments[sum((b.box[1] + b.box[3]) / 2 > c for c in cuts)].append(b)
    blocks: list[list[OcrBox]] = []
    for i, seg in enumerate(segments):
        blocks += _xy_cut(seg, h, hgap, vgap) if seg else []
        if i < len(spanners):
            blocks.append([spanners[i]])
    return blocks


def _gutter_spanners(boxes: list[OcrBox], min_gap: float, h: float) -> list[OcrBox]:
    """The few boxes (at most a tenth) that cross an otherwise empty vertical gutter; [] when none does."""
    import numpy as np

    n = len(boxes)
    if n < 6:
        return []
    x0 = min(b.box[0] for b in boxes)
    width = max(b.box[2] for b in boxes) - x0
    cover = np.zeros(width + 1, dtype=np.int32)  # (width + 1,) boxes covering each pixel column
    for b in boxes:
        cover[b.box[0] - x0 : b.box[2] - x0] += 1
    limit = max(1, n // 10)
    low = np.concatenate([[0], (cover <= limit).astype(np.int8), [0]])  # (width + 3,)
    edges = np.flatnonzero(np.diff(low))  # alternating run starts and ends
    runs = sorted(zip(edges[::2], edges[1::2]), key=lambda r: r[0] - r[1])  # widest first
    for a, z in runs:
        if z - a < min_gap or a == 0 or z >= width:
            continue  # too narrow, or a margin rather than a gutter
        lo, hi = x0 + a, x0 + z
        left = sum(b.box[2] <= lo for b in boxes)
        right = sum(b.box[0] >= hi for b in boxes)
        crossing = [b for b in boxes if b.box[0] < hi and b.box[2] > lo]
        if left >= 3 and right >= 3 and len(crossing) <= limit:
            sides = ([b for b in boxes if b.box[2] <= lo], [b for b in boxes if b.box[0] >= hi])
            if all(_is_text_column(side, h) for side in sides):
                return crossing
    return []


def _is_text_column(boxes: list[OcrBox], h: float, min_width: float = 6.0) -> bool:
    """Whether boxes look like lines of prose (median width >= 6 line heights, about a dozen characters).

    Table cells and form fields are narrower, so a table is read row by row, as its text layer is.
    """
    return median(b.box[2] - b.box[0] for b in boxes) >= min_width * h
