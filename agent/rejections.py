"""What the model is told when its output cannot run: a `Rejection` with a reason code and a corrective
observation that lists the problems and shows a correct call, in the protocol's own syntax.

The observation replaces a tool result, so the model can fix its call on the next turn. The example call is
built from the episode (`Context`): an unused node id, an existing parent, an image it has seen with a box
inside it, a current search result to memorize. Reason codes (`REASONS`) are for traces, format rewards and
tests; the words are in the observation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent.call_format import format_call, format_vrag
from agent.validate import Context, fresh_id, images, short

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
class Rejection:
    reason: str  # one of REASONS
    observation: str  # the corrective message shown to the model in place of a tool result
    raw: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Rejection":
        return cls(**d)


def _example_box(size: tuple[int, int] | None) -> list[int]:
    """A box over the upper middle of an image seen at `size` (1000x1000 when unknown)."""
    w, h = size or (1000, 1000)
    return [round(w * 0.1), round(h * 0.1), round(w * 0.6), round(h * 0.5)]


def _example(name: str, ctx: Context | None) -> dict:
    nodes = sorted(ctx.node_ids) if ctx else []
    parent = "root" if not nodes or "root" in nodes else nodes[0]
    seen = images(ctx) if ctx else []
    image = seen[0] if seen else "Picture 1"
    bbox = _example_box(ctx.info_ids[image] if seen else None)
    mem = sorted(ctx.memorizable)[0] if ctx and ctx.memorizable else "Picture 1"
    return {
        "add_search_node": {"id": fresh_id(ctx), "query": "a short, specific search query", "parent_ids": [parent]},
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
    if name == "crop":  # a <bbox> crops the latest image, so the example box fits that one
        image = ctx.bbox_image() if ctx else None
        args = {"bbox": _example_box(ctx.info_ids.get(image) if image else None)}
    return format_vrag(name, args, think="what I know so far and what I need next")


def _default_tool(proto: Any, ctx: Context | None) -> str:
    """The tool an example call shows: memorize while results wait for it, else search (else the first)."""
    kinds = {t.get("x-kind"): name for name, t in reversed(list(proto.tools.items()))}
    if ctx and ctx.memorizable and "memorize" in kinds:
        return kinds["memorize"]
    return kinds.get("search", next(iter(proto.tools)))


def reject(
    code: str, problems: list[str], proto: Any, ctx: Context | None, raw: Any, tool: str | None = None
) -> Rejection:
    """A Rejection with reason `code` whose observation lists `problems` (at most 6) and shows a correct call
    of `tool` (when it is one of the protocol's, else the tool the model most likely needs now)."""
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
    return Rejection(reason=code, observation=obs, raw=raw if isinstance(raw, str) else short(raw, 200))
