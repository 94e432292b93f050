"""What every protocol is made of, and the pieces they share.

A protocol owns, in its one module: its prompts (`PROMPTS`, our wording, each replaceable by the user's file),
its tools (`tools`, JSON Schemas with an "x-kind"), its reply syntax (`syntax`: "calls" for Qwen tool calls,
"tags" for VRAG-RL's tags, "answer" for a bare answer), how it builds the model's context each turn
(`context`), how it runs a parsed call (`execute`), and its limits (`max_steps`). Its capabilities are
attributes the rest of the code reads instead of the protocol's name:

- `memorizes`: memory is selective (the model chooses what to keep), so "kept evidence" means memorized;
- `labels_per_response`: result labels ("Picture 1") restart with every tool response, as in the VimRAG demo;
- `single_image`: each search shows one new picture and crops apply to the latest one (VRAG-RL);
- `one_shot`: one answer call, no tools (the vanilla baseline);
- `reads_in_chunks`: each call reads one result into a memory it rewrites, the last answers from it (memagent);
- `folds`: the history folds into text memories and the episode goes on from them (fold).

Each `execute` returns the events it caused; the loop yields them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from agent.actions import Action, parse, parse_many
from agent.backends.base import DEFAULT_GENERATION
from agent.call_format import format_call, format_vrag
from agent.events import AnswerEvent, Citation, Cropped, ErrorEvent, Event, SearchHit
from agent.protocols.schema import specs
from agent.rejections import Rejection
from agent.state import EpisodeState
from agent.toolbox import Toolbox
from agent.tools import ToolError
from agent.validate import Context
from memory_graph.graph import GraphError, Item


class Protocol:
    name: ClassVar[str] = ""
    order: ClassVar[int] = 99  # position in menus and listings
    summary: ClassVar[str] = ""  # one line for --help and the UI
    syntax: ClassVar[str] = "calls"
    tools: ClassVar[dict[str, dict]] = {}
    PROMPTS: ClassVar[dict[str, str]] = {}  # prompt name -> our default text
    PLACEHOLDERS: ClassVar[dict[str, tuple[str, ...]]] = {}  # prompt name -> placeholders it must contain
    main_prompt: ClassVar[str] = "system"  # where a plain prompt file goes by default
    max_steps: ClassVar[int] = 20
    memorizes: ClassVar[bool] = False
    labels_per_response: ClassVar[bool] = False
    single_image: ClassVar[bool] = False
    one_shot: ClassVar[bool] = False
    reads_in_chunks: ClassVar[bool] = False  # each call reads one result into a memory it rewrites (memagent)
    folds: ClassVar[bool] = False  # the history folds into text memories (fold)
    max_calls: ClassVar[int] = 1  # tool calls run from one reply (the published protocols take one per turn)

    def __init__(self, tools: Toolbox, native_tools: bool = False) -> None:
        self.toolbox = tools
        self.native_tools = native_tools  # the tools travel in the API's `tools` field, not in the prompt

    # -- prompts and tools -------------------------------------------------------------------------------
    @property
    def coords(self) -> str:
        return self.toolbox.coords

    def tool_specs(self) -> list[dict]:
        return specs(self.tools, self.coords)

    def prompt(self, st: EpisodeState, key: str) -> str:
        """The user's text for prompt `key` when given (AgentConfig.prompts), else ours."""
        given = st.config.prompts.get(key)
        return given if given is not None else self.default_prompt(key)

    def default_prompt(self, key: str) -> str:
        return self.PROMPTS.get(key, "")

    @classmethod
    def format_call(cls, name: str, args: dict, think: str = "") -> str:
        """The canonical text of a call in this protocol's syntax (for scripted and embedded policies)."""
        if cls.syntax == "tags":
            return format_vrag(name, args, think)
        if cls.syntax == "answer":
            return f"<answer>{args['answer']}</answer>"
        return format_call(name, args, think)

    @classmethod
    def tool_named(cls, kind: str) -> str | None:
        """This protocol's tool of a kind (search, memorize, crop, scale, answer), or None."""
        return next((n for n, t in cls.tools.items() if t.get("x-kind") == kind), None)

    @classmethod
    def write(cls, kind: str, args: dict, think: str = "") -> str:
        """A call of this protocol's tool of `kind`, in its syntax."""
        name = cls.tool_named(kind)
        if name is None:
            raise ValueError(f"protocol {cls.name} has no {kind} tool")
        return cls.format_call(name, args, think)

    @classmethod
    def generation_defaults(cls, thinking: bool | None = None) -> dict[str, Any]:
        """The sampling settings the published code uses with this protocol, before the user's overrides
        (agent/backends/base.py `generation_settings`)."""
        return dict(DEFAULT_GENERATION)

    # -- one turn ------------------------------------------------------------------------------------------
    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        raise NotImplementedError

    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        return parse(text, self, self.parse_context(st))

    def parse_calls(self, text: str, st: EpisodeState) -> list[Action] | Rejection:
        """The reply's calls to run: one, or up to `max_calls` where the protocol takes several per turn."""
        if self.max_calls > 1:
            return parse_many(text, self, self.parse_context(st), self.max_calls)
        action = self.parse(text, st)  # a protocol may read its replies its own way
        return action if isinstance(action, Rejection) else [action]

    def execute_many(self, actions: list[Action], st: EpisodeState) -> list[Event]:
        """Run a reply's calls; a protocol with `max_calls` > 1 overrides this to run several."""
        if len(actions) != 1:
            raise ValueError(f"the {self.name} protocol runs one call per turn, got {len(actions)}")
        return self.execute(actions[0], st)

    def parse_context(self, st: EpisodeState) -> Context:
        info = {i: self.box_frame(ev) for i, ev in st.evidence.by_id.items()}
        return Context(
            node_ids=set(st.graph.nodes),
            info_ids=info,
            memorizable=set(st.pending),
            current_image=st.last_image or None,
        )

    def box_frame(self, ev) -> tuple[int, int] | None:
        """The (w, h) frame a box on `ev` is checked against: its size as seen, or 1000x1000 for a model that
        grounds in 0..1000; None for items without pixels."""
        if ev.kind != "image":
            return None
        return (1000, 1000) if self.coords == "relative" else ev.seen_size

    def execute(self, action: Action, st: EpisodeState) -> list[Event]:
        """Run a parsed call; a tool or graph error goes back to the model as a rejection."""
        try:
            return self.run(self.tools[action.name]["x-kind"], action, st)
        except (GraphError, ToolError) as e:
            return self.reject(st, str(e), action.raw)

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        """Run a call of the tool of `kind` (search, memorize, crop, scale, answer)."""
        raise NotImplementedError

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        """A malformed reply or failed tool: tell the model what went wrong, carry on."""
        st.feedback = message
        return [ErrorEvent(st.step, message=message, raw=raw[:2000])]

    def finish_chain(self, st: EpisodeState, answer: str) -> list[Event]:
        """End a linear episode: an answer node after the newest one, holding the answer."""
        node = chain(st, "answer")
        node.summary = answer
        return self.finish(st, answer, node.id)

    def finish(self, st: EpisodeState, answer: str, node_id: str = "") -> list[Event]:
        st.answer, st.answer_node, st.done = answer.strip(), node_id, True
        return [AnswerEvent(st.step, text=st.answer, node_id=node_id, citations=citations(st), support=st.support)]


# ------------------------------------------------------------------------------------------ shared pieces
def citations(st: EpisodeState) -> list[Citation]:
    """The evidence an answer rests on: memorized items on the answer's ancestry, else what was seen."""
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
        out.append(Citation(i, ev.citation(), u.source, u.page, ev.crop_box, u.start, u.end, u.modality, u.uid))
    return out


def result_rows(st: EpisodeState, ids: list[str], labels: dict[str, str] | None = None) -> list[SearchHit]:
    """SearchResults rows; `labels` maps an information id to the label the model saw, when they differ."""
    rows = []
    for i in ids:
        ev = st.evidence.get(i)
        rows.append(
            SearchHit(
                info_id=i,
                label=(labels or {}).get(i, i),
                uid=ev.unit.uid,
                citation=ev.citation(),
                modality=ev.unit.modality,
                score=round(ev.score, 4),
                source=ev.unit.source,
            )
        )
    return rows


def cropped(st: EpisodeState, node_id: str, ev, source_id: str, bbox_seen, bbox_raw) -> Cropped:
    return Cropped(
        st.step,
        node_id=node_id,
        info_id=ev.info_id,
        source_info_id=source_id,
        bbox_seen=list(bbox_seen),
        bbox_raw=list(bbox_raw),
        citation=ev.citation(),
    )


def fresh_id(graph, prefix: str) -> str:
    n = 1
    while f"{prefix}{n}" in graph.nodes:
        n += 1
    return f"{prefix}{n}"


def last_node(st: EpisodeState) -> str:
    return max(st.graph.nodes.values(), key=lambda n: n.index).id


def chain(st: EpisodeState, kind: str, label: str = "", node_id: str = ""):
    """A new `kind` node after the newest one (linear protocols keep a path); `node_id` when already chosen."""
    return st.graph.add_node(node_id or fresh_id(st.graph, kind), kind, [last_node(st)], label)


def remember(st: EpisodeState, node_id: str, ids: list[str]) -> None:
    """Linear protocols keep everything: the graph records it as a chain with every result memorized."""
    node = st.graph.nodes[node_id]
    for i in ids:
        ev = st.evidence.get(i)
        node.items.append(
            Item(
                info_id=i,
                unit_uid=ev.unit.uid,
                modality=ev.unit.modality,
                priority=3,
                summary=ev.text[:300],
                crop_box=ev.crop_box,
                source=ev.citation(),
            )
        )


def strip_answer(text: str) -> str:
    """The answer part of a free-form reply: inside <answer> tags when present, without <think>."""
    text = re.sub(r"<think>.*?(</think>|$)", "", text or "", flags=re.S)
    m = re.search(r"<answer>(.*?)(</answer>|$)", text, flags=re.S)
    return (m.group(1) if m else text).strip()


def join_text(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A content list that is all text becomes one string, as the demo sends it (vimrag_utils.py lines 144-145)."""
    if all(p.get("type") == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts
