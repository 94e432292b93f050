"""Candidate answer spans of the expected type, and their ranking: the reader's middle step.

The spans come from the span modules (spans.py typed kinds, name_spans.py names and phrases, clause_spans.py
key rows); here they are gathered for an answer type, headings dropped, and ranked by their sentence's score,
the question's names in it and closeness to the question's words. SmolLM2 may reorder the best free-text spans
(`lm_order`). `states_change` and `states_total` tell whether a number's sentence states it as a difference or
a sum, for questions that ask for one. The reader (extract.py) picks from the ranking.
"""

from __future__ import annotations

import math
import re
from typing import Any

from agent.reader.answer_types import NUMERIC
from agent.reader.clause_spans import key_spans
from agent.reader.name_spans import entity_spans, expansion_spans, label_spans, phrase_spans
from agent.reader.sentences import Sentence
from agent.reader.spans import (
    CONTACT,
    Span,
    color_spans,
    contact_spans,
    date_spans,
    distance,
    freq_spans,
    list_spans,
    numeric_spans,
    q_hits,
)
from agent.reader.words import SCAFFOLD, WORD, stem, terms

# a number that is the size of a change or a gap, as the text states it: 'up 31 percent', 'rose by 5', '12 more',
# '3 points higher'; a number beside such a word but not its size ('48.6 million dollars, up ...') is not one
_CHANGE_BEFORE = re.compile(
    r"\b(?:up|down|by|rose|fell|increased|decreased|grew|gained|dropped|declined|(?:difference|gap|rise|increase|"
    r"drop|decline|fall|growth|gain) of)\s+(?:about\s+|around\s+|nearly\s+|almost\s+)?[$€£]?$",
    re.I,
)
_CHANGE_AFTER = re.compile(r"^\s*(?:\w+\s+)?(?:more|less|fewer|higher|lower|above|below|ahead|behind)\b", re.I)


def typed_candidates(question: str, kind: str, sents: list[Sentence], heads: set[str]) -> list[Span]:
    """Candidates of the expected type; never the whole of a heading, title or running header/footer line
    (`heads`, lower case), wherever the span was found ('PEW RESEARCH CENTER' inside a joined line)."""
    return [sp for sp in _typed(question, kind, sents) if sp.text.strip(" .").lower() not in heads]


def _typed(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    keyed = key_spans(question, sents) if kind in ("person", "organization", "place", "text") else []
    return keyed + _typed_spans(question, kind, sents)


def _typed_spans(question: str, kind: str, sents: list[Sentence]) -> list[Span]:
    if kind in NUMERIC:
        return numeric_spans(question, kind, sents)
    if kind == "date":
        return date_spans(question, kind, sents)
    if kind == "place":
        return entity_spans(question, kind, sents)
    if kind == "frequency":
        return freq_spans(question, sents)
    if kind == "color":
        return color_spans(question, sents)
    if kind in CONTACT:
        return contact_spans(question, kind, sents)
    if kind == "expansion":
        return expansion_spans(question, sents)
    if kind in ("person", "organization", "text"):
        base = (
            entity_spans(question, kind, sents)
            if kind != "text"
            else phrase_spans(question, sents) + entity_spans(question, "text", sents)
        )
        return base + label_spans(question, kind, sents)
    if kind == "list":
        return list_spans(question, sents) or phrase_spans(question, sents)
    return phrase_spans(question, sents) + entity_spans(question, "text", sents)


def _names(question: str) -> list[str]:
    """The capitalised words of the question past its first word: the specifics it asks about."""
    words = WORD.findall(question)[1:]
    return list(dict.fromkeys(stem(w) for w in words if w[0].isupper() and w.lower() not in SCAFFOLD))


def rank(question: str, spans: list[Span]) -> list[tuple[float, Span]]:
    """Sentence score + type bonus + 0.15 x the share of the question's names in the sentence, minus a
    penalty for distance (characters, log-scaled) to the question's words."""
    names = _names(question)
    ranked = []
    for sp in spans:
        d = distance(sp, q_hits(question, sp.sent.text))
        named = sum(n in set(terms(sp.sent.text)) for n in names) / len(names) if names else 0.0
        ranked.append((sp.sent.score + sp.bonus + 0.15 * named - 0.08 * math.log1p(d / 8), sp))
    ranked.sort(key=lambda x: (-x[0], x[1].sent.index, x[1].start))
    return ranked


def states_change(sp: Span) -> bool:
    """Whether the span's number is the size of a change or gap its sentence states.

    >>> s = Sentence("Revenue reached 48.6 million dollars, up 31 percent; 12 more robots shipped.", 0, 0, False)
    >>> [states_change(Span(t, s, s.text.index(t), s.text.index(t) + len(t))) for t in ("48.6", "31 percent", "12")]
    [False, True, True]
    """
    text = sp.sent.text
    return bool(_CHANGE_BEFORE.search(text[max(0, sp.start - 30) : sp.start]) or _CHANGE_AFTER.match(text[sp.end :]))


_TOTAL_BEFORE = re.compile(
    r"\b(?:total(?:led|ed)?(?: of)?|combined|sum(?: of)?|overall|altogether|in all)\s+(?:\w+\s+){0,2}[$€£]?$", re.I
)
_TOTAL_AFTER = re.compile(r"^\s*(?:\w+\s+){0,2}(?:in total|in all|combined|altogether|together|overall)\b", re.I)


def states_total(sp: Span) -> bool:
    """Whether the span's sentence states its number as a total ('a total of 41 tweets', '41 in all').

    >>> s = Sentence("Germanwings got 24 tweets; a total of 41 tweets went to the three.", 0, 0, False)
    >>> [states_total(Span(t, s, s.text.index(t), s.text.index(t) + len(t))) for t in ("24", "41")]
    [False, True]
    """
    text = sp.sent.text
    return bool(_TOTAL_BEFORE.search(text[max(0, sp.start - 30) : sp.start]) or _TOTAL_AFTER.match(text[sp.end :]))


def lm_order(lm: Any, question: str, ranked: list[tuple[float, Span]]) -> list[tuple[float, Span]]:
    """SmolLM2's likelihood of each of the best 8 free-text spans as the answer, added to the rule score."""
    from agent.reader.smollm import SPAN_PROMPT

    top = ranked[:8]
    ctx = "\n".join(dict.fromkeys(sp.sent.text for _, sp in top))[:600]
    try:
        lps = lm.score(SPAN_PROMPT.format(ctx=ctx, q=question.strip()), [sp.text for _, sp in top])
    except Exception:  # noqa: BLE001 - the rules' order stands
        return ranked
    rescored = [(sc + 0.1 * lp, sp) for (sc, sp), lp in zip(top, lps)]
    rescored.sort(key=lambda x: -x[0])
    return rescored + ranked[8:]
