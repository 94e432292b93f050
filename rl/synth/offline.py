"""The offline question writer: natural questions read out of an index's text and OCR, with no model.

Each rule turns one kind of printed statement into the question it answers, rewording it as a person would
ask (the wh-word moved to the front, the verb inverted), never as a sentence with a blank:

    "About six-in-ten Republicans (59%) say the economy is good."  ->  What percentage of Republicans say the
                                                                       economy is good?          (59%)
    "The campus has 12 libraries."                                 ->  How many libraries does the campus have?
    "The median age was 38 in 2010."                               ->  What was the median age in 2010?
    "Intersection over Union (IoU) ..."                            ->  What does IoU stand for?
    "Table 3: Accuracy on GSM8K with different prompts"            ->  Which table reports accuracy on GSM8K
                                                                       with different prompts?   (Table 3)
    a slide or page whose first line is its title                  ->  What is the title of page 7 of X?

Two facts from different pages make a two-hop, multi-page question ("..., and what percentage of ...?").
A rule only fires where its pattern leaves nothing to guess: a statement that leans on the sentence before it
("this", "these", "it"), or holds a second number the question could mean, is passed over. Every draft carries
the sentence it came from, so the grounded check and a reader of the card can see why its answer is right.

Left out on purpose: arithmetic answers (a sum or a difference is not printed, so the grounded check could not
hold), and reading values out of charts' drawn marks (the text layer does not place them; a VLM generator can).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent.reader.sentences import is_heading

# a number as documents print it: 1,234 | 12.5 | $48.6 | S$ 5,000 | 59%
NUM = r"(?:(?:US|S|A|C|HK)?\$\s?|€|£)?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?:(?:US|S|A|C|HK)?\$\s?|€|£)?\d+(?:\.\d+)?"
UNIT = (
    r"(?:\s?(?:%|percent|per cent)|\s(?:million|billion|thousand|trillion|years?|months?|weeks?|days?|hours?|"
    r"minutes?|seconds?|km|kg|mm|cm|m|g|GB|MB|TB|MHz|GHz|mAh|W|kW|V|°C|°F|inches|feet|miles|points?|"
    r"percentage points?))?"
)
# words that lean on what came before: a question built on them would not stand alone
_DEICTIC = re.compile(
    r"\b(this|these|those|that|it|its|they|them|their|such|above|below|following|previous|former|latter|here|"
    r"same|other|we|our|us|you|your|he|she|his|her)\b",
    re.I,
)
_SAY = (
    "say|said|think|thought|believe|believed|are|were|have|had|view|viewed|see|saw|favor|favored|favour|"
    "support|supported|oppose|opposed|expect|expected|use|used|own|owned|approve|approved|disapprove|"
    "disapproved|want|wanted|rate|rated|describe|described|report|reported|feel|felt|agree|agreed|prefer|"
    "preferred|trust|trusted|worry|worried|consider|considered|identify|identified|live|lived|go|went|"
    "would|could|should|will|can|do|did|read|get|got|play|played|watch|watched|know|knew"
)
_SHARE_WORDS = (
    r"(?:[Aa]bout|[Rr]oughly|[Nn]early|[Aa]lmost|[Ss]ome|[Ff]ully|[Jj]ust|[Oo]nly|[Aa]round|[Mm]ore than|"
    r"[Ff]ewer than|[Ll]ess than|[Oo]ver|[Uu]nder)"
)
_PCT = r"\d{1,3}(?:\.\d)?%"

# "45% of Republicans say ..." / "About 45% of ..."; and "(Among Republicans,) 45% say ..."
_PCT_OF = re.compile(
    rf"^(?:{_SHARE_WORDS}\s+)?(?P<num>{_PCT}) of (?P<group>[^,;()%\d]{{3,70}}?) (?:now |also |still )?(?P<verb>{_SAY}) "
    rf"(?P<rest>[^;]{{6,220}}?)[.;]?$"
)
_BARE_PCT = re.compile(
    rf"^(?:{_SHARE_WORDS}\s+)?(?P<num>{_PCT}) (?:now |also |still )?(?P<verb>{_SAY}) (?P<rest>[^;%\d]{{6,150}}?)[.;]?$"
)
# "About six-in-ten Republicans (59%) say ..." / "A majority of adults (59%) say ..."
_IN_TEN = re.compile(
    rf"^(?:{_SHARE_WORDS}\s+)?(?:(?:one|two|three|four|five|six|seven|eight|nine)-in-(?:ten|10)|(?:[Aa]|[Tt]he) "
    rf"(?:majority|minority|plurality|third|quarter|half) of|(?:[Mm]ost|[Hh]alf|[Tt]wo-thirds|[Tt]hree-quarters|"
    rf"[Oo]ne-third|[Oo]ne-quarter) of) (?P<group>[^,;()%\d]{{3,60}}?) \((?P<num>{_PCT})\) (?P<verb>{_SAY}) "
    rf"(?P<rest>[^;]{{6,220}}?)[.;]?$"
)
# "There are 12 libraries on campus."
_THERE = re.compile(
    r"^There (?P<cop>are|were) (?:about |approximately |around |nearly |over |more than )?"
    r"(?P<num>\d{1,3}(?:,\d{3})*) "
    r"(?P<noun>[a-z][a-z -]{2,40}?) (?P<rest>(?:in|on|at|across|within|for|per|inside) [^.;\d]{3,90}?)[.;]?$"
)
# "The campus has 12 libraries." (a count of things something has)
_HAS = re.compile(
    r"^(?P<subj>(?:The|Each|Every) [A-Za-z][^,;\d]{2,60}?) (?P<verb>has|have|had|contains|contained|includes|"
    r"included|offers|offered|employs|employed|comprises|consists of|features) (?:about |approximately |around |"
    r"nearly |over |more than )?(?P<num>\d{1,3}(?:,\d{3})*) (?P<noun>[a-z][a-z -]{2,40}?)"
    r"(?P<rest>(?: (?:in|on|at|across|for|from|since|by|during|as of) [^.;,\d]{2,60}?)?)[.;]?$"
)
_BASE = {
    "has": ("does", "have"),
    "have": ("do", "have"),
    "had": ("did", "have"),
    "contains": ("does", "contain"),
    "contained": ("did", "contain"),
    "includes": ("does", "include"),
    "included": ("did", "include"),
    "offers": ("does", "offer"),
    "offered": ("did", "offer"),
    "employs": ("does", "employ"),
    "employed": ("did", "employ"),
    "comprises": ("does", "comprise"),
    "consists of": ("does", "consist of"),
    "features": ("does", "feature"),
}
# "The median age was 38 in 2010." (a value stated of a named quantity)
_COPULA = re.compile(
    rf"^(?P<subj>The [a-z][a-z' -]{{3,70}}?(?: of [A-Za-z][\w' -]{{2,50}}?)?) (?P<cop>is|was|are|were) "
    rf"(?:about |approximately |around |nearly |almost |roughly |just |only |over |under )?(?P<num>(?:{NUM}){UNIT})"
    rf"(?P<rest>(?: (?:in|on|at|for|as of|by|per|among|across) [^.;\d]{{2,50}}?| in (?:19|20)\d\d)?)[.;]?$"
)
# "Intersection over Union (IoU)"
_ACRONYM = re.compile(
    r"\b(?P<long>(?:[A-Z][a-z]+(?:-[A-Za-z]+)?\s(?:(?:of|for|and|in|on|to|over|the)\s)?){1,6}[A-Z][a-z]+) "
    r"\((?P<abbr>[A-Z][A-Za-z]{1,6})\)"
)
# "Table 3: Accuracy on GSM8K ..." / "Figure 2. Distribution of ..."
_CAPTION = re.compile(r"^(?P<kind>Table|Figure|Fig\.)\s+(?P<n>\d{1,2})\s*[:.|]\s+(?P<body>[A-Z][^.]{12,110}?)(?:\.|$)")
_CAPTION_LEAD = {
    "overview": "an overview",
    "illustration": "an illustration",
    "example": "an example",
    "examples": "examples",
    "comparison": "a comparison",
    "summary": "a summary",
    "breakdown": "a breakdown",
    "case study": "a case study",
}
_CHART_WORDS = re.compile(
    r"\b(distribution|trend|share|percent|percentage|rate|accuracy|performance|scores?|results?|growth|"
    r"comparison|curve|over time|by year|by age|histogram|proportion|number of|frequency)\b",
    re.I,
)
# "The company was founded in 1998."
_YEAR = re.compile(
    r"^(?P<subj>[A-Z][\w&'’ .-]{2,60}?) (?P<aux>was|were) (?:first |officially |originally )?(?P<verb>founded|"
    r"established|launched|released|introduced|created|built|opened|formed|published|incorporated|completed|"
    r"enacted|adopted|renamed)(?P<mid> (?:as|by|at) [^,;.\d]{2,40}?)? in (?P<year>(?:1[5-9]|20)\d\d)[.;]$"
)
# "Exports account for 45% of output."
_ACCOUNT = re.compile(
    r"^(?P<subj>[A-Z][^,;%\d]{2,60}?) (?P<verb>accounts|account|accounted) for (?:about |nearly |almost |roughly |"
    rf"over |more than |just |only )?(?P<num>{_PCT}) of (?P<obj>[^,;%\d]{{3,60}}?)[.;]$"
)
# "A full charge takes about 2 hours."
_TAKES = re.compile(
    r"^(?P<subj>[A-Z][^,;%\d]{2,60}?) (?P<verb>takes|took|lasts|lasted) (?:about |approximately |up to |around |"
    r"at least |roughly |only )?(?P<num>\d+(?:\.\d+)? (?:seconds?|minutes?|hours?|days?|weeks?|months?|years?))"
    r"(?P<rest>(?: (?:to|for|on|in|with) [^,;.\d]{2,60}?)?)[.;]$"
)
# "Press and hold the Up button for 3 seconds to restart the watch."
_HOLD = re.compile(
    r"^(?P<act>Press and hold|Touch and hold|Hold down|Hold|Press|Wait|Charge|Soak|Leave|Keep) (?P<obj>[^,;.\d]{2,60}?)"
    r" for (?:about |approximately |at least |around |up to )?(?P<num>\d+(?:\.\d+)? (?:seconds?|minutes?|"
    r"hours?|days?)) (?P<conn>to|until) (?P<goal>[^;.\d]{3,90}?)[.;]$"
)
# "Tuition costs $5,000 per year."
_COSTS = re.compile(
    r"^(?P<subj>[A-Z][^,;%\d]{2,60}?) (?P<verb>costs|cost) (?:about |approximately |around |only |just )?"
    r"(?P<num>(?:US|S|A|C|HK)?\$\s?\d[\d,]*(?:\.\d+)?(?: (?:million|billion|thousand))?)"
    r"(?P<rest>(?: (?:per|a|each|for) "
    r"[^,;.\d]{2,40}?)?)[.;]$"
)
# a table of contents line: "Data Analysis ............ 10"
_TOC = re.compile(r"^(?P<sec>[A-Z][A-Za-z][\w ,&'’:()/-]{3,70}?)\s*(?:\.\s?){4,}\s*(?P<page>\d{1,3})$")

TYPES = ("text", "table", "chart", "layout", "multi-page", "video")


@dataclass
class Draft:
    """One question read off the corpus, before any check."""

    question: str
    answer: str
    type: str  # one of TYPES
    rule: str  # which rule wrote it
    sentence: str  # the printed statement it rests on
    unit: dict[str, Any]  # the unit's provenance: source, page / start / end, doc
    hops: int = 1
    answer_format: str = ""  # MMLongBench-Doc's: Int | Float | Str | List
    parts: list["Draft"] = field(default_factory=list)  # a multi-page draft's two facts


def _fmt(answer: str) -> str:
    a = answer.replace(",", "").strip()
    if re.fullmatch(r"\d+", a):
        return "Int"
    if re.fullmatch(r"[$€£]?\s?\d+\.\d+%?|\d+(?:\.\d+)?%", a):
        return "Float"
    return "Str"


def _lower_first(text: str, vocab: Vocab | None = None) -> str:
    """'The median age' -> 'the median age', moved inside a question; a name keeps its capitals ('Americans',
    'GSM8K', 'New York'). A capitalised first word is lower-cased when the corpus mostly prints it in lower case
    (`vocab.common`), kept when the corpus mostly prints it capitalised (`vocab.names`), and
    otherwise lower-cased when the next word is in lower case (sentence case: 'Accuracy of ...').

    >>> _lower_first("The median age"), _lower_first("GSM8K accuracy"), _lower_first("Accuracy of models")
    ('the median age', 'GSM8K accuracy', 'accuracy of models')
    >>> _lower_first("F1-scores difference")
    'F1-scores difference'
    """
    vocab = vocab or EMPTY
    words = text.split(" ")
    first, nxt = words[0], (words[1] if len(words) > 1 else "")
    if first in _LEADS:
        return text[0].lower() + text[1:]
    if not re.fullmatch(r"[A-Z][a-z]+(?:-[a-z]+)*", first) or first.lower() in vocab.names:  # 'F1-scores' stays
        return text
    if first.lower() in vocab.common or nxt[:1].islower():
        return text[0].lower() + text[1:]
    return text


_LEADS = {"The", "A", "An", "Each", "Every"}


@dataclass(frozen=True)
class Vocab:
    """What a corpus says about its words: `common`, printed mostly in lower case away from a sentence's start
    ('number', 'accuracy'); `names`, mostly capitalised there ('Americans', 'China'); `known`, printed at least
    twice. Empty, it knows nothing and every rule falls back to the words' shapes.

    >>> v = Vocab.learn(["Most Americans say the number rose.", "The number of Americans fell."])
    >>> sorted(v.common), sorted(v.names), sorted(v.known)
    (['fell', 'number', 'of', 'rose', 'say', 'the'], ['americans'], ['americans', 'number'])
    """

    common: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()

    @classmethod
    def learn(cls, texts: Any) -> "Vocab":
        from collections import Counter

        low, cap = Counter(), Counter()
        for text in texts:
            for m in re.finditer(r"(?<=[a-z,] )([A-Za-z][a-z]+(?:-[a-z]+)*)\b", text or ""):
                w = m.group(1)
                (low if w[0].islower() else cap)[w.lower()] += 1
        return cls(
            frozenset(w for w, n in low.items() if n > cap[w]),
            frozenset(w for w, n in cap.items() if n > low[w]),
            frozenset(w for w, n in (low + cap).items() if n >= 2),
        )


EMPTY = Vocab()


def sentences(text: str) -> list[str]:
    r"""A page's complete sentences: each paragraph's wrapped lines joined (words hyphenated at a line end mended),
    then cut after . ! ? before a capital. Lines in columns narrower than prose are joined too, which
    agent.reader.words.split_sentences keeps apart as labels. A line stands alone (a paragraph of its own) when
    it is a heading, the page's first line, a short caption, or a short line that cannot go on into the next:
    a label or a table row ('Westfield 41 min') before a capitalised line.

    >>> sentences("Introduction to the survey\nAbout 62% of commuters say the trains\nare too crowded. It rains.")
    ['Introduction to the survey', 'About 62% of commuters say the trains are too crowded.', 'It rains.']
    >>> sentences("Table 2: Commute time\nWestfield 41 min\nOld Port 29 min\nThe median was 34 minutes.")
    ['Table 2: Commute time', 'Westfield 41 min', 'Old Port 29 min', 'The median was 34 minutes.']
    """
    lines = [ln.strip() for ln in (text or "").replace("\r", "").split("\n")]
    paras: list[list[str]] = []
    cur: list[str] = []
    for i, s in enumerate(lines):
        nxt = next((x for x in lines[i + 1 :] if x), "")
        if not s or is_heading(s):  # a heading ends a paragraph and is no sentence (boilerplate is dropped)
            paras.append(cur)
            cur = []
            continue
        cur.append(s)
        if _alone(s, nxt, first=not any(lines[:i])):
            paras.append(cur)
            cur = []
    paras.append(cur)
    out = []
    for para in paras:
        joined = re.sub(r"(\w)- (\w)", r"\1\2", " ".join(para))  # 'improve- ment' wrapped at a line end
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"“(])", joined) if s.strip()]
    return out


def _alone(line: str, nxt: str, first: bool) -> bool:
    """Whether `line` ends its paragraph although it ends with no full stop."""
    if re.search(r"[.!?;:,]$", line) or re.search(r"\b(?:the|a|an|of|to|and|or|in|on|for|with|by|at)$", line, re.I):
        return False
    if first or (_CAPTION.match(line) and len(line) < 60):
        return True
    words = line.split()
    starts_new = nxt[:1].isupper() or nxt[:1].isdigit()
    if len(words) <= 8 and "," not in line and starts_new:
        return True  # a title, label or table row: prose wrapped mid-sentence goes on in lower case
    return False


def _clean_rest(rest: str) -> str | None:
    """The predicate a question keeps: up to the first comma (what follows compares, qualifies or lists another
    fact), and only if it stands alone."""
    rest = rest.split(",")[0].strip()
    # 'they' and 'their' in the predicate are the group the question names ('45% say they expect ...')
    if (
        re.search(r"[\d%]", rest)
        or len(rest.split()) < 2
        or _DEICTIC.search(re.sub(r"\b(they|their|them)\b", "", rest))
    ):
        return None
    if re.search(r"\b(the|a|an|of|to|and|or|than|in|for|with)$", rest):
        return None
    if re.search(r"\b(?:a certain|certain|some kind of|such)\b", rest):  # a made-up example, not a finding
        return None
    return rest


# sentence openers a question does without; a lead that scopes the fact ("In 2020,", "Among adults,") is kept
_OPENERS = re.compile(
    r"^(?:Still|Overall|Today|Now|Meanwhile|Similarly|Likewise|By contrast|By comparison|In addition|Moreover|"
    r"However|Indeed|And|But|Yet|Also|In fact|In total|Altogether|In comparison|Even so),?\s+"
)
_LEAD = re.compile(r"^(?P<lead>(?:Among|In|As of|By) [^,;%]{3,60}), (?P<body>.*)$")


def _clauses(sent: str) -> list[tuple[str, str]]:
    """(lead, clause) pairs a share rule may start at: the sentence, and what follows a colon or semicolon; a
    leading 'While'/'Although' clause is its own."""
    out = []
    for part in re.split(r"(?:[:;]| – | — )\s+", sent):
        part = _OPENERS.sub("", part.strip())
        part = re.sub(r"^(?:While|Although|Whereas|Though) ", "", part)
        m = _LEAD.match(part)
        out.append((m["lead"], m["body"]) if m else ("", part))
    return out


def _sentence_drafts(sent: str, unit: dict[str, Any], kind: str, vocab: Vocab = EMPTY) -> list[Draft]:
    def low(text: str) -> str:
        return _lower_first(text, vocab)

    out = []
    s = sent.strip()
    for lead, clause in _clauses(s):
        if _DEICTIC.search(lead):
            continue
        m = _PCT_OF.match(clause) or _IN_TEN.match(clause)
        if m and not _DEICTIC.search(m["group"]):
            rest = _clean_rest(m["rest"])
            if rest:
                q = f"what percentage of {low(m['group'].strip())} {m['verb']} {rest}?"
                q = f"{lead}, {q}" if lead else q[0].upper() + q[1:]
                out.append(Draft(q, m["num"], kind, "share", s, unit, answer_format="Float"))
                continue
        m = _BARE_PCT.match(clause)
        if m and lead.startswith("Among"):
            rest = _clean_rest(m["rest"])
            if rest:
                q = f"{lead}, what percentage {m['verb']} {rest}?"
                out.append(Draft(q, m["num"], kind, "share", s, unit, answer_format="Float"))
    m = _THERE.match(s)
    if m and not _DEICTIC.search(m["rest"]) and not _DEICTIC.search(m["noun"]):
        q = f"How many {m['noun'].strip()} {m['cop']} there {m['rest'].strip()}?"
        out.append(Draft(q, m["num"], kind, "count", s, unit, answer_format="Int"))
    m = _HAS.match(s)
    if m and not _DEICTIC.search(m["subj"] + " " + m["noun"] + " " + (m["rest"] or "")):
        aux, base = _BASE[m["verb"]]
        noun = m["noun"].strip()
        if not re.search(r"\b(of|and|or|to|the|a|an)$", noun):
            q = f"How many {noun} {aux} {low(m['subj'])} {base}{m['rest'] or ''}?"
            out.append(Draft(q, m["num"], kind, "count", s, unit, answer_format="Int"))
    m = _COPULA.match(s)
    if m and not _DEICTIC.search(m["subj"] + " " + (m["rest"] or "")) and s.count("%") <= 1:
        subj = m["subj"]
        if not re.search(r"\b(of|and|or|to|the|a|an|in|for)$", subj) and len(re.findall(NUM, s)) <= 2:
            q = f"What {m['cop']} {low(subj)}{m['rest'] or ''}?"
            out.append(Draft(q, m["num"].strip(), kind, "value", s, unit, answer_format=_fmt(m["num"])))
    m = _YEAR.match(s)
    if m and not _DEICTIC.search(m["subj"] + (m["mid"] or "")) and not s.startswith(("It ", "This ", "The first")):
        q = f"In what year {m['aux']} {low(m['subj'])} {m['verb']}{m['mid'] or ''}?"
        out.append(Draft(q, m["year"], kind, "year", s, unit, answer_format="Int"))
    m = _ACCOUNT.match(s)
    if m and not _DEICTIC.search(m["subj"] + " " + m["obj"]):
        aux = "did" if m["verb"] == "accounted" else ("does" if m["verb"] == "accounts" else "do")
        q = f"What percentage of {m['obj'].strip()} {aux} {low(m['subj'])} account for?"
        out.append(Draft(q, m["num"], kind, "share", s, unit, answer_format="Float"))
    m = _TAKES.match(s)
    if m and not _DEICTIC.search(m["subj"] + (m["rest"] or "")):
        aux = "did" if m["verb"] in ("took", "lasted") else ("do" if _plural(m["subj"]) else "does")
        base = "take" if m["verb"].startswith("t") else "last"
        q = f"How long {aux} {low(m['subj'])} {base}{m['rest'] or ''}?"
        out.append(Draft(q, m["num"], kind, "duration", s, unit, answer_format="Str"))
    m = _HOLD.match(s)
    if m and not re.search(r"\b(it|this|that|them)\b", m["obj"] + " " + m["goal"], re.I):
        q = f"How long should you {m['act'].lower()} {m['obj']} {m['conn']} {m['goal']}?"
        out.append(Draft(q, m["num"], kind, "duration", s, unit, answer_format="Str"))
    m = _COSTS.match(s)
    if m and not _DEICTIC.search(m["subj"] + (m["rest"] or "")):
        aux = "did" if m["verb"] == "cost" and not _plural(m["subj"]) else ("do" if _plural(m["subj"]) else "does")
        q = f"How much {aux} {low(m['subj'])} cost{m['rest'] or ''}?"
        out.append(Draft(q, m["num"], kind, "price", s, unit, answer_format="Str"))
    # a venue in a reference list ('Proceedings of ... (EMNLP)') is known without the page
    acronyms = () if re.search(r"\b(?:Proceedings|Conference|Journal|arXiv|Workshop)\b", s) else _ACRONYM.finditer(s)
    for m in acronyms:
        words = re.findall(r"[A-Za-z]+", m["long"])
        content = [w for w in words if w.lower() not in {"of", "for", "and", "in", "on", "to", "over", "the"}]
        abbr = m["abbr"].rstrip("s") if m["abbr"].endswith("s") and len(m["abbr"]) > 2 else m["abbr"]
        caps = "".join(c for c in abbr if c.isupper())
        # the long form must spell the acronym: its capitals are the initials of its last len(caps) words
        tail = content[-len(caps) :] if len(caps) <= len(content) else []
        if len(caps) >= 2 and tail and "".join(w[0].upper() for w in tail) == caps:
            start = m["long"].find(tail[0])
            long = m["long"][start:]
            half = long.split()
            if len(half) % 2 == 0 and half[: len(half) // 2] == half[len(half) // 2 :]:
                continue  # 'Parallel File System Parallel File System': a repeated line, not a long form
            out.append(Draft(f"What does {m['abbr']} stand for?", long, kind, "acronym", s, unit, answer_format="Str"))
    return out


def _plural(subject: str) -> bool:
    """Whether a subject takes 'do' ('Students', 'The fees') rather than 'does' ('The fee', 'A full charge')."""
    head = re.split(r" (?:of|for|in|on|at|with|from|to|by)\b", subject)[0].split()[-1].lower()
    return head.endswith("s") and not head.endswith(("ss", "us", "is", "ics"))


def _toc_drafts(lines: list[str], unit: dict[str, Any], where: str) -> list[Draft]:
    """Table-of-contents entries: on which page a section starts, as the contents page prints it."""
    hits = [m for m in (_TOC.match(ln.strip()) for ln in lines) if m]
    if len(hits) < 4 or not where:  # a contents page lists several entries
        return []
    names = [m["sec"].strip().lower() for m in hits]
    out = []
    for m in hits:
        sec = m["sec"].strip().rstrip(" .")
        if names.count(sec.lower()) > 1 or len(sec.split()) < 2:
            continue
        if re.match(r"^(?:Chapter|Section|Part|Appendix)\b", sec):
            continue
        q = f'According to the contents of {where}, on which page does "{sec}" begin?'
        out.append(Draft(q, m["page"], "layout", "contents", ln_of(m), unit, answer_format="Int"))
    return out


def ln_of(m: re.Match) -> str:
    return m.string.strip()


_ABBREV = re.compile(r"\b(?:w\.r\.t|e\.g|i\.e)\.?|\b(?:et al|vs|cf|approx|resp|Eq|No)\.", re.I)


def _caption_draft(line: str, unit: dict[str, Any], vocab: Vocab = EMPTY) -> Draft | None:
    m = _CAPTION.match(_ABBREV.sub(lambda a: a[0].replace(".", "\u2024"), line.strip()))  # keep 'w.r.t.' whole
    if not m or _DEICTIC.search(m["body"]) or "\u2024" in m["body"]:
        return None  # an abbreviation in a caption makes a question no one would write
    body = m["body"].strip().rstrip(":;,")
    first = body.split(" ", 1)[0].lower()
    if first in {"we", "our", "this", "the", "a", "an", "in", "as", "for", "left", "right", "top", "bottom"}:
        return None
    lead = next((v for k, v in _CAPTION_LEAD.items() if body.lower().startswith(k + " ")), None)
    if lead:
        body = lead + body[len(lead.split()[-1]) :]
    elif not re.match(r"^\S+ [A-Z][a-z]", body):  # a caption in Title Case keeps its capitals
        body = _lower_first(body, vocab)
    table = m["kind"] == "Table"
    if not table and not _CHART_WORDS.search(body):
        return None  # a diagram or a photo: which figure it is says nothing a chart question should test
    name = f"{'Table' if table else 'Figure'} {m['n']}"
    q = f"Which {'table' if table else 'figure'} {'reports' if table else 'shows'} {body}?"
    return Draft(q, name, "table" if table else "chart", "caption", line.strip(), unit, answer_format="Str")


_NOT_TITLES = re.compile(
    r"^(?:thank you|thanks|questions\??|agenda|contents|table of contents?|introduction|summary|conclusions?|"
    r"references|appendix|overview|about us|q ?& ?a)$",
    re.I,
)


_CUT_OFF = (
    r"\b(?:the|a|an|of|to|and|or|in|on|for|with|is|are|has|be|about|from|into|over|under|at|by|as|than|vs|"
    r"versus|between|your|our|their|its|this|that|how|what|why|who|when|where|does|do|did|can|will|should|"
    r"would|was|were|not|no)$"
)


def title_line(text: str, vocab: Vocab = EMPTY) -> str:
    """A page's title: its first line, when that line reads as a whole heading (not cut off, not a running
    header, not OCR debris) and the next line does not continue it."""
    lines = [ln.strip() for ln in (text or "").split("\n") if ln.strip() and not re.fullmatch(r"[\d\W]+", ln.strip())]
    if not lines:
        return ""
    s, nxt = lines[0], (lines[1] if len(lines) > 1 else "")
    words = re.findall(r"[A-Za-z][A-Za-z'’-]*", s)
    if not (2 <= len(words) <= 10 and len(s) <= 70 and is_heading(s, first=True)) or re.search(r"\d{3,}|[|_•]", s):
        return ""
    if _NOT_TITLES.match(s) or not s[0].isupper() or re.match(r"^[a-zA-Z]\.\s", s):  # 'j. Master of ...': a list item
        return ""
    if re.search(_CUT_OFF, s, re.I) or s.endswith((",", ":", "-", "&")):
        return ""  # cut off: the title goes on on the next line
    if nxt[:1].islower() or nxt.startswith("("):
        return ""  # 'Technology Adoption' + '(Next Two Years)': one title on two lines
    if s.isupper() and nxt.isupper() and len(nxt.split()) <= 4:
        return ""  # 'THE POWER' + 'OF VISUALS': capitals wrapped onto the next line
    if any(len(w) == 1 and w.lower() not in {"a", "i"} for w in words):
        return ""  # 'AN UNC OMM ON SENSE OF T HE': letters split by the text layer
    if s.isupper() and any(w.lower() not in vocab.common for w in words if len(w) > 3):
        return ""  # an all-capitals line with words the corpus never prints in lower case: likely broken
    if vocab.known and any(w.lower() not in vocab.known for w in words if len(w) > 3):
        return ""  # a word the corpus prints nowhere else: OCR debris ('electroma gnetic')
    if re.search(r"#[IlO]\b", s):
        return ""  # '#I' for '#1': a digit OCR read as a letter
    return s


def _garbled(question: str, vocab: Vocab) -> bool:
    """A long run of letters the corpus prints nowhere else: words the text layer glued ('incorrectlypredicted')."""
    return bool(vocab.known) and any(w not in vocab.known for w in re.findall(r"\b[a-z]{13,}\b", question))


def page_drafts(unit: dict[str, Any], text: str, headers: set[str], deck: bool, vocab: Vocab = EMPTY) -> list[Draft]:
    """Every draft one unit's text supports. `headers`: lines that repeat across its document (running heads and
    footers, never a title); `deck`: the document is a slide deck (each page has a title); `vocab`: what the
    corpus says about its words (`Vocab.learn`)."""
    kind = "video" if unit.get("modality") == "video" else "text"
    out: list[Draft] = []
    text = re.sub("\ufffe\\s*", "", text or "")  # pdfium's mark of a word hyphenated at a line end ('QuAL\ufffe ITY')
    lines = [ln for ln in (text or "").split("\n") if ln.strip()]
    for sent in sentences(text):
        if re.search(r"[.!?]$", sent):  # a complete statement; a cut-off one may miss what it says
            out += _sentence_drafts(sent, unit, kind, vocab)
        d = _caption_draft(sent, unit, vocab)
        if d:
            out.append(d)
    where = unit.get("doc") or unit.get("name") or ""
    out += _toc_drafts(lines, unit, where)
    out = [d for d in out if not _garbled(d.question, vocab)]
    # a deck's pages each have a title; a report's first line may not. A first line that runs on every page is
    # the deck's own title, and the line after it is not the page's (a bullet, a chart's caption)
    title = title_line(text, vocab) if deck and unit.get("page") else ""
    if title and title.lower() not in headers and (unit.get("text_source") != "pdf-text" or largest_text(unit, title)):
        q = f"What is the title of page {unit['page']} of {where}?"
        out.append(Draft(q, title, "layout", "title", title, unit, answer_format="Str"))
    return out


def largest_text(unit: dict[str, Any], line: str, share: float = 0.85) -> bool:
    """Whether `line` is printed in the page's largest type: its characters' median height at least `share` of the
    tallest printed line's, read from the PDF's own character boxes (a table header above the title fails). A page
    whose boxes cannot be read passes: the text rules of `title_line` still hold it."""
    try:
        import pypdfium2 as pdfium

        tp = pdfium.PdfDocument(unit["source"])[int(unit["page"]) - 1].get_textpage()
        chars = [(tp.get_text_range(i, 1), tp.get_charbox(i)) for i in range(tp.count_chars())]
    except Exception:  # noqa: BLE001 - an unreadable page is judged by its text alone
        return True
    flat: list[tuple[str, float | None]] = []  # the page's text, runs of white space as one space, with heights
    line_heights: list[list[float]] = [[]]
    for c, (_, bottom, _, top) in chars:
        if c in "\r\n":
            line_heights.append([])
        if not c.strip():
            if flat and flat[-1][0] != " ":
                flat.append((" ", None))
            continue
        flat.append((c, top - bottom))
        line_heights[-1].append(top - bottom)
    want = " ".join(line.split())
    at = "".join(c for c, _ in flat).find(want)
    mine = [h for _, h in flat[at : at + len(want)] if h is not None] if at >= 0 else []
    tallest = max((sorted(h)[len(h) // 2] for h in line_heights if h), default=0.0)
    if not mine or tallest <= 0:
        return True
    return sorted(mine)[len(mine) // 2] >= share * tallest


def pair_draft(a: Draft, b: Draft) -> Draft | None:
    """Two facts from different pages asked together: a two-hop, multi-page question with a list answer."""
    if a.unit.get("source") == b.unit.get("source") and a.unit.get("page") == b.unit.get("page"):
        return None
    if a.rule in ("caption", "title", "contents") or b.rule in ("caption", "title", "contents"):
        return None  # 'Which table ..., and which table ...?' reads as two questions glued, not one
    if a.rule == "acronym" and b.rule == "acronym":
        if a.question == b.question:
            return None
        x, y = (re.match(r"What does (\S+) stand for", d.question)[1] for d in (a, b))
        q = f"What do {x} and {y} stand for?"
    elif a.rule == "acronym" or b.rule == "acronym":
        return None
    else:
        q = None
    qb = b.question[0].lower() + b.question[1:] if not b.question.startswith(("According", "Among")) else None
    if q is None and (qb is None or a.question.startswith("Among")):
        return None
    q = q or f"{a.question[:-1]}, and {qb}"
    return Draft(
        q,
        f"['{a.answer}', '{b.answer}']",
        "multi-page",
        "pair",
        f"{a.sentence} | {b.sentence}",
        a.unit,
        hops=2,
        answer_format="List",
        parts=[a, b],
    )
