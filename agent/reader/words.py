"""Words and sentences of questions and evidence text, shared by the answer readers and the query rewriter.

- content words: a question's words minus its scaffolding ("what", "according", "document", ...);
- stems and terms: what "the same word" means when a sentence is matched against a question;
- sentences: page, note and keyframe texts cut into sentences and table/label lines;
- anchors: the specifics a question names (numbers, mid-sentence names) that no evidence mentions, the
  strongest sign that the answer is not there.

Pure functions over strings; nothing here loads a model.
"""

from __future__ import annotations

import functools
import math
import re
import threading

NOT_ANSWERABLE = "Not answerable"  # what a reader answers when the evidence does not hold the answer
_LOCAL = threading.local()

# question scaffolding: words that say what kind of answer is wanted, not what it is about
SCAFFOLD = set(
    """what what's whats which who whom whose when where why how many much is are was were be been
being do does did has have had having can could should would will shall may might the a an of in on at to for
from by with about as and or this that these those it its there their they them according document report paper
page pages figure figures slide slides text guidebook guide brochure shown show shows showed mentioned mention
listed list given stated state states described describe provided please tell me give name answer value number
among following between than into per if any all each some other others such""".split()
)
WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*[A-Za-z]|[A-Za-z]|\$?\d[\d,]*(?:\.\d+)?%?")
NUMBER = re.compile(
    r"(?<![\w.])[$€£]?\d+(?:,\d{3})*(?:\.\d+)?(?:\s?%|\s?(?:percent|million|billion|thousand|"
    r"m|bn|k)\b)?"
)
_SPLIT = re.compile(r"(?<=[.!?;])\s+(?=[A-Z0-9\"“(•·\-])|\s*[•·▪●]\s*")


def content_words(question: str) -> list[str]:
    """The question's words in order, minus scaffolding; duplicates dropped (case-insensitive)."""
    seen, out = set(), []
    for w in WORD.findall(question.replace("’", "'")):
        low = w.lower().strip("'")
        if low.endswith("'s"):
            low, w = low[:-2], w[:-2]
        if low in SCAFFOLD or len(low) < 2 and not low.isdigit() or low in seen:
            continue
        seen.add(low)
        out.append(w)
    return out


# a name that mixes digits and letters, or joins letters with & or -, kept whole in a query: "3M", "FY2022",
# "COVID-19", "7-Eleven", "S&P 500" (with the number that belongs to it), "Q3"
_MIXED_NAME = re.compile(
    r"(?<![\w&-])(?:[A-Za-z]+&[A-Za-z]+(?:\s\d+)?"
    r"|(?=[\w&-]*\d)(?=[\w&-]*[A-Za-z])[A-Za-z0-9]+(?:[-&][A-Za-z0-9]+)*)(?![\w&-])"
)


def keyword_query(question: str, max_words: int = 12) -> str:
    """Deterministic fallback query: the question's content words, quoted phrases and names that mix digits and
    letters kept whole.

    >>> keyword_query("What was 3M's operating margin in FY2022?")
    '3M operating margin FY2022'
    >>> keyword_query("How did COVID-19 affect the S&P 500?")
    'COVID-19 affect S&P 500'
    """
    quoted = re.findall(r"[\"“']([^\"”']{3,60})[\"”']", question)
    names = [m.group() for m in _MIXED_NAME.finditer(question)]
    words = content_words(question)
    if quoted or names:
        inside = {w.lower() for q in quoted + names for w in content_words(q)} | {n.lower() for n in names}
        rest = sorted(names + [w for w in words if w.lower() not in inside], key=lambda w: _position(question, w))
        words = [f'"{q.strip()}"' for q in quoted] + rest  # quoted phrases first, then in the question's order
    return " ".join(dict.fromkeys(words[:max_words])) or question.strip()


def _position(question: str, word: str) -> int:
    i = question.find(word.strip('"'))
    return i if i >= 0 else len(question)


def _tokenizer():
    """The BM25 tokenizer, one per thread (a Snowball stemmer object is not safe to share between threads)."""
    tok = getattr(_LOCAL, "tokenizer", None)
    if tok is None:
        from retrieval.bm25 import Tokenizer

        tok = _LOCAL.tokenizer = Tokenizer()
    return tok


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A word's stem as search has it (the BM25 tokenizer's Snowball stemmer), so that "the same word" means
    one thing to retrieval, the embedded policy and the readers.

    >>> stem("Assembles"), stem("assembled"), stem("countries")
    ('assembl', 'assembl', 'countri')
    """
    return _tokenizer().stem(word.strip("'’-"))


def terms(text: str) -> list[str]:
    """The stem of every word of `text`, stop words included, in order."""
    return [stem(w) for w in WORD.findall(text.replace("’", "'"))]


def search_terms(text: str) -> set[str]:
    """The terms BM25 indexes `text` by: lower-cased, stop words dropped, stemmed."""
    return set(_tokenizer()(text or ""))


def split_sentences(texts: list[str], max_chars: int = 320) -> list[str]:
    """Sentences and table/chart lines of page texts: wrapped lines are joined, short label lines kept apart."""
    out: list[str] = []
    for text in texts:
        text = (text or "").replace("\r\n", "\n").replace("\r", "\n")
        # a video clip's text is "[mm:ss] line\nline ..." per keyframe: each keyframe's lines belong together
        text = re.sub(r"\n(?=\[\d\d:\d\d\])", "\n\n", text)
        for para in re.split(r"\n\s*\n", text):
            if re.match(r"\[\d\d:\d\d\]", para):
                # one keyframe: its title and body as one sentence, without the time marker, whose digits
                # a small LM would otherwise offer as the answer to "how many" / "how long"
                body = re.sub(r"^\[\d\d:\d\d\]\s*", "", para)
                out.append(". ".join(ln.strip().rstrip(".") for ln in body.split("\n") if ln.strip()))
                continue
            buf = ""
            for ln in (ln.strip() for ln in para.split("\n")):
                if not ln:
                    continue
                # a long line is wrapped prose that continues on the next; a short one is a label or table row
                buf = f"{buf} {ln}".strip()
                if len(ln) < 50 or re.search(r"[.!?:]$", ln):
                    out.extend(_SPLIT.split(buf))
                    buf = ""
            if buf:
                out.extend(_SPLIT.split(buf))
    sents = []
    for s in out:
        s = " ".join(s.split())
        while len(s) > max_chars:  # hard wrap very long runs (tables flattened into one line)
            cut = s.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            sents.append(s[:cut])
            s = s[cut:].strip()
        if len(s) > 1:
            sents.append(s)
    return sents


def fuzzy_hit(term: str, words: set[str]) -> bool:
    """Typo-tolerant match for longer words (benchmark questions misspell: 'Americen', 'demostrated')."""
    if len(term) < 5:
        return False
    from rapidfuzz import fuzz

    return any(abs(len(w) - len(term)) <= 2 and fuzz.ratio(term, w) >= 85 for w in words)


def question_idf(question: str, texts: list[str]) -> tuple[dict[str, float], list[set[str]]]:
    """The question's content terms, in its order, with their IDF over `texts`; and each text's terms."""
    q = list(dict.fromkeys(stem(w) for w in content_words(question)))
    bags = [set(terms(t)) for t in texts]
    n = len(texts)
    return {t: math.log(1 + n / (1 + sum(t in b for b in bags))) for t in q}, bags


def number_value(token: str) -> float | None:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", token)
    try:
        return float(m.group().replace(",", "")) if m else None
    except ValueError:
        return None


def missing_anchors(question: str, texts: list[str], caps: bool = True) -> list[str]:
    """Specifics the question names that no evidence text mentions: numbers (page numbers aside) and,
    with `caps`, capitalised names in mid-sentence (sentence-initial words are often instructions such as
    'Return me an integer'). Benchmark "Not answerable" questions are often answerable ones with one
    specific changed ('in 2024' for 'in 2018'), so a missing specific is strong evidence of no answer."""
    joined = " ".join(texts)
    low = joined.lower()
    digits = re.sub(r"[,\s]", "", joined)
    vocab = {w.lower() for w in WORD.findall(joined)}
    letters = re.sub(r"[^A-Za-z]", "", question)
    shouting = sum(c.isupper() for c in letters) > 0.6 * max(len(letters), 1)  # ALL-CAPS: case says nothing
    missing = []
    for sentence in re.split(r"(?<=[.?!])\s+", question.strip()):
        for i, m in enumerate(WORD.finditer(sentence)):
            w = re.sub(r"['’]s$", "", m.group())
            if w.lower() in SCAFFOLD or re.fullmatch(r"[YMD]+(-[YMD]+)*", w):  # 'Format as YYYY-MM-DD'
                continue
            if re.fullmatch(r"\$?\d[\d,.]*%?", w):
                before = sentence[: m.start()].lower().rstrip()
                if re.search(r"\b(page|pages|p\.|slide|slides|top|first|last)$", before):
                    continue  # where to look, not what to find
                if re.sub(r"[$,%]", "", w).rstrip(".") not in digits:
                    missing.append(w)
            elif (
                caps
                and not shouting
                and i > 0
                and w[0].isupper()
                and len(w) > 2
                and w.lower() not in low
                and not fuzzy_hit(w.lower(), vocab)
            ):
                missing.append(w)
    return missing


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_CONNECT = {"of", "the", "for", "&", "de"}  # inside a name; "and", "on", "in" join two of them


def squash(text: str) -> str:
    """Lower case, no possessive or plural s, no spaces or punctuation: 'the Center’s Rules' -> 'thecenterrule'."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"['’]s\b", "", text.lower()))
    return "".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def missing_phrases(question: str, texts: list[str]) -> list[str]:
    """Multi-word specifics of the question that no evidence text prints as a whole: a name of two or more
    capitalised words ('Care Quality Commission' where the pages only say 'Quality' and 'Commission'), a month
    with its year ('May 2018'), a number range ('port 10-13'), an amount with its scale ('50 billion'), a colour.
    Compared with case, spacing, line breaks and punctuation ignored. `missing_anchors` checks single words;
    benchmark "Not answerable" questions often change one specific of an answerable one, and a changed word of a
    name is still a word of the pages.

    >>> missing_phrases("What is the phone of the Care Quality Commission?", ["Quality Commission, care home"])
    ['Care Quality Commission']
    >>> missing_phrases("Who produced the report revised on May 2016?", ["Revised\\nMay  2016 by the Department"])
    []
    >>> missing_phrases("How many users were there when sales reached 50 billion?", ["$11 billion; 50% of 40 users"])
    ['50 billion']

    A row key the evidence prints ('AR01') is what the question looks up, and the words around it in the
    question ('EPS Code AR01') are the table's header, not a phrase the row prints:

    >>> missing_phrases("What's the market name for EPS Code AR01?", ["EPS\\nMarket name Code\\n1. Little Rock AR01"])
    []
    """
    from agent.reader.answer_types import question_keys

    keys = [k for k in question_keys(question) if any(re.search(rf"\b{k}\b", t) for t in texts)]
    joined = squash(" ".join(texts))
    out = []
    for m in re.finditer(r"\b" + _MONTH + r",?\s+(?:\d{1,2},?\s+)?(\d{4})\b", question, re.I):
        month = m.group()[:3].lower()
        if not re.search(month + r"[a-z]*(?:\d{1,2})?" + m.group(1), joined):
            out.append(m.group())
    where = r"(?:page|pages|p\.|figure|figures|fig\.?|table|tables|slide|slides|chapter|chapters|section|sections)"
    for m in re.finditer(r"\b\d+\s?[-–]\s?\d+\b", question):  # a range, unless it says where to look
        if not re.search(where + r"\s*$", question[: m.start()].lower()) and squash(m.group()) not in joined:
            out.append(m.group())
    # an amount with its scale ('reached 50 billion'), printed neither whole nor as its number (a chart prints
    # '330' under '(in millions)')
    for m in re.finditer(r"\b(\d[\d,.]*)\s?(?:million|billion|trillion|thousand)\b", question, re.I):
        bare = re.compile(r"(?<![\d.,])" + re.escape(m.group(1)) + r"(?![\d]|[.,]\d|\s?%)")
        if squash(m.group()) not in joined and not any(bare.search(t) for t in texts):
            out.append(m.group())
    # a colour ('What temperature does the yellow color represent?'): text that never prints it cannot tell which
    out += [c for c in dict.fromkeys(m.group().lower() for m in COLORS.finditer(question)) if squash(c) not in joined]
    out += [n for n in question_names(question) if squash(n) not in joined and not set(n.split()) & set(keys)]
    return out


def question_names(question: str) -> list[str]:
    """The names of two or more capitalised words the question gives past each sentence's first word.

    >>> question_names("What is the phone of the Care Quality Commission in May?")
    ['Care Quality Commission']
    """
    letters = re.sub(r"[^A-Za-z]", "", question)
    if sum(c.isupper() for c in letters) > 0.6 * max(len(letters), 1):  # ALL-CAPS: case says nothing
        return []
    out = []
    for sentence in re.split(r"(?<=[.?!])\s+", question.strip()):
        # words (digits included: 'PaLM-2L') and the punctuation between them, which ends a name
        tokens = [t.group() for t in re.finditer(r"[A-Za-z0-9][\w.'’&-]*[\w]|[A-Za-z0-9]|[^\s\w]", sentence)][1:]
        run: list[str] = []
        for w in tokens + [","]:
            w = re.sub(r"['’]s$", "", w)
            if (w[:1].isupper() and not re.fullmatch(_MONTH, w.lower())) or (run and w.lower() in _CONNECT):
                run.append(w)
                continue
            while run and run[-1].lower() in _CONNECT:
                run.pop()
            if len(run) >= 2:
                out.append(" ".join(run))
            run = []
    return out


def printed_near(name: str, text: str, at: int, before: int = 600, after: int = 200) -> bool:
    """Whether `text` prints `name` (case, spacing and punctuation aside) within `before` characters before
    position `at` or `after` characters after it: an address block's name over its phone number.

    >>> printed_near("The Limes Home", "The Limes\\nHome\\n43 Foreland Road\\nTel: 01983 873655", 36)
    True
    """
    return squash(name) in squash(text[max(0, at - before) : at + after])


ORDINALS = {
    "first": 1,
    "1st": 1,
    "second": 2,
    "2nd": 2,
    "third": 3,
    "3rd": 3,
    "fourth": 4,
    "4th": 4,
    "fifth": 5,
    "5th": 5,
}
# colour names as text prints them; a colour is drawn far more often than it is written
COLORS = re.compile(
    r"\b(?:(?:light|dark|bright|pale|deep)[ -])?(?:red|green|blue|yellow|orange|purple|violet|pink|black|white|"
    r"gr[ae]y|brown|cyan|magenta|turquoise|teal|navy|maroon|beige|gold|golden|silver)\b",
    re.I,
)
MONTH_ABBR = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")  # month n: index n-1


def periods(text: str) -> set[str]:
    """The quarters, halves and months a text names, in one spelling: 'Q3', 'the third quarter' and '3rd quarter'
    are all 'q3'; 'H1' and 'the first half' are 'h1'; 'March' and 'Mar.' are 'm3'.

    >>> sorted(periods("Shipments in the third quarter beat Q1 and March"))
    ['m3', 'q1', 'q3']
    """
    low = (text or "").lower()
    out = {f"q{n}" for n in re.findall(r"\bq([1-4])\b", low)}
    out |= {f"q{ORDINALS[w]}" for w in re.findall(r"\b(first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+quarter\b", low)}
    out |= {f"h{n}" for n in re.findall(r"\bh([12])\b", low)}
    out |= {f"h{ORDINALS[w]}" for w in re.findall(r"\b(first|second|1st|2nd)\s+half\b", low)}
    # 'may' is also a verb: a month only beside a day or a year ('May 2016', '3 May')
    for m in re.finditer(r"\b(" + _MONTH + r")(?=\s+\d)|(?<=\d\s)(" + _MONTH + r")", low):
        word = (m.group(1) or m.group(2))[:3]
        if word in MONTH_ABBR:
            out.add(f"m{MONTH_ABBR.index(word) + 1}")
    for m in re.finditer(
        r"\b(january|february|march|april|june|july|august|september|october|november|december)\b", low
    ):
        out.add(f"m{MONTH_ABBR.index(m.group(1)[:3]) + 1}")
    return out
