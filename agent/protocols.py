"""The four protocols: how each builds the model's context, reads its reply, and runs the chosen tool.

- vimrag: DAG memory. The context is rebuilt every turn from the graph (question + action graph JSON +
  Multimodal Memory at energy-allocated resolution), plus the current observation. Crop and scale make
  child nodes. (VimRAG; DESIGN.md 4.1-4.2)
- react: the same tools in a linear, growing history; every image ever shown stays in context.
- vrag: VRAG-RL's tags (<search>, <bbox>, <answer>) in a linear history, one new page per search.
- vanilla: the top-k pages in context and one answer.
Each `execute` returns the events it caused; the loop yields them.
"""

from __future__ import annotations

import re
from typing import Any

from agent.actions import Action, Context, Rejection, parse
from agent.events import (AnswerEvent, Cropped, ErrorEvent, Event, Memorized, Scaled, SearchResults)
from agent.prompts import system_prompt
from agent.state import EpisodeState
from agent.toolbox import Toolbox
from agent.tools import ToolError
from memory_graph.energy import allocate
from memory_graph.graph import GraphError, Item
from memory_graph.render import render_messages

VRAG_MIN_PIXELS, VRAG_MAX_PIXELS = 256 * 28 * 28, 512 * 28 * 28  # VRAG-RL's image range (DESIGN.md 4.1)


class Protocol:
    name = ""

    def __init__(self, tools: Toolbox) -> None:
        self.tools = tools

    def system(self, st: EpisodeState) -> str:
        return system_prompt(self.name, st.config.system_prompt)

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        raise NotImplementedError

    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        return parse(text, self.name, self.parse_context(st))

    def parse_context(self, st: EpisodeState) -> Context:
        info = {i: (ev.seen_size if ev.kind == "image" else None) for i, ev in st.evidence.by_id.items()}
        return Context(node_ids=set(st.graph.nodes), info_ids=info, memorizable=set(st.pending),
                       current_image=st.last_image or None)

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        raise NotImplementedError

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        """A malformed reply or failed tool: tell the model what went wrong, carry on."""
        st.feedback = message
        return [ErrorEvent(st.step, message=message, raw=raw[:2000])]

    # shared by all: the answer and what it cites
    def finish(self, st: EpisodeState, answer: str, node_id: str = "") -> list[Event]:
        st.answer, st.answer_node, st.done = answer.strip(), node_id, True
        return [AnswerEvent(st.step, text=st.answer, node_id=node_id, citations=citations(st))]


def citations(st: EpisodeState) -> list[dict[str, Any]]:
    """The evidence an answer rests on: memorized items on the answer's ancestry (vimrag), else what was seen."""
    ids: list[str] = []
    g = st.graph
    if st.answer_node and st.answer_node in g.nodes:
        # nearest first: the answer's parents, then theirs (breadth-first up the DAG); higher priority first
        order, frontier, seen = [], list(g.nodes[st.answer_node].parents), set()
        while frontier:
            order += [n for n in frontier if n not in seen]
            seen.update(frontier)
            frontier = [p for n in frontier for p in g.nodes[n].parents if p not in seen]
        for nid in order:
            ids += [it.info_id for it in sorted(g.nodes[nid].items, key=lambda i: -i.priority) if it.useful]
    if not ids:
        ids = [it.info_id for _, it in g.items() if it.useful] or list(st.evidence.by_id)[:5]
    out = []
    for i in dict.fromkeys(ids):
        ev = st.evidence.get(i)
        if ev is None:
            continue
        u = ev.unit
        out.append({"info_id": i, "citation": ev.citation(), "file": u.source, "page": u.page,
                    "bbox": ev.crop_box, "start": u.start, "end": u.end, "modality": u.modality, "uid": u.uid})
    return out


def _result_rows(st: EpisodeState, ids: list[str]) -> list[dict[str, Any]]:
    rows = []
    for i in ids:
        ev = st.evidence.get(i)
        rows.append({"info_id": i, "uid": ev.unit.uid, "citation": ev.citation(), "modality": ev.unit.modality,
                     "score": round(ev.score, 4), "source": ev.unit.source})
    return rows


# ------------------------------------------------------------------------------------------ vimrag
class VimragProtocol(Protocol):
    name = "vimrag"

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        cfg = st.config
        tail: list[dict[str, Any]] = []
        if st.feedback:
            tail.append({"type": "text", "text": f"Observation: {st.feedback}"})
        if st.pending:
            # fresh results take at most half the budget; memory gets the rest, so the total stays bounded
            share = min(cfg.obs_pixels, cfg.s_total // (2 * len(st.pending)))
            tail += self.tools.show(st, st.pending, share,
                                    header=f"## Results of node {st.pending_node} (memorize the useful ones)")
        tail_pixels = sum(p["image"].width * p["image"].height for p in tail if p.get("type") == "image")

        def images(item: Item):
            return st.evidence.images_for(item.info_id, item.key_timestamps)

        rendered = render_messages(st.graph, self.system(st), images, tail=tail,
                                   k=cfg.memory_k, s_total=max(0, cfg.s_total - tail_pixels),
                                   max_image=cfg.max_image_pixels, max_frame=cfg.max_frame_pixels,
                                   patch=self.tools.patch, lam=cfg.lam, gamma=cfg.gamma, cache=st.resize_cache)
        for img in rendered.images:  # crops name coordinates in the view the model has now
            ev = st.evidence.get(img.get("ref", ""))
            if ev is not None and ev.kind == "image":
                ev.seen_size = (img["width"], img["height"])
        return rendered.messages

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        a, g = action.args, st.graph
        st.feedback = ""
        try:
            if action.name == "add_search_node":
                node = g.add_node(a["id"], "search", a.get("parent_ids") or ["root"], a.get("query", ""))
                ids = [e.info_id for e in self.tools.search(st, node.id, a.get("query", ""), a.get("image", ""),
                                                            a.get("bbox"))]
                st.pending, st.pending_node = ids, node.id
                if not ids:
                    st.feedback = "the search found nothing; try other words"
                return [SearchResults(st.step, node_id=node.id, query=node.query, by_image=a.get("image", ""),
                                      results=_result_rows(st, ids))]
            if action.name == "summarize_and_memorize":
                return self._memorize(a, st)
            if action.name in ("crop", "scale"):
                return self._derive(action.name, a, st)
            if action.name == "add_answer_node":
                node = g.add_node(_fresh_id(g, "answer"), "answer", a.get("parent_ids") or ["root"], "")
                node.summary = a["answer"]
                return self.finish(st, a["answer"], node.id)
        except (GraphError, ToolError) as e:
            return self.reject(st, str(e), action.raw)
        return self.reject(st, f"tool {action.name!r} is not available in this protocol", action.raw)

    def _memorize(self, a: dict, st: EpisodeState) -> list[Event]:
        if not st.pending_node:
            return self.reject(st, "there are no fresh results to memorize; call add_search_node, crop or "
                                   "scale first", "")
        node = st.graph.nodes[st.pending_node]
        node.summary = a.get("summarize", "")
        rows = []
        for m in a.get("memorize", []):
            ev = st.evidence.get(m["information_id"])
            if ev is None:
                continue
            item = Item(info_id=ev.info_id, unit_uid=ev.unit.uid, modality=ev.unit.modality,
                        priority=int(m.get("priority_score", 3)), useful=bool(m.get("is_useful", True)),
                        summary=(node.summary or ev.text)[:300], key_timestamps=list(m.get("key_timestamp") or []),
                        crop_box=ev.crop_box, source=ev.citation())
            node.items.append(item)
            rows.append({"info_id": ev.info_id, "citation": ev.citation(), "priority": item.priority,
                         "useful": item.useful, "key_timestamps": item.key_timestamps})
        st.pending, st.pending_node = [], ""
        return [Memorized(st.step, node_id=node.id, summary=node.summary, items=rows)]

    def _derive(self, tool: str, a: dict, st: EpisodeState) -> list[Event]:
        g = st.graph
        src = self.tools.image_evidence(st, a["image"])
        parents = a.get("parent_ids") or [src.node_id if src.node_id in g.nodes else "root"]
        node_id = a.get("id") or _fresh_id(g, tool)
        if tool == "crop":
            # validate before the node exists, so a bad box leaves the graph untouched
            ev, box = self.tools.crop(st, src.info_id, a["bbox"], node_id)
            node = g.add_node(node_id, "crop", parents, f"crop {src.info_id} {list(a['bbox'])}")
            event: Event = _cropped(st, node.id, ev, src.info_id, a["bbox"], box)
        else:
            ev = self.tools.scale(st, src.info_id, float(a["factor"]), node_id)
            node = g.add_node(node_id, "scale", parents, f"scale {src.info_id} x{a['factor']}")
            top, _ = self.tools.budget(st, ev)
            event = Scaled(st.step, node_id=node.id, info_id=ev.info_id, source_info_id=src.info_id,
                           factor=float(a["factor"]), pixels=top, citation=ev.citation())
        st.pending, st.pending_node = [ev.info_id], node.id
        return [event]


def _cropped(st: EpisodeState, node_id: str, ev, source_id: str, bbox_seen, bbox_raw) -> Cropped:
    return Cropped(st.step, node_id=node_id, info_id=ev.info_id, source_info_id=source_id,
                   bbox_seen=list(bbox_seen), bbox_raw=list(bbox_raw), citation=ev.citation())


def _fresh_id(graph, prefix: str) -> str:
    n = 1
    while f"{prefix}{n}" in graph.nodes:
        n += 1
    return f"{prefix}{n}"


# ------------------------------------------------------------------------------------- linear history
class LinearProtocol(Protocol):
    """History grows by (assistant reply, user observation) pairs; every image shown stays in context."""

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system(st)},
                {"role": "user", "content": [{"type": "text", "text": f"Question: {st.question}"}]},
                *st.history]

    def observe(self, st: EpisodeState, raw: str, parts: list[dict[str, Any]]) -> None:
        st.history.append({"role": "assistant", "content": raw})
        st.history.append({"role": "user", "content": parts or [{"type": "text", "text": "(no result)"}]})

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        self.observe(st, raw, [{"type": "text", "text": f"Observation: {message}"}])
        return [ErrorEvent(st.step, message=message, raw=raw[:2000])]

    def answer(self, st: EpisodeState, answer: str) -> list[Event]:
        node = st.graph.add_node(_fresh_id(st.graph, "answer"), "answer", [_last_node(st)])
        node.summary = answer
        return self.finish(st, answer, node.id)

    def _search_node(self, st: EpisodeState, query: str) -> str:
        node = st.graph.add_node(_fresh_id(st.graph, "search"), "search", [_last_node(st)], query)
        return node.id

    def _remember(self, st: EpisodeState, node_id: str, ids: list[str]) -> None:
        """Linear protocols keep everything: the graph records it as a chain with every result memorized."""
        node = st.graph.nodes[node_id]
        for i in ids:
            ev = st.evidence.get(i)
            node.items.append(Item(info_id=i, unit_uid=ev.unit.uid, modality=ev.unit.modality, priority=3,
                                   summary=ev.text[:300], crop_box=ev.crop_box, source=ev.citation()))


def _last_node(st: EpisodeState) -> str:
    return max(st.graph.nodes.values(), key=lambda n: n.index).id


class ReactProtocol(LinearProtocol):
    name = "react"

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        try:
            if action.name == "search":
                node_id = self._search_node(st, a["query"])
                ids = [e.info_id for e in self.tools.search(st, node_id, a["query"])]
                self._remember(st, node_id, ids)
                self.observe(st, action.raw, self.tools.show(st, ids, header=f"Results for {a['query']!r}:"))
                return [SearchResults(st.step, node_id=node_id, query=a["query"], results=_result_rows(st, ids))]
            if action.name in ("crop", "scale"):
                return self._derive(action, st)
            if action.name == "answer":
                return self.answer(st, a["answer"])
        except (GraphError, ToolError) as e:
            return self.reject(st, str(e), action.raw)
        return self.reject(st, f"tool {action.name!r} is not available in this protocol", action.raw)

    def _derive(self, action: Action, st: EpisodeState) -> list[Event]:
        a, tool = action.args, action.name
        node_id = _fresh_id(st.graph, tool)
        if tool == "crop":
            ev, box = self.tools.crop(st, a["image"], a["bbox"], node_id)
            event: Event = _cropped(st, node_id, ev, a["image"], a["bbox"], box)
        else:
            ev = self.tools.scale(st, a["image"], float(a["factor"]), node_id)
            event = Scaled(st.step, node_id=node_id, info_id=ev.info_id, source_info_id=a["image"],
                           factor=float(a["factor"]), pixels=self.tools.budget(st, ev)[0], citation=ev.citation())
        st.graph.add_node(node_id, tool, [_last_node(st)], f"{tool} {a['image']}")
        self._remember(st, node_id, [ev.info_id])
        self.observe(st, action.raw, self.tools.show(st, [ev.info_id]))
        return [event]


class VragProtocol(LinearProtocol):
    name = "vrag"

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        try:
            if action.name == "search":
                node_id = self._search_node(st, a["query"])
                hits = self.tools.search(st, node_id, a["query"])
                seen = {it.info_id for _, it in st.graph.items()}
                fresh = [e.info_id for e in hits if e.info_id not in seen][:1]  # one new page per search
                self._remember(st, node_id, fresh)
                if fresh and st.evidence.get(fresh[0]).kind == "image":
                    st.last_image = fresh[0]
                parts = self.tools.show(st, fresh, VRAG_MAX_PIXELS)
                self.observe(st, action.raw, parts or [{"type": "text", "text": "No new results were found."}])
                return [SearchResults(st.step, node_id=node_id, query=a["query"], results=_result_rows(st, fresh))]
            if action.name == "crop":
                if not st.last_image:
                    raise ToolError("there is no image to crop yet; <search> first")
                node_id = _fresh_id(st.graph, "crop")
                ev, box = self.tools.crop(st, st.last_image, a["bbox"], node_id)
                st.graph.add_node(node_id, "crop", [_last_node(st)], f"crop {st.last_image}")
                self._remember(st, node_id, [ev.info_id])
                event = _cropped(st, node_id, ev, st.last_image, a["bbox"], box)
                st.last_image = ev.info_id
                self.observe(st, action.raw, self.tools.show(st, [ev.info_id], VRAG_MAX_PIXELS))
                return [event]
            if action.name == "answer":
                return self.answer(st, a["answer"])
        except (GraphError, ToolError) as e:
            return self.reject(st, str(e), action.raw)
        return self.reject(st, f"action {action.name!r} is not available in this protocol", action.raw)


# ---------------------------------------------------------------------------------------------- vanilla
class VanillaProtocol(Protocol):
    name = "vanilla"

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        if not st.graph.children("root"):
            node = st.graph.add_node("search1", "search", ["root"], st.question)
            ids = [e.info_id for e in self.tools.search(st, node.id, st.question, k=st.config.vanilla_k)]
            st.pending, st.pending_node = ids, node.id
            for i in ids:
                ev = st.evidence.get(i)
                node.items.append(Item(info_id=i, unit_uid=ev.unit.uid, modality=ev.unit.modality, priority=3,
                                       summary=ev.text[:300], crop_box=ev.crop_box, source=ev.citation()))
        parts = [{"type": "text", "text": f"Question: {st.question}"}]
        parts += self.tools.show(st, st.pending, header="Retrieved evidence:")
        return [{"role": "system", "content": self.system(st)}, {"role": "user", "content": parts}]

    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        answer = _strip_answer(text)
        if not answer:
            return Rejection(reason="empty_answer", observation="The reply was empty; give a short answer.",
                             raw=text)
        return Action(name="answer", args={"answer": answer}, raw=text)

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        node = st.graph.add_node("answer", "answer", ["search1"])
        node.summary = action.args["answer"]
        return self.finish(st, action.args["answer"], node.id)


def _strip_answer(text: str) -> str:
    """The answer part of a free-form reply: inside <answer> tags when present, without <think>."""
    text = re.sub(r"<think>.*?(</think>|$)", "", text or "", flags=re.S)
    m = re.search(r"<answer>(.*?)(</answer>|$)", text, flags=re.S)
    return (m.group(1) if m else text).strip()


PROTOCOL_CLASSES = {c.name: c for c in (VimragProtocol, ReactProtocol, VragProtocol, VanillaProtocol)}


def make_protocol(name: str, tools: Toolbox) -> Protocol:
    if name not in PROTOCOL_CLASSES:
        raise ValueError(f"unknown protocol {name!r}; use one of {sorted(PROTOCOL_CLASSES)}")
    return PROTOCOL_CLASSES[name](tools)


def allocation_table(st: EpisodeState) -> list[dict[str, Any]]:
    """Each memorized item's energy and pixels under the current config (for the UI and traces)."""
    cfg = st.config
    rows = []
    for a in allocate(st.graph, k=cfg.memory_k, s_total=cfg.s_total, max_image=cfg.max_image_pixels,
                      max_frame=cfg.max_frame_pixels, lam=cfg.lam, gamma=cfg.gamma):
        item = st.graph.nodes[a.node_id].items[a.item_index]
        rows.append({"node_id": a.node_id, "info_id": item.info_id, "omega": round(a.omega, 4),
                     "pixels": a.pixels, "frames": a.frames, "source": item.source})
    return rows
