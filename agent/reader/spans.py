"""Candidate answer spans of the typed kinds: numbers (counts, percentages, money, durations, years, with the
side of a change they are on), dates, frequencies, colours, e-mails / phones / URLs, enumerations, and the pick of
an either-or question. Names, places and free-text phrases are agent/reader/name_spans.py's.

A `Span` is a piece of a candidate sentence with a type-specific bonus ("fell from X to Y": X is the before,
Y the after); agent/reader/ranking.py ranks them for the reader (agent/reader/extract.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.reader.answer_types import DURATION_UNITS, choices, counted_thing, wants_side
from agent.reader.sentences import Sentence
from agent.reader.words import COLORS, SCAFFOLD, WORD, content_words, number_value, squash, stem, terms

_SCALE = r"million|billion|thousand|trillion|bn|mn|m|k"
_CUR_WORDS = r"dollars|euros|pounds|yen|usd|eur|gbp|us\$"
_QTY = re.compile(
    r"(?P<range>between\s+)?(?:(?P<cur>(?:US)?[$€£¥])\s?)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<to>\s?(?:to|-|–|and)\s?[$€£]?\d+(?:\.\d+)?)?"
    r"(?:\s?(?P<scale>" + _SCALE + r")\b)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b|percentage points?\b))?"
    r"(?:\s(?P<cur2>" + _CUR_WORDS + r")\b)?"
    r"(?:\s(?P<unit>(?:[a-z]+\s){0,2}?(?:per\s[a-z]+|" + DURATION_UNITS + r")\b))?",
    re.I,
)
_CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}:\d{2}(?![\d:])")
MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)?\s+" + MONTHS + r"\.?,?\s+\d{4}\b"
    r"|\b" + MONTHS + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b"
    r"|\b(?:early|mid|late|end of|beginning of|the end of|spring|summer|autumn|fall|winter)\s+(?:of\s+)?\d{4}\b"
    r"|\b" + MONTHS + r"\.?\s+\d{4}\b"
    r"|\b(?:the\s+)?(?:first|second|third|fourth|last)\s+(?:quarter|half)\s+of\s+\d{4}\b"
    r"|\bQ[1-4](?:\s+\d{4})?\b|\bH[12]\s+\d{4}\b|\b(?:FY|fiscal year\s)\s?\d{2,4}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b(?:1[89]|20)\d\d\b"
)
_FREQ = re.compile(
    r"\b(?:every\s+(?:\d+\s+)?[a-z]+|hourly|daily|weekly|monthly|quarterly|annually|yearly|"
    r"(?:once|twice|\d+\s+times)\s+(?:a|an|per|every)\s+[a-z]+)\b",
    re.I,
)
CONTACT = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "phone": re.compile(r"\+?\(?\d[\d ().-]{6,}\d"),
    "url": re.compile(
        r"(?:https?://|www\.)[^\s,;)]+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|edu|gov|io|"
        r"example|eu|de|fi|uk)(?:/[^\s,;)]*)?",
        re.I,
    ),
}


@dataclass
class Span:
    """A candidate answer: a piece of a sentence, at [start, end) in its text."""

    text: str
    sent: Sentence
    start: int
    end: int
    bonus: float = 0.0  # type-specific preference (unit matches, side of a change, ...)


def q_hits(question: str, sent: str) -> list[tuple[int, int]]:
    q = {stem(w) for w in content_words(question)}
    return [(m.start(), m.end()) for m in WORD.finditer(sent) if stem(m.group()) in q]


def distance(span: Span, hits: list[tuple[int, int]]) -> int:
    return min((max(h0 - span.end, span.start - h1, 0) for h0, h1 in hits), default=len(span.sent.text))


def in_question(text: str, question: str) -> bool:
    q = {stem(w) for w in WORD.findall(question)} | {w.lower() for w in WORD.findall(question)}
    words = [w for w in WORD.findall(text) if w.lower() not in SCAFFOLD]
    return all(stem(w) in q or w.lower() in q for w in words)


def _side(sent: str, start: int) -> str:
    """Which side of a change the number at `start` is on: 'before' ('from X', 'X before', 'was X'),
    'after' ('to X', 'reached X', 'now X'), or ''."""
    before = sent[max(0, start - 24) : start].lower()
    after = sent[start : start + 40].lower()
    if re.search(
        r"\b(from|was|were|previously|down from|up from|compared with|versus|vs\.?)\s+(?:about\s+|"
        r"around\s+|roughly\s+)?[$€£]?$",
        before,
    ):
        return "before"
    if re.search(
        r"\b(to|reached|reaching|now|hit|at|became|is|are|of)\s+(?:about\s+|around\s+|roughly\s+)?"
        r"[$€£]?$",
        before,
    ):
        return "after"
    if re.search(r"^\S+(?:\s\S+)?\s+(before|previously|earlier)\b", after):
        return "before"
    if re.search(r"^\S+(?:\s\S+)?\s+(after|now|today)\b", after):
        return "after"
    return ""


def numeric_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    asked = {number_value(t) for t in re.findall(r"\d[\d,]*(?:\.\d+)?", question)}
    side = wants_side(question)
    q = question.lower()
    counted = {stem(w) for w in content_words(counted_thing(question))} if kind == "number" else set()
    out: list[Span] = []
    for s in sents:
        for m in _QTY.finditer(s.text):
            num = m.group("num")
            val = number_value(num)
            if val is None:
                continue
            text = m.group().strip()
            is_year = (
                re.fullmatch(r"(1[89]|20)\d\d", num) is not None
                and not m.group("pct")
                and not m.group("cur")
                and not m.group("scale")
            )
            pct = bool(m.group("pct"))
            money = bool(m.group("cur") or m.group("cur2") or m.group("scale"))
            unit = (m.group("unit") or "").strip()
            if re.match(r"[A-Za-z]", s.text[m.end() : m.end() + 1] or " ") or (
                m.start() and re.match(r"[A-Za-z@]", s.text[m.start() - 1])
            ):
                continue  # part of a code or a name: 'X2', 'B21', 'Q4', 'MCS@51'
            if (
                re.match(r"0\d", num)
                or re.match(r"/\d", s.text[m.end() : m.end() + 2])
                or re.search(r"\d/$", s.text[max(0, m.start() - 2) : m.start()])
            ):
                continue  # a code or a date's part, not a quantity: '(000)' thousands, '05' of '05/10/2015'
            if val in asked and not m.group("to"):
                continue
            if counted and names_not_counts(s.text, m.start(), m.end()):
                continue  # a count question; 'What is the page number ...?' asks for a number that names
            if counted and not counts(s.text, m.start(), m.end("to") if m.group("to") else m.end("num"), counted):
                continue
            bonus = 0.0
            if kind == "year":
                if not is_year:
                    continue
                text = num
            elif kind == "percent":
                if not pct:
                    continue
            elif kind == "money":
                if is_year or pct:
                    continue
                bonus += 0.05 if money else 0.0
            elif kind == "duration":
                if is_year or pct or not re.search(DURATION_UNITS, unit or "", re.I):
                    continue
                text = f"{num} {unit}" if not m.group("to") else text
            else:  # number: a count or measure
                if is_year and not re.search(r"\byear\b", q):
                    continue
                if pct and counted:
                    continue  # a share is not a count: 'How many claims ...?' is not '86% of the claims'
                if pct and not re.search(r"rate|share|percent|%", q):
                    bonus -= 0.2
                text = num if not (money or pct or m.group("to")) else text
                if unit and re.search(r"\bper\b", unit) and re.search(r"\bper\b", q):
                    text = num  # 'items per hour' asked: the count alone
            if m.group("range") or m.group("to"):
                bonus += 0.05 if re.search(r"\b(expect|range|between|forecast|guidance|outlook)", q) else -0.05
            where = _side(s.text, m.start() + (len(m.group("range") or "")))
            if side and where:
                bonus += 0.3 if where == side else -0.3
            elif not side and where == "after":
                bonus += 0.02
            out.append(Span(clean(text), s, m.start(), m.end(), bonus))
        if kind == "duration":  # a clock-style duration in a table row: 'desktop 15,390,335 ... 6.50 00:04:14'
            out += [
                Span(m.group(), s, m.start(), m.end(), 0.05) for m in _CLOCK.finditer(s.text) if _row_named(s, m, q)
            ]
    return out


# A number printed after one of these words names a thing ("Table 6-2", "Algorithm 1", "regulation 17"); it does
# not count or measure one.
_REFERENCE = re.compile(
    r"\b(?:tables?|figures?|figs?|algorithms?|chapters?|sections?|sec|units?|appendix|exhibits?|plates?|"
    r"regulations?|paragraphs?|articles?|pages?|pp?|equations?|eqs?|lemmas?|theorems?|steps?|versions?|no|nos|"
    r"items?|rules?|clauses?|annex|schedule|notes?|hour)\.?\s*$|#\s*$",
    re.I,
)


def names_not_counts(text: str, start: int, end: int) -> bool:
    """Whether the number at text[start:end] is a reference or a heading's number rather than a quantity: it follows
    a reference word ("Table 1 shows", "Figure 3-8", "UNIT 14"), it numbers a heading ("4.13 USB", "10.1 Design of
    Data pipelines"), or it is a list marker standing alone ("4.").

    >>> names_not_counts("Table 6-2 lists the operations", 6, 9), names_not_counts("It lists 42 operations", 9, 11)
    (True, False)
    >>> names_not_counts("10.1 Design of Data pipelines", 0, 4), names_not_counts("4.", 0, 1)
    (True, True)
    """
    if _REFERENCE.search(text[max(0, start - 16) : start]):
        return True
    if not text[:start].strip() and re.fullmatch(r"\d+(?:\.\d+)+", text[start:end].strip()):
        return bool(re.match(r"\s+[A-Z]", text[end:]))
    return not text[:start].strip() and not text[end:].strip(" .)")


def counts(text: str, start: int, end: int, thing: set[str]) -> bool:
    """Whether the number at text[start:end] counts `thing`: one of its words stands within three words after the
    number ('538 square miles', '6 possible combinations'), just before it, or in the label its colon ends ('Debit
    card users (in millions): 399' counts the people who used a debit card). A number beside other words counts
    something else ('30 MCs' does not answer how many areas; 'Table 1 shows' nothing).

    >>> counts("fulfil 30 MCs, 3 courses", 7, 9, {"area"}), counts("covers 538 square miles", 7, 10, {"mile"})
    (False, True)
    """
    after = [stem(w) for w in WORD.findall(text[end:])][:3]
    lead = text[max(0, start - 80) : start]
    before = [stem(w) for w in WORD.findall(lead)][-2:]
    label = re.search(r"([^.;:\n]*):\s*[$€£]?$", lead)  # 'Debit card users in India (in millions): 399'
    if label:
        before += [stem(w) for w in WORD.findall(label.group(1))][-8:]
    return bool(thing & set(after + before))


def _row_named(s: Sentence, m: re.Match, question: str) -> bool:
    """Whether the line that prints a table value names the row the question asks about: a question word besides
    what the column measures ('the average session duration for desktop': 'desktop')."""
    line = s.text[s.text.rfind("\n", 0, m.start()) + 1 : (s.text.find("\n", m.end()) + 1 or len(s.text) + 1) - 1]
    measure = {"average", "avg", "mean", "session", "duration", "time", "length", "total"}
    asked = {stem(w) for w in content_words(question) if w.lower() not in measure}
    return bool(asked & set(terms(line)))


def clean(text: str) -> str:
    return " ".join(text.strip(" ,;:.()[]\"'“”‘’").split())


def date_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    q = question.lower()
    asked = {w.lower() for w in WORD.findall(question)}
    out = []
    for s in sents:
        for m in _DATE.finditer(s.text):
            text = clean(m.group())
            if text.lower() in asked or text.lower() in q:
                continue
            bonus = 0.0
            specific = bool(re.search(MONTHS, text)) + bool(
                re.search(r"\d{1,2}(?:st|nd|rd|th)?\s+" + MONTHS + r"|" + MONTHS + r"\s+\d{1,2}\b", text)
            )
            if "quarter" in q:
                bonus += 0.3 if re.search(r"quarter|Q[1-4]", text) else -0.3
            elif "month" in q:
                bonus += 0.2 if re.search(MONTHS, text) else -0.2
            elif re.search(r"\b(date|deadline|day)\b", q):
                bonus += 0.1 * specific
            else:
                bonus += 0.05 * specific
            if re.fullmatch(r"(1[89]|20)\d\d", text):
                bonus -= 0.1  # a bare year is the least specific date
            out.append(Span(text, s, m.start(), m.end(), bonus))
    return out


def freq_spans(question: str, sents: list[Sentence]) -> list[Span]:
    return [Span(clean(m.group()), s, m.start(), m.end()) for s in sents for m in _FREQ.finditer(s.text)]


def color_spans(question: str, sents: list[Sentence]) -> list[Span]:
    """The colours a sentence names ('the red line'), but not one the question itself names."""
    named = {m.group().lower() for m in COLORS.finditer(question)}
    return [
        Span(m.group().lower(), s, m.start(), m.end())
        for s in sents
        for m in COLORS.finditer(s.text)
        if m.group().lower() not in named
    ]


def contact_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    """E-mails, phones, URLs; one that spells a name the question gives ('laurent nahmiash' ->
    lnahmiash@...) comes first."""
    names = [w.lower() for w in WORD.findall(question) if len(w) >= 4 and w.lower() not in SCAFFOLD]
    out = []
    for s in sents:
        for m in CONTACT[kind].finditer(s.text):
            text = m.group().strip().rstrip(".")
            if kind == "phone" and not _phone_like(text, s.text[: m.start()]):
                continue
            bonus = 0.3 if any(n in text.lower() for n in names) else 0.0
            cue = re.search(r"\b(fax|tel|telephone|phone|mobile|cell)\b", question, re.I)
            if cue and re.search(
                r"\b" + cue.group(1).lower()[:3] + r"\w*\.?\s*:?\s*$",
                s.text[max(0, m.start() - 14) : m.start()].lower(),
            ):
                bonus += 0.3  # 'Fax: 514-...' when the fax is asked, not the 'Tel:' beside it
            out.append(Span(text, s, m.start(), m.end(), bonus))
    return out


def _phone_like(text: str, before: str) -> bool:
    """A phone number, not a run of table cells: 7+ digits, not the tail of a bigger number, and 10+ digits
    when every group has at most two ('01 23 45 67 89' is a number; '65-69 84 29' and '000 67 8' are cells).

    >>> _phone_like("01983 873655", "Tel: "), _phone_like("65-69 84 29", ""), _phone_like("000 67 8", "<$30,")
    (True, False, False)
    """
    groups = re.findall(r"\d+", text)
    digits = sum(len(g) for g in groups)
    return digits >= 7 and not re.search(r"[\d,.]$", before) and (digits >= 10 or max(map(len, groups)) > 2)


_LIST_CUE = re.compile(r"\b(?:are|were|include|includes|included|including|is|was|such as|namely)\b\s*:?\s+|:\s+")


def list_spans(question: str, sents: list[Sentence]) -> list[Span]:
    """The enumeration after a list cue ('The main risks are A and B.') as 'A, B'."""
    out = []
    for s in sents:
        hits = q_hits(question, s.text)
        for m in _LIST_CUE.finditer(s.text):
            if hits and m.start() < hits[0][0]:
                continue  # the cue must follow the words that name what is listed
            tail = re.split(r"[.;]\s", s.text[m.end() :] + " ")[0].strip(" .")
            items = [i.strip(" .") for i in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", tail) if i.strip()]
            items = [re.sub(r"^(the|a|an)\s+", "", i) for i in items]
            if len(items) >= 2 and all(len(i.split()) <= 8 for i in items):
                out.append(Span(", ".join(items), s, m.end(), m.end() + len(tail), 0.2))
                break
    return out


def choice_spans(question: str, sents: list[Sentence], passages_text: str) -> list[Span]:
    """One of the question's options: the one whose words come with the largest (or, for 'less' / 'fewer' /
    'lower', the smallest) number in the evidence; else, of two, the one the evidence mentions more. Of three
    or more listed options ('among A, B and C'), none when the evidence never prints one of them, or gives no
    number to compare: counting mentions among several is a guess."""
    opts = choices(question)
    if not opts or not sents:
        return []
    low = bool(re.search(r"\b(less|fewer|lower|smaller|least|lowest|minimum|shorter|cheaper)\b", question, re.I))
    printed = set(terms(passages_text))
    values = []
    for o in opts:
        ow = {stem(w) for w in content_words(o)} - {stem(w) for w in content_words(question.replace(o, ""))}
        ow = ow or {stem(w) for w in content_words(o)}
        best = None
        for s in sents:
            sent_terms = set(terms(s.text))
            if ow and len(ow & sent_terms) >= max(1, len(ow) // 2):
                nums = [
                    v
                    for v in (number_value(t) for t in re.findall(r"\d[\d,]*(?:\.\d+)?", s.text))
                    if v is not None and not (1900 <= v <= 2100)
                ]
                if nums:
                    best = max(nums) if best is None else max(best, max(nums))
        values.append((best, sum(t in printed for t in ow), len(ow)))
    joined = squash(passages_text) if len(opts) > 2 else ""
    if len(opts) > 2 and any(n < k or squash(o) not in joined for o, (_, n, k) in zip(opts, values)):
        return []
    if all(v is not None for v, _, _ in values) and len({v for v, _, _ in values}) == len(values):
        pick = (
            min(range(len(opts)), key=lambda i: values[i][0])
            if low
            else max(range(len(opts)), key=lambda i: values[i][0])
        )
    elif len(opts) == 2:
        pick = max(range(2), key=lambda i: values[i][1])
    else:
        return []
    text = re.sub(r"^(the|a|an)\s+", "", opts[pick], flags=re.I)
    return [Span(text, sents[0], 0, 0, 0.0)]
