"""Answer metrics: MMLongBench-Doc's scoring by answer format, plus ANLS, exact match, token F1 and
numeric match for datasets without formats. Pure functions; the RL rewards reuse them.

The MMLongBench-Doc rules follow the authors' scorer, reimplemented here rather than copied:
github.com/mayubo2333/MMLongBench-Doc, eval/eval_score.py (eval_score, eval_acc_and_f1).
Upstream extracts a short answer from the model's reply with GPT-4o before scoring; `extract_answer`
is a rule-based stand-in that needs no LLM, so our scores are comparable only when the agent already
answers briefly. An LLM judge is available separately in `eval/judge.py`.

Left out on purpose: the per-category report (`show_results` upstream); eval/report.py aggregates rows.
"""

from __future__ import annotations

import ast
import math
import re
import string
from collections import Counter
from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein

NOT_ANSWERABLE = "Not answerable"
MMLB_FORMATS = ("Str", "Int", "Float", "List", "None")

# ---------------------------------------------------------------------------------------------
# MMLongBench-Doc rules (github.com/mayubo2333/MMLongBench-Doc, eval/eval_score.py)
# ---------------------------------------------------------------------------------------------

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


def _split_list_text(text: str) -> list[str]:
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
        value = _split_list_text(text.strip()[1:].rstrip("]"))
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


# ---------------------------------------------------------------------------------------------
# Rule-based answer extraction (upstream uses GPT-4o for this step)
# ---------------------------------------------------------------------------------------------

_NA_PHRASES = re.compile(
    r"not answerable|unanswerable|cannot be (?:determined|answered)|can't be (?:determined|answered)"
    r"|no information|not mentioned|not enough information|insufficient information",
    re.IGNORECASE,
)
_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*[:：]\s*", re.IGNORECASE)
# A minus sign counts only when it does not join words ("COVID-19" holds 19, not -19).
_NUMBER_TEXT = r"(?:(?<![\w-])-)?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
_NUMBER = re.compile(_NUMBER_TEXT)
_WORD_NUMBERS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_WORD_NUMBER = re.compile(r"\b(" + "|".join(_WORD_NUMBERS) + r")\b", re.IGNORECASE)


# "The shapes are a, b" / "They include: a, b": a lead-in before the items of a prose list.
_LIST_LEAD_IN = re.compile(
    r"^(?:[^\n]*?:\s+|(?:the|these|those|they|there)\b[^,;\n]*?\b(?:are|were|is|include|includes)\s+)",
    re.IGNORECASE,
)


_INITIAL_END = re.compile(r"(?:^|[\s.])[^\W\d_]\.$")


def _strip_answer(text: str) -> str:
    """Drop a leading "Answer:" and a trailing period, unless it ends an initial ("a.m.", "Melinda D.").

    >>> _strip_answer("Answer: Scott Bradley."), _strip_answer("10 45 a.m."), _strip_answer("M.A.")
    ('Scott Bradley', '10 45 a.m.', 'M.A.')
    """
    text = _ANSWER_PREFIX.sub("", text.strip()).strip()
    if text.endswith(".") and not _INITIAL_END.search(text):
        return text[:-1].rstrip()
    return text


def _first_number(text: str, words: bool) -> tuple[str, int] | None:
    """The earliest number in the text (digits, or "one".."twenty" when `words`), commas removed,
    with the index where it ends."""
    found = []
    m = _NUMBER.search(text)
    if m:
        found.append((m.start(), m.group().replace(",", ""), m.end()))
    if words:
        w = _WORD_NUMBER.search(text)
        if w:
            found.append((w.start(), str(_WORD_NUMBERS[w.group().lower()]), w.end()))
    if not found:
        return None
    _, value, end = min(found)
    return value, end


def extract_answer(pred: str | None, fmt: str) -> str:
    """A short answer in the form MMLongBench-Doc's scorer expects, by rules (no LLM).

    Upstream asks GPT-4o for this step; these rules suit agents that already answer briefly. The full table
    of cases is tests/eval/test_answer_metrics.py::test_extract_answer.

    >>> extract_answer("There are 1,240 respondents.", "Int"), extract_answer("About 18.29% of adults.", "Float")
    ('1240', '18.29%')
    >>> extract_answer("Answer: circle, rectangle and triangle.", "List")
    "['circle', 'rectangle', 'triangle']"
    >>> extract_answer("The document does not say; it cannot be determined.", "Int")
    'Not answerable'
    """
    if pred is None or not pred.strip():
        return ""
    if _NA_PHRASES.search(pred):
        return NOT_ANSWERABLE
    text = _strip_answer(pred)
    if fmt == "Int":
        found = _first_number(text, words=True)
        if found is None:
            return text
        value = found[0]
        if "." in value and set(value.split(".")[1]) <= {"0"}:
            value = value.split(".")[0]  # "12.0" is the integer 12
        return value
    if fmt == "Float":
        found = _first_number(text, words=False)
        if found is None:
            return text
        value, end = found
        percent = re.match(r"\s*(%|percent\b)", text[end:])
        return value + "%" if percent else value
    if fmt == "List":
        # The widest bracket, then each innermost one; the longest that parses wins, so a citation
        # like "[1]" does not shadow "['a', 'b']".
        candidates = re.findall(r"\[.*\]", text, re.DOTALL) + re.findall(r"\[[^\[\]]*\]", text)
        parsed = []
        for literal in candidates:
            try:
                value = ast.literal_eval(literal)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(value, (list, tuple)):
                parsed.append((len(literal), [str(v) for v in value]))
        if parsed:
            return str(max(parsed, key=lambda lv: lv[0])[1])
        text = _LIST_LEAD_IN.sub("", text, count=1)
        items = [re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", p).strip(" .'\"") for p in _split_list_text(text)]
        return str([p for p in items if p])
    return text


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
