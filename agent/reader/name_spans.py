"""Candidate answer spans that are names and phrases: people, organizations and places (runs of capitalised
words, booth and hall locators, "City, Country"), an abbreviation's expansion, the value under a label line,
and free-text phrases around the question's verb. The typed kinds are agent/reader/spans.py's.
"""

from __future__ import annotations

import re

from agent.reader.sentences import Sentence
from agent.reader.spans import Span, clean, in_question
from agent.reader.words import WORD, content_words, squash, stem

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
# words of documents, bodies and laws that no person's name holds
_NOT_PERSON = set(
    "opinion disposition report code conduct court gazette act committee board council program programme plan "
    "policy agreement order department office commission amendment amendments law rules section chapter appendix "
    "contents introduction summary conclusion table figure state county city street avenue".split()
)
# a street, avenue or road the question names ('the sight on Taylor St', '45th Ave.'): a name, then the kind of
# way, and no name after it ('St. Louis' and 'Dr. Smith' are not streets)
_STREET = re.compile(
    r"(?:\b[A-Z][\w'’-]*|\b\d+(?:st|nd|rd|th))\s+(?P<kind>St|Street|Ave|Avenue|Rd|Road|Blvd|Boulevard|Drive|Ln|Lane|"
    r"Hwy|Highway)\b\.?(?!\w)(?!\s*[A-Z])"
)
_STREET_ABBR = {"street": "st", "avenue": "ave", "road": "rd", "boulevard": "blvd", "lane": "ln", "highway": "hwy"}
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


def _cap_runs(s: Sentence) -> list[tuple[str, int, int]]:
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


def entity_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    q = question.lower()
    out = []
    for s in sents:
        for text, a, b in _cap_runs(s):
            if in_question(text, question) or not re.search(r"[A-Za-z]{2}", text):
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
                    out.append(Span(text, s, a, b, 0.2))  # 'Who produced the document?' asks for a body
                    continue
                if org or any(re.search(r"\d", w) for w in words) or len(words) > 4:
                    continue
                if any(w.lower().strip(".,") in _NOT_PERSON for w in words):
                    continue  # 'Final Disposition Opinion', 'Code of Conduct': a document's words, not a name
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
            out.append(Span(text, s, a, b, bonus))
        if kind == "place":
            for m in _LOCATOR.finditer(s.text):
                out.append(Span(clean(m.group()), s, m.start(), m.end(), 0.35))
            # 'Tampere, Finland': the country asked is the last part, the city the first
            for m in re.finditer(r"\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)?),\s([A-Z][a-z]+(?:\s[A-Z][a-z]+)?)\b", s.text):
                if re.search(r"\bcountry\b", q):
                    out.append(Span(m.group(2), s, m.start(2), m.end(2), 0.3))
                elif re.search(r"\b(city|town)\b", q):
                    out.append(Span(m.group(1), s, m.start(1), m.end(1), 0.3))
                elif "where" in q:
                    out.append(Span(m.group(), s, m.start(), m.end(), 0.25))
    if kind == "place" and re.search(r"\b(hall|booth|stand|room)\b", q):
        noun = re.search(r"\b(hall|booth|stand|room)\b", q).group(1)
        for sp in out:
            if sp.text.lower().startswith(noun) and re.fullmatch(r"\w+ [A-Z]?\d+\w*", sp.text):
                sp.bonus += 0.2
    return out


def _same(a: str, b: str) -> bool:
    """Two stems of one word ('assembl' / 'assemble'): equal, or one a prefix of the other past 4 letters."""
    return a == b or min(len(a), len(b)) >= 5 and (a.startswith(b) or b.startswith(a))


def phrase_spans(question: str, sents: list[Sentence]) -> list[Span]:
    """Free-text candidates around the question's verb: its object ('What does the factory assemble?' ->
    'It assembles | the Falcon X2 picker'), or its subject ('Which product drove ...?' -> 'the Falcon X2
    picker | drove'); and a capitalised word before the question's noun ('Which drone ...?' -> 'Heron drone')."""
    q = question.strip().lower()
    qwords = [stem(w) for w in content_words(question)]
    obj = re.match(r"(?:what|which \w+)\s+(?:do|does|did|will|would|can|could|should)\s+.+?\s+(\w+)\W*$", q)
    aux = r"(?!(?:is|are|was|were|do|does|did|has|have|had|will|can)\b)"
    subj = re.match(r"(?:which|what)\s+" + aux + r"(\w+)\s+" + aux + r"(\w+)", q)
    verb_obj = stem(obj.group(1)) if obj else ""
    verb_subj = stem(subj.group(2)) if subj else ""
    out = []
    for s in sents:
        for w in WORD.finditer(s.text):
            w_stem = stem(w.group())
            if verb_obj and _same(w_stem, verb_obj):
                m = re.match(
                    r"\s+((?:the|a|an)\s+)?([\w$%&'’-]+(?:\s+[\w$%&'’-]+){0,5}?)(?=\s*(?:[.,;:!?]|"
                    r"\s(?:and|but|which|that|who|to|in|on|at|for|with|from|by|since|after|before)\b|$))",
                    s.text[w.end() :],
                )
                if m and not in_question(m.group(2), question):
                    a = w.end() + m.start(1 if m.group(1) else 2)
                    text = clean(m.group(0))
                    out.append(Span(text, s, a, a + len(text), 0.25))
            if verb_subj and _same(w_stem, verb_subj) and w.start():
                head = s.text[: w.start()]
                m = re.search(r"((?:[\w$%&'’-]+\s+){0,5}[\w$%&'’-]+)\s*$", head)
                piece = m.group(0) if m else ""
                cut = list(re.finditer(r"\b(said|says|that|and|but|which|while|who|is|are|was|were)\s+", piece))
                if cut:  # 'Lindqvist said the Falcon X2 picker' keeps 'the Falcon X2 picker'
                    piece = piece[cut[-1].end() :]
                text = clean(piece)
                if text and not in_question(text, question):
                    out.append(Span(text, s, w.start() - len(piece), w.start(), 0.25))
        for m in re.finditer(r"\b([A-Z][\w-]+)\s+([a-z][\w-]+)\b", s.text):
            if stem(m.group(2)) in qwords and not in_question(m.group(1), question):
                out.append(Span(m.group(), s, m.start(), m.end(), 0.25))
    return out


def expansion_spans(question: str, sents: list[Sentence]) -> list[Span]:
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
                out.append(Span(text, s, at, at + len(text), 0.5))
            for m in re.finditer(re.escape(ab) + r"\s*\(([A-Z][^()]{3,80})\)", s.text):
                out.append(Span(m.group(1).strip(), s, m.start(1), m.end(1), 0.5))
    return out


def label_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    """The line after a short label line that names what is asked ('Produced by:' / 'Florida Department of
    Health'; 'Lead Coordinator' / 'Allison Crimmins, U.S. EPA'): the value, up to its first comma."""
    out = []
    for a, b in zip(sents, sents[1:]):
        if a.passage != b.passage or len(a.text) > 40 or a.coverage <= 0 or len(b.text) > 120:
            continue
        if not (a.text.rstrip().endswith(":") or a.heading or len(a.text.split()) <= 4):
            continue
        value = clean(re.split(r",\s|;\s|\s[-–]\s", b.text)[0])
        if value and not in_question(value, question) and len(value.split()) <= 8:
            out.append(Span(value, b, 0, len(value), 0.15 + 0.2 * a.coverage))
    return out


def not_siblings(question: str, spans: list[Span]) -> list[Span]:
    """The spans that are not another of what the question names: for 'What is the sight on Taylor St?' or 'a
    restaurant between 45th Ave. and 44th Ave.', a street is where to look, and 'Sacramento St' is no answer;
    and the answer comes from a sentence that prints the street asked about.

    >>> s = Sentence("Sacramento St runs past the Audium on Taylor St.", 0, 0, False)
    >>> [sp.text for sp in not_siblings("What is the sight on Taylor St?", [Span("Sacramento St", s, 0, 13),
    ...  Span("Audium", s, 28, 34)])]
    ['Audium']
    >>> len(not_siblings("Who did Dr. Smith meet in St. Louis?", [Span("Audium", s, 28, 34)]))
    1
    """
    heads = {_norm_street(m.group("kind")) for m in _STREET.finditer(question)}
    if not heads:
        return spans
    named = [squash(m.group()) for m in _STREET.finditer(question)]
    return [
        sp
        for sp in spans
        if not any(_norm_street(m.group("kind")) in heads for m in _STREET.finditer(sp.text))
        and any(n in squash(sp.sent.text) for n in named)  # read where the street is printed, not anywhere
    ]


def _norm_street(word: str) -> str:
    return _STREET_ABBR.get(word.lower(), word.lower())
