"""Model output -> a validated tool call, for every agent protocol (DESIGN.md 4.1).

Model output is untrusted text. `parse(text, protocol, ctx)` returns an `Action` the loop can run, or a
`Rejection` whose `observation` tells the model what was wrong, how to fix it, and shows a correct call.
Nothing the model writes makes it raise; only a programming error (an unknown protocol name) does.

Protocols:
- "vimrag": one Qwen tool call per turn, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, with
  add_search_node / summarize_and_memorize / crop / scale / add_answer_node.
- "react": the same syntax with search / crop / scale / answer (the linear-history baseline).
- "vrag": VRAG-RL's tags: `<think>...</think>`, then one of `<search>q</search>`, `<bbox>[x1, y1, x2, y2]</bbox>`,
  `<answer>a</answer>`, normalized to Action("search" | "crop" | "answer").

Leniency (tool-call protocols). The call is the first `<tool_call>` after the think block (else the first
JSON object naming a tool); a second call is not run, and `Action.warnings` says so. Inside it we accept
```json fences, a missing `</tool_call>`, missing closing brackets (but a string cut off mid-value is
rejected: a half answer must not run as if complete), single quotes, trailing or missing commas,
unquoted keys and bare-word values, // and /* */ comments, Python True/False/None, tuples,
"parameters"/"args" for "arguments", arguments given as a JSON string, an OpenAI `{"function": {...}}`
wrapper, arguments flattened next to "name", and `ast.literal_eval` as a last resort.
Values are coerced when the intent is unambiguous: numeric strings to numbers ("3", "0.5"), "true"/"yes"
to booleans, "[1,2,3,4]" or "1,2,3,4" to a bbox, one string to a one-item id list, "mm:ss" to seconds,
ids matched ignoring case and spaces ("picture 1" -> "Picture 1"), a few argument aliases ("priority" ->
"priority_score"). Unknown arguments are dropped with a warning.

VRAG multi-tag rule: VRAG-RL reads the leftmost complete `<search|answer|bbox>...</...>` (`re.search` over
the response) and its rollouts stop generating at the first closing tag, so later tags are never seen. We
do the same after stripping the think block (a tag quoted in the reasoning does not count; if nothing
follows `</think>` the reasoning is searched too), and ignore later tags silently, so the released
checkpoint sees the observations it was trained on. A last tag left unclosed (a stop sequence eats the
closing tag) is read to the end of the output.

Left out on purpose: protocol sequencing (memorize after a search, answer last) is the loop's business;
this module judges one call against the current `Context`.

The tool schemas live in each protocol's module (agent/protocols/), the JSON repair in agent/lenient_json.py.
`protocol` is a registered protocol's name or the protocol object itself: this module reads only its
`tools` (schemas) and its `syntax` ("calls": Qwen tool calls; "tags": VRAG-RL's tags), never its name.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from agent import lenient_json
from agent.lenient_json import MAX_DEPTH
from agent.protocols.schema import SCALE_RANGE

__all__ = [
    "parse",
    "validate",
    "format_call",
    "format_vrag",
    "tool_specs",
    "Context",
    "Action",
    "Rejection",
    "REASONS",
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_ABS",
    "SCALE_RANGE",
    "syntax_of",
]

MAX_CHARS = 20_000  # output past this is not read: no real call is this long, and it bounds parse time
MAX_ABS = 1e9  # |numbers| above this are garbage, and would overflow pixel arithmetic downstream

# Rejection.reason codes (for traces, format rewards and tests); the observation carries the words
REASONS = (
    "empty_output",
    "no_tool_call",
    "bad_json",
    "not_a_call",
    "unknown_tool",
    "missing_argument",
    "bad_type",
    "empty_value",
    "empty_answer",
    "missing_query",
    "out_of_range",
    "unknown_node",
    "duplicate_id",
    "unknown_info_id",
    "not_memorizable",
    "not_an_image",
    "bad_bbox",
    "bbox_outside",
    "duplicate_item",
    "no_action",
    "internal_error",
)


@dataclass
class Context:
    """What a call is checked against: the graph's node ids and the information ids the model has seen."""

    node_ids: set[str] = field(default_factory=set)
    info_ids: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # id -> (w, h) as seen; None: no pixels
    memorizable: set[str] = field(default_factory=set)  # ids of the current search results
    current_image: str | None = None  # the image a VRAG <bbox> crops; None: the last image in info_ids

    def bbox_image(self) -> str | None:
        if self.current_image is not None:
            return self.current_image
        images = [k for k, v in self.info_ids.items() if v is not None]
        return images[-1] if images else None  # VRAG-RL crops the most recent image


@dataclass
class Action:
    name: str
    args: dict[str, Any]
    raw: str
    think: str = ""
    warnings: list[str] = field(default_factory=list)  # things to tell the model alongside the result
    raw_args: Any = None  # the arguments as the model wrote them (JSON-parsed, before coercion)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Action":
        return cls(**d)


@dataclass
class Rejection:
    reason: str  # one of REASONS
    observation: str  # the corrective message shown to the model in place of a tool result
    raw: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Rejection":
        return cls(**d)


def syntax_of(protocol: Any):
    """The protocol object behind `protocol` (a registered name, or an object with `tools` and `syntax`)."""
    if isinstance(protocol, str):
        from agent.protocols import get

        return get(protocol)
    return protocol


def tool_specs(protocol: Any, coords: str = "absolute") -> list[dict]:
    """OpenAI/Qwen function specs of the protocol's tools, for the system prompt or the `tools=` field."""
    from agent.protocols.schema import specs

    return specs(syntax_of(protocol).tools, coords)


def format_call(name: str, args: dict, think: str = "") -> str:
    """The canonical Qwen tool call text (what scripted and embedded policies emit)."""
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return (f"<think>{think}</think>\n" if think else "") + f"<tool_call>\n{call}\n</tool_call>"


_VRAG_TAG = {"search": "search", "crop": "bbox", "answer": "answer"}


def format_vrag(name: str, args: dict, think: str = "") -> str:
    """The canonical VRAG-RL text of an action: `<search>q</search>`, `<bbox>[...]</bbox>` or `<answer>a</answer>`."""
    if name not in _VRAG_TAG:
        raise ValueError(f"unknown VRAG action {name!r}; choose one of {sorted(_VRAG_TAG)}")
    tag = _VRAG_TAG[name]
    body = json.dumps(list(args["bbox"])) if name == "crop" else str(args["query" if name == "search" else "answer"])
    if f"</{tag}>" in body.lower():
        raise ValueError(f"the {name} text contains '</{tag}>', which the tag protocol cannot express; remove it")
    return (f"<think>{think}</think>\n" if think else "") + f"<{tag}>{body}</{tag}>"


# ---- finding the call in the text ----------------------------------------------------------------------
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)
_TC_OPEN = re.compile(r"<tool_call>", re.I)
_OBJ_START = re.compile(r"\[\s*\{|\{")  # a call object, or a JSON list of them
_NOISE = re.compile(r"</?tool_call>|```(?:json)?|<\|[^|>]{0,40}\|>", re.I)


def _think_and_start(text: str, first_action: int) -> tuple[str, int]:
    """The reasoning text and where to look for the action: after </think> when the think block comes first."""
    limit = first_action if first_action >= 0 else len(text)
    o = _THINK_OPEN.search(text)
    if o and o.start() < limit:
        c = _THINK_CLOSE.search(text, o.end())
        if c:
            return text[o.end() : c.start()].strip(), c.end()
        return text[o.end() : limit].strip(), o.end()
    c = _THINK_CLOSE.search(text)
    if o is None and c and c.start() < limit:  # the chat template opened <think> for the model
        return text[: c.start()].strip(), c.end()
    return "", 0


def _tagged_spans(text: str, start: int) -> list[tuple[int, str]]:
    """(position, JSON text) of each <tool_call> from `start`; a cut-off call ends at </tool_call> or the next tag."""
    spans, pos = [], start
    while len(spans) < 8:
        m = _TC_OPEN.search(text, pos)
        if m is None:
            break
        nxt = _TC_OPEN.search(text, m.end())
        limit = nxt.start() if nxt else len(text)
        o = _OBJ_START.search(text, m.end(), limit)
        b = o.start() if o else -1
        if b < 0:  # a tag with no object in it
            spans.append((m.start(), _NOISE.sub("", text[m.end() : limit]).strip()))
            pos = m.end()
            continue
        end, complete = lenient_json.value_end(text, b)
        if not complete:
            close = text.lower().find("</tool_call>", b, limit)
            end = close if close >= 0 else limit
        spans.append((m.start(), text[b:end]))
        pos = max(end, m.end())
    return spans


def _bare_spans(text: str, start: int) -> list[tuple[int, str]]:
    """(position, JSON text) of the bracketed objects in untagged text."""
    spans, pos = [], start
    while len(spans) < 8:
        b = text.find("{", pos)
        if b < 0:
            break
        end, _ = lenient_json.value_end(text, b)
        spans.append((b, text[b:end]))
        pos = end
    return spans


# ---- unpacking {"name": ..., "arguments": ...} ----------------------------------------------------------
_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
_ARG_KEYS = ("arguments", "parameters", "args", "params", "input")


def _canon_name(name: Any) -> str:
    if not isinstance(name, str):  # ast.literal_eval may give int or tuple keys
        return ""
    s = name.strip().lower().replace("-", "_").replace(" ", "_")
    return s.removeprefix("functions.")


def _unpack(obj: Any, tools: dict) -> tuple[str | None, Any]:
    """(tool name, arguments) of a parsed call; name None when it does not look like a call."""
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]  # a JSON list of calls; the caller counts them
    if not isinstance(obj, dict):
        return None, None
    if isinstance(obj.get("function"), dict):  # OpenAI tool_calls entry
        obj = {**{k: v for k, v in obj.items() if k != "function"}, **obj["function"]}
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None:
        if len(obj) == 1:  # {"crop": {...}}
            k, v = next(iter(obj.items()))
            if _canon_name(k) in tools and isinstance(v, dict):
                return k, v
        return None, None
    args = next((obj[k] for k in _ARG_KEYS if obj.get(k) is not None), None)
    if args is None:  # arguments flattened next to the name
        args = {k: v for k, v in obj.items() if k not in _NAME_KEYS and k != "type"}
    return name, args


# ---- validation ---------------------------------------------------------------------------------------
_BAD = object()  # a value that failed validation (its problem is already recorded)
_TYPE_WORDS = {
    "string": "a string",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
}
_INT = re.compile(r"[-+]?\d+")
_TIME = re.compile(r"(?:(\d+):)?(\d+):(\d+(?:\.\d*)?)")


def _short(v: Any, n: int = 60) -> str:
    try:
        s = repr(v)
    except ValueError:  # an int beyond Python's digit limit (from ast.literal_eval)
        s = f"<a {type(v).__name__} too long to show>"
    return s if len(s) <= n else s[: n - 3] + "..."


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s).lower()


def _listing(ids: Any, n: int = 10) -> str:
    ids = list(ids)
    shown = ", ".join(repr(i) for i in ids[:n])
    return (shown + f" (+{len(ids) - n} more)") if len(ids) > n else (shown or "none yet")


def _num(v: Any) -> int | float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        s = v.strip()
        if len(s) > 40:
            return None
        try:
            return int(s) if _INT.fullmatch(s) else float(s)
        except ValueError:
            t = _TIME.fullmatch(s)  # "01:05" or "1:02:03" -> seconds
            if t:
                return int(t.group(1) or 0) * 3600 + int(t.group(2)) * 60 + float(t.group(3))
    return None


class _Checker:
    """Coerces arguments to their schema and records (code, message) problems and warnings."""

    def __init__(self, ctx: Context | None, tool: str) -> None:
        self.ctx, self.tool = ctx, tool
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.failed: set[str] = set()  # top-level arguments that had a problem
        self.args: dict[str, Any] = {}

    def bad(self, code: str, msg: str, path: str = "") -> object:
        self.problems.append((code, msg))
        self.failed.add(path.split(".")[0].split("[")[0])
        return _BAD

    def value(self, v: Any, schema: dict, path: str) -> Any:
        t = schema["type"]
        if t == "string":
            return self.string(v, schema, path)
        if t in ("number", "integer"):
            return self.number(v, schema, path)
        if t == "boolean":
            if isinstance(v, bool):
                return v
            key = v.strip().lower() if isinstance(v, str) else str(v) if v in (0, 1) else None
            if key in ("true", "yes", "1"):
                return True
            if key in ("false", "no", "0"):
                return False
            return self.bad("bad_type", f"`{path}` must be true or false, got {_short(v)}", path)
        if t == "array":
            return self.array(v, schema, path)
        return self.object(v, schema, path)

    def type_error(self, v: Any, schema: dict, path: str) -> object:
        what = "a bbox [x1, y1, x2, y2] of 4 numbers" if schema.get("x-kind") == "bbox" else _TYPE_WORDS[schema["type"]]
        code = "bad_bbox" if schema.get("x-kind") == "bbox" else "bad_type"
        return self.bad(code, f"`{path}` must be {what}, got {_short(v)}", path)

    def string(self, v: Any, schema: dict, path: str) -> Any:
        if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str) and schema.get("x-ref"):
            v = v[0]  # ["Picture 1"] where one id is wanted
        if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e18:
            v = str(v)  # an answer or an id written as a number
        if not isinstance(v, str):
            return self.type_error(v, schema, path)
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from a bad \u escape would break every writer downstream
            v = v.encode("utf-8", "replace").decode("utf-8")
        if schema.get("minLength") and not v.strip():
            code = "empty_answer" if path == "answer" else "empty_value"
            return self.bad(code, f"`{path}` is empty; give {schema['description']}", path)
        ref = schema.get("x-ref")
        return self.reference(v.strip(), ref, path) if ref else v

    def reference(self, s: str, ref: str, path: str) -> Any:
        ctx = self.ctx
        if ctx is None:
            return s
        if ref == "new_node":
            if _norm(s) in {_norm(n) for n in ctx.node_ids}:
                return self.bad(
                    "duplicate_id",
                    f"node id {_short(s)} is already used; give this step a new id such as {_fresh_id(ctx)!r}",
                    path,
                )
            return s
        pool = {"node": ctx.node_ids, "memorizable": ctx.memorizable}.get(ref, ctx.info_ids)
        hit = s if s in pool else next(iter([p for p in pool if _norm(p) == _norm(s)][:1]), None)
        if hit is None:
            if ref == "node":
                return self.bad(
                    "unknown_node",
                    f"`{path}` names node {_short(s)}, which does not exist; "
                    f"existing nodes: {_listing(sorted(ctx.node_ids))}",
                    path,
                )
            if ref == "memorizable" and (s in ctx.info_ids or any(_norm(k) == _norm(s) for k in ctx.info_ids)):
                return self.bad(
                    "not_memorizable",
                    f"`{path}` = {_short(s)} is not among the current search "
                    f"results; memorize only these: {_listing(sorted(ctx.memorizable))}",
                    path,
                )
            known = sorted(ctx.memorizable) if ref == "memorizable" else list(ctx.info_ids)
            return self.bad(
                "unknown_info_id",
                f"`{path}` = {_short(s)} is not an information id you have been shown; use one of: {_listing(known)}",
                path,
            )
        if ref == "image" and ctx.info_ids.get(hit) is None:
            return self.bad(
                "not_an_image",
                f"{hit!r} is not an image (text and video items have no pixels to "
                f"crop); use one of: {_listing(_images(ctx))}",
                path,
            )
        return hit

    def number(self, v: Any, schema: dict, path: str) -> Any:
        n = _num(v)
        if n is None:
            return self.type_error(v, schema, path)
        if isinstance(n, float) and not math.isfinite(n):
            return self.bad("bad_type", f"`{path}` must be a finite number, got {_short(v)}", path)
        if abs(n) > MAX_ABS:
            return self.bad("out_of_range", f"`{path}` = {_short(n, 30)} is far too large", path)
        if schema["type"] == "integer":
            if isinstance(n, float) and not n.is_integer():
                return self.bad("bad_type", f"`{path}` must be a whole number, got {_short(v)}", path)
            n = int(n)
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            return self.bad("out_of_range", f"`{path}` is {n}, outside the allowed range {rng}", path)
        return n

    def array(self, v: Any, schema: dict, path: str) -> Any:
        items, bbox = schema["items"], schema.get("x-kind") == "bbox"
        if isinstance(v, str) and items["type"] != "string":
            s = v.strip()
            if s[:1] in "[(":
                try:
                    v = lenient_json.loads(s)
                except lenient_json.ParseError:
                    pass
            elif items["type"] == "number" and re.fullmatch(r"[-+\d.eE:\s,]+", s) and "," in s:
                v = [p for p in s.split(",")]  # "1, 2, 3, 4"
        elif isinstance(v, str) and v.strip()[:1] == "[":
            try:
                v = lenient_json.loads(v)
            except lenient_json.ParseError:
                pass
        if isinstance(v, tuple):
            v = list(v)
        if bbox and isinstance(v, list) and len(v) == 1 and isinstance(v[0], (list, tuple)):
            v = list(v[0])  # [[x1, y1, x2, y2]]
        if bbox and isinstance(v, dict) and all(k in v for k in ("x1", "y1", "x2", "y2")):
            v = [v["x1"], v["y1"], v["x2"], v["y2"]]
        if not isinstance(v, list):
            fits = {"string": str, "number": (int, float, str), "object": dict}.get(items["type"])
            if fits is None or isinstance(v, bool) or not isinstance(v, fits) or bbox:
                return self.type_error(v, schema, path)
            v = [v]  # one value where a list is wanted: "root" -> ["root"]
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if (lo is not None and len(v) < lo) or (hi is not None and len(v) > hi):
            if bbox:
                return self.bad(
                    "bad_bbox", f"`{path}` must be exactly 4 numbers [x1, y1, x2, y2], got {len(v)} values", path
                )
            return self.bad("missing_argument", f"`{path}` must list at least {lo} item(s); it is empty", path)
        out = [self.value(x, items, f"{path}[{i}]") for i, x in enumerate(v[:256])]
        if len(v) > 256:
            return self.bad("out_of_range", f"`{path}` has {len(v)} items; that is far too many", path)
        if any(x is _BAD for x in out):
            return _BAD
        return list(dict.fromkeys(out)) if items.get("x-ref") == "node" else out  # repeated parents collapse

    def object(self, v: Any, schema: dict, path: str, aliases: dict | None = None) -> Any:
        if isinstance(v, str):
            try:
                v = lenient_json.loads_any(v) if v.strip() else {}
            except lenient_json.ParseError as e:
                return self.bad(
                    "bad_json", f"`{path or 'arguments'}` is a string that is not a JSON object ({e})", path
                )
        if not isinstance(v, dict):
            return self.bad("bad_type", f"`{path or 'arguments'}` must be a JSON object, got {_short(v)}", path)
        props = schema["properties"]
        aliases = aliases or schema.get("x-aliases", {})
        out: dict[str, Any] = {}
        unknown, seen = [], set()
        for k, val in v.items():
            key = _canon_name(k)
            key = key if key in props else aliases.get(key)
            if key is None:
                unknown.append(k)
                continue
            if key in seen or val is None:  # a duplicate under another spelling, or an explicit null
                continue
            seen.add(key)
            got = self.value(val, props[key], f"{path}.{key}" if path else key)
            if got is not _BAD:
                out[key] = got
        for r in schema["required"]:
            if r not in seen:
                self.bad(
                    "missing_argument",
                    f"`{self.tool}` needs `{f'{path}.{r}' if path else r}`: {props[r]['description']}",
                    f"{path}.{r}" if path else r,
                )
        if unknown:
            names = ", ".join(_short(u, 30) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            self.warnings.append(f"ignored unknown argument(s) {names} of {self.tool}; it takes {', '.join(props)}")
        return out

    def bbox(self, b: list, size: tuple[int, int] | None, image: str | None, path: str = "bbox") -> None:
        x1, y1, x2, y2 = b
        if x2 <= x1 or y2 <= y1:
            self.bad(
                "bad_bbox",
                f"`{path}` {b} is empty or inverted: it needs x1 < x2 and y1 < y2 (left, top, right, bottom)",
                path,
            )
        elif size is not None:
            w, h = size
            if x2 <= 0 or y2 <= 0 or x1 >= w or y1 >= h:
                self.bad(
                    "bbox_outside",
                    f"`{path}` {b} lies entirely outside {image}, which you see at {w}x{h} "
                    f"pixels; give coordinates inside 0..{w} (x) and 0..{h} (y)",
                    path,
                )
            elif max(abs(c) for c in b) <= 1 and max(w, h) > 100:
                self.bad(
                    "bad_bbox",
                    f"`{path}` {b} looks like fractions of the image; give pixels of {image} as you see it ({w}x{h})",
                    path,
                )


def _images(ctx: Context) -> list[str]:
    return [k for k, v in ctx.info_ids.items() if v is not None]


def _fresh_id(ctx: Context | None) -> str:
    used = {_norm(n) for n in ctx.node_ids} if ctx else set()
    return next(f"s{k}" for k in range(1, len(used) + 2) if f"s{k}" not in used)


def _check(name: str, args: Any, proto: Any, ctx: Context | None) -> _Checker:
    spec = proto.tools[name]
    props = spec["parameters"]["properties"]
    chk = _Checker(ctx, name)
    out = chk.object(args, spec["parameters"], "", spec["aliases"])
    chk.args = a = out if isinstance(out, dict) else {}
    failed = chk.failed
    if (
        name == "add_search_node"
        and "query" not in failed
        and not str(a.get("query", "")).strip()
        and "image" not in a
        and "image" not in failed
    ):
        chk.bad("missing_query", "`add_search_node` needs a non-empty `query` (or an `image` to search with)")
    if name == "add_search_node" and "bbox" in a and "image" not in a and "image" not in failed:
        chk.bad("missing_argument", "`bbox` marks a region of an image, so `image` must name that image")
    if "bbox" in a:
        # a tool without an `image` argument crops the latest image (VRAG-RL's <bbox>)
        image = a.get("image") if "image" in props else (ctx.bbox_image() if ctx else None)
        size = ctx.info_ids.get(image) if ctx and image else None
        chk.bbox(a["bbox"], size, image)
    if "bbox" in props and "image" not in props and ctx is not None and ctx.bbox_image() is None:
        chk.bad("not_an_image", "there is no image to crop yet: <search> first, then crop the page it shows")
    if name == "summarize_and_memorize" and isinstance(a.get("memorize"), list):
        ids = [m.get("information_id") for m in a["memorize"]]
        dup = sorted({i for i in ids if i is not None and ids.count(i) > 1})
        if dup:
            chk.bad("duplicate_item", f"`memorize` lists {_listing(dup)} more than once; list each result once")
    return chk


def validate(name: str, args: Any, protocol: Any, ctx: Context | None = None) -> list[str]:
    """Problems with one call (empty when it is valid). Coerces a copy; `args` is left as it is."""
    proto = syntax_of(protocol)
    if name not in proto.tools:
        return [f"unknown tool {name!r}; available: {', '.join(proto.tools)}"]
    return [m for _, m in _check(name, copy.deepcopy(args), proto, ctx).problems]


# ---- rejections ----------------------------------------------------------------------------------------
def _example(name: str, ctx: Context | None) -> dict:
    nodes = sorted(ctx.node_ids) if ctx else []
    parent = "root" if not nodes or "root" in nodes else nodes[0]
    images = _images(ctx) if ctx else []
    image = images[0] if images else "Picture 1"
    w, h = (ctx.info_ids[image] if images else None) or (1000, 1000)
    bbox = [round(w * 0.1), round(h * 0.1), round(w * 0.6), round(h * 0.5)]
    mem = sorted(ctx.memorizable)[0] if ctx and ctx.memorizable else "Picture 1"
    return {
        "add_search_node": {"id": _fresh_id(ctx), "query": "a short, specific search query", "parent_ids": [parent]},
        "summarize_and_memorize": {
            "summarize": f"What {mem} shows that bears on the question.",
            "memorize": [{"information_id": mem, "is_useful": True, "priority_score": 4}],
        },
        "crop": {"image": image, "bbox": bbox},
        "scale": {"image": image, "factor": 2},
        "add_answer_node": {"answer": "the final answer, stated briefly", "parent_ids": [parent]},
        "search": {"query": "a short, specific search query"},
        "answer": {"answer": "the final answer, stated briefly"},
    }[name]


def _vrag_example(name: str, ctx: Context | None) -> str:
    args = _example(name, ctx)
    if name == "crop":
        image = ctx.bbox_image() if ctx else None
        w, h = (ctx.info_ids.get(image) if image else None) or (1000, 1000)
        args = {"bbox": [round(w * 0.1), round(h * 0.1), round(w * 0.6), round(h * 0.5)]}
    return format_vrag(name, args, think="what I know so far and what I need next")


def _default_tool(proto: Any, ctx: Context | None) -> str:
    """The tool an example call shows: memorize while results wait for it, else search (else the first)."""
    kinds = {t.get("x-kind"): name for name, t in reversed(list(proto.tools.items()))}
    if ctx and ctx.memorizable and "memorize" in kinds:
        return kinds["memorize"]
    return kinds.get("search", next(iter(proto.tools)))


def _reject(
    code: str, problems: list[str], proto: Any, ctx: Context | None, raw: Any, tool: str | None = None
) -> Rejection:
    tool = tool if tool in proto.tools else _default_tool(proto, ctx)
    lines = "\n".join(f"- {p}" for p in problems[:6])
    if len(problems) > 6:
        lines += f"\n- ... and {len(problems) - 6} more problems"
    if proto.syntax == "tags":
        obs = (
            f"My previous action is invalid:\n{lines}\nFirst reason inside <think> and </think>, then write "
            f"exactly one of <search>query</search>, <bbox>[x1, y1, x2, y2]</bbox> or <answer>answer</answer>. "
            f"For example:\n{_vrag_example(tool, ctx)}"
        )
    else:
        obs = (
            f"Your last output was not executed:\n{lines}\nReply with exactly one tool call "
            f"({', '.join(proto.tools)}), for example:\n{format_call(tool, _example(tool, ctx))}"
        )
    return Rejection(reason=code, observation=obs, raw=raw if isinstance(raw, str) else _short(raw, 200))


# ---- parsing -------------------------------------------------------------------------------------------
def parse(text: str, protocol: Any, ctx: Context | None = None) -> Action | Rejection:
    """Read one model output under `protocol`; validate it against `ctx` when given. Never raises on `text`."""
    proto = syntax_of(protocol)  # an unknown protocol is the caller's bug, not the model's
    try:
        return _parse(text, proto, ctx)
    except Exception as e:  # noqa: BLE001 - last line of defence; tests assert it never fires
        return _reject(
            "internal_error", [f"the output could not be read ({type(e).__name__}); write it again"], proto, ctx, text
        )


def _parse(text: Any, protocol: Any, ctx: Context | None) -> Action | Rejection:
    raw = text
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    warnings = []
    if isinstance(text, str) and len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        warnings.append(f"your output was longer than {MAX_CHARS} characters; only the start was read")
    if not isinstance(text, str) or not text.strip():
        where = f" (in its first {MAX_CHARS} characters)" if warnings else ""
        return _reject(
            "empty_output", [f"the output was empty{where}"], protocol, ctx, raw if isinstance(raw, str) else ""
        )
    if protocol.syntax == "tags":
        return _parse_vrag(text, raw, protocol, ctx, warnings)
    return _parse_call(text, raw, protocol, ctx, warnings)


def _parse_call(text: str, raw: str, protocol: Any, ctx: Context | None, warnings: list[str]):
    tools = protocol.tools
    tag = _TC_OPEN.search(text)
    think, start = _think_and_start(text, tag.start() if tag else text.find("{"))
    tagged = bool(_TC_OPEN.search(text, start))
    spans = _tagged_spans(text, start) if tagged else _bare_spans(text, start)
    if not spans and start > 0:  # the only call sits inside the reasoning
        tagged = bool(tag)
        spans = _tagged_spans(text, 0) if tagged else _bare_spans(text, 0)
    if not spans:
        hint = " (VRAG-style tags are not this protocol's syntax)" if re.search(r"<(search|answer|bbox)>", text) else ""
        return _reject(
            "no_tool_call",
            [
                f'no tool call was found{hint}; put one JSON object with "name" and '
                f'"arguments" between <tool_call> and </tool_call>'
            ],
            protocol,
            ctx,
            raw,
        )
    # tagged: the first <tool_call> is the call and every other tag is one more call; untagged: the first
    # object naming a tool is the call (prose may hold other braces) and later such objects are more calls
    found, extra, error = None, 0, None
    for pos, span in spans:
        try:
            obj = lenient_json.loads_any(span)
        except lenient_json.ParseError as e:
            if tagged and found is None:
                return _reject(
                    "bad_json",
                    [
                        f"the JSON of the tool call could not be read: {e}; write valid JSON, "
                        f"with double-quoted keys and strings"
                    ],
                    protocol,
                    ctx,
                    raw,
                )
            error = error or e
            continue
        name, args = _unpack(obj, tools)
        if name is None and tagged and found is None:
            return _reject(
                "not_a_call",
                [f'the tool call {_short(obj)} has no tool "name"; write {{"name": <tool>, "arguments": {{...}}}}'],
                protocol,
                ctx,
                raw,
            )
        if name is None:
            continue
        listed = len(obj) if isinstance(obj, list) else 1  # a JSON list of calls
        if found is None:
            found, extra = (pos, name, args), listed - 1
            if tagged:
                extra += len(spans) - 1
                break
        else:
            extra += listed
    if found is None:
        if error is not None and re.search(r"""["']?name["']?\s*:""", text):
            return _reject("bad_json", [f"the JSON of the tool call could not be read: {error}"], protocol, ctx, raw)
        return _reject(
            "no_tool_call",
            [
                'no tool call was found; put one JSON object with "name" and '
                '"arguments" between <tool_call> and </tool_call>'
            ],
            protocol,
            ctx,
            raw,
        )
    pos, name, args = found
    if not think:
        think = _NOISE.sub("", text[start:pos]).strip()
    if extra:
        warnings.append(
            f"only one tool call per turn is executed: ran the first ({_short(name, 40)}) and ignored "
            f"the other {extra}; make the next call after you see this result"
        )
    canon = _canon_name(name)
    if canon not in tools:
        close = difflib.get_close_matches(canon, list(tools), n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        return _reject(
            "unknown_tool",
            [f"unknown tool {_short(name, 40)}; available tools: {', '.join(tools)}.{guess}"],
            protocol,
            ctx,
            raw,
            close[0] if close else None,
        )
    raw_args = copy.deepcopy(args) if isinstance(args, dict) else None
    chk = _check(canon, args, protocol, ctx)
    if chk.problems:
        return _reject(chk.problems[0][0], [m for _, m in chk.problems], protocol, ctx, raw, canon)
    return Action(name=canon, args=chk.args, raw=raw, think=think, warnings=warnings + chk.warnings, raw_args=raw_args)


_VRAG_OPEN = re.compile(r"<(search|answer|bbox)>", re.I)
_VRAG_CLOSE = re.compile(r"</(search|answer|bbox)\s*>", re.I)
_TRAILING_NOISE = re.compile(r"(?:\s|<\|[^|>]{0,40}\|>|</?\w{1,20}>)+\Z")


def _vrag_action(text: str, start: int) -> tuple[int, str, str] | None:
    """(position, tag, content) of the leftmost complete action tag from `start`; else the first open one, unclosed."""
    last_close: dict[str, int] = {}
    for m in _VRAG_CLOSE.finditer(text, start):
        last_close[m.group(1).lower()] = m.start()
    first_open = None
    for m in _VRAG_OPEN.finditer(text, start):
        tag = m.group(1).lower()
        first_open = first_open or m
        if last_close.get(tag, -1) >= m.end():  # this open tag has a closing tag after it
            close = _VRAG_CLOSE.search(text, m.end())
            while close.group(1).lower() != tag:
                close = _VRAG_CLOSE.search(text, close.end())
            return m.start(), tag, text[m.end() : close.start()]
    if first_open is not None:
        body = text[first_open.end() :]
        return first_open.start(), first_open.group(1).lower(), _TRAILING_NOISE.sub("", body)
    return None


def _parse_vrag(text: str, raw: str, proto: Any, ctx: Context | None, warnings: list[str]):
    first = _VRAG_OPEN.search(text)
    think, start = _think_and_start(text, first.start() if first else -1)
    found = _vrag_action(text, start) or (_vrag_action(text, 0) if start else None)
    if found is None:
        hint = " (tool calls are not this protocol's syntax)" if _TC_OPEN.search(text) else ""
        return _reject("no_action", [f"no <search>, <bbox> or <answer> tag was found{hint}"], proto, ctx, raw)
    pos, tag, body = found
    if not think:
        think = text[start:pos].strip()
    kind = {"search": "search", "bbox": "crop", "answer": "answer"}[tag]
    name = next(n for n, t in proto.tools.items() if t.get("x-kind") == kind)
    key = {"search": "query", "crop": "bbox", "answer": "answer"}[kind]
    args = {key: body.strip()}  # a bbox string is read by the schema coercion: "[1, 2, 3, 4]", "1, 2, 3, 4"
    chk = _check(name, args, proto, ctx)
    if chk.problems:
        return _reject(chk.problems[0][0], [m for _, m in chk.problems], proto, ctx, raw, name)
    return Action(name=name, args=chk.args, raw=raw, think=think, warnings=warnings + chk.warnings)
