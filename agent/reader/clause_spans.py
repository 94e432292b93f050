"""Answers that are a clause of the evidence, not a name or a number: how a term is defined ('How does the
guide define the law of good Gestalt?'), what happens under a condition ('What happens if the adaptor
supplies less than 1.5 A?'), and the row that a key looks up ('the market name for code AR01').

    definition   the sentence that defines the term: the one after the term printed as a label ('Law of good
                 Gestalt. Elements of objects tend to ...'), else one that says '<term> is / means / refers to'
    consequence  the result clause of the sentence that states the condition ('If the current is less than
                 1.5 A, the charging time will increase'), or the cell beside a table's condition cell
                 ('Press and hold' | 'Wake up the voice assistant.')
    key row      the name printed in the same row as a code the question names ('1. Little Rock AR01')

Functions over candidate sentences (agent/reader/sentences.py); ranking.py ranks them and the reader (extract.py)
cites. One side effect, on purpose: a table's result cell takes its row's relevance (score and coverage), so that
it ranks as the row does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.reader.answer_types import DOC, KEY, consequence_condition, definition_term, question_keys
from agent.reader.sentences import Passage, Sentence, passage_sentences
from agent.reader.spans import Span, clean, in_question
from agent.reader.words import content_words, stem, terms

# a term printed as a label and then defined, or defined by a verb: 'Law of good Gestalt. Elements ...'
_LABEL_AFTER = re.compile(r"^\s*[.:—–-]\s*(?P<rest>\S.*)$")
_DEFINED_AS = re.compile(r"^\s*(?:is|are|was|were|means|mean|refers? to|is defined as|are defined as|denotes)\b")
_PRONOUNS = {"you", "your", "i", "we", "they", "it", "user", "one"}
_CONDITION = re.compile(r"\b(?:if|when|whenever|once|in case)\b", re.I)


def _term_stems(term: str) -> list[str]:
    return list(dict.fromkeys(stem(w) for w in content_words(term)))


def definition(question: str, sents: list[Sentence]) -> tuple[str, Sentence] | None:
    """The defining text for the question's term and the sentence it is in, or None.

    Preference: the sentence after the term printed alone as a label, then the rest of a sentence that opens
    with the term and a label mark ('Law of good Gestalt. Elements ...'), then a sentence saying '<term> is /
    means / refers to ...' (whole); ties go to the better-scored sentence.
    """
    want = _term_stems(definition_term(question))
    if not want:
        return None
    found: list[tuple[int, float, str, Sentence]] = []
    for i, s in enumerate(sents):
        words = terms(s.text)
        if sum(t in words for t in want) < max(1, round(0.67 * len(want))):
            continue
        end = _term_end(s.text, want)
        rest = s.text[end:] if end is not None else ""
        nxt = sents[i + 1] if i + 1 < len(sents) and sents[i + 1].passage == s.passage else None
        if end is not None and len(content_words(rest)) == 0 and nxt is not None and not nxt.title:
            found.append((3, s.score, nxt.text, nxt))  # the term alone, as a label: the next sentence defines it
        elif end is not None and _LABEL_AFTER.match(rest) and len(content_words(rest)) >= 4:
            found.append((2, s.score, _LABEL_AFTER.match(rest).group("rest"), s))
        elif end is not None and _DEFINED_AS.match(rest):
            found.append((1, s.score, s.text, s))
    if not found:
        return None
    found.sort(key=lambda f: (-f[0], -f[1], f[3].index))
    return found[0][2].strip(), found[0][3]


def _term_end(text: str, want: list[str]) -> int | None:
    """Where the term's last word ends in `text`, when all of the term's words come within a short run."""
    hits = [m for m in re.finditer(r"[A-Za-z][\w'’-]*", text) if stem(m.group()) in want]
    if not hits:
        return None
    first = hits[0].start()
    seen: set[str] = set()
    for m in hits:
        seen.add(stem(m.group()))
        if len(seen) == len(set(want)):
            return m.end() if m.end() - first < 12 * len(want) + 20 else None
    return None


def consequence_spans(question: str, pool: list[Sentence], sents: list[Sentence]) -> list[Span]:
    """Result clauses of the best sentences that state the question's condition ('If <condition>, <result>';
    '<result> if <condition>'), and the cell after a table's condition cell ('Press and' 'hold' | 'Wake up the
    voice assistant.'). A clause counts only where the condition's words are."""
    cond = [t for t in _term_stems(consequence_condition(question)) if t not in _PRONOUNS]
    need = max(1, len(cond) // 3)

    def hits(text: str) -> int:
        return sum(t in terms(text) for t in cond)

    out = []
    for s in pool[:6]:
        text = s.text
        for m in _CONDITION.finditer(text):
            tail = text[m.end() :]
            comma = re.search(r"[,;]\s*(?:then\s+)?", tail)
            if comma and hits(tail[: comma.start()]) >= need:  # 'If <condition>, <result>'
                out.append(_clause(tail[comma.end() :], s, m.end() + comma.end(), 0.45))
            head = text[: m.start()]
            if len(content_words(head)) >= 3 and hits(tail) >= need and not re.search(r"[,;(]\s*$", head):
                out.append(_clause(head, s, 0, 0.3))  # '<result> if <condition>'
        # a condition cell, wrapped over short lines ('Press and' / 'hold'), then its result cell
        if len(text) >= 40 or s.index + 1 >= len(sents) or not hits(text):
            continue
        first = s.index
        while (
            first > 0
            and sents[first].text[:1].islower()  # the cell's text goes on from the line before
            and sents[first - 1].passage == s.passage
            and len(sents[first - 1].text) < 20
            and not sents[first - 1].text.endswith(".")
        ):
            first -= 1
        cell = " ".join(x.text for x in sents[first : s.index + 1])
        value = sents[s.index + 1]
        header = all(w[0].isupper() for w in value.text.split()) and not value.text.endswith(".")
        if value.passage != s.passage or value.title or header or hits(cell) < need or hits(value.text) > 1:
            continue
        # the rows of several tables read alike ('Press and hold' under 'Up button' and under 'Down button'):
        # a row answers only when its condition cell and the short title lines above it (the table's name)
        # hold every word of the condition
        titles = " ".join(
            x.text
            for x in sents[max(0, first - 20) : first]
            if x.passage == s.passage and len(x.text) < 30 and not x.text.endswith(".")
        )
        if in_question(value.text, question) or not all(t in terms(cell) or t in terms(titles) for t in cond):
            continue
        value.coverage = max(value.coverage, s.coverage)  # the result cell answers for its row
        value.score = max(value.score, s.score)
        out.append(_clause(value.text, value, 0, 0.3 + 0.3 * hits(cell) / max(1, len(cond))))
    return [sp for sp in out if sp.text and len(sp.text.split()) >= 2]


def _clause(text: str, s: Sentence, at: int, bonus: float) -> Span:
    piece = re.split(r"\)\s*$|\s+\((?![^)]*$)", text.strip(), maxsplit=1)[0].strip(" ,;)(")
    return Span(piece, s, at, at + len(piece), bonus)


def key_spans(question: str, sents: list[Sentence]) -> list[Span]:
    """The name printed in a key's row, before the key: '1. Little Rock AR01 2. Northern Arkansas AR02' gives
    'Little Rock' for AR01 (a list number, another key or a label mark ends the name on its left). Only where
    the evidence prints a column of codes of the key's shape: one code alone may be part of a name."""
    keys = question_keys(question)
    if not keys:
        return []
    out = []
    shapes = [_shape(k) for k in {k for s in sents for k in KEY.findall(s.text)}]
    for key in keys:
        if shapes.count(_shape(key)) < 2:
            continue  # one code is a name; a column of codes of one shape ('AR01', 'AR02') keys rows
        for s in sents:
            for m in re.finditer(r"\b" + re.escape(key) + r"\b", s.text):
                head = s.text[: m.start()]
                cut = list(re.finditer(r"(?:^|\s)\d{1,3}[.)]\s+|" + KEY.pattern + r"|[:;|()]\s*", head))
                name = clean(head[cut[-1].end() :] if cut else head)
                if name and 1 <= len(name.split()) <= 8 and not in_question(name, question):
                    out.append(Span(name, s, m.start() - len(name), m.start(), 0.5))
    return out


def _shape(code: str) -> str:
    """'AR01' -> 'AA99': codes of one column share it."""
    return re.sub(r"\d", "9", re.sub(r"[A-Z]", "A", code))


# 'the robot that picks 600 items per hour': one thing the question describes by what it does, not by its name;
# not a group ('the people who ...', 'the percentage of adults who ...'), which has no name
_RELATIVE = re.compile(
    r"\b(?:the|a|an)\s+(?:(?!of\b)[\w-]+\s+){0,2}?(?P<head>(?!of\b)[\w-]*(?:[^s\W]|ss))\s+(?:that|which|who)\s+"
    r"(?P<clause>[^?]+?)\s*\??\s*$",
    re.I,
)
_SUPERLATIVE = re.compile(
    r"\b(?:most|least|fewest|best|worst|(?:high|low|larg|small|great|fast|slow|long|short|big)g?est)\b", re.I
)
# 'Where is <it> assembled?': the question's own verb closes the question after the description
_INVERTED = re.compile(r"^\s*(?:where|when|why|how|who|what|which)\b[^?]*?\b(?:is|are|was|were|does|do|did)\s*$", re.I)
# a run of capitalised words and numbers: 'Falcon X2', 'Boeing 747'; not the '9' of 'Scans 9,000'
_NAME_RUN = re.compile(r"\b[A-Z][\w-]*(?:\s+(?:[A-Z][\w-]*|\d+[A-Za-z-]*\b(?![,.]\d)))*")


@dataclass
class Hop:
    """A question's described subject and the name the evidence gives it."""

    question: str  # the question asked again with the name: 'Where is Falcon X2 assembled?'
    described: str  # 'the robot that picks 600 items per hour'
    name: str  # 'Falcon X2'
    sent: Sentence  # the sentence that names it


def bridge(question: str, passages: list[Passage]) -> Hop | None:
    """A question that names its subject only by a description, asked again with the name the evidence gives
    it: 'Where is the robot that picks 600 items per hour assembled?', with 'Falcon X2 launch. Picks 600 items
    per hour' in the evidence, is 'Where is Falcon X2 assembled?'. None when no sentence names it.

    The describing sentence must hold every number of the description and three quarters of its words, and
    the name is the one run of capitalised words in it (or else in the heading or short label line just
    above it) that the question does not use.

    >>> ps = [Passage("Falcon X2 launch. Picks 600 items per hour."), Passage("It is assembled in Tampere.")]
    >>> bridge("Where is the robot that picks 600 items per hour assembled?", ps).question
    'Where is Falcon X2 assembled?'
    >>> bridge("Where is the robot that picks 900 items per hour assembled?", ps) is None
    True
    >>> bridge("Where are the robots that pick 600 items per hour assembled?", ps) is None
    True
    """
    m = _RELATIVE.search(question)
    if not m or re.fullmatch(DOC, m.group("head"), re.I):
        return None  # 'the document that was revised in May': the one being read, not one to name
    if _SUPERLATIVE.search(m.group("clause")):
        return None  # 'the person who attended the least meetings' is a table's extreme row, not a sentence's name
    clause, tail = m.group("clause").split(), ""
    if _INVERTED.match(question[: m.start()]) and len(clause) > 2 and clause[-1].islower():
        clause, tail = clause[:-1], clause[-1]  # 'Where is [the robot that ...] assembled?'
    want = _term_stems(" ".join(clause))
    if len(want) < 2:
        return None
    numbers = [t for t in want if t[:1].isdigit()]
    asked = set(terms(question))
    sents = passage_sentences(passages)  # only for a question that describes its subject; most return above
    best: tuple[float, str, Sentence] | None = None
    for i, s in enumerate(sents):
        have = set(terms(s.text))
        share = sum(t in have for t in want) / len(want)
        if s.title or s.heading or share < 0.75 or not all(n in have for n in numbers):
            continue
        prev = sents[i - 1] if i and sents[i - 1].passage == s.passage else None
        above = prev if prev and (prev.heading or len(prev.text.split()) <= 6) else None  # a label line over it
        for text in [s.text] + ([above.text] if above else []):
            names = [n.group() for n in _NAME_RUN.finditer(text) if not set(terms(n.group())) <= asked]
            if names:
                break
        if len(names) == 1 and (best is None or share > best[0]):
            best = (share, names[0], s)
    if best is None:
        return None
    share, name, s = best
    described = question[m.start() : m.end("clause") - (len(tail) + 1 if tail else 0)].strip()
    again = question[: m.start()].rstrip() + f" {name}" + (f" {tail}" if tail else "") + "?"
    return Hop(again, described, name, s)
