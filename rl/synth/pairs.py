"""Pairs: two facts from two pages of one document, asked together as one two-hop, multi-page question.

    "How many libraries does the campus have?" (p.2)  +  "How many reading rooms does the campus library have?"
    (p.5)  ->  How many libraries does the campus have, and how many reading rooms does the campus library have?

Two facts are asked together only when they are related, as a reader would ask them together:

    the same entity   the two questions name the same thing ('Republicans', 'GPT-4', 'the northern line'): a
                      capitalised name or acronym in both, or two content words in common;
    the same section  neighbouring pages (at most two apart) that share a content word.

Never two facts from two documents, and never two unrelated facts of one: "What do IRS and FLSA stand for?"
(two companies' reports, two acronyms) asks two questions glued, and tests nothing a single page does not.
Table questions are not paired: each already names its table and document, and two of them read as a list.
"""

from __future__ import annotations

import re

from agent.reader.words import search_terms
from rl.synth.wording import Draft

# rules a pair question joins: a page's statements (captions, titles, contents lines and tables ask alone)
PAIRABLE = ("share", "count", "value", "year", "duration", "price", "acronym")
# words every question of a rule holds: they say what kind of fact is asked, not what it is about
_FRAME = {
    w
    for t in (
        "what which how many much percentage percent share say said does do did is are was were there have has "
        "year stand for long take cost value number total among according in of the"
    ).split()
    for w in search_terms(t) | {t}
}
_NAME = re.compile(r"\b(?:[A-Z][a-z]+(?:[- ][A-Z][a-z]+)*|[A-Z][A-Z0-9&-]{1,}[a-z]?)\b")
_NOT_NAMES = {"What", "Which", "How", "When", "Where", "Who", "In", "Among", "According", "The", "A", "An", "Is"}


def _names(d: Draft) -> set[str]:
    """The names a draft's question (and an acronym's long form) holds, sentence-initial question words aside."""
    text = d.question + (" " + d.answer if d.rule == "acronym" else "")
    return {m for m in _NAME.findall(text) if m not in _NOT_NAMES}


def _terms(d: Draft) -> set[str]:
    text = d.question + (" " + d.answer if d.rule == "acronym" else "")
    return search_terms(text) - _FRAME


def topics_of(drafts: list[Draft]) -> set[str]:
    """What a page's pairable facts are about (their names and content words): the sampler draws a pair's second
    page among those sharing one with the first, and `related` decides."""
    out: set[str] = set()
    for d in drafts:
        if d.rule in PAIRABLE:
            out |= {n.lower() for n in _names(d)} | _terms(d)
    return out


def related(a: Draft, b: Draft) -> str:
    """Why two drafts may be asked together ('the same entity: Republicans'), or '' when they may not: drafts of
    two documents, or of one page, never are (see the module's docstring)."""
    if a.unit.get("source") != b.unit.get("source") or a.unit.get("page") == b.unit.get("page"):
        return ""
    shared = sorted(_names(a) & _names(b))
    if shared:
        return f"the same entity: {shared[0]}"
    common = _terms(a) & _terms(b)
    if len(common) >= 2:
        return f"the same entity: {' '.join(sorted(common)[:3])}"
    pa, pb = a.unit.get("page") or 0, b.unit.get("page") or 0
    if common and pa and pb and abs(pa - pb) <= 2:
        return f"the same section: pages {min(pa, pb)} and {max(pa, pb)} on {next(iter(common))}"
    return ""


def pair_draft(a: Draft, b: Draft) -> Draft | None:
    """Two related facts from two pages of one document asked together: a two-hop question with a list answer."""
    if a.rule not in PAIRABLE or b.rule not in PAIRABLE or a.question == b.question:
        return None
    if not related(a, b):
        return None
    if a.rule == "acronym" and b.rule == "acronym":
        x, y = (re.match(r"What does (\S+) stand for", d.question)[1] for d in (a, b))
        q = f"What do {x} and {y} stand for?"
    elif a.rule == "acronym" or b.rule == "acronym":
        return None
    else:
        if b.question.startswith(("According", "Among")) or a.question.startswith("Among"):
            return None  # 'Among X, ...' scopes the whole question: the second fact would fall under it
        q = f"{a.question[:-1]}, and {b.question[0].lower() + b.question[1:]}"
    return Draft(
        q,
        f"['{a.answer}', '{b.answer}']",
        "multi-page",
        "pair",
        f"{a.sentence} | {b.sentence}",
        a.unit,
        hops=2,
        answer_format="List",
        parts=[a, b],
    )
