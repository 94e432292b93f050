"""ReAct, the linear baseline: vimrag's tools in a growing history where every image shown stays in context.

The context is a system message, `Question: ...`, then (reply, observation) pairs. Results are labelled with
episode-wide information ids ("Picture 3") and shown at up to 512*28*28 pixels each. Crops and zooms chain
after the last step, so the graph is a path and every result counts as kept.
"""

from __future__ import annotations

import json
from typing import Any

from agent.actions import Action
from agent.events import ErrorEvent, Event, Scaled, SearchResults
from agent.protocols import schema as S
from agent.protocols.base import Protocol, chain, cropped, fresh_id, remember, result_rows
from agent.state import EpisodeState
from agent.tools import ToolError
from memory_graph.graph import GraphError

TOOLS = {
    "search": S.tool(
        "search", "Search the corpus; the top results are shown.", {"query": S.text("the search query")}, ["query"]
    ),
    "crop": S.tool(
        "crop", "Zoom into a region of an image you have seen.", {"image": S.IMAGE, "bbox": S.BBOX}, ["image", "bbox"]
    ),
    "scale": S.tool(
        "scale",
        "Show an item you have seen again at another resolution.",
        {"image": S.ref('information id of the item, e.g. "Picture 1"', "info"), "factor": S.FACTOR},
        ["image", "factor"],
        {"scale": "factor"},
    ),
    "answer": S.tool(
        "answer", "Give the final answer. Ends the episode.", {"answer": S.text("the final answer")}, ["answer"]
    ),
}

SYSTEM = """You answer questions about a collection of documents, images and videos by using tools.
Each turn, think briefly inside <think>...</think>, then make exactly one tool call:
<tool_call>{{"name": "<tool>", "arguments": {{...}}}}</tool_call>
{tools}
Search until you have the evidence, crop to read details ({coords}), then call answer with a short answer
("Not answerable" if the collection does not contain it).
"""
COORDS = {
    "absolute": "bbox in pixels of the image as you see it",
    "relative": "bbox from 0 to 1000 of the image's width and height",
}


class ReactProtocol(Protocol):
    name = "react"
    order = 2
    summary = "the same tools in a linear, growing history (baseline)"
    syntax = "calls"
    tools = TOOLS
    PROMPTS = {"system": SYSTEM}
    max_steps = 20
    max_calls = 4  # a reply (or a native tool_calls array) may carry several calls: they all run, searches at once

    def default_prompt(self, key: str) -> str:
        tools = (
            ""
            if self.native_tools
            else "\nTools:\n" + "\n".join(json.dumps(s, ensure_ascii=False) for s in self.tool_specs()) + "\n"
        )
        return SYSTEM.format(tools=tools, coords=COORDS[self.coords])

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": self.prompt(st, "system")},
            {"role": "user", "content": [{"type": "text", "text": f"Question: {st.question}"}]},
            *st.history,
        ]

    def observe(self, st: EpisodeState, raw: str, parts: list[dict[str, Any]]) -> None:
        st.history.append({"role": "assistant", "content": raw})
        st.history.append({"role": "user", "content": parts or [{"type": "text", "text": "(no result)"}]})

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        events = super().reject(st, message, raw)
        self.observe(st, raw, [{"type": "text", "text": f"Observation: {message}"}])
        return events

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        if kind == "answer":
            return self.finish_chain(st, action.args["answer"])
        events, parts = self._act(kind, action, st)
        self.observe(st, action.raw, parts)
        return events

    def execute_many(self, actions: list[Action], st: EpisodeState) -> list[Event]:
        """Several calls of one reply: their searches run at once (`Toolbox.prefetch`, unless
        `parallel_calls` is off), then every call is applied in the order written, and one observation shows
        all their results in that order, so what the model sees does not depend on which search finished first.
        A call that fails shows its error in its place; the others still run."""
        if len(actions) == 1:
            return self.execute(actions[0], st)
        if st.config.parallel_calls:
            self.toolbox.prefetch(st, [a.args["query"] for a in actions if self.tools[a.name]["x-kind"] == "search"])
        events: list[Event] = []
        parts: list[dict[str, Any]] = [{"type": "text", "text": f"Note: {w}"} for w in actions[0].warnings]
        try:
            for i, action in enumerate(actions, start=1):
                try:
                    evs, shown = self._act(self.tools[action.name]["x-kind"], action, st)
                except (GraphError, ToolError) as e:
                    evs = [ErrorEvent(st.step, message=str(e), raw=action.raw[:2000])]
                    shown = [{"type": "text", "text": f"Observation (call {i}, {action.name}): {e}"}]
                events += evs
                parts += shown
        finally:
            self.toolbox.forget_prefetched()
        self.observe(st, actions[0].raw, parts)
        return events

    def _act(self, kind: str, action: Action, st: EpisodeState) -> tuple[list[Event], list[dict[str, Any]]]:
        """Apply one search, crop or scale: (its events, what the observation shows of it)."""
        a = action.args
        if kind == "search":
            node_id = fresh_id(st.graph, "search")
            ids = [e.info_id for e in self.toolbox.search(st, node_id, a["query"])]  # a failed search adds no node
            node = chain(st, "search", a["query"], node_id)
            remember(st, node.id, ids)
            shown = self.toolbox.show(st, ids, header=f"Results for {a['query']!r}:")
            return [SearchResults(st.step, node_id=node.id, query=a["query"], results=result_rows(st, ids))], shown
        node_id = fresh_id(st.graph, kind)
        if kind == "crop":
            ev, box = self.toolbox.crop(st, a["image"], a["bbox"], node_id)
            event: Event = cropped(st, node_id, ev, a["image"], a["bbox"], box)
        else:
            ev = self.toolbox.scale(st, a["image"], float(a["factor"]), node_id)
            event = Scaled(
                st.step,
                node_id=node_id,
                info_id=ev.info_id,
                source_info_id=a["image"],
                factor=float(a["factor"]),
                pixels=self.toolbox.budget(st, ev)[0],
                citation=ev.citation(),
            )
        chain(st, kind, f"{kind} {a['image']}", node_id)
        remember(st, node_id, [ev.info_id])
        return [event], self.toolbox.show(st, [ev.info_id])
