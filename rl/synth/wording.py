"""The words of a synthesized question: the Draft a writer makes, the question types, and how a phrase is moved
inside a question (`lower_first`, guided by what the corpus says about its words, `Vocab`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# words that lean on what came before: a question built on them would not stand alone
DEICTIC = re.compile(
    r"\b(this|these|those|that|it|its|they|them|their|such|above|below|following|previous|former|latter|here|"
    r"same|other|we|our|us|you|your|he|she|his|her)\b",
    re.I,
)

TYPES = ("text", "table", "chart", "layout", "multi-page", "video")


@dataclass
class Draft:
    """One question read off the corpus, before any check."""

    question: str
    answer: str
    type: str  # one of TYPES
    rule: str  # which rule wrote it
    sentence: str  # the printed statement it rests on
    unit: dict[str, Any]  # the unit's provenance: source, page / start / end, doc
    hops: int = 1
    answer_format: str = ""  # MMLongBench-Doc's: Int | Float | Str | List
    parts: list["Draft"] = field(default_factory=list)  # a multi-page draft's two facts
    # a table draft's: the question the grounded check re-reads its page with (its words without the document's
    # name, which names no row or column), and the cells its answer is computed from, as printed
    reread: str = ""
    cells: list[str] = field(default_factory=list)


def lower_first(text: str, vocab: Vocab | None = None) -> str:
    """'The median age' -> 'the median age', moved inside a question; a name keeps its capitals ('Americans',
    'GSM8K', 'New York'). A capitalised first word is lower-cased when the corpus mostly prints it in lower case
    (`vocab.common`), kept when the corpus mostly prints it capitalised (`vocab.names`), and
    otherwise lower-cased when the next word is in lower case (sentence case: 'Accuracy of ...').

    >>> lower_first("The median age"), lower_first("GSM8K accuracy"), lower_first("Accuracy of models")
    ('the median age', 'GSM8K accuracy', 'accuracy of models')
    >>> lower_first("F1-scores difference")
    'F1-scores difference'
    """
    vocab = vocab or EMPTY
    words = text.split(" ")
    first, nxt = words[0], (words[1] if len(words) > 1 else "")
    if first in _LEADS:
        return text[0].lower() + text[1:]
    if not re.fullmatch(r"[A-Z][a-z]+(?:-[a-z]+)*", first) or first.lower() in vocab.names:  # 'F1-scores' stays
        return text
    if first.lower() in vocab.common or nxt[:1].islower():
        return text[0].lower() + text[1:]
    return text


_LEADS = {"The", "A", "An", "Each", "Every"}


@dataclass(frozen=True)
class Vocab:
    """What a corpus says about its words: `common`, printed mostly in lower case away from a sentence's start
    ('number', 'accuracy'); `names`, mostly capitalised there ('Americans', 'China'); `known`, printed at least
    twice. Empty, it knows nothing and every rule falls back to the words' shapes.

    >>> v = Vocab.learn(["Most Americans say the number rose.", "The number of Americans fell."])
    >>> sorted(v.common), sorted(v.names), sorted(v.known)
    (['fell', 'number', 'of', 'rose', 'say', 'the'], ['americans'], ['americans', 'number'])
    """

    common: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()

    @classmethod
    def learn(cls, texts: Any) -> "Vocab":
        from collections import Counter

        low, cap = Counter(), Counter()
        for text in texts:
            for m in re.finditer(r"(?<=[a-z,] )([A-Za-z][a-z]+(?:-[a-z]+)*)\b", text or ""):
                w = m.group(1)
                (low if w[0].islower() else cap)[w.lower()] += 1
        return cls(
            frozenset(w for w, n in low.items() if n > cap[w]),
            frozenset(w for w, n in cap.items() if n > low[w]),
            frozenset(w for w, n in (low + cap).items() if n >= 2),
        )


EMPTY = Vocab()
