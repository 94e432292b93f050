"""How likely a reading is right: a confidence from the signals the reader already has, and where to look
when it is too low to answer.

Signals (`features`, each in [0, 1]): how much of the question the answer's sentence and passage cover, the
span's rank score and its margin over the best different answer, whether the ranked spans agree, how high its
passage ranks and whether it was memorized, whether the answer is a typed value (a number, date, contact) or
was read from structure (a table row, a stated sum or change, the page layout, a definition), and how many of
the question's names its passage prints. `confidence` is a logistic model over them; its weights (`WEIGHTS`)
are fitted by `python -m eval.bench_extract --calibrate` on the answers of an embedded dev run whose questions are
not in the smoke set, and on the bundled plain and demo answers, so the smoke set stays a held-out check
(eval/RESULTS.md).

`pointers` names the pages most likely to hold the answer: the passages that cover most of the question, the
answer's own first, so an abstention still says where to look.

Pure functions over strings and numbers; nothing here loads a model.
"""

from __future__ import annotations

import math
import re
from typing import Any

from agent.reader.words import NOT_ANSWERABLE, question_names, search_terms

FEATURES = (
    "coverage",  # share of the question's search terms in the answer's sentence
    "passage_coverage",  # ... in the answer's passage
    "score",  # the reader's rank score, clipped to [0, 2] and halved
    "margin",  # rank score over the best span with a different text (1 when there is none)
    "agree",  # share of the ranked spans that read the same answer
    "rank",  # 1 / (1 + the answer's passage rank)
    "memorized",  # the answer's passage was memorized (1) or only retrieved (0)
    "typed",  # a typed value: number, percent, money, date, year, contact ...
    "structured",  # read from a table row, a stated sum or change, the layout, a definition or an expansion
    "yes_no",  # a yes/no answer
    "names",  # share of the question's names its passage prints (1 when it names none)
    "type_match",  # the answer's form is the form asked for (a count has no % sign, a percent has one ...)
    "needs",  # the question needs what reading text cannot do: counting across a document, a ratio, a list
    "row_match",  # a table answer: share of its row label's words the question uses (0 for other answers)
    "column_match",  # ... of its column header's words (agent/reader/table_reader.py)
)
FREE = {"text", "person", "organization", "place", "list", "consequence", "choice", "yes_no"}
STRUCTURED = {"table", "table row", "arithmetic", "layout", "definition", "expansion"}

# Fitted by `python -m eval.bench_extract --calibrate DEV_RUN --simple PLAIN_RUN DEMO_RUN` (logistic regression,
# C = 0.3) on 185 answers to dev questions outside the smoke set (19 right) and the 35 plain and demo answers;
# eval/RESULTS.md has the runs and the precision against coverage.
WEIGHTS = {
    "bias": -2.962,
    "coverage": 0.784,
    "passage_coverage": 0.14,
    "score": 1.582,
    "margin": 0.831,
    "agree": -0.64,
    "rank": 0.677,
    "memorized": -0.192,
    "typed": 0.821,
    "structured": 0.611,
    "yes_no": -0.174,
    "names": -0.018,
    "type_match": 0.119,
    "needs": -0.536,
    # not fitted: no dev answers came from tables when the rest was fitted; a table answer whose row and column
    # both match fully gains what the rest of the model gives a typed span of a sentence that covers the question
    "row_match": 0.8,
    "column_match": 0.8,
}


# what a question needs that reading one sentence cannot give, worded for the abstention's note
_COUNTING = re.compile(
    r"\bhow many\b(?:(?!\?).)*?\b(figures?|tables?|charts?|graphs?|plots?|images?|pictures?|photos?|pages?|slides?|"
    r"exhibits?|examples?|logos?|icons?|diagrams?|illustrations?|sections?|chapters?|footnotes?|references?|"
    r"hyperlinks?|links?|times|papers?|appendi(?:x|ces)|rows?|columns?|items?|steps?|parts?|quizzes|"
    r"case studies|outcomes|questions?)\b",
    re.I,
)
_RATIO = re.compile(r"\b(ratio|proportion|share|percentage|percent|rate)\b.*\b(of|between|compared|to)\b", re.I)
_GAP = re.compile(
    r"\b(gap|difference|differ|more|less|fewer|higher|lower|increase|decrease)\b.*\b(than|between|from)\b", re.I
)
_LISTING = re.compile(
    r"^\s*(list|enumerate|name all|name the|what are (?:all )?the)\b|\ball\b.*\b(pages?|names?)\b", re.I
)
_PERCENT = re.compile(r"%|percent", re.I)


def needs(question: str, kind: str = "") -> str:
    """What the question needs that reading one sentence cannot give, as the abstention says it; '' if nothing.

    >>> needs("How many figures are there in the paper?"), needs("What is the ratio of A to B?", "number")
    ('counting figures across the document', 'a ratio or share of two values')
    >>> needs("Who chairs the board?")
    ''
    """
    m = _COUNTING.search(question)
    if m:
        return f"counting {m.group(1).lower()} across the document"
    if _RATIO.search(question) and kind in ("percent", "number", "money", "ratio"):
        return "a ratio or share of two values"
    if _GAP.search(question) and kind in ("percent", "number", "money"):
        return "the difference of two values"
    if kind == "list" or _LISTING.search(question):
        return "listing every item the question asks for"
    return ""


def type_match(kind: str, answer: str) -> float:
    """Whether the answer has the form its type asks for: a percent shows a % sign, a plain count has none and no
    words; other types pass.

    >>> type_match("number", "37%"), type_match("percent", "37%"), type_match("number", "12")
    (0.0, 1.0, 1.0)
    """
    if kind == "percent":
        return float(bool(_PERCENT.search(answer)))
    if kind == "number":
        return float(not _PERCENT.search(answer) and not re.search(r"[A-Za-z]{3,}", answer))
    return 1.0


def features(question: str, reading: Any, passages: list[Any]) -> dict[str, float]:
    """The signals of one answered reading (see FEATURES), each in [0, 1]."""
    kw = search_terms(question)
    text = passages[reading.passage].text if 0 <= reading.passage < len(passages) else reading.sentence

    def cover(t: str) -> float:
        return len(kw & search_terms(t)) / len(kw) if kw else 0.0

    rivals = reading.rivals or []
    mine = _norm(reading.answer)
    same = [sc for sc, t, _ in rivals if _norm(t) == mine]
    other = [sc for sc, t, _ in rivals if _norm(t) != mine]
    margin = 1.0 if not other else max(0.0, min(1.0, (max(same, default=reading.score) - max(other)) * 2))
    names = question_names(question)
    low = text.lower()
    memorized = passages[reading.passage].memorized if 0 <= reading.passage < len(passages) else False
    return {
        "coverage": cover(reading.sentence),
        "passage_coverage": cover(text),
        "score": max(0.0, min(2.0, reading.score)) / 2,
        "margin": margin,
        "agree": len(same) / len(rivals) if rivals else 1.0,
        "rank": 1.0 / (1 + max(0, reading.passage)),
        "memorized": float(bool(memorized)),
        "typed": float(reading.answer_type not in FREE),
        "structured": float(reading.path in STRUCTURED),
        "yes_no": float(reading.path == "yes/no"),
        "names": sum(n.lower() in low for n in names) / len(names) if names else 1.0,
        "type_match": type_match(reading.answer_type, reading.answer),
        "needs": float(bool(needs(question, reading.answer_type)) and reading.path not in STRUCTURED),
        "row_match": float((getattr(reading, "table", None) or {}).get("row_match", 0.0)),
        "column_match": float((getattr(reading, "table", None) or {}).get("column_match", 0.0)),
    }


def confidence(feats: dict[str, float], weights: dict[str, float] | None = None) -> float:
    """The logistic model's probability that the reading is right.

    >>> confidence({"coverage": 1.0}, {"bias": 0.0, "coverage": 0.0})
    0.5
    """
    w = WEIGHTS if weights is None else weights
    z = w.get("bias", 0.0) + sum(w.get(k, 0.0) * v for k, v in feats.items())
    return 1.0 / (1.0 + math.exp(-z))


def pointers(question: str, passages: list[Any], first: int = -1, n: int = 3) -> list[dict[str, Any]]:
    """The pages (or pictures, clips, notes) most likely to hold the answer: passage `first` (the reading's own),
    then the passages that cover most of the question's terms, `n` at most, one per citation."""
    kw = search_terms(question)
    order = sorted(
        range(len(passages)),
        key=lambda i: (i != first, -(len(kw & search_terms(passages[i].text)) / len(kw) if kw else 0.0), i),
    )
    out, seen = [], set()
    for i in order:
        p = passages[i]
        key = (p.citation or p.info_id).split(" region [")[0]  # a crop points to its page
        if key in seen:
            continue
        seen.add(key)
        out.append({"citation": p.citation, "info_id": p.info_id, "page": p.page})
        if len(out) == n:
            break
    return out


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split()).strip(" .")


def abstain_below(reading: Any, question: str, threshold: float, passages: list[Any] = ()) -> Any:
    """`reading` as it is when it answers with at least `threshold` confidence from a passage that prints every name
    the question gives; else "Not answerable", with a note that says what could not be done and where the answer
    likely is, and the answer it would have given kept in `candidate` (for the risk-coverage curve, and for a
    reader of the trace)."""
    text = passages[reading.passage].text if 0 <= reading.passage < len(passages) else reading.sentence
    unnamed = [n for n in question_names(question) if n.lower() not in text.lower()] if reading.answered else []
    if not reading.answered or reading.confidence >= threshold and not unnamed:
        return reading
    reading.candidate = reading.answer
    reading.abstained_for = "unnamed" if unnamed else "confidence"
    if unnamed and passages:  # the reading's own passage is not where to look: the ones covering the question are
        reading.pointers = pointers(question, passages)
    why = needs(question, reading.answer_type)
    where = ", ".join(p["citation"] or p["info_id"] for p in reading.pointers)
    said = f"“{reading.answer}” ({reading.citation or reading.info_id})"
    if unnamed:  # an answer read where the question's subject is never named is not shown to be about it
        head = f"its best reading, {said}, comes from a passage that never names {unnamed[0]}"
    elif why:
        head = f"this needs {why}, which reading the text one sentence at a time cannot do; its best reading was {said}"
    else:
        head = f"not sure enough to answer: its best reading, {said}, has confidence {reading.confidence:.2f}"
    reading.note = f"{head}; the answer is likely on {where}" if where else head
    reading.answer = NOT_ANSWERABLE
    return reading
