"""Helpers of the action parser tests: the vimrag context the examples are checked in, a call written in the
Qwen tool-call format, and parse-and-check wrappers for a call that must pass and one that must be rejected."""

import json
import re

from agent.actions import Action
from agent.protocols import get, parse
from agent.protocols.schema import specs
from agent.rejections import REASONS, Rejection
from agent.validate import Context


def tool_specs(protocol: str) -> list[dict]:
    return specs(get(protocol).tools)


def ctx() -> Context:
    return Context(
        node_ids={"root", "s1"},
        info_ids={"Picture 1": (640, 480), "Picture 2": (300, 900), "Text 1": None, "Video 1": None},
        memorizable={"Picture 2", "Text 1", "Video 1"},
    )


def call(name, args, tag=True):
    body = json.dumps({"name": name, "arguments": args})
    return f"<tool_call>{body}</tool_call>" if tag else body


def ok(text, protocol="vimrag", c=None) -> Action:
    r = parse(text, protocol, ctx() if c is None else c)
    assert isinstance(r, Action), getattr(r, "observation", r)
    return r


def rejected(text, protocol="vimrag", c=None, reason=None, *words) -> Rejection:
    r = parse(text, protocol, ctx() if c is None else c)
    assert isinstance(r, Rejection), r
    assert r.reason in REASONS and r.observation.strip()
    if reason:
        assert r.reason == reason, r.observation
    for w in words:
        assert w in r.observation, (w, r.observation)
    example = re.split(r"(?i)for example:\n", r.observation)
    assert len(example) == 2, r.observation  # every rejection ends with a correct call ...
    assert isinstance(parse(example[1], protocol, ctx() if c is None else c), Action)  # ... that runs
    return r


CROP = {"image": "Picture 1", "bbox": [10, 20, 300, 400]}
