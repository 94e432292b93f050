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

This module finds the call in the text; agent/validate.py checks and coerces its arguments against the
protocol's schema and the episode's `Context`; agent/rejections.py words the corrective observation;
agent/call_format.py writes calls (`format_call`, `format_vrag`); agent/lenient_json.py repairs the JSON.

Leniency (tool-call protocols). The call is the first `<tool_call>` after the think block (else the first
JSON object naming a tool); a second call is not run, and `Action.warnings` says so. Inside it we accept
```json fences, a missing `</tool_call>`, missing closing brackets (but a string cut off mid-value is
rejected: a half answer must not run as if complete), single quotes, trailing or missing commas,
unquoted keys and bare-word values, // and /* */ comments, Python True/False/None, tuples,
"parameters"/"args" for "arguments", arguments given as a JSON string, an OpenAI `{"function": {...}}`
wrapper, arguments flattened next to "name", and `ast.literal_eval` as a last resort.

VRAG action rule, exactly VRAG-RL's (`VRAG-RL/vrag_agent/generation.py`): the reply is first reduced to its
complete `<answer|search|think|bbox>...</...>` tags re-joined by newlines (`keep_tags`, lines 93-108,
`_postprocess_responses`), then the action is the first `<(search|answer|bbox)>(.*?)</\1>` match in that text
(lines 652-658, `postprocess_predictions`): case-sensitive, think blocks included, so a `<search>` written
inside `<think>` runs before an `<answer>` after it. No match, or a `<bbox>` that is not a JSON list of four
numbers >= 0 (lines 620-627), is an invalid action. The rollouts set no stop strings, so a tag left unclosed is
no action either.

`protocol` is the protocol class or object itself: this module reads only its `tools` (schemas) and its
`syntax` ("calls": Qwen tool calls; "tags": VRAG-RL's tags), never its name, and imports nothing of
agent/protocols/ but its schemas, so imports inside agent/ point one way (the protocols import this module).
`agent.protocols.parse` is the same function taking a registered name.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from agent import lenient_json
from agent.rejections import Rejection, reject
from agent.validate import Context, canon_name, check, short

# Rejection: what parse returns
__all__ = ["parse", "parse_many", "Action", "MAX_CHARS", "Rejection", "keep_tags", "vrag_bbox", "vrag_tag"]

MAX_CHARS = 20_000  # output past this is not read: no real call is this long, and it bounds parse time


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


# ---- finding the call in the text ----------------------------------------------------------------------
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)
_TC_OPEN = re.compile(r"<tool_call>", re.I)
_OBJ_START = re.compile(r"\[\s*\{|\{")  # a call object, or a JSON list of them
_NOISE = re.compile(r"</?tool_call>|```(?:json)?|<\|[^|>]{0,40}\|>", re.I)
_NO_CALL = (
    'no tool call was found{hint}; put one JSON object with "name" and "arguments" between <tool_call> and </tool_call>'
)


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
            if canon_name(k) in tools and isinstance(v, dict):
                return k, v
        return None, None
    args = next((obj[k] for k in _ARG_KEYS if obj.get(k) is not None), None)
    if args is None:  # arguments flattened next to the name
        args = {k: v for k, v in obj.items() if k not in _NAME_KEYS and k != "type"}
    return name, args


# ---- parsing -------------------------------------------------------------------------------------------
def parse(text: str, protocol: Any, ctx: Context | None = None) -> Action | Rejection:
    """Read one model output under `protocol` (a protocol class or object); validate it against `ctx` when
    given. Never raises on `text`. agent.protocols.parse also takes a protocol's name."""
    proto = protocol
    try:
        return _parse(text, proto, ctx)
    except Exception as e:  # noqa: BLE001 - last line of defence; tests assert it never fires
        return reject(
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
        return reject(
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
        return reject("no_tool_call", [_NO_CALL.format(hint=hint)], protocol, ctx, raw)
    # tagged: the first <tool_call> is the call and every other tag is one more call; untagged: the first
    # object naming a tool is the call (prose may hold other braces) and later such objects are more calls
    found, extra, error = None, 0, None
    for pos, span in spans:
        try:
            obj = lenient_json.loads_any(span)
        except lenient_json.ParseError as e:
            if tagged and found is None:
                return reject(
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
            return reject(
                "not_a_call",
                [f'the tool call {short(obj)} has no tool "name"; write {{"name": <tool>, "arguments": {{...}}}}'],
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
            return reject("bad_json", [f"the JSON of the tool call could not be read: {error}"], protocol, ctx, raw)
        return reject("no_tool_call", [_NO_CALL.format(hint="")], protocol, ctx, raw)
    pos, name, args = found
    if not think:
        think = _NOISE.sub("", text[start:pos]).strip()
    if extra:
        warnings.append(
            f"{_ONE_PER_TURN}: ran the first ({short(name, 40)}) and ignored "
            f"the other {extra}; make the next call after you see this result"
        )
    canon = canon_name(name)
    if canon not in tools:
        close = difflib.get_close_matches(canon, list(tools), n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        return reject(
            "unknown_tool",
            [f"unknown tool {short(name, 40)}; available tools: {', '.join(tools)}.{guess}"],
            protocol,
            ctx,
            raw,
            close[0] if close else None,
        )
    raw_args = copy.deepcopy(args) if isinstance(args, dict) else None
    return _checked(Action(canon, args, raw, think, warnings, raw_args), protocol, ctx)


_ONE_PER_TURN = "only one tool call per turn is executed"


def parse_many(text: str, protocol: Any, ctx: Context | None = None, limit: int = 4) -> list[Action] | Rejection:
    """Every tool call of a reply, up to `limit`, each checked against `ctx`: for a protocol whose replies may carry
    several calls (react, and native `tool_calls` arrays, which arrive as several <tool_call> blocks). The first
    call is read exactly as `parse` reads it, and its problems reject the reply. A later call with problems is not
    run, and neither is an `answer` beside other calls (the model has not seen their results yet); the first
    action's warnings say so. Never raises on `text`.

    >>> from agent.protocols import get
    >>> two = '<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>' \\
    ...       '<tool_call>{"name": "search", "arguments": {"query": "b"}}</tool_call>'
    >>> [a.args["query"] for a in parse_many(two, get("react"))]
    ['a', 'b']
    """
    first = parse(text, protocol, ctx)
    if isinstance(first, Rejection) or limit <= 1 or protocol.syntax != "calls":
        return first if isinstance(first, Rejection) else [first]
    if not any(w.startswith(_ONE_PER_TURN) for w in first.warnings):  # `parse` saw no other call: no second scan
        return [first]
    try:
        more = _later_calls(text, protocol.tools)
    except Exception:  # noqa: BLE001 - the first call stands, as `parse` read it
        return [first]
    if not more:
        return [first]
    notes = [w for w in first.warnings if not w.startswith(_ONE_PER_TURN)]
    actions = [first]
    for i, (name, args) in enumerate(more, start=2):
        if len(actions) >= limit:
            notes.append(f"at most {limit} tool calls run per turn: the calls from number {i} on were not run")
            break
        canon = canon_name(name)
        if canon not in protocol.tools:
            notes.append(f"call {i} names the unknown tool {short(name, 40)} and was not run")
            continue
        act = _checked(Action(canon, args, text, first.think, [], copy.deepcopy(args)), protocol, ctx)
        if isinstance(act, Rejection):
            notes.append(f"call {i} ({canon}) was not run: {short(act.observation, 200)}")
            continue
        notes += act.warnings
        actions.append(act)
    answers = [a for a in actions if protocol.tools[a.name].get("x-kind") == "answer"]
    if answers and len(actions) > 1:
        actions = [a for a in actions if a not in answers]
        notes.append("answer was not run beside other calls: answer in a turn of its own, once you see these results")
    actions[0].warnings = notes
    return actions


def _later_calls(text: str, tools: dict) -> list[tuple[str, Any]]:
    """(name, arguments) of every call after the first that `_parse_call` runs: the other <tool_call> blocks (each
    may hold a JSON list of calls), or in untagged text the later objects naming a tool. Unreadable ones are
    skipped."""
    tag = _TC_OPEN.search(text)
    _, start = _think_and_start(text, tag.start() if tag else text.find("{"))
    tagged = bool(_TC_OPEN.search(text, start))
    spans = _tagged_spans(text, start) if tagged else _bare_spans(text, start)
    if not spans and start > 0:
        tagged = bool(tag)
        spans = _tagged_spans(text, 0) if tagged else _bare_spans(text, 0)
    calls: list[tuple[str, Any]] = []
    for _, span in spans:
        try:
            obj = lenient_json.loads_any(span)
        except lenient_json.ParseError:
            continue
        for entry in obj if isinstance(obj, list) else [obj]:
            name, args = _unpack(entry, tools)
            if name is not None:
                calls.append((name, args))
    return calls[1:]


def _checked(action: Action, proto: Any, ctx: Context | None) -> Action | Rejection:
    """`action` with its arguments checked and coerced, or the Rejection that lists their problems."""
    chk = check(action.name, action.args, proto, ctx)
    if chk.problems:
        return reject(chk.problems[0][0], [m for _, m in chk.problems], proto, ctx, action.raw, action.name)
    action.args, action.warnings = chk.args, action.warnings + chk.warnings
    return action


_VRAG_TAGS = re.compile(r"<(answer|search|think|bbox)>(.*?)</\1>", re.S)  # generation.py line 101
_VRAG_ACTION = re.compile(r"<(search|answer|bbox)>(.*?)</\1>", re.S)  # generation.py line 654
_VRAG_THINK = re.compile(r"<think>(.*?)</think>", re.S)


def keep_tags(reply: str) -> str:
    """The reply as VRAG-RL keeps it: its complete tags, re-joined by newlines (generation.py lines 93-108).

    >>> keep_tags("Sure! <think>need p.2</think> ok <search>revenue</search> trailing")
    '<think>need p.2</think>\\n<search>revenue</search>'
    """
    return "\n".join(f"<{tag}>{body}</{tag}>" for tag, body in _VRAG_TAGS.findall(reply or ""))


def vrag_tag(reply: str) -> str | None:
    """The action tag VRAG-RL reads in a reply ("search", "answer" or "bbox"), or None when there is none.

    >>> vrag_tag("<think>zoom <bbox>[1, 2]</bbox></think><answer>x</answer>"), vrag_tag("<answer>x")
    ('bbox', None)
    """
    m = _VRAG_ACTION.search(keep_tags(reply))
    return m.group(1) if m else None


def vrag_bbox(body: str) -> list[float] | None:
    """A <bbox> body as VRAG-RL accepts it (generation.py lines 620-627): json.loads gives four numbers >= 0.

    >>> vrag_bbox(" [10, 20.5, 30, 40] "), vrag_bbox("10, 20, 30, 40"), vrag_bbox("[1, 2, -3, 4]")
    ([10, 20.5, 30, 40], None, None)
    """
    try:
        box = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
        return None
    ok = isinstance(box, list) and len(box) == 4
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in box)
    return box if ok else None


def _parse_vrag(text: str, raw: str, proto: Any, ctx: Context | None, warnings: list[str]):
    kept = keep_tags(text)
    m = _VRAG_ACTION.search(kept)
    if m is None:
        hint = " (tool calls are not this protocol's syntax)" if _TC_OPEN.search(text) else ""
        return reject("no_action", [f"no complete <search>, <bbox> or <answer> tag was found{hint}"], proto, ctx, raw)
    tag, body = m.group(1), m.group(2).strip()
    think = _VRAG_THINK.search(kept)
    kind = {"search": "search", "bbox": "crop", "answer": "answer"}[tag]
    name = next(n for n, t in proto.tools.items() if t.get("x-kind") == kind)
    if kind == "crop" and vrag_bbox(body) is None:
        return reject(
            "bad_bbox",
            [f"the <bbox> must be a JSON list of four numbers >= 0, [x1, y1, x2, y2]; got {short(body, 60)}"],
            proto,
            ctx,
            raw,
            name,
        )
    key = {"search": "query", "crop": "bbox", "answer": "answer"}[kind]
    return _checked(Action(name, {key: body}, raw, think.group(1).strip() if think else "", warnings), proto, ctx)
