"""Dates as a question wants them written: a written date read into (year, month, day), and the answer
rewritten in the format the question prescribes ('Format the date as YYYY-MM-DD'). The reader (extract.py)
applies it to the span it picked.
"""

from __future__ import annotations

import re

from agent.reader.spans import MONTHS
from agent.reader.words import MONTH_ABBR

_MONTH_NUM = {m: i for i, m in enumerate(MONTH_ABBR, 1)}


def iso_date(text: str) -> tuple[int, int | None, int | None] | None:
    """(year, month, day) of a written date, or None.

    >>> iso_date("March 15, 2026"), iso_date("15 March 2026"), iso_date("07/2009"), iso_date("2003-10-07")
    ((2026, 3, 15), (2026, 3, 15), (2009, 7, None), (2003, 10, 7))
    """
    t = text.strip()
    m = re.search(r"\b(\d{4})-(\d{1,2})(?:-(\d{1,2}))?\b", t)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None
    m = re.search(r"\b(\d{1,2})/(\d{1,2})/(\d{2,4})\b", t)  # US order, as US documents write it
    if m:
        y = int(m.group(3))
        return (y + 2000 if y < 50 else y + 1900 if y < 100 else y), int(m.group(1)), int(m.group(2))
    m = re.search(r"\b(\d{1,2})/(\d{4})\b", t)
    if m:
        return int(m.group(2)), int(m.group(1)), None
    mon = re.search(MONTHS, t)
    year = re.search(r"\b(1[6-9]|20)\d\d\b", t)
    if mon and year:
        day = re.search(r"\b(\d{1,2})(?:st|nd|rd|th)?\b(?!\d)", t.replace(year.group(), ""))
        return int(year.group()), _MONTH_NUM[mon.group()[:3].lower()], int(day.group(1)) if day else None
    return None


def reformat(question: str, answer: str, kind: str) -> str:
    """The answer in the form the question prescribes ('Format the date as YYYY-MM-DD')."""
    fmt = re.search(r"\b(YYYY-MM-DD|YYYY-MM|MM/DD/YYYY|DD/MM/YYYY)\b", question, re.I)
    if not fmt or kind not in ("date", "year", "text"):
        return answer
    d = iso_date(answer)
    if not d:
        return answer
    y, m, day = d
    f = fmt.group(1).upper()
    if f == "YYYY-MM" and m:
        return f"{y:04d}-{m:02d}"
    if f == "YYYY-MM-DD" and m and day:
        return f"{y:04d}-{m:02d}-{day:02d}"
    if f == "MM/DD/YYYY" and m and day:
        return f"{m:02d}/{day:02d}/{y:04d}"
    if f == "DD/MM/YYYY" and m and day:
        return f"{day:02d}/{m:02d}/{y:04d}"
    return answer
