"""Superlatives over a table's rows: 'Which region had the highest revenue?' over 'Europe 21.4 / North America
15.9 / Asia Pacific 8.7' is the label of the row with the largest value, not whichever label sits nearest the
question's words.

A table reaches the reader as lines of a label and one number each. A run of three or more such lines is one
column; the lines just above and below it (its header, its caption) say what the numbers are, and a run is
read only when they name a word of the question besides the superlative. Tables with several number columns
are left to the sentence reader: which column the question means is not something a rule can tell.

The same columns answer a difference ('How many more tweets went to Germanwings than to Lufthansa?'): the
value of the row that names one side minus that of the row that names the other; and a sum ('the total of A, B
and C'): the rows that name each part, added. For these two, a table that OCR read beside a column of prose,
its rows ending the prose's lines ('... of its digital Germanwings 24'), is read as rows too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.reader.answer_types import difference_sides, sum_parts
from agent.reader.sentences import Passage
from agent.reader.words import ORDINALS, content_words, number_value, stem, terms

_MOST = r"highest|largest|biggest|most|greatest|maximum|max|top|best|strongest|longest|heaviest|oldest"
_LEAST = r"lowest|smallest|least|fewest|minimum|min|worst|weakest|shortest|lightest|youngest"
_ASKS = re.compile(r"\b(?:which|what|who|where)\b.*?\b(?P<word>" + _MOST + "|" + _LEAST + r")\b", re.I)
_ROW = re.compile(
    r"^\s*(?P<label>[A-Za-z][A-Za-z .,&'’()/-]{0,60}?)\s+(?P<value>(?P<num>[-−]?[$€£]?\d[\d,]*(?:\.\d+)?)\s*%?)\s*$"
)


@dataclass
class RowAnswer:
    label: str
    value: str  # the row's number as printed ('21.4', '44%')
    line: str  # the row as printed, the answer's support
    passage: int


_ORDINAL = {w: n for w, n in ORDINALS.items() if n > 1}  # 'the second highest'; 'the first highest' is just 'highest'


def rank_asked(question: str) -> int:
    """Which place the question asks for: 2 for 'the second highest', else 1.

    >>> rank_asked("Which region had the second highest revenue?"), rank_asked("Which is largest?")
    (2, 1)
    """
    m = re.search(r"\b(" + "|".join(_ORDINAL) + r")[\s-]+(?:" + _MOST + "|" + _LEAST + r")\b", question, re.I)
    return _ORDINAL[m.group(1).lower()] if m else 1


def asks_extreme_value(question: str) -> bool:
    """Whether the question asks for the extreme value itself ('What was the lowest revenue?'), not for something
    about the row that holds it ('What percentage of the second largest segment ...?').

    >>> asks_extreme_value("What was the lowest revenue among the regions?")
    True
    >>> asks_extreme_value("What percentage of the second largest segment said no?")
    False
    """
    pattern = (
        r"^\s*what\s+(?:is|was|are|were)\s+the\s+(?:(?:" + "|".join(_ORDINAL) + r")\s+)?(?:" + _MOST + "|" + _LEAST
    )
    return re.match(pattern + r")\b", question, re.I) is not None


def superlative(question: str) -> str:
    """'max' or 'min' when the question asks which row is highest or lowest, else ''.

    >>> superlative("Which region had the highest revenue?"), superlative("Which market is smallest?")
    ('max', 'min')
    >>> superlative("How many robots were shipped?")
    ''
    """
    m = _ASKS.search(question)
    if not m:
        return ""
    return "max" if re.fullmatch(_MOST, m.group("word").lower()) else "min"


def _runs(text: str) -> list[tuple[int, list[tuple[str, float, str, str]]]]:
    """(index of the first line, [(label, value, printed value, line)]) for each run of 3+ consecutive
    label-number lines."""
    lines = (text or "").split("\n")
    out, run, start = [], [], 0
    for i, ln in enumerate(lines + [""]):
        m = _ROW.match(ln)
        value = number_value(m.group("num").replace("−", "-")) if m else None
        if m and value is not None and re.search(r"[A-Za-z]{2}", m.group("label")):
            if not run:
                start = i
            sign = -1.0 if m.group("num").lstrip("$€£").startswith(("-", "−")) else 1.0
            run.append((m.group("label").strip(" .,"), sign * value, m.group("value").strip(), ln.strip()))
            continue
        if len(run) >= 3:
            out.append((start, run))
        run = []
    return out


# a row at the end of a line that OCR joined with a neighbouring column's prose: '... of its digital Germanwings 24'
_TAIL = re.compile(
    r"(?:^|\s)(?P<label>[A-Z][\w&'’.-]*(?:\s[A-Z][\w&'’.-]*){0,3})\s+(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<pct>%?)\s*$"
)


def _tail_runs(text: str) -> list[tuple[int, list[tuple[str, float, str, str]]]]:
    """Like `_runs`, for a table printed beside prose: 3+ lines, at most one line apart, that each end in a
    capitalised label and its number ('... digital Germanwings 24' / '... and Lufthansa 12' / '... Airbus 5')."""
    out, run, start, last = [], [], 0, -9
    for i, ln in enumerate((text or "").split("\n")):
        m = _TAIL.search(ln)
        value = number_value(m.group("num")) if m else None
        if value is None:
            continue
        if i - last > 2:
            if len(run) >= 3:
                out.append((start, run))
            run, start = [], i
        run.append((m.group("label"), value, m.group("num") + m.group("pct"), f"{m.group('label')} {m.group('num')}"))
        last = i
    if len(run) >= 3:
        out.append((start, run))
    return out


def read_rows(question: str, passages: list[Passage]) -> RowAnswer | None:
    """The highest (or lowest) row of the one column whose header or caption names a word of the question
    (its label answers 'which', its value 'what is the highest'), or None when no column qualifies."""
    side = superlative(question)
    if not side:
        return None
    # what is measured: the question's words past the superlative and the noun it asks for ('Which region
    # had the highest revenue?' measures revenue); the column's header or caption must name one of them
    entity = re.search(r"\b(?:which|what)\s+(\w+)", question, re.I)
    skip = {stem(w) for w in re.findall(_MOST + "|" + _LEAST, question, re.I)} | {
        stem(entity.group(1)) if entity else ""
    }
    asked = {stem(w) for w in content_words(question)} - skip
    k = rank_asked(question)
    best: tuple[int, RowAnswer] | None = None
    for pi, p in enumerate(passages):
        lines = (p.text or "").split("\n")
        for start, run in _runs(p.text):
            around = " ".join(lines[max(0, start - 2) : start] + lines[start + len(run) : start + len(run) + 1])
            named = len(asked & set(terms(around)))
            if not named or len({lab.lower() for lab, *_ in run}) < len(run):
                continue  # nothing says what the numbers are; or 'Pier 45', 'Pier 39': names, not labelled values
            if k > len(run):
                continue
            pick = sorted(run, key=lambda r: r[1], reverse=side == "max")[k - 1]
            if best is None or named > best[0]:
                best = (named, RowAnswer(pick[0], pick[2], pick[3], pi))
    return best[1] if best else None


def difference(question: str, passages: list[Passage]) -> RowAnswer | None:
    """The difference of the two rows of one column that the question's two sides name ('Germanwings 24' and
    'Lufthansa 12' -> '12'), or None when no column holds both."""
    sides = difference_sides(question)
    if sides is None:
        return None
    first, second, sign = sides
    found = _rows_named([first, second], passages)
    if found is None:
        return None
    (la, va, pa, line_a), (lb, vb, pb, line_b) = found[0]
    value = va - vb if sign > 0 else vb - va if sign < 0 else abs(va - vb)
    return RowAnswer(f"{la} - {lb}", _printed(value, [pa, pb]), f"{line_a}; {line_b}", found[1])


def total(question: str, passages: list[Passage]) -> RowAnswer | None:
    """The sum of the rows of one column that the question's parts name ('the sum of A and B'), or None when no
    column holds them all."""
    parts = sum_parts(question)
    found = _rows_named(parts, passages) if parts else None
    if found is None:
        return None
    rows, pi = found
    value = sum(r[1] for r in rows)
    return RowAnswer(
        " + ".join(r[0] for r in rows), _printed(value, [r[2] for r in rows]), "; ".join(r[3] for r in rows), pi
    )


def _rows_named(parts: list[str], passages: list[Passage]) -> tuple[list[tuple[str, float, str, str]], int] | None:
    """One row per part, all in one column, each row naming a word of its part that no other part has ('tweets
    to Germanwings' against 'Lufthansa'), and naming no other part's own words; the column that names the most."""
    words = [{stem(w) for w in content_words(x)} for x in parts]
    own = [w - set().union(*(o for j, o in enumerate(words) if j != i)) for i, w in enumerate(words)]
    if not all(own):
        return None
    best: tuple[int, list, int] | None = None
    for pi, p in enumerate(passages):
        for _, run in _runs(p.text) + _tail_runs(p.text):
            rows = [(set(terms(r[0])), r) for r in run]
            picked = []
            for i, mine in enumerate(own):
                others = set().union(*(o for j, o in enumerate(own) if j != i))
                label, row = max(rows, key=lambda x: len(x[0] & mine) - len(x[0] & others))
                if not label & mine or label & others:
                    break
                picked.append((len(label & mine), row))
            if len(picked) < len(own) or len({id(r) for _, r in picked}) < len(picked):
                continue
            named = sum(n for n, _ in picked)
            if best is None or named > best[0]:
                best = (named, [r for _, r in picked], pi)
    return (best[1], best[2]) if best else None


def _printed(value: float, printed: list[str]) -> str:
    """`value` with the decimals, thousands commas and percent sign of the numbers it was computed from.

    >>> _printed(12.0, ["24", "12"]), _printed(16.7, ["52.4%", "35.7%"]), _printed(1194000.0, ["1,204,000", "10,000"])
    ('12', '16.7%', '1,194,000')
    """
    decimals = max(len(p.rstrip("%").split(".")[1]) if "." in p else 0 for p in printed)
    text = f"{value:,.{decimals}f}" if any("," in p for p in printed) else f"{value:.{decimals}f}"
    return text + "%" if all(p.endswith("%") for p in printed) else text
