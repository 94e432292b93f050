"""MemAgent's overwritten memory (BytedTsinghua-SIA/MemAgent, `recurrent/impls/memory.py`), as a baseline.

MemAgent reads a long context one chunk at a time. For each chunk the model gets one fresh user turn holding the
problem, its current memory and the chunk, and its whole reply becomes the new memory (overwritten, never
appended); after the last chunk one more turn answers from the problem and the memory alone, in `\\boxed{}`.
Exact to the published code (tests/agent/golden/memagent.txt cites the lines):

1. Every call is one user turn with no history and no system message of ours (memory.py lines 150-156;
   async_memory.py lines 123-129): the update turn lays out `<problem> `, the question, `</problem>`,
   `<memory>`, the memory, `</memory>`, `<section>`, the chunk, `</section>` and `Updated memory:` as its
   TEMPLATE does (memory.py lines 115-130); the final turn the problem and memory blocks and `Your answer:`
   (TEMPLATE_FINAL_BOXED, lines 132-143).
2. The first memory is `No previous memory` (memory.py lines 161, 197, 222); a reply replaces it whole, the text
   after its last `</think>` when it thinks (taskutils/memory_eval/utils/recurrent.py line 80), and an empty
   reply leaves `No previous memory` (async_memory.py line 126).
3. The answer is the last `\\boxed{...}` of the final reply (verl/utils/reward_score/hotpotqa.py lines 1-16).

MemAgent has no search tool: it is given the context. Here the context arrives as one search for the question,
its top `vanilla_k` results best first, and each result is one chunk (MemAgent cuts 5,000-token chunks from one
document): a text result as its text, a picture as the image itself inside `<section>` and a clip as its
sampled frames (the VimRAG paper's visual setting; MemAgent is text-only), each after a line naming its source.
The instruction sentences are ours; `--prompt-file` with `update` and `final` templates (placeholders
`{prompt}`, `{memory}`, `{chunk}`) supplies theirs. An answer without a box is taken whole.
"""

from __future__ import annotations

import re
from typing import Any

from agent.actions import Action
from agent.events import Event
from agent.protocols import schema as S
from agent.protocols.base import Protocol, chain, join_text, remember
from agent.rejections import Rejection
from agent.state import EpisodeState
from agent.toolbox import TEXT_EXCERPT

NO_MEMORY = "No previous memory"  # memory.py line 161: the memory before the first chunk
BLOCKS = "<problem> \n{prompt}\n</problem>\n\n<memory>\n{memory}\n</memory>\n\n"  # memory.py lines 117-123
UPDATE = (
    "You are given a problem, the memory you have written so far, and one more piece of evidence that may help "
    "answer it. Write the updated memory: keep what the old memory holds that matters for the problem, and add "
    "what the new evidence tells about it.\n\n" + BLOCKS + "<section>\n{chunk}\n</section>\n\nUpdated memory:\n"
)
FINAL = (
    "You are given a problem and the memory you wrote while reading the evidence. Answer the problem from the "
    "memory, and put the answer in \\boxed{{}}.\n\n" + BLOCKS + "Your answer:\n"
)
_BOXED = re.compile(r"\\boxed\{")

TOOLS = {  # not tool calls: what each reply is, for validation, rewards and the UI
    "update_memory": S.tool(
        "memorize", "The reply to an update turn: the whole new memory.", {"memory": S.text("the memory")}, ["memory"]
    ),
    "answer": S.tool(
        "answer", "The final reply: the answer in \\boxed{}.", {"answer": S.text("the answer")}, ["answer"]
    ),
}


def boxed(reply: str) -> str:
    """The content of the last `\\boxed{...}` (braces balanced), else the reply stripped.

    >>> boxed("So the answer is \\\\boxed{12 customers}."), boxed("\\\\boxed{a} then \\\\boxed{{x}}"), boxed(" 12 ")
    ('12 customers', '{x}', '12')
    """
    starts = [m.end() for m in _BOXED.finditer(reply or "")]
    if not starts:
        return (reply or "").strip()
    i = starts[-1]
    depth, j = 1, i
    while j < len(reply) and depth:
        depth += {"{": 1, "}": -1}.get(reply[j], 0)
        j += 1
    return reply[i : j - 1 if depth == 0 else j].strip()


def after_think(reply: str) -> str:
    """The reply after its last `</think>`, stripped (recurrent.py line 80); the memory a thinking model writes."""
    return (reply or "").rsplit("</think>", 1)[-1].strip()


class MemAgentProtocol(Protocol):
    name = "memagent"
    order = 4
    summary = "MemAgent's overwritten memory: one result a turn updates one memory, then an answer from it (baseline)"
    syntax = "answer"
    tools = TOOLS
    PROMPTS = {"update": UPDATE, "final": FINAL}
    PLACEHOLDERS = {"update": ("prompt", "memory", "chunk"), "final": ("prompt", "memory")}
    main_prompt = "update"
    max_steps = 12  # vanilla_k (5) updates and the answer, with room for empty replies
    reads_in_chunks = True

    @classmethod
    def generation_defaults(cls, thinking: bool | None = None) -> dict[str, Any]:
        """MemAgent's evaluation sampling (taskutils/memory_eval/ruler_hqa.py line 53, run.py line 278): temperature
        0.7, top-p 0.95, at most 1,024 new tokens a call (the memory's length cap in training too)."""
        out = {"max_new_tokens": 1024, "temperature": 0.7, "top_p": 0.95}
        return out | ({"thinking": thinking} if thinking is not None else {})

    @classmethod
    def format_call(cls, name: str, args: dict, think: str = "") -> str:
        lead = f"<think>{think}</think>\n" if think else ""
        return lead + (args["memory"] if name == "update_memory" else f"\\boxed{{{args['answer']}}}")

    # -- context -------------------------------------------------------------------------------------------
    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        notes = st.notes
        if "chunks" not in notes:  # the evidence: one search for the question, each result one chunk
            ids = [e.info_id for e in self.toolbox.search(st, "search1", st.question, k=st.config.vanilla_k)]
            node = st.graph.add_node("search1", "search", ["root"], st.question)
            remember(st, node.id, ids)
            notes.update(chunks=ids, read=0, memory=NO_MEMORY)
        filled = {"prompt": st.question, "memory": notes["memory"]}
        if notes["read"] < len(notes["chunks"]):
            head, tail = self.prompt(st, "update").split("{chunk}", 1)
            chunk = self._chunk(st, notes["chunks"][notes["read"]])
            parts = [{"type": "text", "text": _fill(head, filled)}, *chunk, {"type": "text", "text": tail}]
        else:
            parts = [{"type": "text", "text": _fill(self.prompt(st, "final"), filled)}]
        return [{"role": "user", "content": join_text(parts)}]

    def _chunk(self, st: EpisodeState, info_id: str) -> list[dict[str, Any]]:
        """One result as a section: a line naming its source, then its text, its picture or its clip's frames."""
        ev = st.evidence.get(info_id)
        if ev.kind == "text":
            return [{"type": "text", "text": f"{ev.citation()}\n{ev.text[:TEXT_EXCERPT]}"}]
        parts = self.toolbox.show(st, [info_id])  # a label line, then the pixels (or why there are none)
        if len(parts) == 1:
            return [{"type": "text", "text": f"{ev.citation()}\n{parts[0]['text']}"}]
        return [{"type": "text", "text": f"{ev.citation()}\n"}, *parts[1:]]

    # -- a reply -------------------------------------------------------------------------------------------
    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        notes = st.notes
        if notes.get("read", 0) < len(notes.get("chunks", [])):
            return Action(name="update_memory", args={"memory": after_think(text) or NO_MEMORY}, raw=text)
        answer = boxed(after_think(text))
        if not answer:
            return Rejection(
                reason="empty_answer", observation="The reply held no answer; give it in \\boxed{}.", raw=text
            )
        return Action(name="answer", args={"answer": answer}, raw=text)

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        notes = st.notes
        if kind == "memorize":
            notes["memory"] = action.args["memory"]
            notes["read"] += 1
            node = chain(st, "memory", f"read {notes['chunks'][notes['read'] - 1]}")
            node.summary = notes["memory"][:300]
            return []
        return self.finish_chain(st, action.args["answer"])


def _fill(template: str, values: dict[str, str]) -> str:
    """`template` with {prompt} and {memory} replaced and {{ }} unescaped, as str.format would, without reading
    any other brace (a question or a memory may hold some)."""
    template = template.replace("{{", "{").replace("}}", "}")
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template
