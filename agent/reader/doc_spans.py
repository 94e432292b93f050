"""Answers a document's layout gives: its title, who presents or wrote it, a figure's or table's caption, and an
abbreviation's spelled-out form wherever it is printed.

Which questions ask for them is decided in agent/reader/answer_types.py (`answer_type`, `wants_byline`).
These are the questions whose answer is a heading or a title line, which the sentence reader never answers
with ("What is the title of the slide?", "Who is the presenter?", "What is the title of Figure 2?"), or whose
answer sits in a heading ("National Atmospheric Research Laboratory (NARL)"). They are read from the layout of
the text, not from how well a sentence covers the question's words: a title page never says "title".

    kind 'doc_title'  the title lines at the top of the document's first page in the evidence
    byline            the person's name printed under the title (presenter, author, speaker)
    kind 'caption'    'Figure 2: Diagram of ...' -> 'Diagram of ...'; none printed -> abstain
    kind 'section_title'  'Unit 14: Using Financial Information' -> 'Using Financial Information'
    kind 'expansion'  'National Atmospheric Research Laboratory (NARL)' or 'NARL (National ...)'
"""

from __future__ import annotations

import re
from collections import Counter

from agent.reader.answer_types import FIGURE
from agent.reader.name_spans import expansion_spans
from agent.reader.sentences import Passage, Sentence, is_heading

_CONNECTOR = re.compile(r"\b(and|of|for|the|in|on|to|with|a|an|&)$|[:,–-]$", re.I)
_NAME = re.compile(
    r"^(?:(?:Dr|Prof|Mr|Ms|Mrs)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z]\.)?(?:\s+(?:van|von|de|da)?\s*[A-Z][A-Za-z'’-]+){1,2}$"
)


def _front(passages: list[Passage]) -> Passage:
    """The passage a title is read from: a first page when the evidence holds one, else the best passage."""
    for p in passages:
        if re.search(r"\bp\.\s*1$", p.citation or ""):
            return p
    return passages[0]


def _lines(p: Passage) -> list[str]:
    return [ln.strip().lstrip("# ").strip() for ln in (p.text or "").split("\n") if ln.strip()]


def _title_lines(lines: list[str]) -> tuple[str, int]:
    """The title at the top of `lines` (a wrapped title joined: 'Medical Informatics and' + 'HIT Systems') and
    the index of the line after it; ('', 0) when the page does not open with a title."""
    i = 0
    while i < len(lines) and re.fullmatch(r"\[\w+\]|\d+|page \d+.*", lines[i], re.I):  # page numbers, '[PUBLISH]' tags
        i += 1
    if i >= len(lines) or not is_heading(lines[i], first=True) or len(lines[i].split()) > 14:
        return "", 0
    parts, j = [lines[i]], i + 1
    while j < len(lines) and len(parts) < 3 and (_CONNECTOR.search(parts[-1]) or lines[j][:1].islower()):
        parts.append(lines[j])
        j += 1
    return " ".join(" ".join(parts).split()), j


def doc_title(passages: list[Passage]) -> tuple[str, Passage] | None:
    """The document's title and the passage it was read from, or None."""
    p = _front(passages)
    title, _ = _title_lines(_lines(p))
    return (title, p) if title else None


def byline(passages: list[Passage]) -> tuple[str, Passage] | None:
    """The first person's name printed on its own line under the title ('David Lubliner'), or None."""
    p = _front(passages)
    lines = _lines(p)
    _, after = _title_lines(lines)
    for ln in lines[after : after + 8]:
        name = re.split(r",\s|\s[-–|]\s", re.sub(r"^(presented|prepared|written)? ?by:?\s+", "", ln, flags=re.I))[0]
        if _NAME.match(name.strip()):
            return name.strip(), p
    return None


def caption(question: str, passages: list[Passage], labels: str = FIGURE) -> tuple[str, Passage] | None:
    """The caption printed after 'Figure N' / 'Table N' (or, with `labels=SECTION`, the title after 'Unit 14:')
    for the one the question names, or None."""
    m = re.search(r"\b(" + labels + r")[\s-]*(\d+|[A-H]\b)", question, re.I)
    if not m:
        return None
    kind = m.group(1).lower()
    word = r"fig(?:ure|\s*\.)?" if kind.startswith("fig") else re.escape(kind)  # 'Figure 2', 'Fig. 2', 'FIG . 2'
    label = re.compile(r"^\s*" + word + r"[\s-]*" + m.group(2) + r"\b\s*[.:|–-]?\s*(.*)$", re.I)
    for p in passages:
        lines = _lines(p)
        for k, ln in enumerate(lines):
            found = label.match(ln)
            if not found:
                continue
            text = found.group(1).strip()
            if not text and k + 1 < len(lines):  # 'Figure 2' alone on its line, the caption under it
                text = lines[k + 1]
            text = re.split(r"(?<=[a-z)])\.\s+(?=[A-Z])", text)[0].strip(" .")  # its first sentence
            if len(text.split()) >= 2:
                return text, p
    return None


def expansion(question: str, sents: list[Sentence]) -> tuple[str, Sentence] | None:
    """The spelled-out form of the question's abbreviation printed most often (ties: first printed) over all
    sentences, headings and titles included."""
    found = expansion_spans(question, sents)
    if not found:
        return None
    counts = Counter(sp.text.lower() for sp in found)
    best = max(found, key=lambda sp: (counts[sp.text.lower()], -sp.sent.index))
    return best.text, best.sent
