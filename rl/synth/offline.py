"""The offline question writer: natural questions read out of an index's text and OCR, with no model.

Each rule turns one kind of printed statement into the question it answers, rewording it as a person would
ask (the wh-word moved to the front, the verb inverted), never as a sentence with a blank. The sentence rules
are in rl/synth/statements.py; this module cuts a page into sentences and holds the page rules (captions,
contents lines, slide titles) and pairs:

    "About six-in-ten Republicans (59%) say the economy is good."  ->  What percentage of Republicans say the
                                                                       economy is good?          (59%)
    "The campus has 12 libraries."                                 ->  How many libraries does the campus have?
    "The median age of residents was 38 in 2010."                  ->  What was the median age of residents in 2010?
    "Intersection over Union (IoU) ..."                            ->  What does IoU stand for?
    "Table 3: Accuracy on GSM8K with different prompts"            ->  Which table reports accuracy on GSM8K
                                                                       with different prompts?   (Table 3)
    a slide or page whose first line is its title                  ->  What is the title of page 7 of "X"?
    a table's cells ('Net sales | 2,045 | 1,870', 'in millions')   ->  In "X", what were net sales in 2025 (in
                                                                       millions)?                (2045)

Two related facts from two pages of one document make a two-hop, multi-page question (rl/synth/pairs.py), and
a page's tables make cell lookups and one-step arithmetic (rl/synth/table_rules.py): the answer of a difference or
a percentage change is computed from the cells, and the grounded check re-reads the page with the table reader.
A rule only fires where its pattern leaves nothing to guess: a statement that leans on the sentence before it
("this", "these", "it"), or holds a second number the question could mean, is passed over. Every draft carries
the sentence (or the cells) it came from, so the grounded check and a reader of the card can see why its answer
is right. A question that must name its document names it by its own title (rl/synth/doc_names.py), never by
its file; a document without one is not asked such questions.

Left out on purpose: reading values out of charts' drawn marks (the text layer does not place them; a VLM
generator can), ratios and sums over table cells, and arithmetic over figures printed in prose (which sentence
holds the second figure is a guess).
"""

from __future__ import annotations

import re
from typing import Any

from agent.reader.sentences import is_heading
from rl.synth.pairs import pair_draft
from rl.synth.statements import statement_drafts
from rl.synth.table_rules import table_drafts
from rl.synth.wording import DEICTIC as _DEICTIC
from rl.synth.wording import EMPTY, TYPES, Draft, Vocab, lower_first

__all__ = ["TYPES", "Draft", "Vocab", "EMPTY", "page_drafts", "pair_draft", "sentences", "title_line"]

# "Table 3: Accuracy on GSM8K ..." / "Figure 2. Distribution of ..."
_CAPTION = re.compile(r"^(?P<kind>Table|Figure|Fig\.)\s+(?P<n>\d{1,2})\s*[:.|]\s+(?P<body>[A-Z][^.]{12,110}?)(?:\.|$)")
_CAPTION_LEAD = {
    "overview": "an overview",
    "illustration": "an illustration",
    "example": "an example",
    "examples": "examples",
    "comparison": "a comparison",
    "summary": "a summary",
    "breakdown": "a breakdown",
    "case study": "a case study",
}
_CHART_WORDS = re.compile(
    r"\b(distribution|trend|share|percent|percentage|rate|accuracy|performance|scores?|results?|growth|"
    r"comparison|curve|over time|by year|by age|histogram|proportion|number of|frequency)\b",
    re.I,
)
# a table of contents line: "Data Analysis ............ 10"
_TOC = re.compile(r"^(?P<sec>[A-Z][A-Za-z][\w ,&'’:()/-]{3,70}?)\s*(?:\.\s?){4,}\s*(?P<page>\d{1,3})$")


def sentences(text: str) -> list[str]:
    r"""A page's complete sentences: each paragraph's wrapped lines joined (words hyphenated at a line end mended),
    then cut after . ! ? before a capital. Lines in columns narrower than prose are joined too, which
    agent.reader.words.split_sentences keeps apart as labels. A line stands alone (a paragraph of its own) when
    it is a heading, the page's first line, a short caption, or a short line that cannot go on into the next:
    a label or a table row ('Westfield 41 min') before a capitalised line.

    >>> sentences("Introduction to the survey\nAbout 62% of commuters say the trains\nare too crowded. It rains.")
    ['Introduction to the survey', 'About 62% of commuters say the trains are too crowded.', 'It rains.']
    >>> sentences("Table 2: Commute time\nWestfield 41 min\nOld Port 29 min\nThe median was 34 minutes.")
    ['Table 2: Commute time', 'Westfield 41 min', 'Old Port 29 min', 'The median was 34 minutes.']
    """
    lines = [ln.strip() for ln in (text or "").replace("\r", "").split("\n")]
    paras: list[list[str]] = []
    cur: list[str] = []
    for i, s in enumerate(lines):
        nxt = next((x for x in lines[i + 1 :] if x), "")
        if not s or is_heading(s):  # a heading ends a paragraph and is no sentence (boilerplate is dropped)
            paras.append(cur)
            cur = []
            continue
        cur.append(s)
        if _alone(s, nxt, first=not any(lines[:i])):
            paras.append(cur)
            cur = []
    paras.append(cur)
    out = []
    for para in paras:
        joined = re.sub(r"(\w)- (\w)", r"\1\2", " ".join(para))  # 'improve- ment' wrapped at a line end
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"“(])", joined) if s.strip()]
    return out


def _alone(line: str, nxt: str, first: bool) -> bool:
    """Whether `line` ends its paragraph although it ends with no full stop."""
    if re.search(r"[.!?;:,]$", line) or re.search(r"\b(?:the|a|an|of|to|and|or|in|on|for|with|by|at)$", line, re.I):
        return False
    if first or (_CAPTION.match(line) and len(line) < 60):
        return True
    words = line.split()
    starts_new = nxt[:1].isupper() or nxt[:1].isdigit()
    if len(words) <= 8 and "," not in line and starts_new:
        return True  # a title, label or table row: prose wrapped mid-sentence goes on in lower case
    return False


def _toc_drafts(lines: list[str], unit: dict[str, Any], where: str) -> list[Draft]:
    """Table-of-contents entries: on which page a section starts, as the contents page prints it."""
    hits = [m for m in (_TOC.match(ln.strip()) for ln in lines) if m]
    if len(hits) < 4 or not where:  # a contents page lists several entries
        return []
    names = [m["sec"].strip().lower() for m in hits]
    out = []
    for m in hits:
        sec = m["sec"].strip().rstrip(" .")
        if names.count(sec.lower()) > 1 or len(sec.split()) < 2:
            continue
        if re.match(r"^(?:Chapter|Section|Part|Appendix)\b", sec):
            continue
        q = f'According to the contents of "{where}", on which page does "{sec}" begin?'
        out.append(Draft(q, m["page"], "layout", "contents", m.string.strip(), unit, answer_format="Int"))
    return out


_ABBREV = re.compile(r"\b(?:w\.r\.t|e\.g|i\.e)\.?|\b(?:et al|vs|cf|approx|resp|Eq|No)\.", re.I)


def _caption_draft(line: str, unit: dict[str, Any], vocab: Vocab = EMPTY) -> Draft | None:
    m = _CAPTION.match(_ABBREV.sub(lambda a: a[0].replace(".", "\u2024"), line.strip()))  # keep 'w.r.t.' whole
    if not m or _DEICTIC.search(m["body"]) or "\u2024" in m["body"]:
        return None  # an abbreviation in a caption makes a question no one would write
    body = m["body"].strip().rstrip(":;,")
    first = body.split(" ", 1)[0].lower()
    if first in {"we", "our", "this", "the", "a", "an", "in", "as", "for", "left", "right", "top", "bottom"}:
        return None
    if re.search(_CUT_OFF[:-2] + r"|various|different|several|multiple|all|both|each)$", body, re.I):
        return None  # 'F-1 Match scores of various': the caption goes on on a line not read
    lead = next((v for k, v in _CAPTION_LEAD.items() if body.lower().startswith(k + " ")), None)
    if lead:
        body = lead + body[len(lead.split()[-1]) :]
    elif not re.match(r"^\S+ [A-Z][a-z]", body):  # a caption in Title Case keeps its capitals
        body = lower_first(body, vocab)
    table = m["kind"] == "Table"
    if not table and not _CHART_WORDS.search(body):
        return None  # a diagram or a photo: which figure it is says nothing a chart question should test
    name = f"{'Table' if table else 'Figure'} {m['n']}"
    q = f"Which {'table' if table else 'figure'} {'reports' if table else 'shows'} {body}?"
    # which table a caption names is a question about the document's layout; "table" questions read cells
    return Draft(q, name, "layout" if table else "chart", "caption", line.strip(), unit, answer_format="Str")


_NOT_TITLES = re.compile(
    r"^(?:thank you|thanks|questions\??|agenda|contents|table of contents?|introduction|summary|conclusions?|"
    r"references|appendix|overview|about us|q ?& ?a)$",
    re.I,
)


_CUT_OFF = (
    r"\b(?:the|a|an|of|to|and|or|in|on|for|with|is|are|has|be|about|from|into|over|under|at|by|as|than|vs|"
    r"versus|between|your|our|their|its|this|that|how|what|why|who|when|where|does|do|did|can|will|should|"
    r"would|was|were|not|no)$"
)


def title_line(text: str, vocab: Vocab = EMPTY) -> str:
    """A page's title: its first line, when that line reads as a whole heading (not cut off, not a running
    header, not OCR debris) and the next line does not continue it."""
    lines = [ln.strip() for ln in (text or "").split("\n") if ln.strip() and not re.fullmatch(r"[\d\W]+", ln.strip())]
    if not lines:
        return ""
    s, nxt = lines[0], (lines[1] if len(lines) > 1 else "")
    words = re.findall(r"[A-Za-z][A-Za-z'’-]*", s)
    if not (2 <= len(words) <= 10 and len(s) <= 70 and is_heading(s, first=True)) or re.search(r"\d{3,}|[|_•]", s):
        return ""
    if _NOT_TITLES.match(s) or not s[0].isupper() or re.match(r"^[a-zA-Z]\.\s", s):  # 'j. Master of ...': a list item
        return ""
    if re.search(_CUT_OFF, s, re.I) or s.endswith((",", ":", "-", "&")):
        return ""  # cut off: the title goes on on the next line
    if nxt[:1].islower() or nxt.startswith("("):
        return ""  # 'Technology Adoption' + '(Next Two Years)': one title on two lines
    if s.isupper() and nxt.isupper() and len(nxt.split()) <= 4:
        return ""  # 'THE POWER' + 'OF VISUALS': capitals wrapped onto the next line
    if any(len(w) == 1 and w.lower() not in {"a", "i"} for w in words):
        return ""  # 'AN UNC OMM ON SENSE OF T HE': letters split by the text layer
    if s.isupper() and any(w.lower() not in vocab.common for w in words if len(w) > 3):
        return ""  # an all-capitals line with words the corpus never prints in lower case: likely broken
    if vocab.known and any(w.lower() not in vocab.known for w in words if len(w) > 3):
        return ""  # a word the corpus prints nowhere else: OCR debris ('electroma gnetic')
    if re.search(r"#[IlO]\b", s):
        return ""  # '#I' for '#1': a digit OCR read as a letter
    return s


def _garbled(question: str, vocab: Vocab) -> bool:
    """A long run of letters the corpus prints nowhere else: words the text layer glued ('incorrectlypredicted')."""
    return bool(vocab.known) and any(w not in vocab.known for w in re.findall(r"\b[a-z]{13,}\b", question))


def page_drafts(unit: dict[str, Any], text: str, headers: set[str], deck: bool, vocab: Vocab = EMPTY) -> list[Draft]:
    """Every draft one unit's text supports. `headers`: lines that repeat across its document (running heads and
    footers, never a title); `deck`: the document is a slide deck (each page has a title); `vocab`: what the
    corpus says about its words (`Vocab.learn`). `unit["doc_title"]` is its document's own name
    (rl/synth/doc_names.py): the questions that must name the document are asked only when it has one."""
    kind = "video" if unit.get("modality") == "video" else "text"
    out: list[Draft] = []
    text = re.sub("\ufffe\\s*", "", text or "")  # pdfium's mark of a word hyphenated at a line end ('QuAL\ufffe ITY')
    lines = [ln for ln in (text or "").split("\n") if ln.strip()]
    for sent in sentences(text):
        if re.search(r"[.!?]$", sent):  # a complete statement; a cut-off one may miss what it says
            out += statement_drafts(sent, unit, kind, vocab)
        d = _caption_draft(sent, unit, vocab)
        if d:
            out.append(d)
    where = unit.get("doc_title") or ""
    out += _toc_drafts(lines, unit, where)
    out += table_drafts(unit, text, where, vocab)
    out = [d for d in out if not _garbled(d.question, vocab)]
    # a deck's pages each have a title; a report's first line may not. A first line that runs on every page is
    # the deck's own title, and the line after it is not the page's (a bullet, a chart's caption)
    title = title_line(text, vocab) if deck and unit.get("page") else ""
    ok = title and where and title.lower() not in headers
    if ok and (unit.get("text_source") != "pdf-text" or largest_text(unit, title)):
        q = f'What is the title of page {unit["page"]} of "{where}"?'
        out.append(Draft(q, title, "layout", "title", title, unit, answer_format="Str"))
    return out


def largest_text(unit: dict[str, Any], line: str, share: float = 0.85) -> bool:
    """Whether `line` is printed in the page's largest type: its characters' median height at least `share` of the
    tallest printed line's, read from the PDF's own character boxes (a table header above the title fails). A page
    whose boxes cannot be read passes: the text rules of `title_line` still hold it."""
    try:
        import pypdfium2 as pdfium

        tp = pdfium.PdfDocument(unit["source"])[int(unit["page"]) - 1].get_textpage()
        chars = [(tp.get_text_range(i, 1), tp.get_charbox(i)) for i in range(tp.count_chars())]
    except Exception:  # noqa: BLE001 - an unreadable page is judged by its text alone
        return True
    flat: list[tuple[str, float | None]] = []  # the page's text, runs of white space as one space, with heights
    line_heights: list[list[float]] = [[]]
    for c, (_, bottom, _, top) in chars:
        if c in "\r\n":
            line_heights.append([])
        if not c.strip():
            if flat and flat[-1][0] != " ":
                flat.append((" ", None))
            continue
        flat.append((c, top - bottom))
        line_heights[-1].append(top - bottom)
    want = " ".join(line.split())
    at = "".join(c for c, _ in flat).find(want)
    mine = [h for _, h in flat[at : at + len(want)] if h is not None] if at >= 0 else []
    tallest = max((sorted(h)[len(h) // 2] for h in line_heights if h), default=0.0)
    if not mine or tallest <= 0:
        return True
    return sorted(mine)[len(mine) // 2] >= share * tallest
