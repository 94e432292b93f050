"""One draft through the checks: the item it becomes, with its grounded, needs-evidence and unambiguous verdicts
(rl/synth/questions.py adds the duplicate verdict, which needs the kept set).

The checks themselves are rl/synth/checks.py's. This module decides what each is shown: a table draft's grounded
check re-reads its page with the question the reader can read (`Draft.reread`, without the document's name) and
its cells; the unambiguity check reads rival pages the same way. When only other documents answer differently,
the question is made to name its own document by its title ("In "RAPTOR: ...", ..."), never by its file; a
document without a title of its own cannot be named, and its question is rejected as ambiguous.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rl.synth import checks
from rl.synth.items import Item
from rl.synth.wording import Draft

_WH = {"What", "Which", "How", "When", "Where", "Who", "Whom", "Whose", "Why", "In", "According", "Among", "On"}


def evidence_of(unit: dict[str, Any]) -> dict[str, Any]:
    """Where an item's answer is: its file and page (or clip time), as eval's schema cites evidence."""
    if unit.get("modality") == "video":
        return {"file": unit["name"], "time": [unit.get("start") or 0.0, unit.get("end") or 0.0]}
    if unit.get("page"):
        return {"file": unit.get("doc") or unit["name"], "page": unit["page"]}
    return {"file": unit["name"]}


def verify(draft: Draft, pages: list[dict[str, Any]], slot: str, retriever, verifier, page_of) -> Item:
    """The draft as an item with its first three verdicts (the duplicate check needs the kept set)."""
    parts = draft.parts or [draft]
    ev_units = [p.unit for p in parts]
    evidence = [evidence_of(u) for u in ev_units]
    files = {e["file"] for e in evidence}
    ev_pages = [next((pg for pg in pages if pg["unit"]["uid"] == u["uid"]), None) for u in ev_units]
    ev_pages = [pg for pg in ev_pages if pg is not None] or pages
    key = hashlib.sha1(slot.encode()).hexdigest()[:10]
    item = Item(
        id=f"{draft.type}-{key}",
        question=draft.question,
        answer=[draft.answer],
        type=draft.type,
        evidence=evidence,
        answer_format=draft.answer_format,
        hops=draft.hops,
        doc=files.pop() if len(files) == 1 else "",
        source=draft.rule if draft.rule.startswith("endpoint:") else f"offline:{draft.rule}",
        sentence=draft.sentence,
        slot=slot,
    )
    fmt = draft.answer_format
    if draft.reread:  # a table answer: the reader re-reads the page's table
        ok, why = verifier.grounded(item.question, draft.answer, fmt, ev_pages, draft.reread, draft.cells)
    else:
        ok, why = verifier.grounded(item.question, draft.answer, fmt, ev_pages)
    if not item.verdict("grounded", ok, why):
        return item
    leak = checks.leaked(item.question, draft.answer, draft.answer_format)
    if leak:
        item.verdict("needs_evidence", False, f"the question itself prints {leak!r}")
        return item
    _unambiguous(item, parts, retriever, verifier, page_of)  # before the closed-book call: it is the costly one
    if not item.verdicts["unambiguous"]["ok"]:
        return item
    cb = verifier.closed_book(item.question)
    if cb and checks.closed_book_right(cb, item.answer, item.answer_format, item.question):
        item.verdict("needs_evidence", False, f"answered closed-book ({verifier.name}): {cb!r}")
        return item
    item.verdict("needs_evidence", True, f"closed-book ({verifier.name}): {cb!r}" if cb else "no closed-book answer")
    return item


def _unambiguous(item: Item, parts: list[Draft], retriever, verifier, page_of) -> None:
    own = {(e["file"], e.get("page")) for e in item.evidence}
    other_docs = []
    for part in parts:
        question = part.question if len(parts) > 1 and part.question != item.question else item.question
        asked = part.reread or question  # a table question is read without its document's name
        for hit in retriever.search(question, k=checks.RIVAL_PAGES):
            u = hit.unit
            where = (u.doc or u.name, u.page)
            if where in own:
                continue
            got = verifier.rival(asked, page_of(u))
            if not got or not checks.same_kind(got, part.answer):
                continue  # the page does not answer this question (or answers something else)
            if checks.same_answer(got, [part.answer], part.answer_format, asked):
                continue
            if item.doc and where[0] == item.doc:
                item.verdict("unambiguous", False, f"{u.citation()}, in the same document, answers {got!r}")
                return
            other_docs.append(f"{u.citation()} answers {got!r}")
    name = parts[0].unit.get("doc_title") or ""
    if not other_docs:
        item.verdict("unambiguous", True, f"no other page of the {checks.RIVAL_PAGES} retrieved answers differently")
    elif not item.doc:
        item.verdict("unambiguous", False, "; ".join(other_docs[:2]))
    elif name and f'"{name.lower()}"' in item.question.lower():
        item.verdict("unambiguous", True, f"names its document ({'; '.join(other_docs[:2])})")
    elif not name:
        why = f"{'; '.join(other_docs[:2])}, and {item.doc} has no title of its own to name it by"
        item.verdict("unambiguous", False, why)
    else:
        q = item.question
        if q.split(" ", 1)[0] in _WH:
            q = q[0].lower() + q[1:]
        item.question = f'In "{name}", {q}'
        item.verdict("unambiguous", True, f"named its document, since {'; '.join(other_docs[:2])}")
