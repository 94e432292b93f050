"""VimRAG's protocol: a DAG memory, in the official demo's exact context layout.

The layout follows `demo/vimrag_agent.py` and `demo/vimrag_utils.py` of the VimRAG demo (the protocol table in
docs/protocols.md and tests/agent/golden/vimrag.txt give the line ranges each part follows):

1. The context is rebuilt only after a memorize step (and at the start): a system message, then one user
   turn holding the user prompt (question and action graph as JSON) and, once something is memorized, the
   Multimodal Memory section: its header, then per node `Node: <id>` followed by its kept images, bare.
2. A search appends three turns: the assistant's reply, a user turn with the results wrapped in
   `<tool_response>` (texts, then pictures, then videos, each labelled `Text k:` / `Picture k:` /
   `Video k:`, numbered afresh for every response), and a user turn with the summary prompt.
3. The next call must memorize (or answer): a second search before memorizing is refused.
4. Memorize keeps only useful pictures and videos (a video only the sampled frames its key timestamps
   name, matched to 0.1 s); energy and allocation see nothing else (memory_graph/energy.py).
5. Pictures travel as the demo encodes them: JPEG quality 75 under 38,000 bytes (agent/media.py); results
   capped at 1,003,520 pixels, video frames at 401,408, memory at its allocated budget
   (agent/protocols/vimrag_pictures.py).

The tools and prompts are in agent/protocols/vimrag_prompts.py.

Where we knowingly differ (docs/protocols.md): crop and scale are ours (the demo has neither); they answer like
a search, with one `Picture 1` and the summary prompt. A reply that cannot be run gets the reply and a corrective
observation appended; the demo re-sends the same context. The prompts' wording is ours unless the user supplies
the official text (`--prompt-file`); `demo/vimrag_prompt.py` is not public.
"""

from __future__ import annotations

import json
from typing import Any

from agent.actions import Action
from agent.events import Event, Memorized, MemorizedItem, Scaled, SearchResults
from agent.evidence import KIND_LABEL
from agent.media import time_key
from agent.protocols.base import Protocol, cropped, fresh_id, join_text, result_rows
from agent.protocols.vimrag_pictures import in_parallel, picture, raw_view, result_cap
from agent.protocols.vimrag_prompts import COORDS, SUMMARY, SYSTEM, TOOLS, USER
from agent.state import EpisodeState
from agent.tools import ToolError
from agent.validate import Context
from memory_graph.graph import Item
from memory_graph.render import action_graph, memory_plan

# The demo's fixed framing strings (formats, not prompts): demo/vimrag_agent.py lines 134, 172 and 265-268;
# demo/vimrag_utils.py lines 80 and 252.
TOOL_RESPONSE_OPEN = "<tool_response>\nHere are the retrieved information:"
TOOL_RESPONSE_CLOSE = "\n</tool_response>"
MEMORY_HEADER = "### Multimodal Memory\nHistorical information for reference only.\n"
NODE_LABEL = "Node: {id}"
FRAME_LABEL = "<{t} seconds>"
RESPONSE_ORDER = ("text", "image", "video")  # texts, then pictures, then videos (vimrag_agent.py line 136)
ANSWER_ID = "answer"  # the demo's answer node id (vimrag_agent.py line 431)


class VimragProtocol(Protocol):
    name = "vimrag"
    order = 0
    summary = "DAG memory rebuilt after every memorize step, in the VimRAG demo's exact layout"
    syntax = "calls"
    tools = TOOLS
    PROMPTS = {"system": SYSTEM, "user": USER, "summary": SUMMARY}
    PLACEHOLDERS = {"user": ("query", "action_graph")}
    max_steps = 20  # vimrag_agent.py line 31, max_mem_steps
    memorizes = True
    labels_per_response = True

    @classmethod
    def generation_defaults(cls, thinking: bool | None = None) -> dict[str, Any]:
        """The demo's request (vimrag_agent.py lines 32, 73-85): up to 4,096 new tokens, thinking on by default and
        sent as chat_template_kwargs; temperature 0.6 and top-p 0.95 when thinking, temperature 0 otherwise."""
        thinking = True if thinking is None else thinking
        sampling = {"temperature": 0.6, "top_p": 0.95} if thinking else {"temperature": 0.0}
        return {"max_new_tokens": 4096, "thinking": thinking, **sampling}

    def default_prompt(self, key: str) -> str:
        if key == "system":  # built once per tool setting: it is asked for at every rebuild
            memo = self.__dict__.setdefault("_system_prompts", {})
            setting = (self.native_tools, self.coords)
            if setting not in memo:
                tools = (
                    ""
                    if self.native_tools
                    else "\nTools:\n" + "\n".join(json.dumps(s, ensure_ascii=False) for s in self.tool_specs()) + "\n"
                )
                memo[setting] = SYSTEM.format(tools=tools, coords=COORDS[self.coords])
            return memo[setting]
        return super().default_prompt(key)

    # -- context -------------------------------------------------------------------------------------------
    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        if st.base is None:
            st.base, st.history = self._rebuild(st), []
        return [*st.base, *st.history]

    def _rebuild(self, st: EpisodeState) -> list[dict[str, Any]]:
        """System message, then the user turn: prompt with question and action graph, then the memory."""
        cfg = st.config
        graph_json = json.dumps(action_graph(st.graph), ensure_ascii=False)
        user = self.prompt(st, "user").replace("{query}", st.question).replace("{action_graph}", graph_json)
        parts: list[dict[str, Any]] = [{"type": "text", "text": user}]
        plan = memory_plan(st.graph, **cfg.memory_budget())
        if plan:
            parts.append({"type": "text", "text": MEMORY_HEADER})
            slots = [slot for _, group in plan for slot in group]
            images = dict(zip(map(id, slots), in_parallel(lambda slot: self._memory_images(st, slot), slots)))
            for node_id, group in plan:
                parts.append({"type": "text", "text": NODE_LABEL.format(id=node_id)})
                for slot in group:
                    parts += images[id(slot)]
        messages = []
        system = self.prompt(st, "system")
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": join_text(parts)})
        return messages

    def _memory_images(self, st: EpisodeState, slot) -> list[dict[str, Any]]:
        ev = st.evidence.get(slot.item.info_id)
        if ev is None:
            return []
        try:
            if ev.kind == "video":
                frames = st.evidence.frames(ev, list(slot.item.key_timestamps))
                return [
                    picture(self.toolbox.patch, st, ev, img, st.config.max_frame_pixels, slot.per_frame, time=t)
                    for (img, _), t in zip(frames, slot.item.key_timestamps)
                ]
            return [picture(self.toolbox.patch, st, ev, raw_view(st, ev), st.config.max_image_pixels, slot.per_frame)]
        except Exception:  # noqa: BLE001 - a file gone since it was memorized: its node summary remains
            return []

    def _tool_response(self, st: EpisodeState, ids: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
        """The user turn holding fresh results, and their labels (label -> information id)."""
        labels: dict[str, str] = {}
        counts: dict[str, int] = {}
        shown = []
        for kind in RESPONSE_ORDER:
            for info_id in ids:
                ev = st.evidence.get(info_id)
                if ev is None or ev.kind != kind:
                    continue
                counts[kind] = counts.get(kind, 0) + 1
                label = f"{KIND_LABEL[kind]} {counts[kind]}"
                labels[label] = info_id
                shown.append((label, ev))
        parts: list[dict[str, Any]] = [{"type": "text", "text": TOOL_RESPONSE_OPEN}]
        for (label, _), body in zip(shown, in_parallel(lambda le: self._result_parts(st, le[1]), shown)):
            parts += [{"type": "text", "text": f"{label}:"}, *body]
        parts.append({"type": "text", "text": TOOL_RESPONSE_CLOSE})
        return {"role": "user", "content": join_text(parts)}, labels

    def _result_parts(self, st: EpisodeState, ev) -> list[dict[str, Any]]:
        """One result's content: its text, its picture, or its sampled frames each after its time."""
        if ev.kind == "text":
            return [{"type": "text", "text": ev.text}]
        try:
            if ev.kind == "video":
                parts = []
                times = st.evidence.sampled_times(ev)
                for (img, _), t in zip(st.evidence.frames(ev, times), times):
                    parts.append({"type": "text", "text": FRAME_LABEL.format(t=time_key(t))})
                    parts.append(picture(self.toolbox.patch, st, ev, img, st.config.max_frame_pixels, time=t))
                return parts
            return [picture(self.toolbox.patch, st, ev, raw_view(st, ev), result_cap(self.toolbox, st, ev))]
        except Exception as e:  # noqa: BLE001 - a vanished or broken file must not end the episode
            return [{"type": "text", "text": f"(its pixels could not be loaded: {e})"}]

    # -- parsing -------------------------------------------------------------------------------------------
    def parse_context(self, st: EpisodeState) -> Context:
        info: dict[str, tuple[int, int] | None] = {}
        for node_id in sorted(st.labels, key=lambda n: st.graph.nodes[n].index if n in st.graph.nodes else 0):
            if node_id == st.pending_node:
                continue
            for label, i in st.labels[node_id].items():
                info[label] = self.box_frame(st.evidence.get(i))
        for label, i in st.labels.get(st.pending_node, {}).items():  # the current results win a shared label
            info[label] = self.box_frame(st.evidence.get(i))
        memorizable = set(st.labels.get(st.pending_node, {})) if st.pending_node else set()
        return Context(node_ids=set(st.graph.nodes), info_ids=info, memorizable=memorizable)

    # -- running a call ------------------------------------------------------------------------------------
    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        if kind == "answer":
            parents = a.get("parent_ids") or ["root"]
            node = st.graph.add_node(
                fresh_id(st.graph, ANSWER_ID) if ANSWER_ID in st.graph.nodes else ANSWER_ID, "answer", parents, ""
            )
            node.summary, node.args = a["answer"], dict(action.raw_args or a)
            return self.finish(st, a["answer"], node.id)
        if kind == "memorize":
            return self._memorize(a, st, action.raw)
        if st.pending_node:  # demo: can_search is False until the results are memorized
            return self.reject(
                st,
                f"the results of step {st.pending_node} are not memorized yet; call "
                "summarize_and_memorize first (or add_answer_node to finish)",
                action.raw,
            )
        if kind == "search":
            return self._search(action, st)
        return self._derive(kind, action, st)

    def _respond(self, st: EpisodeState, raw: str, node_id: str, ids: list[str]) -> dict[str, str]:
        """Append the reply, the tool response and the summary prompt; the results wait to be memorized."""
        response, labels = self._tool_response(st, ids)
        st.history += [
            {"role": "assistant", "content": raw},
            response,
            {"role": "user", "content": self.prompt(st, "summary")},
        ]
        st.labels[node_id] = labels
        st.pending, st.pending_node, st.feedback = ids, node_id, ""
        return {i: label for label, i in labels.items()}

    def _search(self, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        image_id = self._resolve(st, a["image"], a.get("parent_ids")) if a.get("image") else ""
        # retrieval first: a search that fails adds no node, so it shifts no energy (in the demo a step joins
        # the graph only when memorized, vimrag_agent.py lines 417-423, and a failed search changes nothing)
        found = self.toolbox.search(st, a["id"], a.get("query", ""), image_id, a.get("bbox"))
        node = st.graph.add_node(a["id"], "search", a.get("parent_ids") or ["root"], a.get("query", ""))
        node.args = dict(action.raw_args or a)
        ids = [e.info_id for e in found]
        shown = self._respond(st, action.raw, node.id, ids)
        return [
            SearchResults(
                st.step,
                node_id=node.id,
                query=node.query,
                by_image=a.get("image", ""),
                results=result_rows(st, ids, shown),
            )
        ]

    def _memorize(self, a: dict, st: EpisodeState, raw: str) -> list[Event]:
        if not st.pending_node:
            return self.reject(st, "there are no fresh results to memorize; call add_search_node first", raw)
        node, labels = st.graph.nodes[st.pending_node], st.labels.get(st.pending_node, {})
        node.summary = a.get("summarize", "")
        rows = []
        for m in a.get("memorize", []):
            ev = st.evidence.get(labels.get(m["information_id"], ""))
            if ev is None:
                continue
            times = []
            if ev.kind == "video":  # keep the sampled frames the timestamps name, to 0.1 s (the demo's match)
                sampled = {time_key(t): t for t in st.evidence.sampled_times(ev)}
                times = [sampled[time_key(t)] for t in m.get("key_timestamp") or [] if time_key(t) in sampled]
            item = Item(
                info_id=ev.info_id,
                unit_uid=ev.unit.uid,
                modality=ev.unit.modality,
                priority=int(m["priority_score"]),
                useful=bool(m["is_useful"]),
                summary=(node.summary or ev.text)[:300],
                key_timestamps=times,
                crop_box=ev.crop_box,
                source=ev.citation(),
            )
            node.items.append(item)
            rows.append(
                MemorizedItem(
                    info_id=ev.info_id,
                    label=m["information_id"],
                    citation=ev.citation(),
                    priority=item.priority,
                    useful=item.useful,
                    in_memory=item.in_memory,
                    key_timestamps=item.key_timestamps,
                )
            )
        st.pending, st.pending_node, st.feedback = [], "", ""
        st.base = None  # demo: need_update_context, the next turn starts from a rebuilt context
        return [Memorized(st.step, node_id=node.id, summary=node.summary, items=rows)]

    def _resolve(self, st: EpisodeState, label: str, parents: list[str] | None) -> str:
        """The information id behind a label: in the results of the first parent when it has results, else in
        the latest results."""
        for node_id in [*(parents or [])[:1], *sorted(st.labels, key=lambda n: -st.graph.nodes[n].index)]:
            if label in st.labels.get(node_id, {}):
                return st.labels[node_id][label]
        raise ToolError(f"no result is labelled {label!r}; name a picture of a tool response, e.g. 'Picture 1'")

    def _derive(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        a, g = action.args, st.graph
        src = self.toolbox.image_evidence(st, self._resolve(st, a["image"], a.get("parent_ids")))
        parents = a.get("parent_ids") or [src.node_id if src.node_id in g.nodes else "root"]
        node_id = a.get("id") or fresh_id(g, kind)
        if kind == "crop":
            ev, box = self.toolbox.crop(st, src.info_id, a["bbox"], node_id)  # validated before the node exists
            node = g.add_node(node_id, "crop", parents, f"crop {a['image']} {list(a['bbox'])}")
            event: Event = cropped(st, node.id, ev, src.info_id, a["bbox"], box)
        else:
            ev = self.toolbox.scale(st, src.info_id, float(a["factor"]), node_id)
            node = g.add_node(node_id, "scale", parents, f"scale {a['image']} x{a['factor']}")
            event = Scaled(
                st.step,
                node_id=node.id,
                info_id=ev.info_id,
                source_info_id=src.info_id,
                factor=float(a["factor"]),
                pixels=self.toolbox.budget(st, ev)[0],
                citation=ev.citation(),
            )
        node.args = {"id": node.id, **dict(action.raw_args or a)}
        self._respond(st, action.raw, node.id, [ev.info_id])
        return [event]

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        events = super().reject(st, message, raw)
        st.history += [{"role": "assistant", "content": raw}, {"role": "user", "content": message}]
        return events
