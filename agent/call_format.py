"""The canonical text of a call in each reply syntax: what scripted and embedded policies write, and what a
rejection shows the model as an example.

- Qwen tool calls (`syntax = "calls"`): `<think>...</think>` then
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.
- VRAG-RL's tags (`syntax = "tags"`): `<think>...</think>` then one of `<search>q</search>`,
  `<bbox>[x1, y1, x2, y2]</bbox>` or `<answer>a</answer>`.

Reading these back is agent/actions.py's job.

    >>> format_vrag("crop", {"bbox": [1, 2, 30, 40]}, think="zoom in")
    '<think>zoom in</think>\\n<bbox>[1, 2, 30, 40]</bbox>'
"""

from __future__ import annotations

import json

VRAG_TAG = {"search": "search", "crop": "bbox", "answer": "answer"}  # action -> the tag that writes it


def format_call(name: str, args: dict, think: str = "") -> str:
    """The canonical Qwen tool call text."""
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return (f"<think>{think}</think>\n" if think else "") + f"<tool_call>\n{call}\n</tool_call>"


def format_vrag(name: str, args: dict, think: str = "") -> str:
    """The canonical VRAG-RL text of an action: `<search>q</search>`, `<bbox>[...]</bbox>` or `<answer>a</answer>`."""
    if name not in VRAG_TAG:
        raise ValueError(f"unknown VRAG action {name!r}; choose one of {sorted(VRAG_TAG)}")
    tag = VRAG_TAG[name]
    body = json.dumps(list(args["bbox"])) if name == "crop" else str(args["query" if name == "search" else "answer"])
    if f"</{tag}>" in body.lower():
        raise ValueError(f"the {name} text contains '</{tag}>', which the tag protocol cannot express; remove it")
    return (f"<think>{think}</think>\n" if think else "") + f"<{tag}>{body}</{tag}>"
