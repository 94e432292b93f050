"""Fuzzing the action parser with random and mutated model outputs (seeded, so any failure reproduces).

For every protocol, N_PER_PROTOCOL outputs: valid calls mutated at the text level (deleted, inserted and
swapped characters, truncation, random unicode, huge numbers, deep brackets, long strings, repeated
calls, changed quotes and case), at the value level (wrong types, garbage, unknown and missing keys,
wrong tool names), and pure noise. Each result must be an Action or a Rejection, and nothing may escape:
- a Rejection has a known reason (never internal_error) and an observation whose example call runs;
- an Action passes an independent strict schema check written here, passes `validate`, and survives a
  round trip through `format_call` / `format_vrag` unchanged.

Why a seeded loop and not hypothesis (a test dependency already): the same generators written as hypothesis
strategies (derandomized, shrinking failures) were measured against this file on the parser. At 1,000 outputs
per protocol they took 6.6 s of CPU and ran 534 lines of agent/actions.py, validate.py, rejections.py,
call_format.py and lenient_json.py; this file's 4,000 per protocol take 3.1 s and run 554. The 20 more are
paths that need volume (true/"no"/0/1 for a boolean, a bbox outside its image, a JSON string as arguments).
Hypothesis spends about 1.8 ms drawing one output of this many choices. A failure here names its case number
and text, and the seed replays it; what is given up is only the shrinking.
"""

import copy
import json
import math
import random
import re
import time

import pytest

from agent.actions import MAX_CHARS, Action
from agent.call_format import format_call, format_vrag
from agent.protocols import get, parse, validate
from agent.rejections import REASONS, Rejection
from agent.validate import Context

TOOLS = {p: get(p).tools for p in ("vimrag", "react", "vrag")}

N_PER_PROTOCOL = 4_000  # x 3 protocols = 12,000 outputs


def full_ctx() -> Context:
    return Context(
        node_ids={"root", "s1", "c1"},
        info_ids={"Picture 1": (640, 480), "Picture 2": (300, 900), "Text 1": None, "Video 1": None},
        memorizable={"Picture 2", "Text 1", "Video 1"},
    )


SEEDS = {
    "vimrag": [
        ("add_search_node", {"id": "s2", "query": "revenue by region 2023", "parent_ids": ["root"]}),
        (
            "add_search_node",
            {"id": "s3", "query": "", "parent_ids": ["s1", "c1"], "image": "Picture 1", "bbox": [10, 20, 200, 300]},
        ),
        (
            "summarize_and_memorize",
            {
                "summarize": "Picture 2 has the table.",
                "memorize": [
                    {"information_id": "Picture 2", "is_useful": True, "priority_score": 5},
                    {"information_id": "Video 1", "is_useful": False, "priority_score": 2, "key_timestamp": [1.5, 30]},
                ],
            },
        ),
        ("crop", {"image": "Picture 2", "bbox": [0.5, 10, 299, 450], "id": "c2", "parent_ids": ["s1"]}),
        ("scale", {"image": "Picture 1", "factor": 2}),
        ("add_answer_node", {"answer": "12.5 million", "parent_ids": ["s1", "c1"]}),
    ],
    "react": [
        ("search", {"query": "what is the revenue"}),
        ("crop", {"image": "Picture 1", "bbox": [1, 2, 3, 4]}),
        ("scale", {"image": "Video 1", "factor": 0.5}),
        ("answer", {"answer": "Paris"}),
    ],
    "vrag": [
        ("search", {"query": "revenue table"}),
        ("crop", {"bbox": [10, 20, 280, 800]}),
        ("answer", {"answer": "42"}),
    ],
}

TOKENS = list("{}[]()\"',:;<>/\\ \n\t0123456789.-+eE_=#*") + [
    "a",
    "x",
    "name",
    "arguments",
    "é",
    "中",
    "😀",
    "\x00",
    "\u202e",
    "\ufeff",
    "\ud800",
    "\udfff",
    "True",
    "None",
    "NaN",
    "null",
    "Infinity",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<bbox>",
    "</bbox>",
    "```json",
    "```",
    "<|im_end|>",
    "\\u00e9",
    "\\ud83d",
    '\\"',
]
HUGE = [
    "1e400",
    "-1e400",
    "9" * 5000,
    "1" + "0" * 30,
    "NaN",
    "-Infinity",
    "0x" + "f" * 40,
    "0x" + "f" * 3900,
    "1e-400",
    "-0",
    "1e308",
    "4.9e-324",
    ".5",
    "+7",
    "5.",
    "1st",
]
NAMES = sorted({n for tools in TOOLS.values() for n in tools}) + ["", "Search", "crop ", "functions.answer", "x" * 300]


def rand_unicode(rng: random.Random, n: int) -> str:
    ranges = [(0x20, 0x7F), (0x0, 0x20), (0xA0, 0x3000), (0xD800, 0xE000), (0x1F300, 0x1F650)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randrange(lo, hi)))
    return "".join(out)


def rand_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(14 if depth < 3 else 10)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 3, 5, 7, 10**40, -(10**12), 2**63])
    if kind == 3:
        return rng.choice([0.25, 4.0, 1e308, -1e-300, 0.1, float("inf"), float("-inf"), float("nan")])
    if kind == 4:
        return rng.choice(
            [
                "",
                " ",
                "3",
                "0.5",
                "1e400",
                "true",
                "no",
                "[1,2,3,4]",
                "1, 2, 3, 4",
                "01:05",
                "root",
                "Picture 1",
                "picture2",
                "Text 1",
                "s1",
                "S1",
            ]
        )
    if kind == 5:
        return "x" * rng.choice([1, 100, 30_000])
    if kind == 6:
        return rand_unicode(rng, rng.randrange(1, 30))
    if kind == 7:
        return [rng.uniform(-100, 1000) for _ in range(rng.choice([0, 1, 3, 4, 4, 5]))]
    if kind == 8:
        return [rng.choice(["root", "s1", "c1", "nope", "Picture 1", 3])]
    if kind == 9:
        nested = 0
        for _ in range(rng.choice([5, 40, 200])):
            nested = [nested]
        return nested
    if kind == 10:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if kind == 11:
        return {rand_unicode(rng, 3): rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 3))}
    if kind == 12:
        return {
            "information_id": rng.choice(["Picture 2", "Text 1", "nope"]),
            "is_useful": rand_value(rng, 3),
            "priority_score": rand_value(rng, 3),
        }
    return (1, 2, 3, 4)


def paths(obj, prefix=()):
    """Every (container, key) leaf location inside a nested args dict."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield obj, k
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield obj, i
            yield from paths(v, prefix + (i,))


def mutate_args(rng: random.Random, name: str, args: dict) -> tuple[str, dict]:
    args = copy.deepcopy(args)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        spots = list(paths(args))
        if op <= 2 and spots:
            container, key = rng.choice(spots)
            container[key] = rand_value(rng)
        elif op == 3 and args:
            args.pop(rng.choice(list(args)))
        elif op == 4:
            args[rng.choice(["k", "priority", "parents", "top_k", rand_unicode(rng, 4)])] = rand_value(rng)
        else:
            name = rng.choice(NAMES)
    return name, args


def mutate_text(rng: random.Random, s: str) -> str:
    for _ in range(rng.randint(1, 4)):
        op, i = rng.randrange(13), rng.randrange(len(s) + 1)
        j = min(len(s), i + rng.randint(1, 8))
        if op == 0:
            s = s[:i] + s[j:]
        elif op == 1:
            s = s[:i] + rng.choice(TOKENS) + s[i:]
        elif op == 2 and len(s) > 1:
            i = min(i, len(s) - 2)
            s = s[:i] + s[i + 1] + s[i] + s[i + 2 :]
        elif op == 3:
            s = s[:i]
        elif op == 4:
            s = s[:j] + s[i:j] * rng.randint(1, 3) + s[j:]
        elif op == 5:
            s = s[:i] + rand_unicode(rng, rng.randint(1, 20)) + s[i:]
        elif op == 6:
            s = re.sub(r"\d+(\.\d+)?", lambda m: rng.choice(HUGE) if rng.random() < 0.5 else m.group(), s)
        elif op == 7:
            s = s[:i] + rng.choice("[{(") * rng.choice([10, 100, 3000]) + s[i:]
        elif op == 8:
            s = s[:i] + rng.choice(['"', "'", ""]) + "y" * rng.choice([500, 25_000]) + s[i:]
        elif op == 9:
            s = s + rng.choice(["\n", " ", ""]) + s
        elif op == 10:
            s = s.replace('"', "'") if rng.random() < 0.5 else s.replace('"', "")
        elif op == 11:
            s = s[:i] + s[i:j].swapcase() + s[j:]
        else:
            s = re.sub(r"</?tool_call>|</?think>", "", s)
    return s


def noise(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(TOKENS) for _ in range(rng.randrange(0, 120)))
    body = json.dumps(
        {
            rng.choice(["name", "tool", "function", "x"]): rng.choice(NAMES),
            rng.choice(["arguments", "parameters", "args"]): rand_value(rng),
        },
        allow_nan=True,
    )
    return rng.choice(["<tool_call>{}</tool_call>", "{}", "<answer>{}</answer>", "<bbox>{}</bbox>"]).format(body)


def render(protocol: str, name: str, args: dict) -> str:
    if protocol != "vrag":
        return format_call(name, args)
    tag = {"search": "search", "crop": "bbox"}.get(name, "answer")
    key = {"search": "query", "crop": "bbox"}.get(name, "answer")
    return f"<think>step</think>\n<{tag}>{json.dumps(args.get(key)) if tag == 'bbox' else args.get(key)}</{tag}>"


def is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def strict_check(protocol: str, a: Action, ctx: Context | None) -> None:
    """The contract of an Action, written independently of the parser's own schema code."""
    nodes = ctx.node_ids if ctx else None
    infos = ctx.info_ids if ctx else None

    def text(x, nonempty=True):
        assert isinstance(x, str) and (x.strip() or not nonempty), x
        x.encode("utf-8")  # no lone surrogates

    def node_list(xs, pool):
        assert isinstance(xs, list) and xs and len(set(xs)) == len(xs)
        for x in xs:
            text(x)
            assert pool is None or x in pool, x

    def bbox(b, size):
        assert isinstance(b, list) and len(b) == 4 and all(is_num(c) and abs(c) <= 1e9 for c in b), b
        assert b[0] < b[2] and b[1] < b[3], b
        if size:
            assert b[2] > 0 and b[3] > 0 and b[0] < size[0] and b[1] < size[1], (b, size)

    def image(x, need_pixels):
        text(x)
        if infos is not None:
            assert x in infos and (infos[x] is not None or not need_pixels), x

    n, g = a.name, a.args
    allowed = {
        "add_search_node": {"id", "query", "parent_ids", "image", "bbox"},
        "summarize_and_memorize": {"summarize", "memorize"},
        "crop": {"image", "bbox", "id", "parent_ids"},
        "scale": {"image", "factor", "id", "parent_ids"},
        "add_answer_node": {"answer", "parent_ids"},
        "search": {"query"},
        "answer": {"answer"},
    }[n]
    assert n in TOOLS[protocol] and set(g) <= allowed, (n, g)
    if "id" in g:
        text(g["id"])
        assert nodes is None or g["id"].lower() not in {x.lower() for x in nodes}
    if "parent_ids" in g or n in ("add_search_node", "add_answer_node"):
        node_list(g["parent_ids"], nodes)
    if n in ("search", "add_search_node"):
        text(g.get("query", ""), nonempty=n == "search" or "image" not in g)
    if "image" in g:
        image(g["image"], need_pixels=n != "scale")
    if "bbox" in g or n == "crop":
        size = infos.get(g["image"]) if infos is not None and "image" in g else None
        if protocol == "vrag" and ctx is not None:
            size = infos[ctx.bbox_image()]
        bbox(g["bbox"], size)
    if n == "scale":
        assert is_num(g["factor"]) and 0.25 <= g["factor"] <= 4
    if n in ("answer", "add_answer_node"):
        text(g["answer"])
    if n == "summarize_and_memorize":
        text(g["summarize"], nonempty=False)
        assert isinstance(g["memorize"], list)
        seen = set()
        for m in g["memorize"]:
            assert set(m) <= {"information_id", "is_useful", "priority_score", "key_timestamp"}
            text(m["information_id"])
            assert ctx is None or m["information_id"] in ctx.memorizable
            assert m["information_id"] not in seen
            seen.add(m["information_id"])
            assert isinstance(m["is_useful"], bool)
            p = m["priority_score"]
            assert isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 5
            ts = m.get("key_timestamp", [])
            assert isinstance(ts, list) and all(is_num(t) and t >= 0 for t in ts)
    json.dumps(g, allow_nan=False)


def check(protocol: str, text, ctx: Context | None, stats: dict) -> None:
    r = parse(text, protocol, ctx)
    assert isinstance(r, (Action, Rejection)), type(r)
    if isinstance(r, Rejection):
        stats["rejected"] += 1
        assert r.reason in REASONS and r.reason != "internal_error", (r.reason, r.observation, text[:300])
        assert isinstance(r.observation, str) and r.observation.strip()
        assert isinstance(r.raw, str)
        if ctx is not None and ctx.node_ids:  # the example call in it must run
            example = re.split(r"(?i)for example:\n", r.observation)[-1]
            assert isinstance(parse(example, protocol, ctx), Action), r.observation
        return
    stats["accepted"] += 1
    strict_check(protocol, r, ctx)
    assert validate(r.name, r.args, protocol, ctx) == [], (r, text[:300])
    assert all(isinstance(w, str) and w for w in r.warnings)
    again = format_vrag(r.name, r.args) if protocol == "vrag" else format_call(r.name, r.args)
    if len(again) > MAX_CHARS:  # args read from the first MAX_CHARS of a text can't fit back in with the framing
        return
    back = parse(again, protocol, ctx)
    assert isinstance(back, Action) and (back.name, back.args) == (r.name, r.args), (r, back)


@pytest.mark.parametrize("protocol", ["vimrag", "react", "vrag"])
def test_fuzz_never_raises_and_every_result_is_well_formed(protocol):
    rng = random.Random(f"actions-fuzz-{protocol}")
    ctxs = [full_ctx()] * 8 + [None, Context()]
    stats = {"accepted": 0, "rejected": 0}
    t0 = time.perf_counter()
    for k in range(N_PER_PROTOCOL):
        ctx = rng.choice(ctxs)
        roll = rng.random()
        name, args = rng.choice(SEEDS[protocol])
        if roll < 0.15:
            text = noise(rng)
        elif roll < 0.45:
            name, args = mutate_args(rng, name, args)
            text = render(protocol, name, args)
            if rng.random() < 0.3:
                text = mutate_text(rng, text)
        else:
            text = mutate_text(rng, render(protocol, name, args))
        try:
            check(protocol, text, ctx, stats)
        except AssertionError as e:
            raise AssertionError(f"case {k} ({protocol}): {text[:500]!r}") from e
    elapsed = time.perf_counter() - t0
    assert stats["accepted"] + stats["rejected"] == N_PER_PROTOCOL
    # the mutations must exercise both paths, not only the rejection one
    assert stats["accepted"] > N_PER_PROTOCOL * 0.05 and stats["rejected"] > N_PER_PROTOCOL * 0.3, stats
    print(f"{protocol}: {N_PER_PROTOCOL} outputs, {stats}, {elapsed:.2f} s")


def test_pathological_inputs():
    """Sizes that break naive parsers: deep nesting, huge numbers, many open tags, long strings."""
    ctx = full_ctx()
    cases = [
        "[" * 100_000,
        "{" * 50_000 + "}" * 50_000,
        '{"a":' * 20_000,
        "<tool_call>" * 5_000,
        "<search>" * 5_000,
        "<think>" * 5_000 + "</think>" * 5_000,
        '"' * 30_000,
        "'" + "\\" * 30_000,
        '<tool_call>{"name": "answer", "arguments": {"answer": ' + "9" * 50_000 + "}}",
        '<tool_call>{"name": "search", "arguments": {"query": "' + "q" * 19_000 + '"}}</tool_call>',
        "<bbox>" + "[" * 5_000 + "</bbox>",
        "(" * 3_000 + ")" * 3_000,
        "-" * 10_000 + "1",
        "<tool_call>{'a': " + "1+" * 3_000 + "1}",
        "\ud800" * 1_000,
        "\x00" * 10_000,
        # too long for the repair pass, then read by ast.literal_eval into an int too long to print
        "<tool_call>{'name': 'answer', 'arguments': {'answer': 0x" + "f" * 3_900 + ", 'x': 'a' 'b'}}",
    ]
    for protocol in ("vimrag", "react", "vrag"):
        for text in cases:
            t0 = time.perf_counter()
            check(protocol, text, ctx, {"accepted": 0, "rejected": 0})
            assert time.perf_counter() - t0 < 2.0, (protocol, text[:40])  # a guard against blow-ups, not a benchmark
