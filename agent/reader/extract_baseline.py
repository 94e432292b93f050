"""The answer extractor that came before the typed reader (agent/reader/extract.py, which the embedded
policy uses now). Kept as the baseline `python -m eval.bench_extract` measures the reader against (`old`).

- abstain ("Not answerable") when the question names a specific (a year, a capitalised name) that the
  evidence lacks, or when no sentence shares a content word with the question;
- e-mail / phone / URL / date questions: a regular expression over the best sentences;
- numeric questions (how many, percentage, which year): the number of the right kind nearest the
  question's words in the best sentences, or abstain;
- other questions: candidate spans of the 3 best sentences, chosen by SmolLM2's mean log-probability
  (one prompt pass; candidates share its KV cache), discounted by distance to the question's words.

Measured against always-abstain, best-sentence, pure LM prompting and LM free generation, this won on
both dev splits (about 23% normalized match overall, 7-9% of answerable questions, ~0.2 s per call).
"""

from __future__ import annotations

import math
import re
from typing import Any

from agent.reader.smollm import SPAN_PROMPT, get_small_lm
from agent.reader.words import (
    NOT_ANSWERABLE,
    NUMBER,
    SCAFFOLD,
    WORD,
    content_words,
    fuzzy_hit,
    missing_anchors,
    number_value,
    question_idf,
    split_sentences,
    stem,
)

# -- the best sentences ---------------------------------------------------------------------------------------


def rank_sentences(question: str, sents: list[str]) -> list[tuple[float, int]]:
    """(score, index) of each sentence, best first. The score is the IDF-weighted share (0..1) of the
    question's content words found in the sentence, plus a quarter of its better neighbour's share."""
    idf, bags = question_idf(question, sents)
    n = len(sents)
    if not idf or not n:
        return [(0.0, i) for i in range(n)]
    total = sum(idf.values())
    own = []
    for b in bags:
        hit = sum(w if t in b else 0.8 * w if fuzzy_hit(t, b) else 0.0 for t, w in idf.items())
        own.append(hit / total)
    scored = []
    for i in range(n):
        ctx = max(own[i - 1] if i else 0.0, own[i + 1] if i + 1 < n else 0.0)
        scored.append((own[i] + 0.25 * ctx, i))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return scored


def evidence_window(sents: list[str], ranked: list[tuple[float, int]], max_chars: int) -> list[str]:
    """The best sentences that fit in `max_chars`, in document order (reading order helps the LM)."""
    keep, size = [], 0
    for _, i in ranked:
        if keep and size + len(sents[i]) > max_chars:
            break
        keep.append(i)
        size += len(sents[i]) + 1
    return [sents[i] for i in sorted(keep)]


# -- answer extraction ----------------------------------------------------------------------------------------


def answer_kind(question: str) -> str:
    """What the question asks for: 'percent', 'year', 'count' (any number), or 'text'."""
    q = question.lower()
    if re.search(r"\b(which|what)( \w+){0,3} year\b|\bwhen\b.*\b(founded|established|published|released|born)", q):
        return "year"
    wh = re.search(r"\b(what|which|who|whom|whose|where|when|how)\b", q)
    if wh and wh.group(1) in ("which", "who", "whom", "whose", "where"):  # "which algorithm has more lines"
        return "text"
    if re.search(r"\bpercent|percentage|\bproportion\b|\bshare of\b|%", q):
        return "percent"
    if re.search(
        r"\bhow (many|much|long|old|far|big|large|tall|often)\b|\bnumber of\b|\bwhat is the (total|"
        r"amount|average|mean|median|sum|difference|ratio|rate|price|cost)\b",
        q,
    ):
        return "count"
    return "text"


def is_yes_no(question: str) -> bool:
    q = question.strip().lower()
    return bool(
        re.match(r"(is|are|was|were|does|do|did|can|could|has|have|had|will|should)\b", q)
        or "yes or no" in q
        or "'yes' or 'no'" in q
    )


def _is_year(token: str) -> bool:
    return re.fullmatch(r"(1[89]|20)\d\d", token.strip()) is not None


def number_candidates(question: str, sents: list[str], kind: str) -> list[str]:
    """Numbers of the right kind in `sents` (best first): percentages for 'percent', years for 'year',
    non-year numbers for 'count'. Numbers the question itself states are skipped; within a sentence, the
    ones nearest a question word come first."""
    asked = {number_value(t) for t in NUMBER.findall(question)}
    q = {stem(w) for w in content_words(question)}
    out: list[str] = []
    for sent in sents:
        hits = [m.start() for m in WORD.finditer(sent) if stem(m.group()) in q]
        cands = []
        for m in NUMBER.finditer(sent):
            tok = m.group().strip()
            val = number_value(tok)
            if val is None or val in asked:
                continue
            if kind == "percent" and not ("%" in tok or "percent" in tok):
                continue
            if kind == "year" and not _is_year(tok):
                continue
            if kind == "count" and _is_year(tok):
                continue
            cands.append((min((abs(m.start() - h) for h in hits), default=0), m.start(), tok))
        out.extend(tok for _, _, tok in sorted(cands) if tok not in out)
    return out


def pick_number(question: str, sents: list[str], kind: str) -> str:
    """The number nearest the question's words in the best sentence holding one of the right kind ('' if none)."""
    cands = number_candidates(question, sents, kind)
    return cands[0] if cands else ""


_TYPED = [  # (question cue, answer pattern): formats a regex finds better than a 135M model
    (re.compile(r"e-?mail", re.I), re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    (re.compile(r"\b(tele)?phone|\btel\b|\bfax\b|contact number", re.I), re.compile(r"\+?\(?\d[\d ().-]{6,}\d")),
    (re.compile(r"website|\burl\b|web address|\blink\b", re.I), re.compile(r"(?:https?://|www\.)[^\s,;)]+")),
    (
        re.compile(r"\bdate\b|\bwhen\b", re.I),
        re.compile(
            r"\b(?:\d{1,2}(?:st|nd|rd|th)?\s+)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
            r"(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?\s+\d{4}\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
        ),
    ),
]
_PUNCT_SEP = re.compile(r"[,;:()\[\]|•·]|\s[-–—]\s")
_COPULA = re.compile(r"\s(?:is|are|was|were)\s")
_PROPER = re.compile(r"(?:[A-Z][\w.&'’-]*\s?){2,6}")  # runs of capitalised words: names, titles


def _segments(sep: re.Pattern, text: str) -> list[tuple[str, int]]:
    """The pieces of `text` between matches of `sep`, with their start offsets."""
    out, at = [], 0
    for m in sep.finditer(text):
        out.append((text[at : m.start()], at))
        at = m.end()
    return out + [(text[at:], at)]


def typed_match(question: str, sents: list[str]) -> str:
    """An e-mail, phone, URL or date from the first of `sents` holding one, when the question asks for it."""
    for cue, pattern in _TYPED:
        if cue.search(question):
            for s in sents:
                m = pattern.search(s)
                if m:
                    return m.group().strip()
    return ""


def candidate_spans(question: str, sents: list[str], limit: int = 16) -> list[tuple[str, int]]:
    """Short spans of `sents` (best first) that could answer, each with its distance in characters to the
    nearest of the question's words in its sentence: whole short lines, their pieces between punctuation or
    a copula, and runs of capitalised words. Spans made only of question words are dropped, and for
    who-questions spans without a capitalised word (names are capitalised)."""
    q = {stem(w) for w in content_words(question)} | SCAFFOLD
    who = re.match(r"\s*(who|whom|whose)\b", question, re.I) is not None
    out: dict[str, int] = {}
    for s in sents:
        hits = [(m.start(), m.end()) for m in WORD.finditer(s) if stem(m.group()) in q - SCAFFOLD]
        spans = [(s, 0)] + _segments(_PUNCT_SEP, s) + [(m.group(), m.start()) for m in _PROPER.finditer(s)]
        for piece, at in _segments(_PUNCT_SEP, s):  # and at a copula: "The chair is | Maria Keller"
            spans += [(seg, at + a) for seg, a in _segments(_COPULA, piece)]
        for p, at in spans:
            stripped = p.strip(" .\"'“”‘’-")
            at += p.find(stripped) if stripped else 0
            words = WORD.findall(stripped)
            if not words or len(stripped.split()) > 10 or all(stem(w) in q or w.lower() in q for w in words):
                continue
            if who and not any(w[0].isupper() for w in words):
                continue
            end = at + len(stripped)
            dist = min((max(h0 - end, at - h1, 0) for h0, h1 in hits), default=len(s))
            if stripped not in out or dist < out[stripped]:
                out[stripped] = dist
            if len(out) >= limit:
                return list(out.items())
    return list(out.items())


def choose_span(lm: Any, question: str, ctx: str, cands: list[tuple[str, int]], near: float = 0.5) -> str:
    """The candidate the LM finds likeliest as the whole answer over `ctx`, discounted by `near` per
    e-fold of distance to the question's words (answers sit next to the words that ask for them)."""
    if not cands:
        return ""
    scores = lm.score(SPAN_PROMPT.format(ctx=ctx, q=question.strip()), [c for c, _ in cands])
    return max((sc - near * math.log1p(d / 10), -i, c) for i, (sc, (c, d)) in enumerate(zip(scores, cands)))[2]


_PREAMBLE = re.compile(r"^(?:the answer is|short answer|answer)\s*[:\-]?\s*", re.I)


def clean_span(question: str, text: str, max_words: int = 12) -> str:
    """A free LM reply cut to its answer: no 'Answer:' preamble, no restated question ('The name of the
    governor is X' -> 'X'), no trailing period, at most `max_words` words."""
    s = _PREAMBLE.sub("", text.strip().strip("\"“”'`")).strip()
    q = {stem(w) for w in content_words(question)} | SCAFFOLD
    while True:  # peel restated question parts off the front
        m = re.match(
            r"^(.{2,}?)\s*(?:\bis\b|\bare\b|\bwas\b|\bwere\b|\bof\b|\bhas\b|\bhave\b|\bhad\b|:)\s+(.+)$", s, re.I
        )
        head = [stem(w) for w in WORD.findall(m.group(1))] if m else []
        if not head or sum(h in q for h in head) < 0.6 * len(head):
            break
        s = m.group(2)
    return " ".join(s.rstrip(" .;,").split()[:max_words])


def grounded(answer: str, context: str, min_share: float = 0.6) -> bool:
    """Whether most of the answer's words (numbers exactly) occur in the context it was read from."""
    words = WORD.findall(answer)
    if not words:
        return False
    ctx = {stem(w) for w in WORD.findall(context)}
    nums = {number_value(t) for t in NUMBER.findall(context)}
    ok = sum((number_value(w) in nums) if re.match(r"\$?\d", w) else (stem(w) in ctx) for w in words)
    return ok >= min_share * len(words)


def extract_answer(question: str, evidence: list[str], max_new_tokens: int = 24, lm: Any = None) -> str:
    """A short answer to `question` from the evidence texts (best first), or 'Not answerable'.

    Abstain when the question names a specific the evidence lacks, or no sentence shares a content word
    -> e-mail / phone / URL / date by pattern -> numeric questions: the number of the right kind nearest
    the question's words in the best sentences holding one, else abstain -> yes/no questions: the likelier
    of the two to the LM -> otherwise the LM picks, by likelihood, one of the short spans of the 3 best
    sentences. Free generation (`max_new_tokens`) is the last resort, kept only when grounded.
    """
    texts = [t for t in evidence if t and t.strip()]
    if not texts or missing_anchors(question, texts):
        return NOT_ANSWERABLE
    sents = split_sentences(texts)
    ranked = rank_sentences(question, sents)
    if not ranked or ranked[0][0] <= 0:
        return NOT_ANSWERABLE
    best = [sents[i] for _, i in ranked[:3]]
    typed = typed_match(question, [sents[i] for _, i in ranked[:5]])
    if typed:
        return typed
    kind = answer_kind(question)
    if kind != "text":  # a number or nothing: a 135M model's prose is never the right number
        return pick_number(question, [sents[i] for _, i in ranked[:8]], kind) or NOT_ANSWERABLE
    ctx = "\n".join(evidence_window(sents, ranked[:3], 600))
    lm = lm or get_small_lm()
    if is_yes_no(question):
        return choose_span(lm, question, ctx, [("Yes", 0), ("No", 0)])
    cands = candidate_spans(question, best)
    if cands:
        return clean_span(question, choose_span(lm, question, ctx, cands)) or NOT_ANSWERABLE
    span = clean_span(question, lm.chat(SPAN_PROMPT.format(ctx=ctx, q=question.strip()), max_new_tokens=max_new_tokens))
    return span if span and grounded(span, ctx) else NOT_ANSWERABLE
