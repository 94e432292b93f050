"""Rows a question picks out of a table by a condition, named or counted: 'Which executive directors attended
more than 6 Board meetings?', 'Who are the non-executive and independent directors?', 'How many directors
attended more than 6 meetings?'.

    subject    ->  the table's rows are what the question asks about: the label column's header or the title
                   shares a word with the question ('directors' / 'Director'), or it names a category below
    conditions ->  a number ('more than 6', 'at least 10', 'fewer than 3') on the value column whose header the
                   question names; and a category, a cell of a text column whose few distinct values repeat
                   down the rows, all of whose words the question uses (of two that fit, the one with more
                   words: 'non-executive and independent' is 'Non-Executive & Independent', not 'Executive')
    answer     ->  the labels of the rows that meet every condition ('A, B and C'), or how many there are

At least one condition must keep some rows and drop others; otherwise the table says nothing about the question.
"""

from __future__ import annotations

import re
from typing import Any

from agent.reader.table_question import asked_terms, match, terms
from retrieval.tables import Table, number

NUMBER_CONDITION = re.compile(
    r"\b(?P<op>more than|greater than|higher than|larger than|over|above|at least|no fewer than|fewer than|"
    r"less than|lower than|below|under|at most|no more than)\s+(?P<n>\d[\d,]*(?:\.\d+)?)\b",
    re.I,
)
_TEST = {
    "more than": float.__gt__,
    "greater than": float.__gt__,
    "higher than": float.__gt__,
    "larger than": float.__gt__,
    "over": float.__gt__,
    "above": float.__gt__,
    "at least": float.__ge__,
    "no fewer than": float.__ge__,
    "fewer than": float.__lt__,
    "less than": float.__lt__,
    "lower than": float.__lt__,
    "below": float.__lt__,
    "under": float.__lt__,
    "at most": float.__le__,
    "no more than": float.__le__,
}
_HOW_MANY = re.compile(r"^\s*how many\b", re.I)
_NAMES_ROWS = re.compile(r"^\s*(?:which|who|list|name|enumerate)\b", re.I)


def asks_filter(question: str, kind: str) -> bool:
    """Whether the question asks for rows by a condition, or counts them: a number condition, 'which/who/list ...'
    rows, or 'how many' asked as a number. 'What was the revenue of the consumer segment?' asks for a value.

    >>> asks_filter("Which directors attended more than 6 meetings?", "text"), asks_filter("What was income?", "money")
    (True, False)
    >>> asks_filter("How many directors attended at least 6 meetings?", "number")
    True
    """
    counting = _HOW_MANY.match(question) is not None
    if counting:
        return kind == "number"
    return NUMBER_CONDITION.search(question) is not None or _NAMES_ROWS.match(question) is not None


def _category(q: set[str], t: Table, c: int) -> tuple[str, int] | None:
    """The value of text column `c` the question names, with its word count; None when the column is not a
    category (its cells do not repeat) or the question names none of its values."""
    cells = [row[c].strip() for row in t.rows if c < len(row) and row[c].strip()]
    values = set(cells)
    if len(cells) < 3 or len(values) < 2 or len(values) > len(cells) / 2 or any(number(v) is not None for v in values):
        return None
    named = [(len(terms(v)), v) for v in values if terms(v) and terms(v) <= q]
    return (max(named)[1], max(named)[0]) if named else None


def filter_rows(question: str, kind: str, tables: list[Table]) -> tuple[str, list, str, float, float] | None:
    """(answer, cells used as (table, row, column), 'filter' or 'count', row match, column match), or None."""
    if not asks_filter(question, kind):
        return None
    q = asked_terms(question)
    cond = NUMBER_CONDITION.search(question)
    counting = _HOW_MANY.match(question) is not None
    best = None
    for ti, t in enumerate(tables):
        if len(t.rows) < 3:
            continue
        about = match(q, t.header[0] or t.title)[0] > 0  # the question names what the rows are
        keep = set(range(len(t.rows)))
        used: list[tuple[int, int, int]] = []
        score, col_cover, col_score = 0.0, 1.0, 0.0
        if cond:
            cols = [(match(q - terms(cond.group(0)), t.header[c]), c) for c in t.value_columns()]
            cols = [x for x in cols if x[0][0]]
            if not cols:
                continue
            (cs, cc), c = max(cols)
            limit, test = float(cond.group("n").replace(",", "")), _TEST[cond.group("op").lower()]
            met = {r for r, row in enumerate(t.rows) if number(row[c]) is not None and test(number(row[c]), limit)}
            keep &= met
            used += [(ti, r, c) for r in sorted(met)]
            score, col_cover, col_score = score + cs, cc, cs
        for c in range(1, t.columns):
            named = _category(q, t, c)
            if named:
                value, words = named
                keep &= {r for r, row in enumerate(t.rows) if row[c].strip() == value}
                used += [(ti, r, c) for r in range(len(t.rows)) if t.rows[r][c].strip() == value]
                score += words
        if not used or not keep or len(keep) == len(t.rows) or not (about or score > col_score):
            continue  # no condition, one that keeps every row or none, or rows the question does not name
        if best is None or score > best[0]:
            best = (score, ti, sorted(keep), [u for u in used if u[1] in keep], col_cover)
    if best is None:
        return None
    _, ti, rows, cells, col_cover = best
    labels = [tables[ti].rows[r][0].strip() for r in rows]
    if counting:
        return str(len(rows)), cells, "count", 1.0, col_cover
    if not all(labels):
        return None
    text = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    return text, cells, "filter", 1.0, col_cover


def filter_support(tables: list[Table], cells: list[Any]) -> str:
    """The rows used, as 'label: cell, cell' (what the reader cites)."""
    by_row: dict[tuple[int, int], list[str]] = {}
    for ti, r, c in cells:
        by_row.setdefault((ti, r), []).append(tables[ti].rows[r][c])
    return "; ".join(f"{tables[ti].rows[r][0]}: {', '.join(v)}" for (ti, r), v in by_row.items())
