"""Statement rules: a printed sentence turned into the question it answers, the wh-word moved to the front and the
verb inverted (rl/synth/offline.py runs them on every complete sentence of a page).

    "About six-in-ten Republicans (59%) say the economy is good."  ->  What percentage of Republicans say the
                                                                       economy is good?          (59%)
    "The campus has 12 libraries."                                 ->  How many libraries does the campus have?
    "The median age of residents was 38 in 2010."                  ->  What was the median age of residents in 2010?
    "Intersection over Union (IoU) ..."                            ->  What does IoU stand for?

A rule only fires where its pattern leaves nothing to guess: a statement that leans on the sentence before it
("this", "these", "it"), holds a second figure the question could mean, is a made-up example, or states a value
without saying whose it is ("The estimated annualized pretax cost is $400.") is passed over.
"""

from __future__ import annotations

import re
from typing import Any

from rl.synth.wording import DEICTIC as _DEICTIC
from rl.synth.wording import EMPTY, Draft, Vocab, lower_first

# a number as documents print it: 1,234 | 12.5 | $48.6 | S$ 5,000 | 59%
NUM = r"(?:(?:US|S|A|C|HK)?\$\s?|€|£)?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?:(?:US|S|A|C|HK)?\$\s?|€|£)?\d+(?:\.\d+)?"
UNIT = (
    r"(?:\s?(?:%|percent|per cent)|\s(?:million|billion|thousand|trillion|years?|months?|weeks?|days?|hours?|"
    r"minutes?|seconds?|km|kg|mm|cm|m|g|GB|MB|TB|MHz|GHz|mAh|W|kW|V|°C|°F|inches|feet|miles|points?|"
    r"percentage points?))?"
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
# "The median age of residents was 38 in 2010." (a value stated of a named quantity)
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


def _fmt(answer: str) -> str:
    a = answer.replace(",", "").strip()
    if re.fullmatch(r"\d+", a):
        return "Int"
    if re.fullmatch(r"[$€£]?\s?\d+\.\d+%?|\d+(?:\.\d+)?%", a):
        return "Float"
    return "Str"


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


def statement_drafts(sent: str, unit: dict[str, Any], kind: str, vocab: Vocab = EMPTY) -> list[Draft]:
    def low(text: str) -> str:
        return lower_first(text, vocab)

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
        cut = re.search(r"\b(of|and|or|to|the|a|an|in|for)$", subj)
        if not cut and len(re.findall(NUM, s)) <= 2 and _has_subject(subj, m["rest"] or ""):
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
    if m and not _DEICTIC.search(m["subj"] + (m["rest"] or "")) and _names_what(m["subj"]):
        aux = "did" if m["verb"] in ("took", "lasted") else ("do" if plural(m["subj"]) else "does")
        base = "take" if m["verb"].startswith("t") else "last"
        q = f"How long {aux} {low(m['subj'])} {base}{m['rest'] or ''}?"
        out.append(Draft(q, m["num"], kind, "duration", s, unit, answer_format="Str"))
    m = _HOLD.match(s)
    if m and not re.search(r"\b(it|this|that|them)\b", m["obj"] + " " + m["goal"], re.I):
        q = f"How long should you {m['act'].lower()} {m['obj']} {m['conn']} {m['goal']}?"
        out.append(Draft(q, m["num"], kind, "duration", s, unit, answer_format="Str"))
    m = _COSTS.match(s)
    if m and not _DEICTIC.search(m["subj"] + (m["rest"] or "")):
        aux = "did" if m["verb"] == "cost" and not plural(m["subj"]) else ("do" if plural(m["subj"]) else "does")
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


def _has_subject(quantity: str, scope: str) -> bool:
    """Whether a value's quantity says whose it is: 'the median age of residents', or a named scope ('in Ohio',
    'for Tesla'). 'The estimated annualized pretax cost' (of what?) or 'the median age in 2010' (of whom?) has
    no subject, and its question no single answer.

    >>> _has_subject("The median age of residents", ""), _has_subject("The median age", " in 2010")
    (True, False)
    >>> _has_subject("The estimated annualized pretax cost", ""), _has_subject("The fare", " in Boston")
    (False, True)
    """
    if re.search(r" of (?!the (?:year|period|time)\b)[A-Za-z]", quantity):
        return True
    return re.search(r"\b(?:in|at|for|among|across|per) (?:the )?[A-Z]", scope) is not None


def _names_what(subject: str) -> bool:
    """Whether an indefinite subject says what it is: 'A full survey interview' does, 'A complete measurement'
    (of what: heart rate, SpO2?) does not. A definite or named subject always does.

    >>> _names_what("A complete measurement"), _names_what("A full survey interview"), _names_what("The update")
    (False, True, True)
    """
    words = subject.split()
    if words[0] not in ("A", "An"):
        return True
    rest = [w for w in words[1:] if w.lower() not in {"full", "complete", "whole", "entire", "single", "typical"}]
    return " of " in subject or len(rest) >= 2


def plural(subject: str) -> bool:
    """Whether a subject takes 'do' ('Students', 'The fees') rather than 'does' ('The fee', 'A full charge')."""
    head = re.split(r" (?:of|for|in|on|at|with|from|to|by)\b", subject)[0].split()[-1].lower()
    return head.endswith("s") and not head.endswith(("ss", "us", "is", "ics"))
