"""What a table question asks, and how well a label names it: the words of a superlative ('the second highest'),
the two sides of a ratio, change or difference ('from 2024 to 2025'), whether 'which' asks for a row, and the
match of the question's terms to a row label or column header (agent/reader/table_reader.py reads the table).
"""

from __future__ import annotations

import re

from agent.reader.answer_types import difference_sides
from agent.reader.words import ORDINALS, search_terms, stem

MOST = r"highest|largest|biggest|most|greatest|maximum|max|top|best|strongest|longest|heaviest|oldest"
LEAST = r"lowest|smallest|least|fewest|minimum|min|worst|weakest|shortest|lightest|youngest"
_ASKS = re.compile(r"\b(?:which|what|who|where)\b.*?\b(?P<word>" + MOST + "|" + LEAST + r")\b", re.I)
_ORDINAL = {w: n for w, n in ORDINALS.items() if n > 1}  # 'the second highest'; 'the first highest' is 'highest'
RATIO = re.compile(r"\bratio of (?P<a>.+?) (?:to|and|over) (?P<b>.+?)\s*(?:\?|$)", re.I)
TIMES = re.compile(r"\bhow many times\b.*?\b(?:more|higher|larger|greater|as)\b", re.I)
PCT_CHANGE = re.compile(
    r"\b(?:percent(?:age)?|%)\s*(?:change|increase|decrease|growth|rise|fall|decline|drop)\b"
    r"|\bby (?:what|how many) (?:percent(?:age)?|%)",
    re.I,
)
_FROM_TO = re.compile(
    r"\bfrom (?P<a>.+?) to (?P<b>.+?)\s*(?:\?|$)|\bbetween (?P<a2>.+?) and (?P<b2>.+?)\s*(?:\?|$)", re.I
)
# words that say nothing about which row or column is meant


_YEARS = re.compile(r"\b((?:19|20)\d\d)\s*[-–/]\s*(\d{2}|(?:19|20)\d\d)\b")  # '1999-00', '2002/2003'


def terms(text: str) -> set[str]:
    """The search terms of `text`, a fiscal year's span read as its two years ('1999-00' -> 1999, 2000).

    >>> sorted(terms("Total dividend 1999-00")), sorted(terms("FEVEROUS scores"))
    (['1999', '2000', 'dividend', 'total'], ['feverous', 'score'])
    """
    caps = re.findall(r"\b[A-Z][A-Z0-9]{2,}\b", text)  # a name in capitals is matched whole: FEVER is not FEVEROUS
    words = set(search_terms(_YEARS.sub(" ", re.sub(r"\b[A-Z][A-Z0-9]{2,}\b", " ", text)))) | {w.lower() for w in caps}
    for a, b in _YEARS.findall(text):
        words |= {a, b if len(b) == 4 else str(int(a) // 100 * 100 + int(b) + (100 if int(b) < int(a) % 100 else 0))}
    return words


def asked_terms(text: str) -> set[str]:
    """A question's terms, and its lower-case words as written: a label in capitals ('TELEVISION') is matched
    whole (`terms`), so the question's 'television' must meet it unstemmed.

    >>> sorted(asked_terms("What is the CAGR of television?"))
    ['cagr', 'televis', 'television', 'what']
    """
    got = terms(text)
    return got | {w for w in re.findall(r"\b[a-z][a-z0-9]{2,}\b", text) if stem(w) in got}


def match(q: set[str], label: str) -> tuple[float, float]:
    """(score, coverage): score is the label words the question uses plus the share of the label they are."""
    words = terms(label)
    hit = len(q & words)
    return (hit + hit / len(words), hit / len(words)) if hit else (0.0, 0.0)


def sides(question: str) -> tuple[str, str, int] | None:
    m = RATIO.search(question) or _FROM_TO.search(question)
    if m and m.re is _FROM_TO:  # 'from A to B': B is the later value, a change is B - A; 'between': a gap
        return (m.group("b"), m.group("a"), 1) if m.group("a") else (m.group("a2"), m.group("b2"), 0)
    if m:
        return m.group("a"), m.group("b"), 1
    return difference_sides(question)


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
    return "max" if re.fullmatch(MOST, m.group("word").lower()) else "min"


def rank_asked(question: str) -> int:
    """Which place the question asks for: 2 for 'the second highest', else 1.

    >>> rank_asked("Which region had the second highest revenue?"), rank_asked("Which is largest?")
    (2, 1)
    """
    m = re.search(r"\b(" + "|".join(_ORDINAL) + r")[\s-]+(?:" + MOST + "|" + LEAST + r")\b", question, re.I)
    return _ORDINAL[m.group(1).lower()] if m else 1


def asks_extreme_value(question: str) -> bool:
    """Whether the question asks for the extreme value itself ('What was the lowest revenue?'), not for something
    about the row that holds it ('What percentage of the second largest segment ...?').

    >>> asks_extreme_value("What was the lowest revenue among the regions?")
    True
    >>> asks_extreme_value("What percentage of the second largest segment said no?")
    False
    """
    nth = "|".join(_ORDINAL)
    pattern = r"^\s*what\s+(?:is|was|are|were)\s+the\s+(?:(?:" + nth + r")\s+)?(?:" + MOST + "|" + LEAST
    return re.match(pattern + r")\b", question, re.I) is not None


_ROW_ASKED = re.compile(
    r"^(?:(?:in|according to|from|based on)\b[^,?]{0,80},\s*)?(?:which|who|what\s+\w+(?:\s+\w+)?\s+"
    r"(?:has|had|have|is|was|are|were|gets?|got|shows?|performs?|scores?|achieves?|achieved|reached|leads?|led))\b",
    re.I,
)


def asks_row(question: str) -> bool:
    """Whether the question asks which row holds the extreme ('Which model performs best ...?'), not for a value of
    a row a superlative describes ('What is the performance of X on the dataset with the highest recall?').

    >>> asks_row("Which region had the highest revenue?"), asks_row("In 2015, which channel led to the most sales?")
    (True, True)
    >>> asks_row("What is the performance of InstructGPT on the dataset with the highest recall?")
    False
    """
    return _ROW_ASKED.match(question.strip()) is not None
