"""Lenient JSON: read the JSON-ish text a language model writes, as `json.loads` would read real JSON.

`loads(text)` repairs the text token by token into strict JSON and loads the first value in it; whatever
follows that value is ignored. `loads_any(text)` also tries `ast.literal_eval` on short texts, for Python
literals the repair cannot express (non-string keys, bytes). `value_end(text, start)` finds where the
bracketed value opening at `start` ends, so a caller can cut a value out of surrounding prose.

Tolerated: single quotes, unquoted keys, bare-word values ("Picture 1", "None of the above"), trailing,
doubled or missing commas, // and /* */ comments, Python and JavaScript literals (True, None, undefined,
inf), hex and signed numbers, NaN and Infinity, tuples (read as lists), stray closing brackets, and closing
brackets missing at the end (output cut short).

    >>> loads("{'name': 'crop', args: {bbox: (1, 2, 3, 4,),},}")
    {'name': 'crop', 'args': {'bbox': [1, 2, 3, 4]}}
    >>> loads('{"answer": None of the above, "sure": True, /* fairly */ "page": 0x1F} and then prose')
    {'answer': 'None of the above', 'sure': True, 'page': 31}
    >>> loads('{"bbox": [10, 20 30, 40] // missing comma, and never closed')
    {'bbox': [10, 20, 30, 40]}
    >>> loads_any("{1: 'a key that is not a string'}")
    {1: 'a key that is not a string'}

Refused on purpose (`ParseError`): a string cut off mid-value, since a half answer must not run as if it
were complete; brackets nested deeper than MAX_DEPTH; characters that start no JSON token.

    >>> loads('{"answer": "the capital is Par')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agent.lenient_json.ParseError: the string starting '"the capital is Par' is never closed: ...

Left out on purpose: what a tool call looks like. agent/actions.py finds calls in the model's output and
checks them against their schemas; this module only reads values.

Why not the json-repair package (0.64.4), measured on the 6,785 distinct texts the action fuzzer hands this
module and on tests/agent/test_lenient_json.py: it reads 3,624 texts as we do and 328 differently, and
repairs 2,784 that we refuse, 1,039 of them strings cut off mid-value (and all 8 cut-off test cases). Its
differences change meaning: "None of the above" becomes null, 0x1F and NaN become strings, `{"a": @}`
becomes {"a": ""}; it agrees on 9 of the 16 repair tests. A guard on its repair log ("missed the closing
quote") refuses the 8 cut-off cases but still lets 255 cut-off strings of the corpus through and refuses 317
texts we read (1st, NaN), leaving 3,461 the same. It is also 60 to 100 times slower (79 s against 0.74 s on
that corpus, 19 s on one text), takes 200 s on `"{" * 50_000 + "}" * 50_000` and raises RecursionError on
deep brackets, where a tool call must be read or refused at once. So this parser stays.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from typing import Any

MAX_DEPTH = 32  # bracket nesting allowed in a call; real calls nest 4 deep
_AST_MAX = 4_000  # ast.literal_eval only sees short texts: its parser is recursive


class ParseError(ValueError):
    """The text holds no value that can be read, even leniently; the message says why."""


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<str>"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|'[^'\\]*(?:\\.[^'\\]*)*(?:'|\\?\Z))
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|Infinity|NaN))
  | (?P<word>[^\W\d]\w*)
  | (?P<open>[\[{(])
  | (?P<close>[\]})])
  | (?P<colon>:)
  | (?P<comma>,)
  | (?P<other>.)
""",
    re.S | re.X,
)
_COLON_AHEAD = re.compile(r"\s*:")
_BARE_RUN = re.compile(r"(?:[^,}\]\n\"']|(?<=\w)'(?=\w))*")  # an unquoted value runs to the next separator
_LITERALS = {
    "true": "true",
    "false": "false",
    "null": "null",
    "none": "null",
    "undefined": "null",
    "nan": "NaN",
    "infinity": "Infinity",
    "inf": "Infinity",
}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_INT = re.compile(r"[-+]?\d+")
_SCAN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|\'[^\'\\]*(?:\\.[^\'\\]*)*\'|[{}\[\]]', re.S)


def _preview(s: str, n: int) -> str:
    r = repr(s)
    return r if len(r) <= n else r[: n - 3] + "..."


def _unquote(tok: str) -> str:
    q, body = tok[0], tok[1:-1]
    if len(tok) < 2 or not tok.endswith(q) or (len(body) - len(body.rstrip("\\"))) % 2:
        # a value cut short would run as if complete (a half answer), so this is not repaired
        raise ParseError(
            f"the string starting {_preview(tok, 30)} is never closed: the output was cut off or a quote is missing"
        )
    if "\\" not in body:
        return body

    def sub(m: re.Match) -> str:
        e = m.group(1)
        return chr(int(e[1:], 16)) if len(e) > 1 else _ESCAPES.get(e, e)

    return _ESCAPE.sub(sub, body)


def _num_json(tok: str) -> str:
    t = tok[1:] if tok.startswith("+") else tok
    if t.lstrip("-") in ("Infinity", "NaN"):
        return t
    if len(t) > 400:  # also keeps int <-> str conversions under Python's digit limit
        raise ParseError(f"the number {tok[:20]}... is too long")
    v = int(t, 16) if "x" in t.lower() else int(t) if _INT.fullmatch(t) else float(t)
    if isinstance(v, float) and not math.isfinite(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def loads(text: str) -> Any:
    """Repair JSON5-ish text into JSON and load the first value in it. Raises ParseError."""
    out: list[str] = []
    stack: list[str] = []
    prev = None  # kind of the last emitted token: open | value | colon | comma

    def close_top() -> str:
        top = stack.pop()
        if out and out[-1] == ",":
            out.pop()  # trailing comma
        if prev == "colon":
            out.append("null")  # a key whose value never came
        out.append("}" if top == "{" else "]")
        return top

    def value(s: str) -> None:
        nonlocal prev
        if stack and prev == "value":
            out.append(",")  # missing comma between two values
        out.append(s)
        prev = "value"

    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        kind, tok, pos = m.lastgroup, m.group(), m.end()
        if kind == "ws":
            continue
        if kind == "str":
            value(json.dumps(_unquote(tok)))
        elif kind == "num":
            value(_num_json(tok))
        elif kind == "word":
            if _COLON_AHEAD.match(text, pos):  # unquoted key
                value(json.dumps(tok))
            else:  # a bare value, possibly several words: "Picture 1", "None of the above"
                run = _BARE_RUN.match(text, m.start()).group().rstrip()
                pos = m.start() + len(run)
                value(_LITERALS.get(run.lower()) or json.dumps(run))
        elif kind == "open":
            if len(stack) >= MAX_DEPTH:
                raise ParseError(f"brackets are nested more than {MAX_DEPTH} levels deep")
            value("{" if tok == "{" else "[")
            stack.append(out[-1])
            prev = "open"
        elif kind == "close":
            want = "{" if tok == "}" else "["
            if want not in stack:
                continue  # a stray closer
            while close_top() != want:  # close what the model left open inside
                prev = "value"
            prev = "value"
        elif kind == "colon":
            out.append(":")
            prev = "colon"
        elif kind == "comma":
            if prev == "value":
                out.append(",")
                prev = "comma"
        else:
            raise ParseError(f"unexpected character {tok!r} at position {m.start()}")
        if not stack and prev == "value":
            break  # one complete value; whatever follows is not part of it
    while stack:  # output cut short: close what is still open
        close_top()
        prev = "value"
    if not out:
        raise ParseError("no JSON value found")
    try:
        return json.loads("".join(out))
    except (ValueError, RecursionError) as e:  # its positions refer to the repaired text, so drop them
        raise ParseError(re.sub(r":? line \d+ column \d+ \(char \d+\)", "", str(e))) from None


def loads_any(text: str) -> Any:
    """`loads`, else `ast.literal_eval` on a short text; raises the ParseError of `loads` when both fail."""
    try:
        return loads(text)
    except ParseError as first:
        if len(text) <= _AST_MAX:
            try:
                with warnings.catch_warnings():  # it warns about odd literals ("1st") on stderr
                    warnings.simplefilter("ignore")
                    return ast.literal_eval(text.strip())
            except Exception:  # noqa: BLE001 - any failure here just means "not a Python literal either"
                pass
        raise first


def value_end(text: str, start: int) -> tuple[int, bool]:
    """End of the bracketed value opening at `start` (brackets inside strings do not count), and whether
    it closes at all; (len(text), False) when it never does.

    >>> text = 'I will call {"query": "a } inside a string"} now'
    >>> end, closed = value_end(text, text.index("{"))
    >>> text[text.index("{"):end], closed
    ('{"query": "a } inside a string"}', True)
    """
    depth = 0
    for m in _SCAN.finditer(text, start):
        tok = m.group()
        if tok in "{[":
            depth += 1
        elif tok in "}]":
            depth -= 1
            if depth == 0:
                return m.end(), True
    return len(text), False
