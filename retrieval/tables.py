"""Tables: cells in rows and columns, built from where words sit on a page, or from label-number lines of text.

A PDF's text layer loses a table's columns: pdfium reads a row as one line of a label and numbers. Its character
boxes keep them. So a table is built from word boxes, the way a reader sees one:

    words   ->  lines (words that overlap vertically; retrieval/reading_order.py)
            ->  cells (a line's words, cut where the gap is wider than the line's height)
            ->  a table: a run of lines with two or more cells, two or more of them holding numbers
            ->  value columns: the x-ranges the numbers' cells cover, merged across rows; the row label is what
                lies left of the first; header words above the first row go to the column under them
            ->  its title (a 'Table N' line near it, else the line above), unit and scale ('in millions').

Why not a library's table finder: pdfplumber's finder follows ruling lines, and on an annual report's
cash-flow page it found 21 one-row tables, one per rule; its text strategy cut labels mid-word (issue 55's
probe). Financial statements and papers print tables without rules, and their word boxes are clean.

Text without geometry (notes, OCR'd text) gets the single-column tables its lines show: three or more lines of
a label and one number, with the lines above as header and title (`text_tables`).

Tables of a PDF page are built on demand and cached (`page_tables`); `eval.bench_tables` measures the cost.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from statistics import median
from typing import Any

from retrieval.ocr_engine import OcrBox
from retrieval.reading_order import reading_order

# a printed number: '1,204', '(3.5)', '-12', '66.4%', '$2,045', '0.833', '—' is not one
NUMBER = re.compile(r"^[(\[]?[-−–+]?[$€£₹]?\s?\d[\d,]*(?:\.\d+)?\s?%?[)\]]?\*?$")
_SCALE = re.compile(
    r"\b(?:in|rs\.?|inr|usd|us\$|\$|€|£)\s*(?:in\s+)?(?P<scale>thousands?|millions?|billions?|lakhs?|lacs?|crores?)\b"
    r"|\((?P<paren>thousands?|millions?|billions?|lakhs?|lacs?|crores?)\)|\b(?P<k>000s|'000)\b"
    r"|\b(?P<before>thousands?|millions?|billions?)\s+(?:usd|eur|gbp|dollars|euros|rupees)\b",
    re.I,
)
_CURRENCY = re.compile(r"(?P<cur>\$|€|£|₹|\brs\.?|\brupees\b|\binr\b|\busd\b|\beur\b|\bdollars\b)", re.I)
_CLOCK = re.compile(r"^(?:(\d{1,2}):)?(\d{1,2}):(\d{2})$")  # '00:04:14', '3:05'
_CAPTION = re.compile(r"^\s*(?:table|tab\.|exhibit)\s*[\dIVXivx]+[.:]?", re.I)
_VARIANT = re.compile(r"^(?:\+|w/o?\b|with(?:out)?\b)\s*\S", re.I)  # a row that varies the one above it
GAP = 1.0  # a gap this many line heights wide ends a cell (a space is about 0.3)
LINE_GAP = 2.6  # a vertical gap this many line heights wide ends a table


@dataclass
class Table:
    """A table: `rows` of cells (the row label first), one `header` per column, and what names it.

    Boxes are in PDF points from the top-left corner of the page (empty for text tables).
    """

    rows: list[list[str]]
    header: list[str]
    title: str = ""
    unit: str = ""  # '%', '$', 'Rs.': what the values count, when the table says so once
    scale: str = ""  # 'million', 'thousand', 'lacs': what a printed value is multiplied by
    page: int = 0
    box: tuple[float, float, float, float] | None = None
    cell_boxes: list[list[tuple[float, float, float, float] | None]] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)  # the label-only line each row sits under ('' when none)
    source: str = ""

    @property
    def columns(self) -> int:
        return len(self.header)

    def value_columns(self) -> list[int]:
        """The columns that hold numbers in at least half of the rows (never the label column)."""
        out = []
        for c in range(1, self.columns):
            filled = [r[c] for r in self.rows if r[c]]
            if sum(number(x) is not None for x in filled) >= max(1, len(filled) / 2):
                out.append(c)
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Table":
        return cls(**{**d, "box": tuple(d["box"]) if d.get("box") else None})

    def markdown(self) -> str:
        """The table as markdown (title, unit and scale above), for a prompt or a trace."""
        cells = lambda r: "| " + " | ".join(c.replace("|", "/") for c in r) + " |"  # noqa: E731
        head = [self.title] if self.title else []
        lines = [cells(self.header), "|" + "---|" * self.columns] + [cells(r) for r in self.rows]
        return "\n".join(head + lines)


def number(cell: str) -> float | None:
    """The value a cell prints: '(3.5)' and '−3.5' are negative, '66.4% (0.8%)' is 66.4; None for a label.

    >>> number("(1,204.5)"), number("66.4% (0.8%)"), number("$2,045"), number("00:04:14"), number("Europe")
    (-1204.5, 66.4, 2045.0, 254.0, None)
    """
    first = cell.strip().split(" (")[0].strip() if not cell.strip().startswith("(") else cell.strip()
    clock = _CLOCK.match(first)
    if clock:  # a duration as a clock prints it: its seconds
        h, m, sec = (int(x or 0) for x in clock.groups())
        return float(h * 3600 + m * 60 + sec)
    if not NUMBER.match(first):
        return None
    digits = re.sub(r"[^\d.]", "", first)
    try:
        value = float(digits)
    except ValueError:
        return None
    return -value if first.startswith("(") or first.lstrip("[")[:1] in "-−–" else value


def is_number(cell: str) -> bool:
    return number(cell) is not None


# -- from word boxes ---------------------------------------------------------------------------------------------


def pdf_words(path: str, page: int) -> tuple[list[OcrBox], float]:
    """The words of a PDF page with their boxes (in quarter points, top-left origin), and the page's width in
    points. A word is a run of characters pdfium prints without a space."""
    import pypdfium2 as pdfium

    from retrieval.loaders import PDFIUM_LOCK

    with PDFIUM_LOCK:
        doc = pdfium.PdfDocument(str(path))
        try:
            pg = doc[page - 1]
            width, height = pg.get_size()
            tp = pg.get_textpage()
            text = tp.get_text_range()
            boxes = [tp.get_charbox(i, loose=True) for i in range(tp.count_chars())]
            tp.close()
            pg.close()
        finally:
            doc.close()
    words, cur, box = [], "", None
    for ch, (left, bottom, right, top) in zip(text, boxes):
        b = (left * 4, (height - top) * 4, right * 4, (height - bottom) * 4)
        if ch.isspace() or ch == "\ufffe" or (box is not None and b[0] - box[2] > 0.5 * (b[3] - b[1])):
            if cur.strip():
                words.append(OcrBox(tuple(int(v) for v in box), cur, 1.0))
            cur, box = "", None
            if ch.isspace() or ch == "\ufffe":
                continue
        cur += ch
        box = b if box is None else (min(box[0], b[0]), min(box[1], b[1]), max(box[2], b[2]), max(box[3], b[3]))
    if cur.strip():
        words.append(OcrBox(tuple(int(v) for v in box), cur, 1.0))
    return words, width


@lru_cache(maxsize=256)
def page_tables(path: str, page: int) -> tuple[Table, ...]:
    """The tables of a PDF page (cached per page); () when the page has no text layer or no table, or the file
    cannot be read (the reader then reads the page's text as it would without tables)."""
    try:
        words, _ = pdf_words(path, page)
    except Exception:  # noqa: BLE001 - a damaged page has no tables; ingest reports the file itself
        return ()
    return tuple(scaled(t, 0.25, page, str(path)) for t in tables_from_words(words))


def scaled(t: Table, factor: float, page: int = 0, source: str = "") -> Table:
    """`t` with its boxes multiplied by `factor` (quarter points or OCR pixels to points), on `page` of `source`."""
    t.page, t.source = page or t.page, source or t.source
    t.box = tuple(round(v * factor, 2) for v in t.box) if t.box else None
    t.cell_boxes = [[tuple(round(v * factor, 2) for v in b) if b else None for b in row] for row in t.cell_boxes]
    return t


def _cells(line: list[OcrBox], h: float) -> list[list[OcrBox]]:
    cells: list[list[OcrBox]] = []
    for b in line:
        if cells and b.box[0] - cells[-1][-1].box[2] <= GAP * h:
            cells[-1].append(b)
        else:
            cells.append([b])
    return cells


def _text(words: list[OcrBox]) -> str:
    return " ".join(w.text for w in words).strip()


def tables_from_words(words: list[OcrBox]) -> list[Table]:
    """Every table among `words` (one page's, any units): see the module's docstring for how."""
    lines = reading_order(words, columns=False)
    if not lines:
        return []
    h = max(1.0, median(b.height for b in words))
    split = [_cells(line, h) for line in lines]
    out, i = [], 0
    while i < len(lines):
        if not _data_row(split[i]):
            i += 1
            continue
        j = i + 1  # the run of rows: data rows, and up to three lines between two of them (a section's name, cells
        while j < len(lines) and _top(lines[j]) - _bottom(lines[j - 1]) <= LINE_GAP * h:  # wrapped onto a line)
            if not _data_row(split[j]):
                k = j
                while k < min(len(lines), j + 3) and not _data_row(split[k]):
                    k += 1
                gaps = [_top(lines[m]) - _bottom(lines[m - 1]) for m in range(j, min(k + 1, len(lines)))]
                close = all(g <= LINE_GAP * h for g in gaps)
                if k >= len(lines) or not _data_row(split[k]) or not close:
                    break
            j += 1
        table = _table(lines, split, i, j, h)
        if table is not None and plausible(table):
            out.append(_inherit(table, out, h))
        i = j
    return out


def plausible(t: Table) -> bool:
    """Whether rows read as a table's and not as prose beside a chart's ticks: two or more rows labelled with
    words, labels short (a median of at most seven words), and most of them not a sentence's continuation.

    >>> plausible(Table([["Europe", "21.4"], ["Asia", "8.7"]], ["", "Revenue"]))
    True
    >>> plausible(Table([["80", "76.1"], ["60", "51.3"]], ["", ""]))
    False
    """
    labels = [r[0] for r in t.rows if re.search(r"[A-Za-z]{2}|\b(?:19|20)\d\d\b", r[0])]  # '2000', '1999-00': years
    if len(labels) < 2:
        return False
    words = sorted(len(x.split()) for x in labels)
    lower = sum(x[:1].islower() and len(x.split()) >= 4 for x in labels)  # 'desktop' is a label, 'and the' prose
    return words[len(words) // 2] <= 7 and lower <= len(labels) / 2


def _centres(t: Table) -> list[float]:
    """Each value column's x-centre (over the rows that fill it)."""
    out = []
    for c in range(1, t.columns):
        xs = [(b[c][0] + b[c][2]) / 2 for b in t.cell_boxes if c < len(b) and b[c]]
        out.append(median(xs) if xs else -1e9)
    return out


def _inherit(table: Table, before: list[Table], h: float) -> Table:
    """A table without a header that continues one above it (the same columns, cut by a gap or a section line)
    takes that table's header, title, unit and scale."""
    if any(table.header[1:]):
        return table
    mine = _centres(table)
    for prev in reversed(before):
        theirs = _centres(prev)
        near = [min(range(len(theirs)), key=lambda k: abs(theirs[k] - x)) for x in mine]
        close = [abs(theirs[k] - x) <= 2 * h for k, x in zip(near, mine)]
        if any(prev.header[1:]) and sum(close) >= max(1, len(mine) / 2):
            table.header = [table.header[0] or prev.header[0]]
            table.header += [prev.header[1 + k] if ok else "" for k, ok in zip(near, close)]
            table.title = table.title or prev.title
            table.unit, table.scale = table.unit or prev.unit, table.scale or prev.scale
        break
    return table


def _top(line: list[OcrBox]) -> int:
    return min(b.box[1] for b in line)


def _bottom(line: list[OcrBox]) -> int:
    return max(b.box[3] for b in line)


_YEAR = re.compile(r"^(?:FY\s?)?(?:19|20)\d\d[*]?$")


def _data_row(cells: list[list[OcrBox]]) -> bool:
    """A line of two or more cells, a number among all but the first (the label); a line of years alone is a
    header ('2025  2024')."""
    texts = [_text(c) for c in cells]
    if len(texts) < 2 or not any(is_number(t) for t in texts[1:]):
        return False
    return not all(_YEAR.match(t) for t in texts)


def _spans(cells: list[list[OcrBox]], h: float) -> list[list[float]]:
    """The x-ranges of the value columns: the cells' ranges merged wherever they overlap."""
    spans: list[list[float]] = []
    for a, b in sorted((c[0].box[0], c[-1].box[2]) for c in cells):
        if spans and a <= spans[-1][1] + 0.2 * h:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    return spans


def _column(word: OcrBox, spans: list[list[float]]) -> int:
    """The value column a word sits over (1-based; 0 is the label column, left of the first)."""
    x = (word.box[0] + word.box[2]) / 2
    if x < spans[0][0] and word.box[2] <= spans[0][0] + 1:
        return 0

    def distance(k: int) -> float:
        return 0 if spans[k][0] <= x <= spans[k][1] else min(abs(x - spans[k][0]), abs(x - spans[k][1]))

    return 1 + min(range(len(spans)), key=distance)


def _table(lines, split, i: int, j: int, h: float) -> Table | None:
    body = [k for k in range(i, j) if _data_row(split[k])]
    if len(body) < 2:
        return None
    value_cells = [c for k in body for c in split[k][1:]]
    spans = _spans(value_cells, h)
    # the label is everything left of the first value column; a wide first cell that reaches into it is a label
    centres = [(c[0].box[0] + c[-1].box[2]) / 2 for c in value_cells]
    spans = [s for s in spans if sum(s[0] <= x <= s[1] for x in centres) >= 2] or spans
    ncol = len(spans) + 1
    rows, boxes, sections, section = [], [], [], ""
    for k in range(i, j):
        if not _data_row(split[k]):
            text = _text(lines[k])
            over = [_column(w, spans) for w in lines[k]]
            if rows and any(over):  # cells wrapped onto the next line: each word joins the cell above it
                for w, c in zip(lines[k], over):
                    rows[-1][c] = f"{rows[-1][c]} {w.text}".strip()
            elif rows and (text[:1].islower() or text[:1] in "&(/-"):
                rows[-1][0] = (rows[-1][0] + " " + text).strip()  # a wrapped label
            else:
                section = text
            continue
        cells: list[list[OcrBox]] = [[] for _ in range(ncol)]
        for w in lines[k]:
            cells[_column(w, spans)].append(w)
        row = [_text(c) for c in cells]
        base = next((r[0] for r in reversed(rows) if not _VARIANT.match(r[0])), "")
        if _VARIANT.match(row[0]) and base:  # '+ CoT' under 'PaLM-2L': the row is 'PaLM-2L + CoT'
            row[0] = f"{base} {row[0]}"
        rows.append(row)
        boxes.append([_union(c) for c in cells])
        sections.append(section)
    header = _header(lines, split, i, spans, h)
    above = [_text(lines[k]) for k in range(max(0, i - 6), i)]
    below = [_text(lines[k]) for k in range(j, min(len(lines), j + 3))]
    captions = [t for t in reversed(above) if _CAPTION.match(t)] + [t for t in below if _CAPTION.match(t)]
    title = captions[0] if captions else ""
    if not title:  # else the nearest line of one cell above the header: what the table is about
        single = [_text(lines[k]) for k in range(i - 1, max(-1, i - 5), -1) if len(split[k]) == 1]
        title = single[0] if single and len(single[0]) <= 120 else ""
    unit, scale = unit_and_scale(" ".join([title, *header, *above]), rows)
    top = min(_top(lines[k]) for k in range(i, j))
    box = (
        min(b.box[0] for k in range(i, j) for b in lines[k]),
        top,
        max(b.box[2] for k in range(i, j) for b in lines[k]),
        max(_bottom(lines[k]) for k in range(i, j)),
    )
    return Table(rows, header, title, unit, scale, box=box, cell_boxes=boxes, sections=sections)


def _header(lines, split, i: int, spans: list[list[float]], h: float) -> list[str]:
    """Column headers: the words of up to three lines above the first row, each under the column it sits over;
    stacked header lines are joined top to bottom ('Year ended' / '2003' -> 'Year ended 2003'). A header cell
    that reaches over a column no word of its own sits over names that column too ('For the year ended 2003'
    over a column of items and one of their totals)."""
    ncol = len(spans) + 1
    left = min(b.box[0] for k in range(i, min(i + 3, len(lines))) for b in lines[k])
    parts: list[list[str]] = [[] for _ in range(ncol)]
    reach: list[list[str]] = [[] for _ in range(ncol)]
    k, taken, skipped = i - 1, 0, False
    while k >= 0 and taken < 3 and _top(lines[k + 1]) - _bottom(lines[k]) <= LINE_GAP * h:
        line = lines[k]
        first = len(split[k][0])  # words in the line's first cell: a header's are few, a sentence's many
        prose = (line[0].box[0] < left - h and (len(split[k]) == 1 or first > 5)) or (
            len(split[k]) == 1 and line[0].box[0] <= left + h and line[-1].box[2] > spans[-1][1] + 2 * h
        )  # a line wider than the table
        if prose or _data_row(split[k]) or _CAPTION.match(_text(line)):
            break  # prose, a row or a caption: the header ends here
        in_order = len(split[k]) == ncol  # as many cells as columns: one header each, however they are aligned
        if not in_order and not any(_column(w, spans) for w in line):  # over the labels alone ('INCOME'): go on
            if skipped or taken:
                break
            k, skipped = k - 1, True
            continue
        cols: list[list[str]] = [[_text(cell)] for cell in split[k]] if in_order else [[] for _ in range(ncol)]
        for w in line if not in_order else []:
            cols[_column(w, spans)].append(w.text)
        for c in range(ncol):
            if cols[c]:
                parts[c].insert(0, " ".join(cols[c]))
        for cell in split[k]:
            for c in range(1, ncol):
                if cell[0].box[0] <= spans[c - 1][1] and cell[-1].box[2] >= spans[c - 1][0] and not cols[c]:
                    reach[c].insert(0, _text(cell))
        k, taken = k - 1, taken + 1
    return [" ".join(p) or " ".join(r) for p, r in zip(parts, reach)]


def _union(words: list[OcrBox]) -> tuple[float, float, float, float] | None:
    if not words:
        return None
    return (
        min(w.box[0] for w in words),
        min(w.box[1] for w in words),
        max(w.box[2] for w in words),
        max(w.box[3] for w in words),
    )


def unit_and_scale(text: str, rows: list[list[str]]) -> tuple[str, str]:
    """What the table's values count and their scale, from its title, header and the lines above.

    >>> unit_and_scale("(Rs. in lacs) 2003 2002", [["Dividend", "155.98"]])
    ('Rs.', 'lacs')
    >>> unit_and_scale("($ in millions, except per share data)", [])
    ('$', 'millions')
    """
    m = _SCALE.search(text)
    scale = ""
    if m:
        scale = m.group("scale") or m.group("paren") or m.group("before") or ("thousands" if m.group("k") else "")
        scale = scale.lower()
    cur = _CURRENCY.search(text)
    unit = cur.group("cur") if cur else ""
    if not unit and rows and all(r[c].endswith("%") for r in rows for c in range(1, len(r)) if r[c]):
        unit = "%"
    return unit, scale


# -- from text lines ---------------------------------------------------------------------------------------------

_ROW = re.compile(
    r"^\s*(?P<label>[A-Za-z][A-Za-z .,&'’()/-]{0,60}?)\s+(?P<value>[-−]?[$€£]?\d[\d,]*(?:\.\d+)?\s*%?)\s*$"
)
# a row at the end of a line that OCR joined with a neighbouring column's prose: '... of its digital Germanwings 24'
_TAIL = re.compile(
    r"(?:^|\s)(?P<label>[A-Z][\w&'’.-]*(?:\s[A-Z][\w&'’.-]*){0,3})\s+(?P<value>\d[\d,]*(?:\.\d+)?\s*%?)\s*$"
)


def text_tables(text: str, tails: bool = False) -> list[Table]:
    """The one-value-column tables of plain text: runs of three or more lines of a label and a number, with the
    two lines above and the line below as the column's header (what the numbers are). With `tails`, the rows
    end lines of prose ('... of its digital Germanwings 24'), at most one line apart: a table OCR read beside
    a column of text."""
    lines = (text or "").replace("\r", "").split("\n")
    found = []  # (line index, label, value)
    for i, ln in enumerate(lines):
        m = _TAIL.search(ln) if tails else _ROW.match(ln)
        if m and re.search(r"[A-Za-z]{2}", m.group("label")) and is_number(m.group("value").replace(" ", "")):
            found.append((i, m.group("label").strip(" .,"), m.group("value").replace(" ", "")))
    runs: list[list[tuple[int, str, str]]] = []
    for row in found:
        if runs and row[0] - runs[-1][-1][0] <= (2 if tails else 1):
            runs[-1].append(row)
        else:
            runs.append([row])
    out = []
    for run in (r for r in runs if len(r) >= 3):
        start, end = run[0][0], run[-1][0] + 1
        head = " ".join(x.strip() for x in lines[max(0, start - 2) : start] + lines[end : end + 1]).strip()
        rows = [[label, value] for _, label, value in run]
        unit, scale = unit_and_scale(head, rows)
        out.append(Table(rows, ["", head], title=head, unit=unit, scale=scale))
    return out
