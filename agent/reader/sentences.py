"""The evidence as candidate sentences: passages cut into sentences and label lines, headings and
boilerplate marked (never an answer, though their words say where one is), each scored against the question.

A sentence's score is its IDF-weighted coverage of the question's terms (the BM25 view of words), a quarter
of its better neighbour's, MiniLM similarity to the question (the retriever's encoder, when given), and a
little for memorized evidence. `visual_hint` says when a page's text layer shows that part of it is drawn
(a chart, a table, a picture), for the reader's "a VLM backend can read it" note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agent.reader.words import fuzzy_hit, question_idf, split_sentences, terms

SIM_WEIGHT = 0.35  # weight of MiniLM cosine similarity beside term coverage in a sentence's score


@dataclass
class Passage:
    """One piece of evidence text with where it came from."""

    text: str
    citation: str = ""  # 'report.pdf p.3', 'notes.md #1', 'talk.mp4 00:10-00:20'
    info_id: str = ""  # the episode's information id ('Picture 2')
    modality: str = "text"  # the unit's: page | image | video | text
    memorized: bool = True  # in the memory graph (else only retrieved)
    page: int = 0  # a PDF page's number (1-based), 0 for other units
    source: str = ""  # the file it came from, where its tables are read (agent/reader/table_reader.py)
    tables: list = field(default_factory=list)  # tables OCR read at ingest (Unit.tables), as dicts


_TICK_LINE = re.compile(r"^\s*[-−]?\d[\d,]*(?:\.\d+)?\s*%?\s*$")
_BOILER = re.compile(
    r"^(page \d+( of \d+)?|\d+|copyright\b.*|©.*|all rights reserved.*|www\.\S+|https?://\S+|"
    r"table of contents|contents|index)$",
    re.I,
)
# a table-of-contents entry: a title, a dot leader and a page number ('Analysis ........ 10 Appendix D')
_TOC_ENTRY = re.compile(r"(?:\.\s?){4,}\s*\d+\b|…{2,}\s*\d+\b")


def is_heading(line: str, first: bool = False) -> bool:
    """A title, heading or boilerplate line: never an answer, though its words may tell where one is.

    >>> is_heading("# Field notes: Tampere factory visit"), is_heading("Aurora Robotics Annual Report 2025")
    (True, True)
    >>> is_heading("Europe 21.4"), is_heading("The defect rate fell from 2.1 percent to 0.8 percent.")
    (False, False)
    >>> is_heading("Data Analysis ............................ 10 Appendix D")
    True
    """
    s = line.strip()
    if not s or s.startswith("#") or _BOILER.match(s) or _TOC_ENTRY.search(s):
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
class Sentence:
    """One candidate sentence, with where it stands and how it scores against the question."""

    text: str
    passage: int
    index: int  # position in the flattened list
    heading: bool
    title: bool = False  # the passage's first line or a markdown heading: never an answer
    source: str = ""  # the passage's citation
    coverage: float = 0.0
    score: float = 0.0


def passage_sentences(passages: list[Passage]) -> list[Sentence]:
    """The passages' sentences in order; axis tick labels dropped, titles and headings marked."""
    out: list[Sentence] = []
    for pi, p in enumerate(passages):
        ticks = axis_ticks(p.text)
        text = "\n".join(ln for ln in (p.text or "").split("\n") if ln.strip() not in ticks) if ticks else p.text
        lines = [ln for ln in (text or "").split("\n") if ln.strip()]
        first = lines[0].strip() if lines else ""
        for s in split_sentences([text]):
            title = s.startswith("#") or (s == first and is_heading(s, first=True))
            out.append(
                Sentence(
                    s.lstrip("# ").strip() if s.startswith("#") else s,
                    pi,
                    len(out),
                    title or is_heading(s),
                    title,
                    re.sub(r"\.\w+\b.*$", "", p.citation),
                )
            )
    return out


def _idf_coverage(question: str, sents: list[Sentence]) -> None:
    """Each sentence's IDF-weighted share (0..1) of the question's content terms. A term found only in the
    headings of its passage or the sentence before counts 0.6 (a heading says what the lines under it are
    about: 'Aurora Robotics at LogiMAT 2026' over 'Hall 4, Booth B21'); a typo counts 0.8."""
    idf, bags = question_idf(question, [s.text for s in sents])
    if not idf:
        return
    total = sum(idf.values()) or 1.0
    heads: dict[int, set[str]] = {}
    for s in sents:  # the file's name is a heading too ('product_update.mp4': "the product update video")
        heads.setdefault(s.passage, set()).update(terms(re.sub(r"[_\W]+", " ", s.source)))
    for s, b in zip(sents, bags):
        if s.heading:
            heads.setdefault(s.passage, set()).update(b)
    for i, (s, b) in enumerate(zip(sents, bags)):
        ctx = set(heads.get(s.passage, set()))
        if i and sents[i - 1].passage == s.passage:
            ctx |= bags[i - 1]
        got = 0.0
        for t, w in idf.items():
            got += w if t in b else 0.8 * w if fuzzy_hit(t, b) else 0.6 * w if t in ctx else 0.0
        s.coverage = got / total


def score_sentences(question: str, sents: list[Sentence], passages: list[Passage], encoder: Any = None) -> None:
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
