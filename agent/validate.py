"""Checking one tool call against its protocol's JSON Schema and the episode (DESIGN.md 4.1).

`validate(name, args, protocol, ctx)` lists what is wrong with a call; `check` is the same walk, which
agent/actions.py runs on every parsed call and which also returns the coerced arguments. The schemas are
the protocols' own (agent/protocols/), with our "x-" keys (agent/protocols/schema.py): "x-ref" says which
pool an id must come from, "x-kind": "bbox" marks a box checked against the image's size as the model sees it.

Values are coerced when the intent is unambiguous: numeric strings to numbers ("3", "0.5"), "true"/"yes"
to booleans, "[1,2,3,4]" or "1,2,3,4" to a bbox, one string to a one-item id list, "mm:ss" to seconds,
ids matched ignoring case and spaces ("picture 1" -> "Picture 1"), argument aliases ("priority" ->
"priority_score"). Unknown arguments are dropped with a warning. Each problem is a (reason code, message)
pair; the codes are agent/rejections.py's REASONS, the messages say what to fix.

Left out on purpose: protocol sequencing (memorize after a search, answer last) is the loop's business;
this module judges one call against the current `Context`.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from agent import lenient_json

MAX_ABS = 1e9  # |numbers| above this are garbage, and would overflow pixel arithmetic downstream


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


def short(v: Any, n: int = 60) -> str:
    try:
        s = repr(v)
    except ValueError:  # an int beyond Python's digit limit (from ast.literal_eval)
        s = f"<a {type(v).__name__} too long to show>"
    return s if len(s) <= n else s[: n - 3] + "..."


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s).lower()


def canon_name(name: Any) -> str:
    """A tool or argument name as the schemas spell it: lower case, "_" for "-" and " ", no "functions."."""
    if not isinstance(name, str):  # ast.literal_eval may give int or tuple keys
        return ""
    s = name.strip().lower().replace("-", "_").replace(" ", "_")
    return s.removeprefix("functions.")


def listing(ids: Any, n: int = 10) -> str:
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
            return self.bad("bad_type", f"`{path}` must be true or false, got {short(v)}", path)
        if t == "array":
            return self.array(v, schema, path)
        return self.object(v, schema, path)

    def type_error(self, v: Any, schema: dict, path: str) -> object:
        what = "a bbox [x1, y1, x2, y2] of 4 numbers" if schema.get("x-kind") == "bbox" else _TYPE_WORDS[schema["type"]]
        code = "bad_bbox" if schema.get("x-kind") == "bbox" else "bad_type"
        return self.bad(code, f"`{path}` must be {what}, got {short(v)}", path)

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
                    f"node id {short(s)} is already used; give this step a new id such as {fresh_id(ctx)!r}",
                    path,
                )
            return s
        pool = {"node": ctx.node_ids, "memorizable": ctx.memorizable}.get(ref, ctx.info_ids)
        hit = s if s in pool else next(iter([p for p in pool if _norm(p) == _norm(s)][:1]), None)
        if hit is None:
            if ref == "node":
                return self.bad(
                    "unknown_node",
                    f"`{path}` names node {short(s)}, which does not exist; "
                    f"existing nodes: {listing(sorted(ctx.node_ids))}",
                    path,
                )
            if ref == "memorizable" and (s in ctx.info_ids or any(_norm(k) == _norm(s) for k in ctx.info_ids)):
                return self.bad(
                    "not_memorizable",
                    f"`{path}` = {short(s)} is not among the current search "
                    f"results; memorize only these: {listing(sorted(ctx.memorizable))}",
                    path,
                )
            known = sorted(ctx.memorizable) if ref == "memorizable" else list(ctx.info_ids)
            return self.bad(
                "unknown_info_id",
                f"`{path}` = {short(s)} is not an information id you have been shown; use one of: {listing(known)}",
                path,
            )
        if ref == "image" and ctx.info_ids.get(hit) is None:
            return self.bad(
                "not_an_image",
                f"{hit!r} is not an image (text and video items have no pixels to "
                f"crop); use one of: {listing(images(ctx))}",
                path,
            )
        return hit

    def number(self, v: Any, schema: dict, path: str) -> Any:
        n = _num(v)
        if n is None:
            return self.type_error(v, schema, path)
        if isinstance(n, float) and not math.isfinite(n):
            return self.bad("bad_type", f"`{path}` must be a finite number, got {short(v)}", path)
        if abs(n) > MAX_ABS:
            return self.bad("out_of_range", f"`{path}` = {short(n, 30)} is far too large", path)
        if schema["type"] == "integer":
            if isinstance(n, float) and not n.is_integer():
                return self.bad("bad_type", f"`{path}` must be a whole number, got {short(v)}", path)
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
            return self.bad("bad_type", f"`{path or 'arguments'}` must be a JSON object, got {short(v)}", path)
        props = schema["properties"]
        aliases = aliases or schema.get("x-aliases", {})
        out: dict[str, Any] = {}
        unknown, seen = [], set()
        for k, val in v.items():
            key = canon_name(k)
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
            names = ", ".join(short(u, 30) for u in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
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


def images(ctx: Context) -> list[str]:
    return [k for k, v in ctx.info_ids.items() if v is not None]


def fresh_id(ctx: Context | None) -> str:
    used = {_norm(n) for n in ctx.node_ids} if ctx else set()
    return next(f"s{k}" for k in range(1, len(used) + 2) if f"s{k}" not in used)


def check(name: str, args: Any, proto: Any, ctx: Context | None) -> _Checker:
    """Check and coerce `args` of tool `name` (in place); the checker holds the problems, warnings and args."""
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
            chk.bad("duplicate_item", f"`memorize` lists {listing(dup)} more than once; list each result once")
    return chk


def validate(name: str, args: Any, protocol: Any, ctx: Context | None = None) -> list[str]:
    """Problems with one call (empty when it is valid). Coerces a copy; `args` is left as it is.

    `protocol` is a protocol class or object (its `tools`); agent.protocols.validate also takes a name."""
    if name not in protocol.tools:
        return [f"unknown tool {name!r}; available: {', '.join(protocol.tools)}"]
    return [m for _, m in check(name, copy.deepcopy(args), protocol, ctx).problems]
