"""Answers read from tables: a cell the question names by its row and column, or one step of arithmetic over
two cells (difference, ratio, percentage change) or several (a sum), or the row that holds a column's extreme.

    tables   ->  the tables of the evidence's pages (retrieval/tables.py: built from word boxes for PDF pages,
                 from label-number lines for other text)
    match    ->  a row matches the question by the share of its label's words the question uses, plus how many
                 it uses ('PaLM-2L + Step-Back (ours)' beats 'PaLM-2L' for a question naming both); a column
                 by its header the same way. Two cells of an arithmetic question share a row or a column (or
                 a row label across two tables), each side of the question naming the label that differs.
    answer   ->  the value as printed, with the table's scale ('2,045 million'); the cells it used, their
                 labels, and how well the row and the column matched (the confidence's row_match and
                 column_match).

The reader keeps to this path only when the row and column both match: a question naming neither is left
to the sentence reader, and a question naming one but not the other is not answered from a table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.reader.answer_types import NUMERIC, asks_change, sum_parts
from agent.reader.table_filter import asks_filter, filter_rows, filter_support
from agent.reader.table_question import (
    LEAST,
    MOST,
    PCT_CHANGE,
    RATIO,
    TIMES,
    asked_terms,
    asks_extreme_value,
    asks_row,
    match,
    rank_asked,
    sides,
    superlative,
    terms,
)
from agent.reader.words import stem
from retrieval.tables import Table, number, page_tables, plausible, text_tables

_SKIP = {
    stem(w)
    for w in "table value number amount figure row column percentage percent much many dataset data result type".split()
}
TABLE_PATH = "table"  # Reading.path of every answer read here (confidence.py counts it as structured)


@dataclass
class TableAnswer:
    """An answer read from `tables` (one, or two for a difference across two tables), with the cells it used
    (table, row, column) and how well the question named their rows and columns."""

    value: str
    tables: list[Table]
    cells: list[tuple[int, int, int]]
    passage: int
    op: str  # cell, difference, ratio, change, sum, extreme, filter (the rows a condition keeps), count
    row_match: float  # share of the matched rows' label words the question uses (the least over the cells)
    column_match: float  # the same for the columns' headers (1 for a one-column table its header names)
    support: str = ""  # 'PaLM-2L + RAG / TimeQA: 57.4%; PaLM-2L / TimeQA: 41.5%'

    def to_dict(self) -> dict[str, Any]:
        """The first table and its cells at the top (what most answers use), every table used under "tables"."""
        used = [
            {"table": t.to_dict(), "cells": [[r, c] for k, r, c in self.cells if k == i]}
            for i, t in enumerate(self.tables)
        ]
        return {
            **used[0],
            "tables": used,
            "op": self.op,
            "row_match": round(self.row_match, 3),
            "column_match": round(self.column_match, 3),
        }


def passage_tables(p: Any, tails: bool = False) -> list[Table]:
    """The tables of a passage: its PDF page's (word boxes), else those its text lines show."""
    found = [_headed(t) for t in (Table.from_dict(d) for d in getattr(p, "tables", None) or []) if plausible(t)]
    source = getattr(p, "source", "")
    if not found and source and p.page and str(source).lower().endswith(".pdf"):
        found = list(page_tables(str(source), p.page))
    # the text's label-number lines too: OCR boxes of a slide may split a row the text keeps whole
    return found + text_tables(p.text) + (text_tables(p.text, tails=True) if tails else [])


def _headed(t: Table) -> Table:
    """`t` with its first row as the header when it has none and that row is one: no label, and no value but
    years and words ('', '2012', ..., '2016', 'CAGR'), as OCR reads a slide's table whose header sits close above.

    >>> t = _headed(Table([["", "2012", "CAGR"], ["TV", "130", "14.7%"], ["Print", "154", "11.5%"]], ["", "", ""]))
    >>> t.header, t.rows[0]
    (['', '2012', 'CAGR'], ['TV', '130', '14.7%'])
    """
    if any(t.header) or len(t.rows) < 3 or t.rows[0][0].strip() or not any(c.strip() for c in t.rows[0][1:]):
        return t
    if any(number(c) is not None and not _YEAR_CELL.match(_first(c)) for c in t.rows[0][1:] if c.strip()):
        return t
    t.header, t.rows = list(t.rows[0]), t.rows[1:]
    t.sections = t.sections[1:] if t.sections else t.sections
    t.cell_boxes = t.cell_boxes[1:] if t.cell_boxes else t.cell_boxes
    return t


@dataclass
class _Cell:
    t: int  # index into the tables
    r: int
    c: int
    value: float


def _cells(tables: list[Table], kind: str = "") -> list[_Cell]:
    """The numeric cells of the value columns, of the form the question asks: a percentage is a cell printed with
    '%' (or in a column or table of percentages), and no answer but a year's is a year ('1971' for 'what share')."""
    out = []
    for ti, t in enumerate(tables):
        for c in t.value_columns():
            shown_pct = t.unit == "%" or "%" in t.header[c] or "percent" in t.header[c].lower()
            for r, row in enumerate(t.rows):
                v = number(row[c]) if c < len(row) else None
                if v is None:
                    continue
                first = _first(row[c])
                if kind == "percent" and not (first.endswith("%") or shown_pct):
                    continue
                if kind not in ("year", "") and _YEAR_CELL.match(first):
                    continue
                out.append(_Cell(ti, r, c, v))
    return out


def _of_kind(value: str, kind: str, used: list[Table], columns: list[int]) -> bool:
    """Whether an answer has the form asked: a percentage shows '%' (or comes from a column of them), and only a
    year's answer is a year."""
    if kind != "year" and _YEAR_CELL.match(value):
        return False
    if kind == "percent" and not value.endswith("%"):
        return any(t.unit == "%" or "%" in t.header[c] for t, c in zip(used, columns))
    return True


_YEAR_CELL = re.compile(r"^(?:19|20)\d\d$")


def _header(t: Table, c: int) -> str:
    """What a column is: its header, or for a table of one value column without one, its title."""
    return t.header[c] or (t.title if len(t.value_columns()) == 1 else "")


def read_table(question: str, kind: str, passages: list[Any]) -> TableAnswer | None:
    """The answer a table on the evidence gives, or None (see the module's docstring)."""
    apart = kind in NUMERIC and asks_change(question)
    parts = sum_parts(question) if kind in NUMERIC and not apart else []
    side = superlative(question)
    rows_asked = kind not in ("yes_no", "choice") and asks_filter(question, kind)
    if not rows_asked and (kind in ("yes_no", "list", "choice") or kind not in NUMERIC and (apart or parts)):
        return None
    tables, where = [], []
    for pi, p in enumerate(passages[:6]):
        for t in passage_tables(p, tails=apart or bool(parts)):
            tables.append(t)
            where.append(pi)
    if not tables:
        return None
    tables, where = _named(question, tables, where)
    got = filter_rows(question, kind, tables) if rows_asked else None
    if got is not None:
        value, cells, op, rm, cm = got
        used = list(dict.fromkeys(ti for ti, _, _ in cells))
        mine = [(used.index(ti), r, c) for ti, r, c in cells]
        support = filter_support(tables, cells)
        return TableAnswer(value, [tables[ti] for ti in used], mine, where[cells[0][0]], op, rm, cm, support)
    if kind in ("list", "choice") or kind not in NUMERIC and (apart or parts):
        return None
    if side:
        got = _extreme(question, kind, side, tables)
    elif PCT_CHANGE.search(question) or RATIO.search(question) or TIMES.search(question):
        got = _two(question, tables, "change" if PCT_CHANGE.search(question) else "ratio")
    elif apart:
        got = _two(question, tables, "difference")
    elif parts:
        got = _sum(question, parts, tables)
    else:
        got = _lookup(question, tables, 0.5 if kind in NUMERIC else 0.75, kind)
    if got is None:
        return None
    value, cells, op, rm, cm = got
    if not _of_kind(value, kind, [tables[ti] for ti, _, _ in cells], [c for _, _, c in cells]):
        return None
    support = "; ".join(_cite(tables[ti], r, c) for ti, r, c in cells)
    used = list(dict.fromkeys(ti for ti, _, _ in cells))
    mine = [(used.index(ti), r, c) for ti, r, c in cells]
    return TableAnswer(value, [tables[ti] for ti in used], mine, where[cells[0][0]], op, rm, cm, support)


def _named(question: str, tables: list[Table], where: list[int]) -> tuple[list[Table], list[int]]:
    """The tables whose titles the question names, when it names two or more words of some titles that others
    lack ('Erstwhile ITC Hotels Limited' against 'ITC Limited'); else all of them."""
    q = terms(question)
    titles = [terms(t.title) for t in tables]
    common = set.intersection(*titles) if titles else set()
    hits = [len(q & (ti - common)) for ti in titles]
    if max(hits, default=0) < 2:
        return tables, where
    keep = [i for i, h in enumerate(hits) if h == max(hits)]
    return [tables[i] for i in keep], [where[i] for i in keep]


def table_row(sentence: str, p: Any) -> str:
    """The table on passage `p` that `sentence` was read from (its rows, header or labels run together as one
    line of text), named by its title or first row; '' when the sentence is prose: it is when fewer than 70% of
    its words are the table's.

    >>> from agent.reader.sentences import Passage
    >>> rows = [["Net sales", "2,045", "1,870"], ["Net income", "318", "240"]]
    >>> p = Passage("x", tables=[Table(rows, ["", "2025", "2024"], "Income", box=(0, 0, 1, 1)).to_dict()])
    >>> table_row("2025 2024 Net sales 2,045 1,870 Net income", p)
    'Income'
    >>> table_row("Net sales grew to 2,045 million in 2025, a record.", p)
    ''
    """
    said = set(re.findall(r"\S+", sentence))
    if not said:
        return ""
    for t in passage_tables(p):
        if t.box is None:
            continue  # label-number lines of text: the sentence reader reads those as they are printed
        words = {w for text in [*t.header, *(c for row in t.rows for c in row)] for w in re.findall(r"\S+", text)}
        if len(said & words) >= 0.7 * len(said):
            return t.title or " ".join(c for c in t.rows[0] if c)
    return ""


def _cite(t: Table, r: int, c: int) -> str:
    """A cell as the answer's support: 'row / column: value', or the printed line of a table read from text."""
    if t.box is None:
        return f"{t.rows[r][0]} {t.rows[r][c]}"
    return " / ".join(x for x in (t.rows[r][0], _header(t, c)) if x) + f": {t.rows[r][c]}"


def _best_cell(
    q: set[str], tables: list[Table], cells: list[_Cell], raw: set[str] = frozenset()
) -> tuple[float, _Cell, float, float] | None:
    """The cell whose row and column the question names best: (score, cell, row coverage, column coverage); None
    when two cells of different values are named equally well (which one is meant is a guess). `raw`: the
    question's words as written (`asked_terms`), which name a row in capitals only when the table's title does not
    use them ('digital' in 'DIGITAL AD SPEND' names the table, not its row 'DIGITAL')."""
    best, tied = None, False
    by_table = [q - (raw & set(re.findall(r"[a-z0-9]+", t.title.lower()))) for t in tables]
    for cell in cells:
        t = tables[cell.t]
        rs, rc = match(by_table[cell.t], t.rows[cell.r][0] + " " + (t.sections[cell.r] if t.sections else ""))
        cs, cc = match(q, _header(t, cell.c))
        if not rs or not cs:
            continue
        if best is not None and rs + cs == best[0] and cell.value != best[1].value:
            tied = True
        if best is None or rs + cs > best[0]:
            best, tied = (rs + cs, cell, rc, cc), False
    return None if tied else best


def _lookup(question: str, tables: list[Table], least: float, kind: str = ""):
    """The cell whose row and column the question names, both covering at least `least` of their label (a
    question that is not asking for a number must name the cell's row and column more fully), the row more than
    `least` of its label: 'Operating income' is not named by 'income' alone."""
    q = asked_terms(question) - _SKIP
    found = _best_cell(q, tables, _cells(tables, kind if kind in NUMERIC else ""), q - terms(question))
    if found is None or found[2] <= least or found[3] < least:
        return None
    _, cell, rc, cc = found
    t = tables[cell.t]
    return _printed_scaled(t.rows[cell.r][cell.c], t, question), [(cell.t, cell.r, cell.c)], "cell", rc, cc


def _two(question: str, tables: list[Table], op: str):
    """Two cells sharing a row or a column, one per side of the question; their difference, ratio or change."""
    found = sides(question)
    if found is None:
        return None
    first, second, sign = found  # a change is from the second to the first
    qa, qb = asked_terms(first) - _SKIP, asked_terms(second) - _SKIP
    q = asked_terms(question) - _SKIP
    own_a, own_b = qa - qb, qb - qa
    if not own_a and not own_b:
        return None
    cells = _cells(tables)
    best, tied = None, False  # two pairs named equally well, of other values: which is meant is a guess
    for a in cells:
        ta = tables[a.t]
        for b in cells:
            tb = tables[b.t]
            if a is b:
                continue
            same_row = a.t == b.t and a.r == b.r or a.t != b.t and ta.rows[a.r][0] == tb.rows[b.r][0]
            same_col = a.t == b.t and a.c == b.c or a.t != b.t and _header(ta, a.c) == _header(tb, b.c)
            if same_row == same_col:
                continue
            shared, la, lb = (
                (ta.rows[a.r][0], _header(ta, a.c), _header(tb, b.c))
                if same_row
                else (_header(ta, a.c), ta.rows[a.r][0], tb.rows[b.r][0])
            )
            (sa, ca), (sb, cb) = match(qa, la), match(qb, lb)
            xa, xb = match(qa, lb)[0], match(qb, la)[0]  # each side must name its own label at least as well
            if not sa or not sb or sa < xa or sb < xb or sa == xa and sb == xb:
                continue
            if _conflict(own_a, own_b, shared, (ta, a), (tb, b), same_row):
                continue
            ss, cs = match(q, shared)
            if not ss and not (len(tables[a.t].value_columns()) == 1 and same_col):
                continue
            score = sa + sb + ss
            if best is not None and score == best[0] and {a.value, b.value} != {best[1].value, best[2].value}:
                tied = True
            if best is None or score > best[0]:
                best, tied = (score, a, b, min(ca, cb) if same_col else cs, cs if same_col else min(ca, cb)), False
    if best is None or tied:
        return None
    _, a, b, rm, cm = best
    va, vb = a.value, b.value
    pa, pb = tables[a.t].rows[a.r][a.c], tables[b.t].rows[b.r][b.c]
    if op == "difference":
        value = va - vb if sign > 0 else vb - va if sign < 0 else abs(va - vb)
        if value < 0:  # 'how much higher is A than B' with A below B: the cells are not the ones it means
            return None
        text = _printed_scaled(printed(value, [pa, pb]), tables[a.t], question)
    elif op == "ratio":
        if vb == 0:
            return None
        text = f"{va / vb:.2f}".rstrip("0").rstrip(".")
    else:
        if vb == 0:
            return None
        text = f"{(va - vb) / abs(vb) * 100:.2f}".rstrip("0").rstrip(".") + "%"
    return text, [(a.t, a.r, a.c), (b.t, b.r, b.c)], op, rm, cm


def _conflict(own_a: set[str], own_b: set[str], shared: str, a, b, same_row: bool) -> bool:
    """Whether one side names the shared label while the other names a different one of its kind ('net income
    in 2025 than operating income in 2024' shares no column: each side names its own year)."""
    for mine, theirs, (t, cell) in ((own_a, own_b, b), (own_b, own_a, a)):
        if not match(mine, shared)[0] or match(theirs, shared)[0]:
            continue
        others = (
            [_header(t, c) for c in t.value_columns() if c != cell.c]
            if not same_row
            else [row[0] for r, row in enumerate(t.rows) if r != cell.r]
        )
        if any(match(theirs, o)[0] for o in others):
            return True
    return False


def _sum(question: str, parts: list[str], tables: list[Table]):
    """One cell per part, all in one column (or one row): their sum."""
    words = [asked_terms(x) - _SKIP for x in parts]
    own = [w - set().union(*(o for j, o in enumerate(words) if j != i)) for i, w in enumerate(words)]
    if not all(own):
        return None
    q = asked_terms(question) - _SKIP
    best = None
    for ti, t in enumerate(tables):
        for c in t.value_columns():
            cs, cc = match(q, _header(t, c))
            if not cs and len(t.value_columns()) > 1:
                continue
            picked = []
            for mine in own:
                scored = [(match(mine, row[0])[0], r) for r, row in enumerate(t.rows) if number(row[c]) is not None]
                if not scored:
                    break
                s, r = max(scored)
                if not s:
                    break
                picked.append((s, r))
            if len(picked) < len(own) or len({r for _, r in picked}) < len(picked):
                continue
            score = sum(s for s, _ in picked) + cs
            if best is None or score > best[0]:
                rc = min(match(mine, t.rows[r][0])[1] for mine, (_, r) in zip(own, picked))
                best = (score, ti, c, [r for _, r in picked], rc, cc if cs else 1.0)
    if best is None:
        return None
    _, ti, c, rows, rc, cc = best
    t = tables[ti]
    value = sum(number(t.rows[r][c]) for r in rows)
    text = _printed_scaled(printed(value, [t.rows[r][c] for r in rows]), t, question)
    return text, [(ti, r, c) for r in rows], "sum", rc, cc


def _extreme(question: str, kind: str, side: str, tables: list[Table]):
    """The row holding the highest (lowest) value of the column the question names: its label answers
    'which', its value 'what is the highest'."""
    value_asked = kind in NUMERIC and asks_extreme_value(question)
    if not value_asked and not asks_row(question):  # 'Which type ... has the lowest percentage?' asks for a row
        return None
    entity = re.search(r"\b(?:which|what)\s+(\w+)", question, re.I)
    skip = {stem(w) for w in re.findall(MOST + "|" + LEAST, question, re.I)}
    skip |= {stem(entity.group(1)) if entity else ""}
    q = asked_terms(question) - skip - _SKIP
    k = rank_asked(question)
    best = None
    for ti, t in enumerate(tables):
        if len({row[0].lower() for row in t.rows}) < len(t.rows):
            continue  # 'Pier 45', 'Pier 39': names, not labelled values
        summary = _summary_column(t, q)
        for c in t.value_columns():
            cs, cc = match(q, _header(t, c))
            if not cs and c == summary:  # 'the best on CLADDER': the table of CLADDER, its overall column
                cs, cc = 0.5, 0.5
            rows = [(number(row[c]), r) for r, row in enumerate(t.rows) if number(row[c]) is not None]
            if not cs or k > len(rows) or len(rows) < 2:
                continue
            v, r = sorted(rows, reverse=side == "max")[k - 1]
            if best is None or cs > best[0]:
                best = (cs, ti, r, c, cc)
    if best is None:
        return None
    _, ti, r, c, cc = best
    t = tables[ti]
    answer = _printed_scaled(t.rows[r][c], t, question) if value_asked else t.rows[r][0]
    if not re.search(r"[A-Za-z0-9]", answer):
        return None
    return answer, [(ti, r, c)], "extreme", 1.0, cc


_SUMMARY = re.compile(r"\b(?:overall|average|avg\.?|mean|total|all)\b", re.I)


def _summary_column(t: Table, q: set[str]) -> int:
    """The column that sums the table up ('Overall Acc.', 'Average'), when the question names the table's subject
    (a word of its title) and no column; -1 when there is none, or the question names a column."""
    if not match(q, t.title)[0] or any(match(q, t.header[c])[0] for c in t.value_columns()):
        return -1
    return next((c for c in t.value_columns() if _SUMMARY.search(t.header[c])), -1)


_LAKH = re.compile(r"^(\D*)(\d{1,2}(?:,\d\d)+,\d{3})(\.\d+)?(\D*)$")  # '3,02,16,492.00': Indian digit grouping


def _first(cell: str) -> str:
    """The value a cell prints, without what follows it ('66.4% (0.8%)' -> '66.4%'), its digits grouped in
    thousands ('3,02,16,492.00' -> '30,216,492.00', as most readers and scorers read numbers).

    >>> _first("66.4% (0.8%)"), _first("3,02,16,492.00"), _first("(1,210)")
    ('66.4%', '30,216,492.00', '(1,210)')
    """
    cell = cell.strip()
    cell = cell if cell.startswith("(") else cell.split(" (")[0].strip()
    m = _LAKH.match(cell)
    if m:
        cell = f"{m[1]}{int(m[2].replace(',', '')):,}{m[3] or ''}{m[4]}"
    return cell


def _printed_scaled(cell: str, t: Table, question: str = "") -> str:
    """A value with the table's scale, as a reader would say it ('2,045' in millions -> '2,045 million'), unless
    the question already asks in that scale ('..., in million USD?')."""
    text = _first(cell)
    scale = t.scale.rstrip("s") if t.scale else ""
    if not scale or text.endswith("%") or stem(scale) in {stem(w) for w in re.findall(r"[a-z]+", question.lower())}:
        return text
    return f"{text} {scale}"


def printed(value: float, cells: list[str]) -> str:
    """`value` with the decimals, thousands commas and percent sign of the numbers it was computed from.

    >>> printed(12.0, ["24", "12"]), printed(16.7, ["52.4%", "35.7%"]), printed(1194000.0, ["1,204,000", "10,000"])
    ('12', '16.7%', '1,194,000')
    """
    shown = [_first(p).strip("()$€£₹ ") for p in cells]
    decimals = max(len(p.rstrip("%").split(".")[1]) if "." in p else 0 for p in shown)
    text = f"{value:,.{decimals}f}" if any("," in p for p in shown) else f"{value:.{decimals}f}"
    return text + "%" if all(p.endswith("%") for p in shown) else text
