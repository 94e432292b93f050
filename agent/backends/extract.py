"""Typed, grounded answer extraction: the embedded policy's last step, reading a short answer out of text.

The embedded default reads text layers and OCR, never pixels (DESIGN.md 5.2). When a sentence of its
evidence states the answer, it must answer from that sentence, with the phrase and not the sentence:

    question  ->  expected answer type (number, percent, money, duration, date, year, person, organization,
                  place, yes/no, list, frequency, e-mail / phone / URL, or free text)
    evidence  ->  candidate sentences, headings and boilerplate dropped, scored by the question's terms
                  (IDF-weighted, the BM25 view of words) and MiniLM similarity (the retriever's encoder)
              ->  candidate spans of the expected type in the best sentences, ranked by closeness to the
                  question's words and by what the question asks ("before" against "after": in "fell from
                  X to Y", X is the before and Y the after)
              ->  the best span, the sentence it came from and its unit; or "Not answerable" when nothing
                  passes the threshold, with a note when the answer may sit in a chart, table or picture the
                  text cannot resolve ("a VLM backend can read it").

SmolLM2-135M chooses among free-text spans (`agent.backends.smollm.choose_span`), where rules cannot
tell a name from a phrase; typed answers never go through it (measured: a 135M model's numbers are
guesses). Entity types come from rules: no package on PyPI ships an English NER model inside its wheel
(spaCy's `en-core-web-*` are placeholders there, installed from GitHub releases; GLiNER and flair fetch
their weights from the hub), so there is nothing to load offline that beats these patterns.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.backends.smollm import (
    _WORD,
    NOT_ANSWERABLE,
    SCAFFOLD,
    _fuzzy_hit,
    _stem,
    _terms,
    _value,
    content_words,
    missing_anchors,
    split_sentences,
)

ANSWER_TYPES = (
    "number",
    "percent",
    "money",
    "duration",
    "date",
    "year",
    "person",
    "organization",
    "place",
    "yes_no",
    "choice",
    "list",
    "frequency",
    "expansion",
    "email",
    "phone",
    "url",
    "text",
)
_CUES = {
    "email",
    "e-mail",
    "phone",
    "telephone",
    "fax",
    "website",
    "url",
    "date",
    "name",
    "title",
    "figure",
    "table",
    "chart",
    "page",
    "document",
    "report",
    "cover",
    "format",
    "yyyy-mm-dd",
    "yyyy-mm",
    "directly",
    "answer",
    "give",
    "return",
    "integer",
    "float",
    "please",
    "list",
    "write",
}
NUMERIC = ("number", "percent", "money", "duration", "year")
THRESHOLD = 0.1  # least question-term coverage of the answer's sentence (calibrated on dev traces: eval/RESULTS.md)
SIM_WEIGHT = 0.35  # weight of MiniLM cosine similarity beside term coverage in a sentence's score


@dataclass
class Passage:
    """One piece of evidence text with where it came from."""

    text: str
    citation: str = ""  # 'report.pdf p.3', 'notes.md #1', 'talk.mp4 00:10-00:20'
    info_id: str = ""  # the episode's information id ('Picture 2')
    modality: str = "text"  # the unit's: page | image | video | text
    memorized: bool = True  # in the memory graph (else only retrieved)


@dataclass
class Reading:
    """An answer and what it rests on; `note` says why there is none when a picture may hold it."""

    answer: str
    answer_type: str
    sentence: str = ""
    citation: str = ""
    info_id: str = ""
    score: float = 0.0
    note: str = ""
    candidates: list[str] = field(default_factory=list)  # the runners-up, best first (for traces)

    @property
    def answered(self) -> bool:
        return self.answer != NOT_ANSWERABLE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- what the question wants --------------------------------------------------------------------------------

_MONEY_WORDS = (
    r"revenue|revenues|sales|cost|costs|price|prices|spend|spending|spent|budget|income|profit|profits|"
    r"earnings|salary|salaries|funding|investment|invest|dollars|euros|usd|eur|gbp|fee|fees|paid|pay"
)
_MEASURE_WORDS = (
    r"capacity|rate|total|amount|number|count|size|population|headcount|speed|score|age|height|weight|"
    r"length|distance|volume|temperature|value|level|ratio|average|mean|median|sum|difference|growth|"
    r"workforce|output|production|figure"
)
_PLACE_NOUNS = (
    r"country|city|town|region|hall|place|location|state|continent|market|site|venue|address|area|"
    r"province|county|booth|stand|room|building|campus|headquarters"
)
_ORG_NOUNS = (
    r"company|companies|organisation|organization|firm|agency|university|bank|institution|institute|"
    r"publisher|brand|team|party|ministry|department|school|college|hospital|sponsor|partner"
)
_PERSON_NOUNS = (
    r"ceo|cfo|cto|chief executive|founder|president|director|chair|chairman|chairwoman|chairperson|"
    r"author|head|manager|minister|leader|person|editor|photographer|speaker|owner|inventor|winner|"
    r"governor|mayor|senator|judge|secretary|officer|chancellor|commissioner|attorney|lawyer|"
    r"representative|principal|dean|professor|surgeon general|spokesperson|contact person"
)
_DURATION_UNITS = r"hours?|minutes?|seconds?|days?|weeks?|months?|years?|hrs?|mins?"


def answer_type(question: str) -> str:
    """The kind of answer `question` wants (one of ANSWER_TYPES).

    >>> [answer_type(q) for q in ("What defect rate did the factory reach?", "Who is the CEO?",
    ...  "When did the factory open?", "How long does the battery last?", "Is the plant open?")]
    ['percent', 'person', 'date', 'duration', 'yes_no']
    """
    q = " " + question.lower().replace("’", "'") + " "
    if re.search(r"e-?mail", q):
        return "email"
    if re.search(r"\b(tele)?phone\b|\btel\b|\bfax\b|contact number", q):
        return "phone"
    if re.search(r"website|\burl\b|web address|\blink\b", q):
        return "url"
    start = q.strip()
    if re.search(r"\bstand for\b|\bstands for\b|\babbreviation\b|\bacronym\b|\bshort for\b|\bfull (form|name)\b", q):
        return "expansion"
    if re.search(r"['\"]?yes['\"]? or ['\"]?no['\"]?", q):
        return "yes_no"
    if choices(question):
        return "choice"
    if (
        re.match(r"(is|are|was|were|does|do|did|can|could|has|have|had|will|should|would)\b", start)
        and not re.search(r"\bor\b", q)
        or "yes or no" in q
    ):
        return "yes_no"
    if re.search(r"\bhow (often|frequently)\b", q):
        return "frequency"
    if re.search(r"\b(which|what|in what) year\b|\bwhat year\b|\b(last|first|latest|earliest) year\b", q):
        return "year"
    if re.search(r"\bhow long\b|\bduration\b|\bruntime\b|\bhow many (" + _DURATION_UNITS + r")\b", q):
        return "duration"
    if re.search(r"\bpercent|percentage|\bproportion\b|\bshare\b|%|\brate\b", q) and not re.search(
        r"\bper (hour|day|minute|second|shift|week|month|year)\b", q
    ):
        return "percent"
    if re.search(
        r"\bwhen\b|\bwhat (date|day|month|time)\b|\bformat the date\b|\bthe date\b|yyyy-mm|"
        r"\bwhich (date|day|month|quarter|period)\b|\bdeadline\b|\bin (which|what) (quarter|month)\b|"
        r"\bdue\b",
        q,
    ):
        return "date"
    if re.search(r"\bhow (much|many)\b", q) and re.search(r"\b(" + _MONEY_WORDS + r")\b", q):
        return "money"
    if re.search(r"\b(what|which)\b.*\b(" + _MONEY_WORDS + r")\b", q) and not re.search(
        r"\b(which|what) (\w+ )?(product|region|market|item|category)\b", q
    ):
        return "money"
    if re.search(r"\bhow (many|much|far|big|large|tall|old|fast|heavy)\b|\bnumber of\b", q):
        return "number"
    if re.search(r"\b(who|whom|whose)\b", q) or re.search(
        r"\b(name of|which|what) (the |this |that )?(" + _PERSON_NOUNS + r")\b", q
    ):
        return "person"
    if re.search(r"\bwhere\b", q) or re.search(r"\b(which|what|in which|in what) (\w+ )?(" + _PLACE_NOUNS + r")\b", q):
        return "place"
    if re.search(r"\b(which|what) (\w+ )?(" + _ORG_NOUNS + r")\b", q):
        return "organization"
    if re.search(r"\b(what|which) (are|were) (the )?(\w+ ){0,3}\w+s\b|\blist\b|\bname (all|the \w+s)\b", q):
        return "list"
    if re.search(r"\bwhat (is|was|will)\b.*\b(" + _MEASURE_WORDS + r")\b", q):
        return "number"
    return "text"


def choices(question: str) -> list[str]:
    """The two options of an either-or question ('which is greater, A or B?'), else [].

    >>> choices("Which one is greater in population? Foreign born Latinos, or the Latinos interviewed by cellphone?")
    ['Foreign born Latinos', 'the Latinos interviewed by cellphone']
    >>> choices("How many people do not go online or only use SNS?")
    []
    """
    q = question.strip()
    if not re.search(r"\b(which|who|what|whether|are there more|is there more|is it)\b", q, re.I):
        return []
    m = re.search(r"(?:^|[?:,]|\b(?:between|either)\b)\s*([^?:,]{2,80}?),?\s+or\s+([^?,]{2,80}?)\s*\?", q)
    if not m:
        return []
    a, b = m.group(1).strip(), m.group(2).strip()
    if re.match(r"(which|who|what|how)\b", a, re.I) or len(a.split()) > 10 or len(b.split()) > 10:
        return []
    return [a, b]


def wants_side(question: str) -> str:
    """'before' or 'after' when the question asks for one side of a change, else ''.

    >>> wants_side("What defect rate did it reach after the new rig?"), wants_side("the rate before the rig")
    ('after', 'before')
    """
    q = question.lower()
    if re.search(
        r"\b(before|previous|previously|prior|originally|initially|used to|formerly|old|start(ed)? at|"
        r"start(ing)? point)\b",
        q,
    ):
        return "before"
    if re.search(
        r"\b(after|reach|reached|now|new|currently|current|become|became|end(ed)? at|result|once|"
        r"following|rise to|fall to|grow to|increase to|will)\b",
        q,
    ):
        return "after"
    return ""


# -- sentences -----------------------------------------------------------------------------------------------

_TICK_LINE = re.compile(r"^\s*[-−]?\d[\d,]*(?:\.\d+)?\s*%?\s*$")
_BOILER = re.compile(
    r"^(page \d+( of \d+)?|\d+|copyright\b.*|©.*|all rights reserved.*|www\.\S+|https?://\S+|"
    r"table of contents|contents|index)$",
    re.I,
)


def is_heading(line: str, first: bool = False) -> bool:
    """A title, heading or boilerplate line: never an answer, though its words may tell where one is.

    >>> is_heading("# Field notes: Tampere factory visit"), is_heading("Aurora Robotics Annual Report 2025")
    (True, True)
    >>> is_heading("Europe 21.4"), is_heading("The defect rate fell from 2.1 percent to 0.8 percent.")
    (False, False)
    """
    s = line.strip()
    if not s or s.startswith("#") or _BOILER.match(s):
        return True
    if re.search(r"[.!?]$", s) or len(s.split()) > 12:
        return False
    words = re.findall(r"[A-Za-z][\w'’-]*", s)
    numbers = [n for n in re.findall(r"\d[\d,.]*", s) if not re.fullmatch(r"(1[89]|20)\d\d", n)]
    if numbers:  # a table row or label with a value ('Europe 21.4', 'Hall 4, Booth B21'): data, not a title
        return False
    if first:
        return True
    significant = [
        w for w in words if w.lower() not in {"of", "and", "the", "in", "at", "for", "a", "to", "on", "by", "with"}
    ]
    caps = sum(w[0].isupper() for w in significant)
    # three or more capitalised words make a title; two may be a name on its own line ('Rick Scott')
    return caps >= 3 and caps >= 0.6 * len(significant) and ":" not in s[:-1]


def axis_ticks(text: str) -> set[str]:
    """Numbers printed as chart axis labels: runs of 4+ lines holding a bare number each (text layers of
    charts list their tick labels one per line). Never an answer: a tick is where a bar ends, not its value.

    >>> sorted(axis_ticks("Q1 Q2\\n0\\n50\\n100\\n150\\nrobots"))
    ['0', '100', '150', '50']
    """
    out: set[str] = set()
    run: list[str] = []
    for ln in (text or "").split("\n") + [""]:
        if _TICK_LINE.match(ln):
            run.append(ln.strip())
            continue
        if len(run) >= 4:
            out.update(run)
        run = []
    return out


def visual_hint(p: Passage) -> str:
    """'chart', 'table' or 'picture' when the passage is a page or image whose text layer hints that part of
    it is drawn (axis ticks, rows of label + number, or little text on a picture); '' otherwise."""
    text = p.text or ""
    if (
        axis_ticks(text)
        or re.search(r"\b(figure|fig\.|chart|graph|plot)\s*\d*\b", text, re.I)
        and p.modality in ("page", "image")
    ):
        return "chart"
    rows = [
        ln for ln in text.split("\n") if re.fullmatch(r"\s*[A-Za-z][\w ,.&'()/-]{1,40}(\s+[-\d.,%$€]+){1,6}\s*", ln)
    ]
    if len(rows) >= 3:
        return "table"
    if p.modality == "image" and len(text.split()) < 40:
        return "picture"
    return ""


@dataclass
class _Sent:
    text: str
    passage: int
    index: int  # position in the flattened list
    heading: bool
    title: bool = False  # the passage's first line or a markdown heading: never an answer
    source: str = ""  # the passage's citation
    coverage: float = 0.0
    score: float = 0.0


def _sentences(passages: list[Passage]) -> list[_Sent]:
    out: list[_Sent] = []
    for pi, p in enumerate(passages):
        ticks = axis_ticks(p.text)
        text = "\n".join(ln for ln in (p.text or "").split("\n") if ln.strip() not in ticks) if ticks else p.text
        lines = [ln for ln in (text or "").split("\n") if ln.strip()]
        first = lines[0].strip() if lines else ""
        for s in split_sentences([text]):
            title = s.startswith("#") or (s == first and is_heading(s, first=True))
            out.append(
                _Sent(
                    s.lstrip("# ").strip() if s.startswith("#") else s,
                    pi,
                    len(out),
                    title or is_heading(s),
                    title,
                    re.sub(r"\.\w+\b.*$", "", p.citation),
                )
            )
    return out


def _idf_coverage(question: str, sents: list[_Sent]) -> None:
    """Each sentence's IDF-weighted share (0..1) of the question's content terms. A term found only in the
    headings of its passage or the sentence before counts 0.6 (a heading says what the lines under it are
    about: 'Aurora Robotics at LogiMAT 2026' over 'Hall 4, Booth B21'); a typo counts 0.8."""
    q = list(dict.fromkeys(_stem(w) for w in content_words(question)))
    if not q:
        return
    bags = [set(_terms(s.text)) for s in sents]
    n = len(sents)
    idf = {t: math.log(1 + n / (1 + sum(t in b for b in bags))) for t in q}
    total = sum(idf.values()) or 1.0
    heads: dict[int, set[str]] = {}
    for s in sents:  # the file's name is a heading too ('product_update.mp4': "the product update video")
        heads.setdefault(s.passage, set()).update(_terms(re.sub(r"[_\W]+", " ", s.source)))
    for s, b in zip(sents, bags):
        if s.heading:
            heads.setdefault(s.passage, set()).update(b)
    for i, (s, b) in enumerate(zip(sents, bags)):
        ctx = set(heads.get(s.passage, set()))
        if i and sents[i - 1].passage == s.passage:
            ctx |= bags[i - 1]
        got = 0.0
        for t in q:
            got += idf[t] if t in b else 0.8 * idf[t] if _fuzzy_hit(t, b) else 0.6 * idf[t] if t in ctx else 0.0
        s.coverage = got / total


def score_sentences(question: str, sents: list[_Sent], passages: list[Passage], encoder: Any = None) -> None:
    """coverage (+ a quarter of the better neighbour's within the same passage) + SIM_WEIGHT * cosine
    similarity to the question (MiniLM, when an encoder is given) + 0.05 for memorized evidence."""
    _idf_coverage(question, sents)
    sims = [0.0] * len(sents)
    if encoder is not None and sents:
        top = sorted(range(len(sents)), key=lambda i: -sents[i].coverage)[:48]
        try:
            qv = encoder.encode_queries([question])[0]  # (dim,)
            sv = encoder.encode_texts([sents[i].text for i in top])  # (k, dim), normalized
            for i, v in zip(top, sv):
                sims[i] = max(0.0, float(v @ qv))
        except Exception:  # noqa: BLE001 - similarity is a refinement; term coverage alone still answers
            pass
    for i, s in enumerate(sents):
        neigh = [sents[j].coverage for j in (i - 1, i + 1) if 0 <= j < len(sents) and sents[j].passage == s.passage]
        s.score = (
            s.coverage
            + 0.25 * max(neigh, default=0.0)
            + SIM_WEIGHT * sims[i]
            + (0.05 if passages[s.passage].memorized else 0.0)
        )


# -- spans -----------------------------------------------------------------------------------------------------

_SCALE = r"million|billion|thousand|trillion|bn|mn|m|k"
_CUR_WORDS = r"dollars|euros|pounds|yen|usd|eur|gbp|us\$"
_QTY = re.compile(
    r"(?P<range>between\s+)?(?:(?P<cur>(?:US)?[$€£¥])\s?)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<to>\s?(?:to|-|–|and)\s?[$€£]?\d+(?:\.\d+)?)?"
    r"(?:\s?(?P<scale>" + _SCALE + r")\b)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b|percentage points?\b))?"
    r"(?:\s(?P<cur2>" + _CUR_WORDS + r")\b)?"
    r"(?:\s(?P<unit>(?:[a-z]+\s){0,2}?(?:per\s[a-z]+|" + _DURATION_UNITS + r")\b))?",
    re.I,
)
_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th)?\s+" + _MONTHS + r"\.?,?\s+\d{4}\b"
    r"|\b" + _MONTHS + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b"
    r"|\b(?:early|mid|late|end of|beginning of|the end of|spring|summer|autumn|fall|winter)\s+(?:of\s+)?\d{4}\b"
    r"|\b" + _MONTHS + r"\.?\s+\d{4}\b"
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
_TYPED = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "phone": re.compile(r"\+?\(?\d[\d ().-]{6,}\d"),
    "url": re.compile(
        r"(?:https?://|www\.)[^\s,;)]+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|edu|gov|io|"
        r"example|eu|de|fi|uk)(?:/[^\s,;)]*)?",
        re.I,
    ),
}
_CAP_RUN = re.compile(r"\b[A-Z][\w&'’.-]*(?:\s+(?:of|de|van|von|der|and|&)?\s*[A-Z][\w&'’.-]*){0,4}")
_LOCATOR = re.compile(
    r"\b(?:Hall|Booth|Stand|Room|Building|Floor|Gate|Terminal|Level|Suite|Pavilion|Block)\s+"
    r"[A-Z]?\d+[A-Za-z]?\b(?:,?\s+(?:Hall|Booth|Stand|Room|Building|Floor|Gate|Level|Suite)\s+"
    r"[A-Z]?\d+[A-Za-z]?\b)*"
)
_ORG_SUFFIX = re.compile(
    r"\b(Inc|Ltd|LLC|Corp|Corporation|Company|Co|Group|Robotics|University|Institute|Bank|"
    r"Association|Agency|Foundation|Council|Ministry|Department|Center|Centre|Lab|Labs|"
    r"Systems|Technologies|Holdings|Partners|AG|GmbH|SA|plc|Oy)\b\.?$"
)
_NOT_NAME = {
    "the",
    "a",
    "an",
    "in",
    "on",
    "at",
    "for",
    "by",
    "it",
    "this",
    "that",
    "these",
    "those",
    "its",
    "their",
    "our",
    "we",
    "they",
    "he",
    "she",
    "chief",
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "footnote",
    "note",
    "figure",
    "table",
    "source",
    "page",
    "q1",
    "q2",
    "q3",
    "q4",
}
_MONTH_WORDS = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
}


@dataclass
class _Span:
    text: str
    sent: _Sent
    start: int
    end: int
    bonus: float = 0.0  # type-specific preference (unit matches, side of a change, ...)


def _q_hits(question: str, sent: str) -> list[tuple[int, int]]:
    q = {_stem(w) for w in content_words(question)}
    return [(m.start(), m.end()) for m in _WORD.finditer(sent) if _stem(m.group()) in q]


def _distance(span: _Span, hits: list[tuple[int, int]]) -> int:
    return min((max(h0 - span.end, span.start - h1, 0) for h0, h1 in hits), default=len(span.sent.text))


def _in_question(text: str, question: str) -> bool:
    q = {_stem(w) for w in _WORD.findall(question)} | {w.lower() for w in _WORD.findall(question)}
    words = [w for w in _WORD.findall(text) if w.lower() not in SCAFFOLD]
    return all(_stem(w) in q or w.lower() in q for w in words)


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


def _numeric_spans(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    asked = {_value(t) for t in re.findall(r"\d[\d,]*(?:\.\d+)?", question)}
    side = wants_side(question)
    q = question.lower()
    out: list[_Span] = []
    for s in sents:
        for m in _QTY.finditer(s.text):
            num = m.group("num")
            val = _value(num)
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
                m.start() and re.match(r"[A-Za-z]", s.text[m.start() - 1])
            ):
                continue  # part of a code or a name: 'X2', 'B21', 'Q4'
            if val in asked and not m.group("to"):
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
                if is_year or pct or not re.search(_DURATION_UNITS, unit or "", re.I):
                    continue
                text = f"{num} {unit}" if not m.group("to") else text
            else:  # number: a count or measure
                if is_year and not re.search(r"\byear\b", q):
                    continue
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
            out.append(_Span(_clean(text), s, m.start(), m.end(), bonus))
    return out


def _clean(text: str) -> str:
    return " ".join(text.strip(" ,;:.()[]\"'“”‘’").split())


def _date_spans(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    q = question.lower()
    asked = {w.lower() for w in _WORD.findall(question)}
    out = []
    for s in sents:
        for m in _DATE.finditer(s.text):
            text = _clean(m.group())
            if text.lower() in asked or text.lower() in q:
                continue
            bonus = 0.0
            specific = bool(re.search(_MONTHS, text)) + bool(
                re.search(r"\d{1,2}(?:st|nd|rd|th)?\s+" + _MONTHS + r"|" + _MONTHS + r"\s+\d{1,2}\b", text)
            )
            if "quarter" in q:
                bonus += 0.3 if re.search(r"quarter|Q[1-4]", text) else -0.3
            elif "month" in q:
                bonus += 0.2 if re.search(_MONTHS, text) else -0.2
            elif re.search(r"\b(date|deadline|day)\b", q):
                bonus += 0.1 * specific
            else:
                bonus += 0.05 * specific
            if re.fullmatch(r"(1[89]|20)\d\d", text):
                bonus -= 0.1  # a bare year is the least specific date
            out.append(_Span(text, s, m.start(), m.end(), bonus))
    return out


def _cap_runs(s: _Sent) -> list[tuple[str, int, int]]:
    runs = []
    for m in _CAP_RUN.finditer(s.text):
        words = m.group().split()
        at = m.start()
        while words and (words[0].lower().strip(".") in _NOT_NAME or words[0].lower() in _MONTH_WORDS):
            at += len(words[0]) + 1
            words = words[1:]
        while words and words[-1].lower() in ("of", "and", "&", "de", "van", "von", "der"):
            words = words[:-1]
        if words:
            text = " ".join(words).rstrip(".,'’")
            runs.append((text, at, at + len(text)))
    return runs


def _entity_spans(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    q = question.lower()
    out = []
    for s in sents:
        for text, a, b in _cap_runs(s):
            if _in_question(text, question) or not re.search(r"[A-Za-z]{2}", text):
                continue
            words = text.split()
            bonus = 0.0
            org = bool(_ORG_SUFFIX.search(text)) or re.fullmatch(r"[A-Z]{2,6}", text) is not None
            if kind == "person":
                if org and re.search(
                    r"\bwho (produced|published|issued|prepared|released|funded|sponsored|"
                    r"developed|made|owns|wrote)\b",
                    q,
                ):
                    out.append(_Span(text, s, a, b, 0.2))  # 'Who produced the document?' asks for a body
                    continue
                if org or any(re.search(r"\d", w) for w in words) or len(words) > 4:
                    continue
                bonus += 0.2 if len(words) in (2, 3) else -0.1
                ctx = s.text[max(0, a - 30) : a].lower()
                if re.search(
                    r"(ceo|chief executive|president|director|founder|chair\w*|head|manager|minister|"
                    r"by|said|says|according to|led by)\W*$",
                    ctx,
                ) or re.match(
                    r"\s*(said|says|,\s*(the\s+)?(ceo|chief|president|founder|director))", s.text[b : b + 30], re.I
                ):
                    bonus += 0.3
            elif kind == "organization":
                bonus += 0.3 if org else 0.0
            elif kind == "place":
                if re.search(r"\d", text):
                    continue  # a product code is not a place ('Hall 4' comes from _LOCATOR)
                if org:
                    bonus -= 0.4  # nor is a company
                if len(words) == 1 and re.search(r"(^|[.!?:]\s+)$", s.text[:a]):
                    bonus -= 0.15  # a capitalised first word may be any word
                if re.match(
                    r"\s+(factory|plant|office|offices|site|headquarters|campus|branch|warehouse|region|"
                    r"city|area)\b",
                    s.text[b : b + 16],
                    re.I,
                ):
                    bonus += 0.2
                ctx = s.text[max(0, a - 12) : a].lower()
                if re.search(r"\b(in|at|near|from|to|across|throughout)\s+$", ctx):
                    bonus += 0.2
            else:  # text: capitalised runs compete with other spans
                bonus -= 0.05
            if len(words) == 1 and kind == "person":
                bonus -= 0.2
            out.append(_Span(text, s, a, b, bonus))
        if kind == "place":
            for m in _LOCATOR.finditer(s.text):
                out.append(_Span(_clean(m.group()), s, m.start(), m.end(), 0.35))
            # 'Tampere, Finland': the country asked is the last part, the city the first
            for m in re.finditer(r"\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)?),\s([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)\b", s.text):
                if re.search(r"\bcountry\b", q):
                    out.append(_Span(m.group(2), s, m.start(2), m.end(2), 0.3))
                elif re.search(r"\b(city|town)\b", q):
                    out.append(_Span(m.group(1), s, m.start(1), m.end(1), 0.3))
                elif "where" in q:
                    out.append(_Span(m.group(), s, m.start(), m.end(), 0.25))
    if kind == "place" and re.search(r"\b(hall|booth|stand|room)\b", q):
        noun = re.search(r"\b(hall|booth|stand|room)\b", q).group(1)
        for sp in out:
            if sp.text.lower().startswith(noun) and re.fullmatch(r"\w+ [A-Z]?\d+\w*", sp.text):
                sp.bonus += 0.2
    return out


def _freq_spans(question: str, sents: list[_Sent]) -> list[_Span]:
    return [_Span(_clean(m.group()), s, m.start(), m.end()) for s in sents for m in _FREQ.finditer(s.text)]


def _typed_spans(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    """E-mails, phones, URLs; one that spells a name the question gives ('laurent nahmiash' ->
    lnahmiash@...) comes first."""
    names = [w.lower() for w in _WORD.findall(question) if len(w) >= 4 and w.lower() not in SCAFFOLD]
    out = []
    for s in sents:
        for m in _TYPED[kind].finditer(s.text):
            text = m.group().strip().rstrip(".")
            bonus = 0.3 if any(n in text.lower() for n in names) else 0.0
            cue = re.search(r"\b(fax|tel|telephone|phone|mobile|cell)\b", question, re.I)
            if cue and re.search(
                r"\b" + cue.group(1).lower()[:3] + r"\w*\.?\s*:?\s*$",
                s.text[max(0, m.start() - 14) : m.start()].lower(),
            ):
                bonus += 0.3  # 'Fax: 514-...' when the fax is asked, not the 'Tel:' beside it
            out.append(_Span(text, s, m.start(), m.end(), bonus))
    return out


_LIST_CUE = re.compile(r"\b(?:are|were|include|includes|included|including|is|was|such as|namely)\b\s*:?\s+|:\s+")


def _list_spans(question: str, sents: list[_Sent]) -> list[_Span]:
    """The enumeration after a list cue ('The main risks are A and B.') as 'A, B'."""
    out = []
    for s in sents:
        hits = _q_hits(question, s.text)
        for m in _LIST_CUE.finditer(s.text):
            if hits and m.start() < hits[0][0]:
                continue  # the cue must follow the words that name what is listed
            tail = re.split(r"[.;]\s", s.text[m.end() :] + " ")[0].strip(" .")
            items = [i.strip(" .") for i in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+", tail) if i.strip()]
            items = [re.sub(r"^(the|a|an)\s+", "", i) for i in items]
            if len(items) >= 2 and all(len(i.split()) <= 8 for i in items):
                out.append(_Span(", ".join(items), s, m.end(), m.end() + len(tail), 0.2))
                break
    return out


def _same(a: str, b: str) -> bool:
    """Two stems of one word ('assembl' / 'assemble'): equal, or one a prefix of the other past 4 letters."""
    return a == b or min(len(a), len(b)) >= 5 and (a.startswith(b) or b.startswith(a))


def _phrase_spans(question: str, sents: list[_Sent]) -> list[_Span]:
    """Free-text candidates around the question's verb: its object ('What does the factory assemble?' ->
    'It assembles | the Falcon X2 picker'), or its subject ('Which product drove ...?' -> 'the Falcon X2
    picker | drove'); and a capitalised word before the question's noun ('Which drone ...?' -> 'Heron drone')."""
    q = question.strip().lower()
    qwords = [_stem(w) for w in content_words(question)]
    obj = re.match(r"(?:what|which \w+)\s+(?:do|does|did|will|would|can|could|should)\s+.+?\s+(\w+)\W*$", q)
    aux = r"(?!(?:is|are|was|were|do|does|did|has|have|had|will|can)\b)"
    subj = re.match(r"(?:which|what)\s+" + aux + r"(\w+)\s+" + aux + r"(\w+)", q)
    verb_obj = _stem(obj.group(1)) if obj else ""
    verb_subj = _stem(subj.group(2)) if subj else ""
    out = []
    for s in sents:
        for w in _WORD.finditer(s.text):
            stem = _stem(w.group())
            if verb_obj and _same(stem, verb_obj):
                m = re.match(
                    r"\s+((?:the|a|an)\s+)?([\w$%&'’-]+(?:\s+[\w$%&'’-]+){0,5}?)(?=\s*(?:[.,;:!?]|"
                    r"\s(?:and|but|which|that|who|to|in|on|at|for|with|from|by|since|after|before)\b|$))",
                    s.text[w.end() :],
                )
                if m and not _in_question(m.group(2), question):
                    a = w.end() + m.start(1 if m.group(1) else 2)
                    text = _clean(m.group(0))
                    out.append(_Span(text, s, a, a + len(text), 0.25))
            if verb_subj and _same(stem, verb_subj) and w.start():
                head = s.text[: w.start()]
                m = re.search(r"((?:[\w$%&'’-]+\s+){0,5}[\w$%&'’-]+)\s*$", head)
                piece = m.group(0) if m else ""
                cut = list(re.finditer(r"\b(said|says|that|and|but|which|while|who|is|are|was|were)\s+", piece))
                if cut:  # 'Lindqvist said the Falcon X2 picker' keeps 'the Falcon X2 picker'
                    piece = piece[cut[-1].end() :]
                text = _clean(piece)
                if text and not _in_question(text, question):
                    out.append(_Span(text, s, w.start() - len(piece), w.start(), 0.25))
        for m in re.finditer(r"\b([A-Z][\w-]+)\s+([a-z][\w-]+)\b", s.text):
            if _stem(m.group(2)) in qwords and not _in_question(m.group(1), question):
                out.append(_Span(m.group(), s, m.start(), m.end(), 0.25))
    return out


def _expansion_spans(question: str, sents: list[_Sent]) -> list[_Span]:
    """'National Atmospheric Research Laboratory (NARL)' or 'NARL (National ...)' for 'What does NARL stand for?'"""
    abbrs = [w for w in re.findall(r"\b[A-Z][A-Za-z]*[A-Z]+[A-Za-z]*\b", question) if 2 <= len(w) <= 10]
    out = []
    for s in sents:
        for ab in abbrs:
            for m in re.finditer(
                r"((?:[A-Z][\w-]*\s+(?:(?:of|for|and|the|in|on|&)\s+)*){1,9})\(\s*" + re.escape(ab) + r"\s*\)", s.text
            ):
                words = m.group(1).split()
                # as many words as the abbreviation has capitals, counted back from the parenthesis
                need, cut = sum(c.isupper() for c in ab), 0
                for i in range(len(words) - 1, -1, -1):
                    need -= words[i][0].isupper()
                    if need == 0:
                        cut = i
                        break
                text = " ".join(words[cut:])
                at = m.start(1) + m.group(1).find(words[cut])
                out.append(_Span(text, s, at, at + len(text), 0.5))
            for m in re.finditer(re.escape(ab) + r"\s*\(([A-Z][^()]{3,80})\)", s.text):
                out.append(_Span(m.group(1).strip(), s, m.start(1), m.end(1), 0.5))
    return out


def _choice_spans(question: str, sents: list[_Sent], passages_text: str) -> list[_Span]:
    """One of the question's two options: the one whose words come with the larger (or, for 'less' /
    'fewer' / 'lower', the smaller) number in the evidence; else the one the evidence mentions more."""
    opts = choices(question)
    if not opts or not sents:
        return []
    low = bool(re.search(r"\b(less|fewer|lower|smaller|least|lowest|minimum|shorter|cheaper)\b", question, re.I))
    values = []
    for o in opts:
        ow = {_stem(w) for w in content_words(o)} - {_stem(w) for w in content_words(question.replace(o, ""))}
        ow = ow or {_stem(w) for w in content_words(o)}
        best = None
        for s in sents:
            terms = set(_terms(s.text))
            if ow and len(ow & terms) >= max(1, len(ow) // 2):
                nums = [
                    v
                    for v in (_value(t) for t in re.findall(r"\d[\d,]*(?:\.\d+)?", s.text))
                    if v is not None and not (1900 <= v <= 2100)
                ]
                if nums:
                    best = max(nums) if best is None else max(best, max(nums))
        values.append((best, sum(t in set(_terms(passages_text)) for t in ow)))
    if all(v is not None for v, _ in values) and values[0][0] != values[1][0]:
        pick = min(range(2), key=lambda i: values[i][0]) if low else max(range(2), key=lambda i: values[i][0])
    else:
        pick = max(range(2), key=lambda i: values[i][1])
    text = re.sub(r"^(the|a|an)\s+", "", opts[pick], flags=re.I)
    return [_Span(text, sents[0], 0, 0, 0.0)]


def _label_spans(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    """The line after a short label line that names what is asked ('Produced by:' / 'Florida Department of
    Health'; 'Lead Coordinator' / 'Allison Crimmins, U.S. EPA'): the value, up to its first comma."""
    out = []
    for a, b in zip(sents, sents[1:]):
        if a.passage != b.passage or len(a.text) > 40 or a.coverage <= 0 or len(b.text) > 120:
            continue
        if not (a.text.rstrip().endswith(":") or a.heading or len(a.text.split()) <= 4):
            continue
        value = _clean(re.split(r",\s|;\s|\s[-–]\s", b.text)[0])
        if value and not _in_question(value, question) and len(value.split()) <= 8:
            out.append(_Span(value, b, 0, len(value), 0.15 + 0.2 * a.coverage))
    return out


def _spans(question: str, kind: str, sents: list[_Sent], heads: set[str]) -> list[_Span]:
    """Candidates of the expected type; never the whole of a heading, title or running header/footer line
    (`heads`, lower case), wherever the span was found ('PEW RESEARCH CENTER' inside a joined line)."""
    return [sp for sp in _typed(question, kind, sents) if sp.text.strip(" .").lower() not in heads]


def _typed(question: str, kind: str, sents: list[_Sent]) -> list[_Span]:
    if kind in NUMERIC:
        return _numeric_spans(question, kind, sents)
    if kind == "date":
        return _date_spans(question, kind, sents)
    if kind == "place":
        return _entity_spans(question, kind, sents)
    if kind == "frequency":
        return _freq_spans(question, sents)
    if kind in _TYPED:
        return _typed_spans(question, kind, sents)
    if kind == "expansion":
        return _expansion_spans(question, sents)
    if kind in ("person", "organization", "text"):
        base = (
            _entity_spans(question, kind, sents)
            if kind != "text"
            else _phrase_spans(question, sents) + _entity_spans(question, "text", sents)
        )
        return base + _label_spans(question, kind, sents)
    if kind == "list":
        return _list_spans(question, sents) or _phrase_spans(question, sents)
    return _phrase_spans(question, sents) + _entity_spans(question, "text", sents)


def _names(question: str) -> list[str]:
    """The capitalised words of the question past its first word: the specifics it asks about."""
    words = _WORD.findall(question)[1:]
    return list(dict.fromkeys(_stem(w) for w in words if w[0].isupper() and w.lower() not in SCAFFOLD))


def _rank(question: str, spans: list[_Span]) -> list[tuple[float, _Span]]:
    """Sentence score + type bonus + 0.15 x the share of the question's names in the sentence, minus a
    penalty for distance (characters, log-scaled) to the question's words."""
    names = _names(question)
    ranked = []
    for sp in spans:
        d = _distance(sp, _q_hits(question, sp.sent.text))
        named = sum(n in set(_terms(sp.sent.text)) for n in names) / len(names) if names else 0.0
        ranked.append((sp.sent.score + sp.bonus + 0.15 * named - 0.08 * math.log1p(d / 8), sp))
    ranked.sort(key=lambda x: (-x[0], x[1].sent.index, x[1].start))
    return ranked


# -- yes / no --------------------------------------------------------------------------------------------------

_NEG = re.compile(r"\b(not|no|never|none|neither|nor|without|n't|cannot|fail(?:ed|s)? to)\b", re.I)


def _yes_no(question: str, best: _Sent) -> str:
    """Yes when the best sentence states the question's claim with the same polarity, else No."""
    if best.coverage < 0.6:
        return "No"
    return "Yes" if bool(_NEG.search(question)) == bool(_NEG.search(best.text)) else "No"


# -- the reader ---------------------------------------------------------------------------------------------


def _limit_note(question: str, passages: list[Passage], sents: list[_Sent]) -> str:
    """Where the answer may be that the text cannot resolve: the most relevant page or picture whose text
    hints at a chart, table or drawing."""
    best: dict[int, float] = {}
    for s in sents:
        best[s.passage] = max(best.get(s.passage, 0.0), s.coverage)
    for pi in sorted(best, key=lambda i: -best[i]):
        if best[pi] <= 0:
            break
        hint = visual_hint(passages[pi])
        if hint:
            where = passages[pi].citation or passages[pi].info_id or "the evidence"
            what = {"chart": "a chart", "table": "a table", "picture": "the picture"}[hint]
            return f"the answer may be in {what} on {where}; a VLM backend can read it"
    return ""


def read_answer(
    question: str, passages: list[Passage], lm: Any = None, encoder: Any = None, threshold: float = THRESHOLD
) -> Reading:
    """A short answer to `question` from `passages` (best first), with the sentence and unit it came from.

    `lm` (SmolLM2, optional) chooses among free-text spans; `encoder` (the retriever's MiniLM, optional)
    adds semantic similarity to term coverage. Abstains ("Not answerable") when the question names a
    specific no passage mentions, or no candidate's sentence covers `threshold` of the question's terms.
    """
    kind = answer_type(question)
    passages = [p for p in passages if p.text and p.text.strip()]
    if not passages:
        return Reading(NOT_ANSWERABLE, kind, note="no evidence text to read")
    missing = [w for w in missing_anchors(question, [p.text for p in passages]) if w.lower() not in _CUES]
    if missing:
        return Reading(NOT_ANSWERABLE, kind, note=f"the evidence never mentions {', '.join(missing[:3])}")
    sents = _sentences(passages)
    if not sents:
        return Reading(NOT_ANSWERABLE, kind, note=_limit_note(question, passages, sents))
    score_sentences(question, sents, passages, encoder)
    entity = kind in ("place", "person", "organization")
    body = sorted((s for s in sents if not (s.title or s.heading and not entity)), key=lambda s: (-s.score, s.index))
    pool = [s for s in body[:8] if s.coverage > 0]
    if kind in _TYPED:  # an e-mail, phone or URL asked for: wherever the pages print one
        pool += [s for s in body if s not in pool and _TYPED[kind].search(s.text)][:8]
    # entities sit beside the words that ask for them: a label line over a name ('GOVERNOR' / 'Rick Scott'),
    # or the sentence before a pronoun subject ('The Tampere factory ...' / 'It assembles ...')
    extra: list[_Sent] = []
    if entity:
        for s in pool[:5]:
            for j in (s.index - 1, s.index + 1):
                if (
                    0 <= j < len(sents)
                    and sents[j].passage == s.passage
                    and not sents[j].title
                    and sents[j] not in pool
                    and sents[j] not in extra
                    and (
                        len(sents[j].text) < 60
                        or j < s.index
                        and re.match(
                            r"(It|They|This|These|He|She|"
                            r"The company)\b",
                            s.text,
                        )
                    )
                ):
                    sents[j].score = max(sents[j].score, s.score - 0.1)
                    extra.append(sents[j])
        pool += extra
    if not pool or max(s.coverage for s in pool) < threshold * 0.5 and kind not in _TYPED:
        return Reading(NOT_ANSWERABLE, kind, note=_limit_note(question, passages, sents))
    if kind == "yes_no":
        best = pool[0]
        return _reading(_yes_no(question, best), kind, best, passages, best.score)
    if kind == "choice":
        picked = _choice_spans(question, pool, " ".join(p.text for p in passages))
        if picked:
            return _reading(picked[0].text, kind, pool[0], passages, pool[0].score)
    heads = {s.text.strip(" .").lower() for s in sents if s.heading or s.title}
    heads |= {
        ln.strip(" #.").lower()
        for p in passages
        for ln in p.text.split("\n")
        if ln.strip() and (ln.strip().startswith("#") or is_heading(ln))
    }
    ranked = [
        (sc, sp)
        for sc, sp in _rank(question, _spans(question, kind, pool, heads))
        if sp.text and (kind in _TYPED or sp.sent.coverage + (0.15 if sp.sent in extra else 0) >= threshold)
    ]
    if kind == "text" and lm is not None and len(ranked) > 1:
        ranked = _lm_order(lm, question, ranked)
    if not ranked:
        return Reading(NOT_ANSWERABLE, kind, note=_limit_note(question, passages, sents))
    score, top = ranked[0]
    out = _reading(reformat(question, top.text, kind), kind, top.sent, passages, score)
    out.candidates = list(dict.fromkeys(sp.text for _, sp in ranked[1:6]))
    return out


_MONTH_NUM = {
    m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)
}


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
    mon = re.search(_MONTHS, t)
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


def _lm_order(lm: Any, question: str, ranked: list[tuple[float, _Span]]) -> list[tuple[float, _Span]]:
    """SmolLM2's likelihood of each of the best 8 free-text spans as the answer, added to the rule score."""
    from agent.backends.smollm import SPAN_PROMPT

    top = ranked[:8]
    ctx = "\n".join(dict.fromkeys(sp.sent.text for _, sp in top))[:600]
    try:
        lps = lm.score(SPAN_PROMPT.format(ctx=ctx, q=question.strip()), [sp.text for _, sp in top])
    except Exception:  # noqa: BLE001 - the rules' order stands
        return ranked
    rescored = [(sc + 0.1 * lp, sp) for (sc, sp), lp in zip(top, lps)]
    rescored.sort(key=lambda x: -x[0])
    return rescored + ranked[8:]


def _reading(answer: str, kind: str, s: _Sent, passages: list[Passage], score: float) -> Reading:
    p = passages[s.passage]
    return Reading(answer, kind, sentence=s.text, citation=p.citation, info_id=p.info_id, score=round(score, 3))
