"""What a question asks for: the answer type the reader looks for (issue 13), the options of an either-or
question, and the side of a change it wants.

    question -> number, percent, money, duration, date, year, person, organization, place, yes/no, choice,
                list, frequency, expansion (an abbreviation spelled out), the document's title, a figure's or
                table's caption, e-mail / phone / URL, or free text

Rules over the question's wording, in order of how specific the cue is (an e-mail before a date before a
number). Entity types come from rules: no package on PyPI ships an English NER model inside its wheel
(spaCy's `en-core-web-*` are placeholders there, installed from GitHub releases; GLiNER and flair fetch
their weights from the hub), so there is nothing to load offline that beats these patterns.
"""

from __future__ import annotations

import re

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
    "color",
    "expansion",
    "definition",
    "consequence",
    "doc_title",
    "caption",
    "section_title",
    "email",
    "phone",
    "url",
    "text",
)
NUMERIC = ("number", "percent", "money", "duration", "year")

_MONEY_WORDS = (
    r"revenue|revenues|sales|cost|costs|price|prices|spend|spending|spent|budget|income|profit|profits|"
    r"earnings|salary|salaries|funding|investment|invest|dollars|euros|usd|eur|gbp|fee|fees|paid|pay"
)
_MEASURE_WORDS = (
    r"capacity|rate|total|amount|number|count|size|population|headcount|speed|score|age|height|weight|"
    r"length|distance|volume|temperature|value|level|ratio|average|mean|median|sum|difference|growth|"
    r"workforce|output|production|figure|gap"
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
DOC = r"slide|slides|document|paper|report|presentation|deck|article|book|guide|guidebook|brochure|poster|file"
FIGURE = r"figure|fig\.?|table|chart|diagram|graph|exhibit"
SECTION = r"unit|chapter|section|lesson|module|part|week|session|appendix|step|stage|phase"
_BYLINE = re.compile(
    r"\bwho (?:is|are|was|were) the (?:presenter|author|speaker|writer|lecturer|creator)s? of (?:this|the) "
    r"(?:" + DOC + r")\b|\bwho (?:presented|wrote|authored|gave) (?:this|the) (?:" + DOC + r")\b",
    re.I,
)
DURATION_UNITS = r"hours?|minutes?|seconds?|days?|weeks?|months?|years?|hrs?|mins?"


def answer_type(question: str) -> str:
    """The kind of answer `question` wants (one of ANSWER_TYPES).

    >>> [answer_type(q) for q in ("What defect rate did the factory reach?", "Who is the CEO?",
    ...  "When did the factory open?", "How long does the battery last?", "Is the plant open?")]
    ['percent', 'person', 'date', 'duration', 'yes_no']
    >>> answer_type("What is the phone number of the hotel?"), answer_type("How many own a cell phone?")
    ('phone', 'number')
    >>> answer_type("From the report, whose rating rose in his last year?"), answer_type("How many used it when?")
    ('person', 'number')
    """
    q = " " + question.lower().replace("’", "'") + " "
    if re.search(r"e-?mail", q):
        return "email"
    # a phone number, not a phone as a device ('own a cell phone and a tablet')
    if re.search(r"\b(tele)?phone\b|\btel\b|\bfax\b|contact number", q) and not re.search(
        r"\b(cell|mobile|smart|smartphone)[ -]?phones?\b|\bphones? (users?|owners?|ownership|adoption|use)\b", q
    ):
        return "phone"
    if re.search(r"website|\burl\b|web address|\blink\b", q):
        return "url"
    start = q.strip()
    laid_out = doc_kind(question)  # the document's title, or a figure's or table's caption
    if laid_out:
        return laid_out
    if re.search(r"\bstand for\b|\bstands for\b|\babbreviation\b|\bacronym\b|\bshort for\b|\bfull (form|name)\b", q):
        return "expansion"
    term = definition_term(question)
    if term:  # 'What does NARL mean?' asks for an abbreviation's expansion
        return "expansion" if re.fullmatch(r"[A-Z][A-Z0-9&-]{1,9}", term.strip("'\"“”")) else "definition"
    if consequence_condition(question):
        return "consequence"
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
    # 'among Clinton, Bush and Obama, whose rating rose in his last year?' asks for a person, not a year
    if re.match(r"(?:(?:among|from|according to|in|of|as of|for)\b[^?,]*,\s*)*(who|whose|whom)\b", start):
        return "person"
    # 'What is the color of the icons ...?', 'WHAT IS THE LOGO COLOR?'; not 'the green color of the machine'
    if re.search(
        r"\b(what|which)( is| are| was| were|'s)? the colou?rs?\b|\bwhat colou?rs?\b|\bcolou?rs?\s*\?*$", start
    ):
        return "color"
    if re.search(r"\b(which|what|in what) year\b|\bwhat year\b|\b(last|first|latest|earliest) year\b", q):
        return "year"
    if re.search(r"\bhow long\b|\bduration\b|\bruntime\b|\bhow many (" + DURATION_UNITS + r")\b", q):
        return "duration"
    # 'How many claims have the highest percentage ...?' counts claims; 'how many dollars' is money, below
    if counted_thing(question) and not re.search(r"\bhow many\s+(?:\w+\s+)?(" + _MONEY_WORDS + r")\b", q):
        return "number"
    if re.search(r"\bpercent|percentage|\bproportion\b|\bshare\b|%|\brate\b|\bcagr\b", q) and not re.search(
        r"\bper (hour|day|minute|second|shift|week|month|year)\b", q
    ):
        return "percent"
    # 'How many people used a debit card when sales reached 50 billion?' counts; its 'when' says which moment
    if not re.search(r"\bhow (many|much)\b", start) and re.search(
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


# Where the thing a count question asks about ends: 'How many regulations | of the Act ...'
_COUNTED_END = re.compile(
    r"\b(?:of|in|on|at|for|from|by|with|that|which|who|are|is|was|were|do|does|did|has|have|had|can|could|will|"
    r"would|should|must|may|there|than|per|to|when|where|according)\b|[,?;:(]",
    re.I,
)


def counted_thing(question: str) -> str:
    """What a 'how many' question counts ('How many regulations of the Act are breached?': 'regulations'); '' where
    the question compares or asks for times, a share or a duration, which other readers answer ('how many more',
    'how many times', 'how many percent', 'how many hours').

    >>> counted_thing("How many square miles does the county cover?"), counted_thing("How many more tweets?")
    ('square miles', '')
    """
    m = re.search(r"\bhow many\s+(.*)", question, re.I)
    if not m or re.match(r"(?:more|less|fewer|times|percent|%|in total)\b", m.group(1), re.I):
        return ""
    head = _COUNTED_END.split(m.group(1), maxsplit=1)[0].strip()
    return "" if re.search(DURATION_UNITS, head, re.I) or not re.search(r"[A-Za-z]{3,}", head) else head


def choices(question: str) -> list[str]:
    """The options of an either-or question ('which is greater, A or B?') or of a listed pick ('among A, B and C,
    which ...?'), else [].

    >>> choices("Which one is greater in population? Foreign born Latinos, or the Latinos interviewed by cellphone?")
    ['Foreign born Latinos', 'the Latinos interviewed by cellphone']
    >>> choices("How many people do not go online or only use SNS?")
    []
    >>> choices("Among the three strategies: training-time, generation-time, and post-hoc, which one has most?")
    ['training-time', 'generation-time', 'post-hoc']
    >>> choices("Among all charts in this report, how many compare the public with the Latinos?")
    []
    """
    q = question.strip()
    if not re.search(r"\b(which|who|whose|what|whether|are there more|is there more|is it)\b", q, re.I):
        return []
    # 'Among the three strategies: A, B, and C, which one ...?', 'among A, B and C, whose ...?'
    listed = re.search(
        r"\bamong\s+(?:the\s+\w+\s+[^:,]{0,40}:\s*)?([^:?]{3,200}?),\s*(?:which|who|whose|what)\b", q, re.I
    )
    if listed:
        opts = [o.strip() for o in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", listed.group(1)) if o.strip()]
        if 3 <= len(opts) <= 6 and all(len(o.split()) <= 5 for o in opts):
            return opts
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


def doc_kind(question: str) -> str:
    """'doc_title', 'caption' or 'section_title' when the question asks for one, else ''.

    >>> doc_kind("What is the title of the slide?"), doc_kind("What is the title of the of the Figure 2?")
    ('doc_title', 'caption')
    >>> doc_kind("What's the topic of UNIT 14?")
    'section_title'
    >>> doc_kind("What is the title of the diagram on page 9?"), doc_kind("What is the revenue?")
    ('', '')
    """
    q = question.lower()
    if re.search(r"\b(title|caption|name) of (the )?(of )?(the )?(" + FIGURE + r")\s*\d+\b", q):
        return "caption"
    if re.search(r"\b(title|topic|name|subject|theme|heading) of (the )?(" + SECTION + r")[- ]?(\d+|[a-h])\b", q):
        return "section_title"
    if re.search(r"\btitle of (this|the) (" + DOC + r")\b", q) and not re.search(
        r"\b(" + FIGURE + r"|section|chapter|unit|case study)\b", q
    ):
        return "doc_title"
    return ""


def wants_byline(question: str) -> bool:
    """Whether the question asks who presents or wrote the document itself.

    >>> wants_byline("who is the presenter of this slide?"), wants_byline("Who is the CEO of Aurora?")
    (True, False)
    """
    return bool(_BYLINE.search(question))


_DEFINE = re.compile(
    r"\bhow (?:does|do|did|is|are|was|were)\b.*?\bdefin(?:e|es|ed)\s+(?P<a>.+?)\s*\??\s*$"
    r"|\b(?:what is|what's|give|state) (?:the )?(?:definition|meaning) of\s+(?P<b>.+?)\s*\??\s*$"
    r"|\bwhat is meant by\s+(?P<c>.+?)\s*\??\s*$"
    r"|\bwhat (?:does|do) (?:the )?(?:term |word |phrase )?(?P<d>.+?) mean\s*\??\s*$",
    re.I,
)
_CONSEQUENCE = re.compile(
    r"^\s*(?:what (?:will|would|could|might) happen|what happens|what is the (?:result|consequence|effect)|"
    r"what if)\b(?:\s+(?:if|when|once|after|whenever))?\s*(?P<cond>.+?)\s*\??\s*$",
    re.I,
)
# a code that keys a table row: two to four capitals then two to four digits ('AR01', 'CA19'); a model name such
# as 'X2' or a quarter such as 'Q3' is not one
KEY = re.compile(r"\b(?!FY\d+\b)[A-Z]{2,4}\d{2,4}\b")


def definition_term(question: str) -> str:
    """The term whose definition the question asks for, or ''.

    >>> definition_term("How does this document define the law of good gestalt?")
    'the law of good gestalt'
    >>> definition_term("What does the term 'significance' mean?"), definition_term("What is the revenue?")
    ("'significance'", '')
    """
    m = _DEFINE.search(question.strip())
    if not m:
        return ""
    term = next(g for g in m.groups() if g)
    return "" if len(term.split()) > 8 else term


def consequence_condition(question: str) -> str:
    """The condition of a 'what happens if/when ...' question, or ''.

    >>> consequence_condition("What will happen when you press and hold the down button?")
    'you press and hold the down button'
    >>> consequence_condition("What is the revenue?")
    ''
    """
    m = _CONSEQUENCE.match(question)
    return m.group("cond") if m and m.group("cond") else ""


def question_keys(question: str) -> list[str]:
    """The row keys a question looks up ('AR01'); not years or quarters, nor a key offered as one side of a
    choice ('CA19 or Covina and West Covina': the answer is one of the two, not CA19's row).

    >>> question_keys("What's the geographic market name for EPS Code AR01?"), question_keys("Q3 2015 revenue?")
    (['AR01'], [])
    >>> question_keys("Which is larger, CA19 or Covina and West Covina?")
    []
    """
    keys = (m for m in KEY.finditer(question) if not re.search(r"\bor\s+$", question[: m.start()]))
    return list(dict.fromkeys(m.group() for m in keys if not re.match(r"\s+or\b", question[m.end() :])))


# 'How many more tweets went to Germanwings than to Lufthansa?', 'the difference between A and B'
_DIFFERENCE = re.compile(
    r"\bhow (?:much|many)\s+(?P<cmp>more|less|fewer|higher|lower|larger|smaller|bigger|greater)\b(?P<a>.*?)"
    r"\b(?:than|compared (?:to|with)|comparing to|versus|vs\.?)\s+(?P<b>[^?.,]+)"
    r"|\b(?:difference|gap)\b(?:\s+[\w.%-]+){0,8}?\s+between\s+(?P<a2>[^?]+?)\s+and\s+(?P<b2>[^?.,]+)",
    re.I,
)


def difference_sides(question: str) -> tuple[str, str, int] | None:
    """(A, B, sign) when the question asks how far apart two values are: sign 1 for 'how much more/higher A than
    B' (A - B), -1 for 'how much less/lower' (B - A), 0 for 'the difference/gap between A and B' (|A - B|).

    >>> difference_sides("How many more tweets are attributed to Germanwings than Lufthansa?")
    ('tweets are attributed to Germanwings', 'Lufthansa', 1)
    >>> difference_sides("What is the gap in revenue between Europe and Asia Pacific?")
    ('Europe', 'Asia Pacific', 0)
    >>> difference_sides("How many more robots were shipped in 2025?") is None
    True
    """
    m = _DIFFERENCE.search(question)
    if not m:
        return None
    if m.group("a2") is not None:
        return m.group("a2").strip(), m.group("b2").strip(), 0
    sign = -1 if m.group("cmp").lower() in ("less", "fewer", "lower", "smaller") else 1
    return m.group("a").strip(), m.group("b").strip(), sign


# 'What is the gap of 65+ people with ...', 'the absolute percent change of ...': a change or gap asked for by name
_CHANGE = re.compile(
    r"\b(?:difference|gap|change)\b|\bhow much (?:did|has|have|had|does|do|will)\b.*\b(?:increase|"
    r"decrease|rise|grow|fall|drop|decline|change|improve)",
    re.I,
)


def asks_change(question: str) -> bool:
    """Whether the question asks how far apart two values are, named or not (a difference, gap or change).

    >>> asks_change("What is the gap of 65+ people with a tablet?"), asks_change("How much did sales rise in 2024?")
    (True, True)
    >>> asks_change("How many robots were shipped?")
    False
    """
    return bool(difference_sides(question) or _CHANGE.search(question))


# 'the sum of A and B', 'the total percentage of A and B', 'A, B and C in total', 'units 4, 5, and 6 combined'
_SUM = re.compile(
    r"\b(?:sum|total|combined)\b(?:\s+[\w.%'`-]+){0,4}?\s+(?:of|in|for)\s+(?P<a>[^?]+?\s+and\s+[^?]+?)\s*(?:\?|$)"
    r"|\b(?:are|were|is|was|of|in)\s+(?P<b>[^?]+?\s+and\s+[^?]+?)\s+(?:combined|in total|altogether|together)\b",
    re.I,
)


def sum_parts(question: str) -> list[str]:
    """The parts a question asks to add up ('the sum of A and B'), else []: a single value printed in the text is
    the answer only when the text states it as their total.

    >>> sum_parts("What is the sum of percentage of customers and employees who said yes?")
    ['percentage of customers', 'employees who said yes']
    >>> sum_parts("How many Tweets are attributed to Germanwings, Lufthansa, and Airbus in total?")
    ['attributed to Germanwings', 'Lufthansa', 'Airbus']
    >>> sum_parts("How many figures are there in total in the article?"), sum_parts("What is the total revenue?")
    ([], [])
    """
    m = _SUM.search(question)
    if not m:
        return []
    parts = [p.strip(" `'\"") for p in re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group("a") or m.group("b"))]
    parts = [p for p in parts if p]
    return parts if len(parts) >= 2 and all(len(p.split()) <= 12 for p in parts) else []


_PAGES = re.compile(
    r"\b(?:page|pages|slide|slides|p\.)\s*(?P<a>\d{1,4})(?:\s*(?:-|–|to|and|&)\s*(?:page\s*|slide\s*)?(?P<b>\d{1,4}))?\b",
    re.I,
)


def asked_pages(question: str) -> list[tuple[int, int]]:
    """The page ranges the question says to look at ('on page 10', 'in Pages 100-110', 'page 15 and page 16').

    >>> asked_pages("How many images are there in Pages 100-110?"), asked_pages("the logos on page 10 and page 12")
    ([(100, 110)], [(10, 12)])
    >>> asked_pages("How many robots were shipped?")
    []
    """
    out = []
    for m in _PAGES.finditer(question):
        a = int(m.group("a"))
        b = int(m.group("b")) if m.group("b") else a
        out.append((min(a, b), max(a, b)))
    return out


def without_pages(question: str) -> str:
    """The question without the pages it says to look at, whose numbers are not words to find in the text.

    >>> without_pages("How many rooms are there on page 10?")
    'How many rooms are there on ?'
    """
    return " ".join(_PAGES.sub("", question).split())


# how text looks on the page, which a text layer does not record: 'the underlined italic words in page 2'
# ('Which risks are highlighted in the report?' is not about how words look)
_STYLE = re.compile(
    r"\b(underlined|italics?|italicized|bold|boldface|highlighted|strike-?through)\b(?:\s+\w+){0,2}?\s+"
    r"(?:words?|texts?|numerals?|numbers?|letters?|sentences?|phrases?|font|lines?|titles?)\b"
    r"|\bin\s+(italics?|bold|boldface)\b"
    r"|\b(highlighted|underlined)\s+in\s+(?:red|green|blue|yellow|orange|purple|pink|gr[ae]y|black)\b",
    re.I,
)


def asks_style(question: str) -> str:
    """The typographic style a question picks its text by ('underlined', 'italic', 'bold', 'highlighted'), or ''.

    >>> asks_style("What is the text of the underlined italic words on page 2?"), asks_style("Who wrote it?")
    ('underlined', '')
    >>> asks_style("How many lines are highlighted in yellow?"), asks_style("Which risks are highlighted in it?")
    ('highlighted', '')
    """
    m = _STYLE.search(question)
    return next(g for g in m.groups() if g).lower() if m else ""
