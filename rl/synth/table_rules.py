"""Table questions: a cell looked up by its row and column, and one step of arithmetic over two cells, with the
answer computed from the cells (rl/synth/offline.py runs this on every page; the reader checks each draft).

A table is read as the embedded reader reads it (agent/reader/table_reader.passage_tables: a scanned page's OCR
tables, a PDF page's tables from its word boxes), so the grounded check re-reads the very cells the question
was written from. Two shapes of table are asked about:

    periods in the columns, figures in a currency or a scale (a statement: 'Net sales | 2025 | 2024', 'in
    millions'), whose row labels name what they measure
        table-cell        In "Northwind Annual Report", what were net sales in 2025 (in millions)?    2045
        table-difference  ..., by how much did net income increase from 2024 to 2025 (in millions)?   78
        table-change      ..., what was the percentage change in gross profit from 2024 to 2025?      16.0%
    a numbered table of things by measures (a paper's 'Table 2: Accuracy of ...', rows models, columns datasets)
        table-cell        In Table 2 of "TAKE A STEP BACK: ...", what is the value in the "TimeQA" column for
                          GPT-4?                                                                 45.6%
        table-difference  In Table 2 of "TAKE A STEP BACK: ...", how much higher is the "TimeQA" value for
                          PaLM-2L + TDB than for PaLM-2L + CoT 1-shot?                          2.8

Every question names the document by its own name (rl/synth/doc_names.py): a row label such as 'Net income' or
'GPT-4' recurs across documents. A table on a page whose document has no name is passed over.

Only what leaves nothing to guess is asked: a table whose columns all hold numbers and whose headers are not
prose; a row label that reads as a label (words, short, not a sentence's piece) and no other row shares its words;
a header of a few words that no other column shares; a cell that prints one plain number. A negative figure
('(1,210)') is not asked about: 'the change in cost of sales' would hide which sign the document means.

Left out on purpose: tables that are neither (a survey's 'Men | 17 | 24' under '2013 | 2014' needs the measure
its chart title states, '% who use Twitter', which the table does not hold: "What was Men in 2013?" asks
nothing), and ratios and sums (a difference and a percentage change are what people ask of a report's figures).
"""

from __future__ import annotations

import re
from typing import Any

from agent.reader.sentences import Passage
from agent.reader.table_reader import passage_tables
from agent.reader.table_reader import printed as printed_like
from agent.reader.words import search_terms
from retrieval.tables import Table, number
from rl.synth.statements import plural
from rl.synth.wording import EMPTY, Draft, Vocab, lower_first

_PLAIN = re.compile(r"^[$€£₹]?\d[\d,]*(?:\.\d+)?%?$")  # one plain, non-negative number
# a column of one period: '2025', 'FY2024', '2019-20', 'Q3 2015', 'For the year ended 31.3.2003'
_PERIOD = re.compile(
    r"^(?P<lead>(?:for )?(?:the )?(?:fiscal )?(?:year|quarter|half[- ]year|period|six months|nine months|three "
    r"months) (?:ended|ending) )?(?P<when>(?:FY\s?|Q[1-4]\s?)?(?:\d{1,2}[./-]\d{1,2}[./-])?(?:19|20)\d\d"
    r"(?:[-–/](?:\d\d|(?:19|20)\d\d))?(?:\s?Q[1-4])?|[A-Z][a-z]+ \d{1,2}, (?:19|20)\d\d)$",
    re.I,
)
_CAPTION = re.compile(r"^(?:Table|Tab\.)\s*(?P<n>\d{1,2})\s*[:.]", re.I)
_LABEL_END = re.compile(r"[.:;,]$|\.{3}|…|\b(?:the|a|an|of|to|and|or|in|on|for|with|by)$", re.I)


def table_drafts(unit: dict[str, Any], text: str, name: str, vocab: Vocab = EMPTY) -> list[Draft]:
    """Every table question one page supports; `name` is its document's own name ('' passes the page over)."""
    if not name or not unit.get("page"):
        return []
    p = Passage(text, page=int(unit["page"]), source=str(unit.get("source") or ""), tables=unit.get("tables") or [])
    out: list[Draft] = []
    for t in passage_tables(p):
        if not _tidy(t):
            continue
        rows, cols = _usable(t)
        if len(rows) < 2 or not cols:
            continue
        periods = [c for c in cols if _PERIOD.match(t.header[c].strip())]
        money = bool(t.scale) or t.unit not in ("", "%")  # a statement's figures: its rows name what they measure
        if money and len(periods) == len(cols) and len(periods) >= 2:
            out += _period_drafts(t, rows, periods, unit, name, vocab)
            continue
        cap = _CAPTION.match(t.title.strip())
        if cap:
            out += _numbered_drafts(t, rows, cols, cap["n"], unit, name)
    return out


def _tidy(t: Table) -> bool:
    """Whether the table reads as one table: every column but the labels holds numbers (a second text column
    means the row label may be a group's, 'III. Open source', and not the row's, 'Vicuna-7B'; the paragraph
    beside a table, read as its last column, is left aside), and no header is prose."""
    values = set(t.value_columns())
    for c in range(1, t.columns):
        cells = [r[c].strip() for r in t.rows if c < len(r) and r[c].strip()]
        if not cells:
            continue  # nothing under it: a paragraph beside the table, read as a header cell
        if c not in values and any(re.search(r"[A-Za-z]{2}", x) for x in cells):
            words = sorted(len(x.split()) for x in cells)
            if c == t.columns - 1 and words[len(words) // 2] >= 5:
                continue  # the paragraph beside the table, read as its last column
            return False
        if t.header[c].strip() and not _header_ok(t.header[c]):
            return False
    return bool(values)


def _usable(t: Table) -> tuple[list[int], list[int]]:
    """The rows and value columns a question can name: a row whose label is a label that no other row's words
    match (nor hold), a column whose header is a few words that no other column's words match (nor hold)."""
    cols = [c for c in t.value_columns() if _header_ok(t.header[c])]
    col_terms = [frozenset(search_terms(t.header[c])) for c in cols]
    cols = [c for c, k in zip(cols, col_terms) if k and col_terms.count(k) == 1 and not any(k < o for o in col_terms)]
    terms = [frozenset(search_terms(r[0])) for r in t.rows]
    rows = [i for i, r in enumerate(t.rows) if _label_ok(r[0]) and terms[i] and terms.count(terms[i]) == 1]
    # a label (header) whose words another holds ('PaLM-2L' in 'PaLM-2L + RAG') is named by the longer one too
    rows = [i for i in rows if not any(j != i and terms[i] < terms[j] for j in range(len(t.rows)))]
    return rows, cols


def _label_ok(label: str) -> bool:
    s = label.strip()
    if not 2 <= len(s) <= 60 or not re.match(r"^[A-Za-z]", s) or len(s.split()) > 8 or _LABEL_END.search(s):
        return False
    return sum(ch.isdigit() for ch in s) <= 4 and not re.search(r"\d\s+\d|[|•■]", s)


def _header_ok(header: str) -> bool:
    """A header of a few words that does not start mid-sentence ('are marked 4-hop')."""
    s = header.strip()
    if not 1 <= len(s) <= 40 or len(s.split()) > 5 or re.search(r"\.{3}|…|\d\s\d|[|•■\"]", s):
        return False
    if s.startswith("(") or s.count("(") != s.count(")"):
        return False  # '(gpt-3.5-turbo) Logic-LM': the pieces of a header on two lines
    return not re.match(r"[a-z]+\b", s) or re.match(r"(?:[a-z]+[-@]|[a-z]\b|[a-z]+\d)", s) is not None


def _name(label: str) -> str:
    """A row label as a question says it: without a trailing citation or '(ours)' ('RAPTOR + UnifiedQA (Wu et al.,
    2021)' -> 'RAPTOR + UnifiedQA')."""
    return re.sub(r"\s*\((?:ours|[^()]*\b(?:19|20)\d\d[a-z]?)\)\s*$", "", label.strip(), flags=re.I) or label.strip()


def _cell(t: Table, r: int, c: int) -> float | None:
    """The cell's value when it prints one plain non-negative number, else None."""
    text = t.rows[r][c].strip() if c < len(t.rows[r]) else ""
    return number(text) if _PLAIN.match(text) else None


def _plain(value: float, cells: list[str]) -> str:
    """A computed value as the cells print it, without thousands commas (eval reads '2045', not '2,045')."""
    return printed_like(value, cells).replace(",", "")


def _fmt(answer: str) -> str:
    return "Int" if re.fullmatch(r"-?\d+", answer) else "Float"


def _scale(t: Table) -> str:
    """' (in millions)', ' (in Rs. lakhs)' or '': what the question says of the values' scale."""
    if not t.scale:
        return ""
    unit = t.unit if t.unit and t.unit != "%" else ""
    return f" (in {unit + ' ' if unit else ''}{t.scale})"


def _percent(t: Table, cell: str) -> bool:
    return cell.strip().endswith("%") or t.unit == "%"


def _period(header: str) -> tuple[str, int]:
    """('in 2025', 2025) or ('for the year ended 31.3.2003', 2003): how a question says a period column, and the
    year it sorts by."""
    m = _PERIOD.match(header.strip())
    year = int(re.findall(r"(?:19|20)\d\d", header)[-1])
    if m["lead"]:
        lead = re.sub(r"^(?:for )?(?:the )?", "", m["lead"].lower())
        return f"for the {lead}{m['when']}", year
    return f"in {m['when']}", year


def _period_drafts(t: Table, rows: list[int], cols: list[int], unit: dict, name: str, vocab: Vocab) -> list[Draft]:
    """Cells of a table of periods, and the change of a row from an earlier period to a later one."""
    out: list[Draft] = []
    scale = _scale(t)
    where = f'In "{name}", '
    by_year = sorted(cols, key=lambda c: _period(t.header[c])[1])
    for r in rows:
        label = t.rows[r][0].strip()
        row = lower_first(label, vocab)
        be = "were" if plural(label) else "was"
        for c in cols:
            v = _cell(t, r, c)
            if v is None:
                continue
            cell = t.rows[r][c].strip()
            answer = _plain(v, [cell]) + ("%" if _percent(t, cell) and not cell.endswith("%") else "")
            q = f"what {be} {row} {_period(t.header[c])[0]}{scale}?"
            out.append(_draft(where, q, answer, "table-cell", t, [(r, c)], unit))
        for early, late in zip(by_year, by_year[1:]):
            a, b = _cell(t, r, late), _cell(t, r, early)
            if a is None or b is None or a == b or _period(t.header[early])[1] == _period(t.header[late])[1]:
                continue
            cells = [t.rows[r][late].strip(), t.rows[r][early].strip()]
            pct = _percent(t, cells[0])
            when = f"from {_period(t.header[early])[0][3:]} to {_period(t.header[late])[0][3:]}"
            if _period(t.header[early])[0].startswith("for "):
                when = f"from {t.header[early].strip().lower()} to {t.header[late].strip().lower()}"
            way = "increase" if a > b else "decrease"
            diff = _plain(abs(a - b), cells).rstrip("%")
            unit_words = " (in percentage points)" if pct else scale
            q = f"by how much did {row} {way} {when}{unit_words}?"
            out.append(_draft(where, q, diff, "table-difference", t, [(r, late), (r, early)], unit))
            if b > 0 and not pct:
                change = f"{(a - b) / b * 100:.1f}%"
                q = f"what was the percentage change in {row} {when}?"
                out.append(_draft(where, q, change, "table-change", t, [(r, late), (r, early)], unit))
    return out


def _numbered_drafts(t: Table, rows: list[int], cols: list[int], n: str, unit: dict, name: str) -> list[Draft]:
    """Cells of a numbered table, and how far apart two rows are in one column."""
    out: list[Draft] = []
    where = f'In Table {n} of "{name}", '
    scale = _scale(t)
    for c in cols:
        col = t.header[c].strip()
        filled = [(r, _cell(t, r, c)) for r in rows]
        filled = [(r, v) for r, v in filled if v is not None]
        for r, v in filled:
            cell = t.rows[r][c].strip()
            q = f'what is the value in the "{col}" column for {_name(t.rows[r][0])}{scale}?'
            out.append(_draft(where, q, _plain(v, [cell]), "table-cell", t, [(r, c)], unit))
        for (r1, v1), (r2, v2) in zip(filled, filled[1:]):  # neighbouring rows: a method and its variant
            if v1 == v2:
                continue
            (hi, vh), (lo, vl) = ((r1, v1), (r2, v2)) if v1 > v2 else ((r2, v2), (r1, v1))
            cells = [t.rows[hi][c].strip(), t.rows[lo][c].strip()]
            diff = _plain(vh - vl, cells).rstrip("%")
            a, b = _name(t.rows[hi][0]), _name(t.rows[lo][0])
            q = f'how much higher is the "{col}" value for {a} than for {b}{scale}?'
            out.append(_draft(where, q, diff, "table-difference", t, [(hi, c), (lo, c)], unit))
    return out


def _draft(where: str, q: str, answer: str, rule: str, t: Table, cells: list[tuple[int, int]], unit: dict) -> Draft:
    """A table draft: the question with its document named, and the question the reader re-reads the page with
    (the same words without the document's name, which names no row or column)."""
    reread = re.sub(r' of "[^"]*"', "", re.sub(r'^In "[^"]*", ', "", where + q))
    reread = reread[0].upper() + reread[1:]
    support = "; ".join(f"{t.rows[r][0]} / {t.header[c]}: {t.rows[r][c]}" for r, c in cells)
    title = f"{t.title} | " if t.title else ""
    printed = [t.rows[r][c].strip() for r, c in cells]
    fmt = _fmt(answer)
    return Draft(
        where + q, answer, "table", rule, f"{title}{support}", unit, answer_format=fmt, reread=reread, cells=printed
    )
