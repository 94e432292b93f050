"""MMLongBench-Doc's scoring rules: one extracted answer against its gold by answer format, and accuracy and
F1 over scored rows. Pure functions; eval/answer_metrics.py `score_item` applies them to rows that have a format.

The rules follow the authors' scorer, reimplemented here rather than copied:
github.com/mayubo2333/MMLongBench-Doc, eval/eval_score.py (eval_score, eval_acc_and_f1).

Left out on purpose: the per-category report (`show_results` upstream); eval/run_metrics.py aggregates rows.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein

NOT_ANSWERABLE = "Not answerable"
MMLB_FORMATS = ("Str", "Int", "Float", "List", "None")

_PARENS = re.compile(r"\s*\([^)]*\)")
_EDGE_QUOTE = re.compile(r"^['\"]|['\"]$")


def clean_string(s: object) -> str:
    """Upstream's normalisation before comparing: lower case, no parenthesised groups, one edge quote,
    no leading "$", no trailing "%".

    Upstream also tries to strip the units "mile", "miles" and "million", but it discards the result
    of those calls, so they change nothing; we keep them in the string too, to reproduce its scores.

    >>> clean_string(' "$1,200 (approx.)" ')
    '1,200'
    >>> clean_string('18.29%')
    '18.29'
    >>> clean_string('300 miles')
    '300 miles'
    """
    s = str(s).lower().strip()
    s = _PARENS.sub("", s).strip()
    s = _EDGE_QUOTE.sub("", s).strip()
    s = s.lstrip("$").strip()
    return s.rstrip("%").strip()


_EXACT_PATTERNS = (
    re.compile(r"\d+(-\d+|\s\d+)?"),  # phone-like numbers, and any plain integer
    re.compile(r"\d{4}[-\s]\d{2}[-\s]\d{2}"),  # YYYY-MM-DD
    re.compile(r"\d{4}[-\s]\d{2}"),  # YYYY-MM
    re.compile(r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}"),  # e-mail
)


def is_exact_match_string(s: str) -> bool:
    """Whether upstream compares this (cleaned) gold string exactly instead of by ANLS.

    >>> [is_exact_match_string(s) for s in ["https://x.org", "run.py", "page 3", "555-1234", "2019-05"]]
    [True, True, True, True, True]
    >>> is_exact_match_string("red and blue")
    False
    """
    if "https://" in s or s.endswith(".py") or s.endswith("ipynb") or s.startswith("page"):
        return True
    if "a.m." in s or "p.m." in s:
        return True
    return any(p.fullmatch(s) for p in _EXACT_PATTERNS)


def anls_score(gold: str, pred: str, threshold: float = 0.5) -> float:
    """1 - Levenshtein(gold, pred) / max(len), zeroed at or below the threshold (upstream's anls_compute).

    >>> anls_score("abcd", "abcx")
    0.75
    >>> anls_score("ab", "ax")  # exactly 0.5 is not above the threshold
    0.0
    >>> anls_score("", "")
    1.0
    """
    length = max(len(gold), len(pred))
    value = 1.0 - (Levenshtein.distance(gold, pred) / length if length else 0.0)
    return 0.0 if value <= threshold else value


def _decimals(x: float) -> int:
    """Digits after the point in str(x), else 3: upstream's precision for rounding."""
    text = str(x)
    return len(text.split(".")[-1]) if "." in text else 3


def float_equal(gold: float, pred: float) -> bool:
    """Upstream's Float rule: gold/100, gold or gold*100 within 1% relative, or equal after rounding.

    >>> float_equal(18.29, 18.3), float_equal(18.29, 0.1829), float_equal(0.183, 18.3)
    (True, True, True)
    >>> float_equal(18.29, 19.0)
    False
    """
    for item in (gold / 100, gold, gold * 100):
        if math.isclose(item, pred, rel_tol=0.01):
            return True
        places = max(min(_decimals(pred), _decimals(item)), 2)
        if round(pred, places) == round(item, places):
            return True
    return False


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_LIST_SPLIT = re.compile(r"\s*(?:(?<!\d),|,(?!\d)|;|\n|\band\b)\s*")


def split_list_text(text: str) -> list[str]:
    """Items of a list written as prose: commas (not thousands separators), semicolons, newlines, "and"."""
    return [p.strip() for p in _LIST_SPLIT.split(text) if p and p.strip()]


def parse_list(text: object) -> list:
    """A list answer from its text. Text that starts with "[" is read as a Python literal (never
    eval'd); if that fails, the bracket's content is split on commas / semicolons / "and". Anything
    else is one item, as upstream wraps a non-list answer.

    >>> parse_list("['a', 'b']"), parse_list("[1500, 8000]"), parse_list("[a, b and c]"), parse_list("x, y")
    (['a', 'b'], [1500, 8000], ['a', 'b', 'c'], ['x, y'])
    """
    if isinstance(text, list):
        return text
    text = str(text)
    if not text.startswith("["):
        return [text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = split_list_text(text.strip()[1:].rstrip("]"))
    return list(value) if isinstance(value, (list, tuple)) else [value]


def mmlb_score(gold: str, pred: str, fmt: str) -> float:
    """MMLongBench-Doc's score of one extracted answer against its gold, by answer format.

    >>> mmlb_score("12", "12.0", "Int"), mmlb_score("12", "twelve", "Int")
    (1.0, 0.0)
    >>> mmlb_score("18.29%", "18.3", "Float"), mmlb_score("18.29%", "0.1829", "Float")
    (1.0, 1.0)
    >>> mmlb_score("Not answerable", "Not answerable", "None")
    1.0
    >>> mmlb_score("['Circle', 'Rectangle']", "['rectangle', 'circle']", "List")
    1.0
    """
    if fmt == "Int":
        try:
            return float(int(gold) == int(float(pred)))
        except (ValueError, OverflowError, TypeError):
            return 0.0
    if fmt == "Float":
        try:
            gold_f, pred_f = float(clean_string(gold)), float(clean_string(pred))
        except (ValueError, TypeError):
            return 0.0
        return float(float_equal(gold_f, pred_f))
    if fmt in ("Str", "None"):
        g, p = clean_string(gold), clean_string(pred)
        return float(g == p) if is_exact_match_string(g) else anls_score(g, p)
    # List, and anything unknown, as upstream's final branch does.
    golds, preds = parse_list(gold), parse_list(pred)
    if len(golds) != len(preds):
        return 0.0
    if not golds:
        return 1.0  # both "[]": upstream raises IndexError here; equal empty lists are a match
    golds = sorted(clean_string(g) for g in golds)
    preds = sorted(clean_string(p) for p in preds)
    if _is_float(golds[0]) or is_exact_match_string(golds[0]):
        return float("-".join(golds) == "-".join(preds))
    return min(anls_score(g, p) for g, p in zip(golds, preds))


def _first_gold(gold: object) -> str:
    if isinstance(gold, (list, tuple)):
        return str(gold[0]) if gold else ""
    return str(gold)


def mmlb_acc_f1(rows: Sequence[dict]) -> tuple[float, float]:
    """Accuracy and F1 over scored rows, as upstream's eval_acc_and_f1.

    Recall averages the scores of answerable golds; precision divides the same sum by the number of
    predictions that are not "Not answerable". Rows without a score are left out.

    >>> rows = [{"gold": ["5"], "extracted": "5", "score": 1.0},
    ...         {"gold": ["Not answerable"], "extracted": "Not answerable", "score": 1.0},
    ...         {"gold": ["red"], "extracted": "Not answerable", "score": 0.0}]
    >>> acc, f1 = mmlb_acc_f1(rows)
    >>> round(acc, 4), round(f1, 4)  # recall 1/2, precision 1/1
    (0.6667, 0.6667)
    """
    scored = [r for r in rows if r.get("score") is not None]
    if not scored:
        return 0.0, 0.0
    acc = sum(r["score"] for r in scored) / len(scored)
    answerable = [r for r in scored if _first_gold(r["gold"]) != NOT_ANSWERABLE]
    n_pred = sum(1 for r in scored if r.get("extracted") != NOT_ANSWERABLE)
    if not answerable or n_pred == 0:
        return acc, 0.0
    hits = sum(r["score"] for r in answerable)
    recall, precision = hits / len(answerable), hits / n_pred
    f1 = 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0
    return acc, f1
