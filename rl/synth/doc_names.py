"""A document's own name, as a question names it: its title, never its file name.

A question that must say which document it means ("In <name>, ...", "According to the contents of <name>, ...")
names it the way a reader would: "Fact-Checking Complex Claims with Program-Guided Reasoning", not
"2023.acl-long.386.pdf". The name is read, in this order, from

    the PDF's metadata Title   when it reads as a title: not a file name ('Microsoft Word - x.docx', 'a_b.pdf'),
                               not empty, not a generic label alone ('Contents', 'User Manual');
    the first page's largest type, top half:  a title set in the page's biggest letters, up to four lines
                               joined (a paper's title wraps), lines that are a release date, an arXiv stamp,
                               a URL or a byline left out;
    the first page's first line (or two), for a page without a text layer (its OCR: `first_lines`).

A document none of these name has no name (''): a question that would need one is passed over, never named by
its file. Names are cached per source file.
"""

from __future__ import annotations

import re
from functools import lru_cache

# words that name a kind of document, not one document: a name made only of these says nothing
_GENERIC = set(
    "a an the of and for to on in with by data support user users manual guide help online contents table page "
    "pages hearing product products introduction report reports annual summary overview presentation document "
    "documents chapter section part appendix draft final version edition release handbook owner owner's owners "
    "quick start instructions specifications specification datasheet sheet series volume issue".split()
)
# lines of a first page that are set large but do not name the document
_NOT_NAME = re.compile(
    r"arxiv:|\bfor (?:release|media|further)\b|https?://|www\.|@|©|copyright|downloaded from|\bpage \d+\b|^by\b|"
    r"\bcase\b.*\d|\bfiled\b|\binquiries\b|^\d|\b(?:january|february|march|april|may|june|july|august|september|"
    r"october|november|december) \d{1,2}, \d{4}\b|\bnumbers, facts and trends\b",
    re.I,
)
_FILE_LIKE = re.compile(r"\.(?:pdf|docx?|pptx?|xlsx?|txt|indd|rtf)\b|^microsoft\b|_|\\|/\S*/", re.I)
_SMALL = {"a", "an", "the", "of", "and", "or", "for", "to", "on", "in", "with", "by", "via", "at", "from", "as"}


def usable_name(text: str) -> str:
    """`text` cleaned into a document's name, or '' when it does not read as one.

    >>> usable_name("Fact-Checking Complex Claims with Program-Guided Reasoning")
    'Fact-Checking Complex Claims with Program-Guided Reasoning'
    >>> usable_name("Microsoft Word - report_final.docx"), usable_name("User Manual"), usable_name("Contents")
    ('', '', '')
    >>> usable_name("TAKE A STEP BACK: EVOKING REASONING VIA AB\\ufffeSTRACTION IN LARGE LANGUAGE MODELS")
    'TAKE A STEP BACK: Evoking Reasoning via Abstraction in Large Language Models'
    """
    s = re.sub("\ufffe\\s*", "", text or "")  # pdfium's mark of a word hyphenated at a line end
    s = re.sub(r"[（(][^)）]*\d[^)）]*[)）]\s*$", "", s)  # a trailing '(01,en)': a revision, not the name
    s = " ".join(s.split()).strip(" -–—:|•■")
    words = re.findall(r"[A-Za-z][A-Za-z'’-]*", s)
    if not s or _FILE_LIKE.search(s) or _NOT_NAME.search(s) or len(s) > 130 or not 1 <= len(words) <= 20:
        return ""
    if re.search(r"[■•●▪◆|]|\w&(?:\s|$)|(?<![\w.'’-])[B-HJ-Zb-z](?![\w.'’-])", s):
        return ""  # bullets, 'STUDIES& ...', a letter alone ('C A N A D A', OCR's 'Vietnam M Mobileapps')
    if s.count("(") != s.count(")"):
        return ""
    if s.endswith((",", ";", "(", "&")) or re.search(r"\b(?:and|or|of|with|for|the|to|in|on|a|an)$", s, re.I):
        return ""  # cut off: the name goes on on a line not read
    if sum(c.isdigit() for c in s) > max(4, len(s) // 4) or len(s.split()) > 1 and all(len(w) == 1 for w in words):
        return ""  # a part number, or letters spaced apart ('C A N A D A')
    if all(w.lower().strip("'’") in _GENERIC for w in words):
        return ""  # 'User Manual', 'Product Introduction': a kind of document, not this one
    if len(words) == 1 and len(s) < 4:
        return ""
    return _readable(s)


def _readable(name: str) -> str:
    """An all-capitals name in title case after its first part ('RAPTOR: RECURSIVE ...' -> 'RAPTOR: Recursive
    ...'): the part before a colon is often a system's name in capitals, kept as printed."""
    if not name.isupper() or len(name.split()) <= 3:
        return name
    head, sep, tail = name.partition(": ")
    if not sep:
        head, tail = "", name

    def word(i: int, w: str) -> str:
        return w.lower() if i and w.lower() in _SMALL else w.capitalize() if w.isalpha() else w.title()

    tail = " ".join(word(i, w) for i, w in enumerate(tail.split()))
    return f"{head}{sep}{tail}"


@lru_cache(maxsize=4096)
def doc_name(source: str, first_text: str = "") -> str:
    """The name of the document at `source`: its metadata title, else its first page's largest type, else (a
    scanned first page) the first lines of `first_text`, its OCR, else ''. See the module's docstring."""
    if str(source).lower().endswith(".pdf"):
        import pypdfium2 as pdfium

        from retrieval.loaders import PDFIUM_LOCK

        with PDFIUM_LOCK:  # pdfium is not thread-safe; ingest and the table reader hold the same lock
            pdf = None
            try:
                pdf = pdfium.PdfDocument(str(source))
                meta = usable_name(pdf.get_metadata_dict().get("Title", ""))
                if meta and _printed_early(meta, pdf):
                    return meta
                if pdf[0].get_textpage().count_chars():  # a text layer: its largest type or nothing (its first
                    return usable_name(largest_lines(pdf[0]))  # line may be a running head, as on a cover)
            except Exception:  # noqa: BLE001 - an unreadable PDF is named by its text, or not at all
                pass
            finally:
                if pdf is not None:
                    pdf.close()
    return usable_name(first_lines(first_text))


def first_lines(text: str) -> str:
    r"""A scanned first page's title from its OCR: its first line, with the line after it when the first is cut
    off ('Keeping up with' / 'Caltrain Ridership') or short and the next one or two capitalised words go on
    with it ('Electronic Fuel' / 'Injection').

    >>> first_lines("Keeping up with\nCaltrain Ridership\nAdina Levin\nJune 2015")
    'Keeping up with Caltrain Ridership'
    >>> first_lines("BIG DATA TRENDS\n11/15/2012\nDavid Feinleib")
    'BIG DATA TRENDS'
    """
    lines = [ln.strip() for ln in (text or "").split("\n") if ln.strip()]
    if not lines:
        return ""
    name = lines[0]
    for nxt in lines[1:3]:
        cut = re.search(r"\b(?:of|on|with|for|and|the|a|an|to|in|by|from|about)$", name, re.I)
        words = r"[A-Z][A-Za-z'’-]+(?: [A-Z][A-Za-z'’-]+)?"
        short = 2 <= len(name.split()) <= 3 and re.fullmatch(words, nxt)
        if not (cut or short) or re.match(r"(?:by|presented|prepared)\b", nxt, re.I) or re.search(r"\d", nxt):
            break
        name = f"{name} {nxt}"
    if (
        len(name.split()) < 2
        or not name[:1].isupper()
        or re.search(r"\b(?:of|on|with|for|and|the|a|an|to|in|by)$", name)
    ):
        return ""  # one word ('DISCIPLINED' over 'AGILE'), a lower-case line or a cut one: OCR cannot say more
    return name


def _printed_early(name: str, pdf) -> bool:
    """Whether the first two pages print most of the name's words (metadata left over from a template, such as
    'The DatasheetArchive - Datasheet Search Engine', is not the document's name). A document whose first pages
    print nothing (a scan) takes its metadata on trust."""
    text = " ".join(pdf[i].get_textpage().get_text_range() for i in range(min(2, len(pdf)))).lower()
    words = [w.lower() for w in re.findall(r"[A-Za-z]{3,}", name)]
    if not text.strip() or not words:
        return True
    return sum(w in text for w in words) >= 0.75 * len(words)


def largest_lines(page, most: int = 4) -> str:
    """The first page's title as set in its largest type: the first line in the top 60% of the page whose letters
    are the page's tallest (loose character boxes, which measure the type and not the glyph), and the lines after
    it in the same type, at most `most` in all. Rotated lines (an arXiv stamp) and lines that are no name
    (`_NOT_NAME`) are skipped."""
    height = page.get_height()
    tp = page.get_textpage()
    lines: list[list[tuple[str, float, float, float]]] = [[]]
    for i in range(tp.count_chars()):
        c = tp.get_text_range(i, 1)
        if c in "\r\n":
            if lines[-1]:
                lines.append([])
            continue
        left, bottom, right, top = tp.get_charbox(i, loose=True)
        lines[-1].append((c, top - bottom, right - left, height - top))
    found: list[tuple[str, float]] = []
    for ln in lines:
        text = "".join(c for c, *_ in ln).strip()
        sizes = sorted(h for c, h, _, _ in ln if c.strip())
        widths = sorted(w for c, _, w, _ in ln if c.strip())
        if not text or not sizes or not re.search(r"[A-Za-z]{2}", text) or _NOT_NAME.search(text):
            continue
        size, width = sizes[len(sizes) // 2], widths[len(widths) // 2]
        if width > 1.5 * size or min(y for *_, y in ln) > 0.6 * height:
            continue  # a rotated line, or one low on the page
        found.append((text, size))
    if not found:
        return ""
    tallest = max(s for _, s in found)
    start = next(i for i, (_, s) in enumerate(found) if s >= 0.95 * tallest)
    out = [found[start][0]]
    for text, size in found[start + 1 : start + most]:
        if abs(size - tallest) > 0.08 * tallest:
            break
        out.append(text)
    return " ".join(out)
