"""Rule-based answer extraction: the short answer MMLongBench-Doc's scorer expects, from a model's reply.

Upstream extracts a short answer from the model's reply with GPT-4o before scoring; `extract_answer`
is a rule-based stand-in that needs no LLM, so our scores are comparable only when the agent already
answers briefly. An LLM judge is available separately in `eval/judge.py`.
"""

from __future__ import annotations

import ast
import re

from eval.mmlb_rules import NOT_ANSWERABLE, split_list_text

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
        items = [re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", p).strip(" .'\"") for p in split_list_text(text)]
        return str([p for p in items if p])
    return text
