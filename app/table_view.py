"""A table answer as people check one: the source table drawn as a table, the cells it used marked, and the
page's crop of the table beside it.

The embedded reader's table answers (agent/reader/table_reader.py) carry their table, the cells used and how
well the question named them (`trace.support["table"]`). `table_markdown` writes that table for the chat
(the rows around the cells used, when it is long); `table_crop` renders the table's region of its page, as the
reader saw it, for the picture after the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_ROWS = 12  # a longer table shows the rows around the cells used, and says how many it left out
_OPS = {
    "cell": "Read from the marked cell",
    "difference": "The difference of the marked cells",
    "ratio": "The ratio of the marked cells",
    "change": "The percentage change between the marked cells",
    "sum": "The sum of the marked cells",
    "extreme": "The marked cell is the extreme of its column",
}


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ").strip()


def table_markdown(found: dict[str, Any]) -> str:
    """The answer's table in markdown, the cells used marked (and their row labels and headers in bold)."""
    t, cells = found.get("table") or {}, [tuple(c) for c in found.get("cells") or []]
    rows, header = t.get("rows") or [], t.get("header") or []
    if not rows or not header:
        return ""
    used_rows = sorted({r for r, _ in cells})
    used_cols = {c for _, c in cells}
    keep = list(range(len(rows)))
    if len(rows) > MAX_ROWS:  # the rows used, and those around them, up to MAX_ROWS
        near = sorted({i for r in used_rows for i in range(r - 2, r + 3) if 0 <= i < len(rows)})
        keep = near[:MAX_ROWS]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(values) + " |"

    head = [f"**{_cell(h)}**" if c in used_cols and h else _cell(h) or " " for c, h in enumerate(header)]
    out = [line(head), "|" + "---|" * len(header)]
    last = -1
    for r in keep:
        if r != last + 1:
            out.append(line(["…"] + [" "] * (len(header) - 1)))
        row = list(rows[r]) + [""] * (len(header) - len(rows[r]))
        shown = []
        for c, v in enumerate(row[: len(header)]):
            if (r, c) in cells:
                shown.append(f"<mark>**{_cell(v)}**</mark>")
            else:
                shown.append(f"**{_cell(v)}**" if c == 0 and r in used_rows and v else _cell(v))
        out.append(line([s or " " for s in shown]))
        last = r
    if last < len(rows) - 1:
        out.append(line(["…"] + [" "] * (len(header) - 1)))
    what = _OPS.get(found.get("op", ""), "Read from the marked cells")
    scale = " ".join(x for x in (t.get("unit", ""), t.get("scale", "")) if x)
    title = t.get("title") or "the table"
    lead = f"{what} of *{_cell(title)}*" + (f" (values in {scale})" if scale else "")
    match = f"row match {found.get('row_match', 0):.2f}, column match {found.get('column_match', 0):.2f}"
    return f"{lead}, {match}:\n\n" + "\n".join(out)


def table_crop(found: dict[str, Any], run: Path, dpi: float = 144.0, margin: float = 12.0) -> str | None:
    """The table's region of its PDF page, rendered at `dpi` and saved under `run` (a JPEG path); None when the
    table has no box or its page cannot be rendered (a text table, a moved file)."""
    from retrieval.loaders import render_pdf_region

    t = found.get("table") or {}
    box, source, page = t.get("box"), t.get("source", ""), t.get("page") or 0
    if not box or not source.lower().endswith(".pdf") or not page:
        return None
    scale = dpi / 72.0
    x1, y1, x2, y2 = box
    # the header and a caption sit above the rows' box: keep three margins' worth above it
    px = tuple(int(v * scale) for v in (x1 - margin, y1 - 3 * margin, x2 + margin, y2 + margin))
    try:
        img = render_pdf_region(source, page, px, dpi)
    except Exception:  # noqa: BLE001 - the answer stands without its picture
        return None
    from PIL import ImageDraw

    draw = ImageDraw.Draw(img)
    boxes = t.get("cell_boxes") or []
    for r, c in found.get("cells") or []:  # the cells used, outlined where the page prints them
        b = boxes[r][c] if r < len(boxes) and c < len(boxes[r]) else None
        if b:
            x, y = px[0], px[1]
            edge = [b[0] * scale - x - 6, b[1] * scale - y - 4, b[2] * scale - x + 6, b[3] * scale - y + 4]
            draw.rectangle(edge, outline=(230, 120, 0), width=3)
    path = Path(run) / "table_crop.jpg"
    img.save(path, quality=88)
    return str(path)
