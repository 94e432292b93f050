"""Answer metrics: ANLS, exact match, token F1 and numeric match for datasets without formats, and
`score_item`, which scores one prediction row. Pure functions; the RL rewards reuse them.

MMLongBench-Doc's rules by answer format live in eval/mmlb_rules.py and the rule-based answer extraction before
them in eval/answer_extract.py; `score_item` uses them for rows that have a format.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

from eval.answer_extract import extract_answer
from eval.mmlb_rules import MMLB_FORMATS, anls_score, mmlb_score

# ---------------------------------------------------------------------------------------------
# Generic metrics (DocVQA's ANLS; SQuAD's EM and token F1; numeric match)
# ---------------------------------------------------------------------------------------------


def _as_list(golds: str | Sequence[str]) -> list[str]:
    return [golds] if isinstance(golds, str) else [str(g) for g in golds]


def _squash(text: str | None) -> str:
    return " ".join((text or "").lower().split())


def anls(pred: str | None, golds: str | Sequence[str], threshold: float = 0.5) -> float:
    """Average Normalized Levenshtein Similarity of one answer, the best over golds (Biten et al., 2019).

    >>> anls("The  Cat", ["the cat"]), anls("cat", ["dog", "cats"])
    (1.0, 0.75)
    >>> anls("ab", ["ax"])
    0.0
    """
    p = _squash(pred)
    return max((anls_score(_squash(g), p, threshold) for g in _as_list(golds)), default=0.0)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str | None) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = (text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(pred: str | None, golds: str | Sequence[str]) -> float:
    """1.0 if the normalised answer equals any normalised gold.

    >>> exact_match("the Paris.", ["Paris", "City of Light"]), exact_match("Paris, France", "Paris")
    (1.0, 0.0)
    """
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _as_list(golds)))


def token_f1(pred: str | None, golds: str | Sequence[str]) -> float:
    """SQuAD token F1 between normalised answers, the best over golds.

    >>> round(token_f1("Paris France", ["Paris"]), 4)
    0.6667
    """
    p_tokens = normalize_answer(pred).split()
    best = 0.0
    for g in _as_list(golds):
        g_tokens = normalize_answer(g).split()
        if not p_tokens or not g_tokens:
            best = max(best, float(p_tokens == g_tokens))
            continue
        common = sum((Counter(p_tokens) & Counter(g_tokens)).values())
        if common:
            precision, recall = common / len(p_tokens), common / len(g_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


# A number standing alone: never glued to a letter or a hyphen-joined word, so the digits of names are not
# numbers ("3M", "FY2022", "Q3", "COVID-19", "A4"); thousands separators and a decimal part are allowed.
_STANDALONE = r"(?<![\w.-])(-)?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?![\w]|\.\d)"
_STANDALONE_NUMBER = re.compile(_STANDALONE)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "trillion": 1e12}
_QUALIFIER = re.compile(r"^(?:about|approximately|approx\.?|around|roughly|nearly|almost|~|≈)\s*", re.I)
_CURRENCY = r"(?:[$€£¥₹]|usd|us\$|eur|gbp|rmb|cny|inr|rs\.?)"
# a whole answer that is one number: currency, the number, a scale word, a percent sign, and at most two unit
# words ("15.9 million", "$1,577.00", "18.29%", "12 customers", "300 miles", "5.2 percentage points")
_NUMBER_ANSWER = re.compile(
    rf"^({_CURRENCY})?\s*(-)?((?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?|\.\d+)\s*"
    r"(thousand|million|billion|trillion|mn|bn|k|m)?\b\s*(%|percent(?:age points?)?\b)?\s*"
    rf"{_CURRENCY}?\s*((?:[a-z][a-z'-]*\s*){{0,2}})$",
    re.I,
)
_ASKS_YEAR = re.compile(r"\b(?:what|which)\s+(?:fiscal\s+|calendar\s+)?year\b|\bin what year\b|\bwhen\b", re.I)
_YEAR_IN_NAME = re.compile(r"(?<![\w])(?:FY|CY|fy|cy)?'?((?:19|20)\d{2})(?![\d])")


class NumberAnswer(tuple):
    """(value, written as a percentage, scale factor: 1, 1e3, 1e6 ...)."""

    value = property(lambda self: self[0])
    percent = property(lambda self: self[1])
    scale = property(lambda self: self[2])


def number_answer(text: str | None) -> NumberAnswer | None:
    """The number `text` *is*, when the whole text is one number answer (with its currency, scale, percent and
    up to two unit words); None for a sentence that merely mentions numbers, and for digits inside names.

    >>> number_answer("$1,577.00"), number_answer("about 18.29%"), number_answer("15.9 million")
    ((1577.0, False, 1.0), (18.29, True, 1.0), (15.9, False, 1000000.0))
    >>> number_answer("12 customers"), number_answer("3M"), number_answer("FY2022"), number_answer("COVID-19")
    ((12.0, False, 1.0), None, None, None)
    >>> number_answer("Operating margin for 3M fell by 1.7% in FY2022, mainly because of costs") is None
    True
    """
    t = _QUALIFIER.sub("", " ".join(str(text or "").split())).strip().rstrip(".")
    m = _NUMBER_ANSWER.match(t)
    if not m:
        return None
    currency, sign, digits, scale, percent = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    if scale and scale.lower() in ("k", "m") and not currency:  # "3M", "4K": a name, unless "$3M"
        return None
    value = float(digits.replace(",", "")) * (-1 if sign else 1)
    return NumberAnswer((value, bool(percent), _SCALES.get((scale or "").lower(), 1.0)))


def answer_number(pred: str | None, question: str = "") -> NumberAnswer | None:
    """The number a prediction gives as its answer: the whole answer when it is one number, else its one
    standalone number; None when it gives several (which one would be the answer?) or none. When the question
    asks for a year, a year written inside a name counts ("FY2022" answers "In which fiscal year ...").

    >>> answer_number("1,577"), answer_number("1373, 1577"), answer_number("effect on 3M's consolidated results of")
    ((1577.0, False, 1.0), None, None)
    >>> answer_number("FY2022"), answer_number("FY2022", "In which fiscal year did margins peak?")
    (None, (2022.0, False, 1.0))
    >>> answer_number("Revenue grew 31 percent.")
    (31.0, True, 1.0)
    """
    whole = number_answer(pred)
    if whole is not None:
        return whole
    text = str(pred or "")
    if question and _ASKS_YEAR.search(question):
        years = {m.group(1) for m in _YEAR_IN_NAME.finditer(text)}
        return NumberAnswer((float(years.pop()), False, 1.0)) if len(years) == 1 else None
    found = list(_STANDALONE_NUMBER.finditer(text))
    if len(found) != 1:
        return None
    m = found[0]
    value = float(m.group(2).replace(",", "")) * (-1 if m.group(1) else 1)
    after = text[m.end() :]
    percent = re.match(r"\s*(%|percent\b)", after) is not None
    scale = re.match(r"\s*(thousand|million|billion|trillion|mn|bn)\b", after, re.I)
    return NumberAnswer((value, percent, _SCALES[scale.group(1).lower()] if scale else 1.0))


def _same_number(p: NumberAnswer, g: NumberAnswer, rel_tol: float) -> bool:
    variants = [g.value]
    if p.percent or g.percent:  # 18% and 0.18 are one share
        variants += [g.value / 100, g.value * 100]
    if p.scale != g.scale:  # 15.9 million and 15,900,000; a scale left out still names the number
        variants += [g.value * g.scale / p.scale]
    return any(math.isclose(p.value, v, rel_tol=rel_tol) for v in variants)


def numeric_match(
    pred: str | None, golds: str | Sequence[str], rel_tol: float = 0.01, question: str = ""
) -> float | None:
    """1.0 if the number the answer gives (`answer_number`) equals a numeric gold's within `rel_tol`; None when
    no gold *is* a number answer (a sentence that mentions numbers is not one). When either side is written as
    a percentage, x/100 and x*100 also count.

    >>> numeric_match("about 18%", ["0.18"]), numeric_match("0.18", ["18 percent"])
    (1.0, 1.0)
    >>> numeric_match("1,240 people", ["1240"]), numeric_match("3", ["300"]), numeric_match("x", ["red"])
    (1.0, 0.0, None)
    >>> numeric_match("1373, 1577", ["$1577.00"]), numeric_match("1,577", ["$1577.00"])
    (0.0, 1.0)
    """
    gold_numbers = [n for n in (number_answer(g) for g in _as_list(golds)) if n is not None]
    if not gold_numbers:
        return None
    p = answer_number(pred, question)
    if p is None:
        return 0.0
    return float(any(_same_number(p, g, rel_tol) for g in gold_numbers))


LONG_FORM_WORDS = 8  # a gold of this many words or more is a sentence, scored by token overlap without a judge


def is_long_form(golds: str | Sequence[str]) -> bool:
    """Whether every gold is a sentence rather than a short answer (a judge scores these best).

    >>> is_long_form(["Operating margin for 3M fell by 1.7% in FY2022, mainly because of costs"])
    True
    >>> is_long_form(["Eiffel Tower", "the tower built for the 1889 World's Fair in Paris, France"])
    False
    """
    items = _as_list(golds)
    return bool(items) and all(len(str(g).split()) >= LONG_FORM_WORDS for g in items)


# ---------------------------------------------------------------------------------------------
# One prediction row
# ---------------------------------------------------------------------------------------------


def score_item(row_like: dict) -> dict:
    """Extract and score one prediction row (schema in eval/runner.py).

    Reads "pred", "gold" (list of acceptable answers), "answer_format" and "question". MMLongBench-Doc formats
    get the upstream score as the primary one (`scored_by` "mmlb"). Other rows: a gold that is a number answer
    is matched by the number the prediction gives ("number": max(EM, numeric match)); a sentence gold by token
    overlap, F1 >= 0.5 ("overlap"; a configured judge replaces it, eval/runner.py); anything else by
    max(EM, ANLS >= 0.5) ("text").

    >>> out = score_item({"pred": "Answer: 18.3%", "gold": ["18.29%"], "answer_format": "Float"})
    >>> out["extracted"], out["scores"]["mmlb"], out["score"], out["scored_by"]
    ('18.3%', 1.0, 1.0, 'mmlb')
    >>> score_item({"pred": "the Eiffel Tower.", "gold": ["Eiffel Tower"], "answer_format": ""})["score"]
    1.0
    >>> score_item({"pred": "48.6 million", "gold": ["15.9 million"], "answer_format": ""})["score"]
    0.0
    """
    fmt = row_like.get("answer_format") or ""
    golds = _as_list(row_like.get("gold") or [])
    extracted = extract_answer(row_like.get("pred"), fmt)
    mmlb = mmlb_score(golds[0], extracted, fmt) if fmt in MMLB_FORMATS and golds else None
    scores = {
        "mmlb": mmlb,
        "anls": anls(extracted, golds) if golds else 0.0,
        "em": exact_match(extracted, golds),
        "f1": token_f1(extracted, golds) if golds else 0.0,
        "num": numeric_match(extracted, golds, question=str(row_like.get("question") or "")),
        "judge": None,
    }
    if mmlb is not None:
        score, by = mmlb, "mmlb"
    elif scores["num"] is not None:  # a numeric gold: the number decides ('48.6 million' is not '15.9 million')
        score, by = max(scores["em"], scores["num"]), "number"
    elif is_long_form(golds):  # a sentence: no short answer equals it, and ANLS against it means little
        score, by = max(scores["em"], 1.0 if scores["f1"] >= 0.5 else 0.0), "overlap"
    else:
        score, by = max(scores["em"], 1.0 if scores["anls"] >= 0.5 else 0.0), "text"
    return {"extracted": extracted, "scores": scores, "score": score, "scored_by": by}
