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

Where each step lives: answer types in agent/reader/answer_types.py, candidate sentences in
agent/reader/sentences.py, spans in agent/reader/spans.py (typed kinds) and agent/reader/name_spans.py
(names and phrases), their ranking in agent/reader/ranking.py, dates in the format a question asks for in
agent/reader/date_format.py, words and stems in agent/reader/words.py; this module reads the answer: it
tries the layout, table rows and arithmetic first, then picks from the ranked spans, or abstains with a note.

SmolLM2-135M reorders the best free-text spans (`SmallLM.score`, in `ranking.lm_order`), where rules cannot
tell a name from a phrase; typed answers never go through it (measured: a 135M model's numbers are guesses).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.reader.answer_types import (
    NUMERIC,
    SECTION,
    answer_type,
    asked_pages,
    asks_change,
    asks_style,
    choices,
    sum_parts,
    wants_byline,
    without_pages,
)
from agent.reader.clause_spans import bridge, consequence_spans, definition
from agent.reader.confidence import confidence, features, pointers
from agent.reader.date_format import reformat
from agent.reader.doc_spans import byline, caption, doc_title, expansion
from agent.reader.name_spans import not_siblings
from agent.reader.ranking import lm_order, rank, states_change, states_total, typed_candidates
from agent.reader.sentences import Passage, Sentence, is_heading, passage_sentences, score_sentences, visual_hint
from agent.reader.spans import CONTACT, Span, choice_spans
from agent.reader.table_filter import NUMBER_CONDITION
from agent.reader.table_reader import TABLE_PATH, read_table, table_row
from agent.reader.words import (
    NOT_ANSWERABLE,
    missing_anchors,
    missing_phrases,
    periods,
    printed_near,
    question_names,
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
_UNIT_ASKED = re.compile(r"\((?:[^()]*\bin\b[^()]*)\)")  # a parenthesis that says the unit an answer is wanted in
# how far a page's number in the file may be from the page number a question names: printed page numbers often
# start after a cover or a contents page
PAGE_SLACK = 2
THRESHOLD = 0.1  # least question-term coverage of the answer's sentence (calibrated on dev traces: eval/RESULTS.md)


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
    path: str = ""  # how it was read: span, table row, arithmetic, layout, definition, expansion, yes/no, choice
    passage: int = -1  # the passage it was read from (an index into the passages, best first)
    confidence: float = 0.0  # how likely the answer is right (agent/reader/confidence.py), 0 when none
    features: dict[str, float] = field(default_factory=dict)  # what the confidence was built from
    pointers: list[dict[str, Any]] = field(default_factory=list)  # the pages most likely to hold the answer
    candidate: str = ""  # the answer it would have given, when it abstained (agent/reader/confidence.py)
    abstained_for: str = ""  # why: "confidence" (below the threshold) or "unnamed" (its passage lacks the subject)
    rivals: list = field(default_factory=list, repr=False)  # (score, text, passage) of the ranked spans
    table: dict[str, Any] = field(default_factory=dict)  # a table answer's table, cells and match (table_reader)

    @property
    def answered(self) -> bool:
        return self.answer != NOT_ANSWERABLE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("rivals")
        return d


# -- yes / no --------------------------------------------------------------------------------------------------

_NEG = re.compile(r"\b(not|no|never|none|neither|nor|without|n't|cannot|fail(?:ed|s)? to)\b", re.I)


def _yes_no(question: str, best: Sentence) -> str:
    """Yes when the best sentence states the question's claim with the same polarity, else No."""
    if best.coverage < 0.6:
        return "No"
    return "Yes" if bool(_NEG.search(question)) == bool(_NEG.search(best.text)) else "No"


# -- the reader ---------------------------------------------------------------------------------------------


def _limit_note(question: str, passages: list[Passage], sents: list[Sentence]) -> str:
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
    A question that describes its subject ('the robot that picks 600 items per hour') is asked again with
    the name the evidence gives it ('Falcon X2'); the note says which sentence named it.
    """
    passages = [p for p in passages if p.text and p.text.strip()]
    hop = bridge(question, passages)
    got = None
    if hop is not None:
        got = _read(hop.question, passages, lm, encoder, threshold)
        if got.answered and hop.name.lower() not in got.answer.lower():
            p = passages[hop.sent.passage]
            got.note = f'{hop.described} is {hop.name}: "{hop.sent.text}" ({p.citation or p.info_id})'
        else:
            got = None
    got = got or _read(question, passages, lm, encoder, threshold)
    if got.answered:
        got.features = features(question, got, passages)
        got.confidence = round(confidence(got.features), 4)
    got.pointers = pointers(question, passages, got.passage)
    return got


def _read(question: str, passages: list[Passage], lm: Any, encoder: Any, threshold: float) -> Reading:
    kind = answer_type(question)
    if not passages:
        return Reading(NOT_ANSWERABLE, kind, note="no evidence text to read")
    # 'the logos on page 10': evidence without page 10 cannot say. (With it, other pages may still answer: 'the
    # population of the city on the map on page 3' is printed in a table elsewhere.)
    pages = asked_pages(question) if all(p.page for p in passages) else []  # notes and clips have no pages
    on_page = {i for i, p in enumerate(passages) if any(a - PAGE_SLACK <= p.page <= b + PAGE_SLACK for a, b in pages)}
    if pages and not on_page:
        where = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in pages)
        return Reading(NOT_ANSWERABLE, kind, note=f"the evidence holds no text from page {where}")
    style = asks_style(question)
    if style:  # 'the underlined italic words': the text layer keeps the words, not how they look
        note = f"the evidence's text does not record which words are {style}; a VLM backend can see the page"
        return Reading(NOT_ANSWERABLE, kind, note=note)
    laid_out = _from_layout(question, kind, passages)
    if laid_out is not None:
        return laid_out
    texts = [p.text for p in passages]
    missing = [w for w in missing_anchors(question, texts) if w.lower() not in _CUES] + missing_phrases(question, texts)
    # a table's unit says what the question's '(in Rupee)' asks, and a condition's number ('more than 6') need not be
    # printed for rows to meet it; the sentences need every word the question names
    asked = NUMBER_CONDITION.sub(" ", _UNIT_ASKED.sub("", question))
    if missing and [w for w in missing_anchors(asked, texts) if w.lower() not in _CUES] + missing_phrases(asked, texts):
        return Reading(NOT_ANSWERABLE, kind, note=f"the evidence never mentions {', '.join(missing[:3])}")
    # a cell the question names by row and column, or arithmetic over two cells; 'which region had the highest ...'
    found = read_table(question, kind, passages)
    if found is not None:
        p = passages[found.passage]
        out = Reading(found.value, kind, found.support, p.citation, p.info_id, 1.0, path=TABLE_PATH)
        out.passage = found.passage
        out.table = found.to_dict()
        return out
    if missing:
        return Reading(NOT_ANSWERABLE, kind, note=f"the evidence never mentions {', '.join(missing[:3])}")
    apart = kind in NUMERIC and asks_change(question)
    parts = sum_parts(question) if kind in NUMERIC and not apart else []
    sents = passage_sentences(passages)
    if not sents:
        return Reading(NOT_ANSWERABLE, kind, note=_limit_note(question, passages, sents))
    if kind == "expansion":  # printed anywhere, a heading included: 'National Atmospheric Research Laboratory (NARL)'
        found = expansion(question, sents)
        if found:
            return _reading(found[0], kind, found[1], passages, 1.0, "expansion")
    focus = without_pages(question)  # 'page 10' says where to look; its 10 is not a word to find
    score_sentences(focus, sents, passages, encoder)
    if kind == "definition":
        defined = definition(question, sents)
        if defined:
            return _reading(defined[0], kind, defined[1], passages, defined[1].score, "definition")
    entity = kind in ("place", "person", "organization")
    body = sorted((s for s in sents if not (s.title or s.heading and not entity)), key=lambda s: (-s.score, s.index))
    pool = [s for s in body[:8] if s.coverage > 0]
    if kind in CONTACT:  # an e-mail, phone or URL asked for: wherever the pages print one
        pool += [s for s in body if s not in pool and CONTACT[kind].search(s.text)][:8]
    # entities sit beside the words that ask for them: a label line over a name ('GOVERNOR' / 'Rick Scott'),
    # or the sentence before a pronoun subject ('The Tampere factory ...' / 'It assembles ...')
    extra: list[Sentence] = []
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
    if not pool or max(s.coverage for s in pool) < threshold * 0.5 and kind not in CONTACT:
        return Reading(NOT_ANSWERABLE, kind, note=_limit_note(question, passages, sents))
    if kind == "yes_no":
        best = pool[0]
        return _reading(_yes_no(question, best), kind, best, passages, best.score, "yes/no")
    if kind == "choice":
        picked = choice_spans(question, pool, " ".join(p.text for p in passages))
        if picked:
            return _reading(picked[0].text, kind, pool[0], passages, pool[0].score, "choice")
        if len(choices(question)) > 2:  # one of several listed options, and the text does not single one out
            note = _limit_note(question, passages, sents) or "the evidence's text does not tell the options apart"
            return Reading(NOT_ANSWERABLE, kind, note=note)
    heads = {s.text.strip(" .").lower() for s in sents if s.heading or s.title}
    heads |= {
        ln.strip(" #.").lower()
        for p in passages
        for ln in p.text.split("\n")
        if ln.strip() and (ln.strip().startswith("#") or is_heading(ln))
    }
    # what follows from a condition is a clause where the condition is stated, never a loose phrase
    spans = (
        consequence_spans(question, pool, sents)
        if kind == "consequence"
        else typed_candidates(question, kind, pool, heads)
    )
    spans = not_siblings(question, spans)
    ranked = [
        (sc, sp)
        for sc, sp in rank(focus, spans)
        if sp.text and (kind in CONTACT or sp.sent.coverage + (0.15 if sp.sent in extra else 0) >= threshold)
    ]
    # a number for a quarter, half or month the question names comes from a passage that names it too: the
    # year's total is not the third quarter's ('How many robots were shipped in the third quarter?')
    period = periods(question) if kind in NUMERIC else set()
    if period:
        ranked = [(sc, sp) for sc, sp in ranked if period <= periods(passages[sp.sent.passage].text)]
    if kind == "text" and lm is not None and len(ranked) > 1:
        ranked = lm_order(lm, question, ranked)
    if not ranked:
        note = _limit_note(question, passages, sents)
        if kind == "color":  # the text names no colour: it is drawn
            note = note or "the evidence's text names no colour; a VLM backend can see the pictures"
        return Reading(NOT_ANSWERABLE, kind, note=note)
    if on_page:  # the page the question names comes first, other pages may still hold the answer
        ranked = sorted(((sc + 0.1 * (sp.sent.passage in on_page), sp) for sc, sp in ranked), key=lambda x: -x[0])
    names = question_names(question) if kind in CONTACT else []
    if names:  # the phone of the Care Quality Commission is printed by its name, not under another's address
        ranked = [(sc, sp) for sc, sp in ranked if any(_near(n, sp, passages) for n in names)]
        if not ranked:
            return Reading(NOT_ANSWERABLE, kind, note=f"the evidence prints no {kind} beside {names[0]}")
    if apart:  # one number is not a difference, unless its sentence states the change ('up 31 percent from 2024')
        ranked = [(sc, sp) for sc, sp in ranked if states_change(sp)]
        if not ranked:
            note = (
                _limit_note(question, passages, sents) or "the evidence's text does not print both values to subtract"
            )
            return Reading(NOT_ANSWERABLE, kind, note=note)
    if parts:  # one number is not a sum of several, unless its sentence states it as their total
        ranked = [(sc, sp) for sc, sp in ranked if states_total(sp)]
        if not ranked:
            note = _limit_note(question, passages, sents) or "the evidence's text does not print every value to add"
            return Reading(NOT_ANSWERABLE, kind, note=note)
    score, top = ranked[0]
    row = table_row(top.sent.text, passages[top.sent.passage])
    if row:  # the table reader, which knows the row and column of every cell there, could not tell which is meant
        where = passages[top.sent.passage].citation or passages[top.sent.passage].info_id
        note = f"the answer would be read from the table “{row}” on {where} without knowing which cell holds it"
        return Reading(NOT_ANSWERABLE, kind, note=note, candidate=top.text, passage=top.sent.passage)
    out = _reading(reformat(question, top.text, kind), kind, top.sent, passages, score, "span")
    out.candidates = list(dict.fromkeys(sp.text for _, sp in ranked[1:6]))
    out.rivals = [(sc, sp.text, sp.sent.passage) for sc, sp in ranked[:8]]
    return out


def _near(name: str, sp: Span, passages: list[Passage]) -> bool:
    text = passages[sp.sent.passage].text
    at = text.find(sp.text)
    return printed_near(name, text, at if at >= 0 else 0)


def _from_layout(question: str, kind: str, passages: list[Passage]) -> Reading | None:
    """The document's title, a caption or the byline, read from where the page prints them (doc_spans); None
    when the question asks for none of them, or (byline) none is printed and the sentences may still say."""
    if kind == "doc_title":
        found = doc_title(passages)
        what = "no title line at the top of the evidence's pages"
    elif kind == "caption":
        found = caption(question, passages)
        what = "the evidence's text holds no such caption; it may be drawn in the figure, which a VLM backend can read"
    elif kind == "section_title":  # none printed: the sentences may still name it
        found, what = caption(question, passages, SECTION), ""
    elif kind == "person" and wants_byline(question):
        found, what = byline(passages), ""
    else:
        return None
    if found is None:
        return Reading(NOT_ANSWERABLE, kind, note=what) if what else None
    text, p = found
    return Reading(text, kind, text, p.citation, p.info_id, 1.0, path="layout")


def _reading(answer: str, kind: str, s: Sentence, passages: list[Passage], score: float, path: str) -> Reading:
    p = passages[s.passage]
    return Reading(answer, kind, s.text, p.citation, p.info_id, round(score, 3), path=path, passage=s.passage)
