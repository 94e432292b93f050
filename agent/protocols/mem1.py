"""MEM1's constant-memory loop (MIT-MI/MEM1, `Mem1/inference/`), as a baseline.

MEM1 keeps no history. Each turn the model writes its internal state inside `<think>...</think>` (a summary of
everything it needs, carried forward turn to turn), then `<search>query</search>` or `<answer>...</answer>`; a
search comes back as `<information>...</information>`. The next turn sees the prompt, that last response and that
last observation, and nothing older. Exact to the published inference code (`Mem1/inference/data_pipelines.py`
= DP, `Mem1/inference/models.py` = MD; tests/agent/golden/mem1.txt cites the lines):

1. The prompt is one user turn: the instruction and the question (DP line 157; the published instruction is
   `Mem1/gen_data/data_process/qa_search_train_merge.py` lines 56-67: ours by default, `--prompt-file` gives it).
2. A reply ends at its first `</search>` or `</answer>` (the stop strings of MD lines 71-98); that reply is the
   action: a search if it holds `<search>...</search>`, else an answer from `<answer>...</answer>` (DP lines 41-55).
3. The observation: `<information>\\n{hint}\\n{docs}\\n</information>` (DP line 164), the hint saying how many turns
   are left, inside `[HINT]...[/HINT]` (DP lines 154-158); the docs one line each, `Doc {i}(Title: {title})
   {text}` (DP lines 24-31), the top 3 results (DP line 8).
4. Every earlier turn is dropped (DP lines 148-151, 172): the context is the prompt, the last reply, the last
   observation. 6 turns at most (DP line 10). Sampling: temperature 0.01, top-p 0.95, 1,024 tokens (MD 78-88).
5. A reply with neither action ends the episode without an answer (DP lines 160-161).

Where we differ: MEM1 continues its assistant turn with the observation (MD lines 64-69); a picture cannot travel
in an assistant turn of an OpenAI-compatible request, so the observation is a user turn after the reply. A
picture result is its `Doc i(Title: ...)` line with the citation as the title, then the image (the VimRAG
paper's visual setting; MEM1 is text-only); a clip, its sampled frames. The hint's wording is ours (prompt keys
`hint`, `last_hint`).
"""

from __future__ import annotations

import re
from typing import Any

from agent.actions import Action
from agent.events import Event, SearchResults
from agent.protocols import schema as S
from agent.protocols.base import Protocol, chain, fresh_id, join_text, remember, result_rows
from agent.rejections import Rejection
from agent.state import EpisodeState
from agent.toolbox import TEXT_EXCERPT

TOP_K = 3  # DP line 8
MAX_TURNS = 6  # DP line 10
_STOP = re.compile(r"</(?:search|answer)>")
_SEARCH = re.compile(r"<search>(.*?)</search>", re.S)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)

TOOLS = {  # tags, not tool calls: the schemas serve validation, rewards and the UI
    "search": S.tool(
        "search", "<search>query</search>: retrieve documents.", {"query": S.text("the query")}, ["query"]
    ),
    "answer": S.tool(
        "answer", "<answer>text</answer>: the final answer.", {"answer": S.text("the answer")}, ["answer"]
    ),
}
INSTRUCTION = (
    "Answer the question with the help of a search engine over documents, pictures and videos. You will not see "
    "your earlier turns again: each turn, first write inside <think> and </think> everything you know so far that "
    "matters for the question, carried over from your last <think> and the latest <information>. Then either search "
    "with <search> a few key words </search>, or, when you know the answer, give it briefly inside <answer> and "
    "</answer>. Question: {question}"
)
HINT = "{n} turns remain."
LAST_HINT = "This is your last turn: answer the question now."


def cut_reply(reply: str) -> str:
    """The reply as the published stop strings leave it: up to and with its first `</search>` or `</answer>`.

    >>> cut_reply("<think>s</think><search>q</search> more <answer>a</answer>")
    '<think>s</think><search>q</search>'
    """
    m = _STOP.search(reply or "")
    return (reply[: m.end()] if m else reply or "").strip()


class Mem1Protocol(Protocol):
    name = "mem1"
    order = 5
    summary = "MEM1's constant memory: each turn rewrites one internal state; only the last turn is kept (baseline)"
    syntax = "answer"
    tools = TOOLS
    PROMPTS = {"user": INSTRUCTION, "hint": HINT, "last_hint": LAST_HINT}
    PLACEHOLDERS = {"user": ("question",), "hint": ("n",)}
    main_prompt = "user"
    max_steps = MAX_TURNS

    @classmethod
    def generation_defaults(cls, thinking: bool | None = None) -> dict[str, Any]:
        """MEM1's inference sampling (MD lines 78-88): temperature 0.01, top-p 0.95, at most 1,024 new tokens."""
        out = {"max_new_tokens": 1024, "temperature": 0.01, "top_p": 0.95}
        return out | ({"thinking": thinking} if thinking is not None else {})

    @classmethod
    def format_call(cls, name: str, args: dict, think: str = "") -> str:
        tag = "search" if name == "search" else "answer"
        return f"<think>{think}</think>\n<{tag}>{args['query' if tag == 'search' else 'answer']}</{tag}>"

    # -- context -------------------------------------------------------------------------------------------
    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        prompt = self.prompt(st, "user").replace("{question}", st.question)
        return [{"role": "user", "content": prompt}, *st.history]  # history: the last reply and observation only

    def observe(self, st: EpisodeState, reply: str, ids: list[str]) -> None:
        """Replace the history with the last reply and its observation (DP lines 148-151, 164, 172)."""
        left = st.config.max_steps - st.step
        hint = self.prompt(st, "hint").replace("{n}", str(left)) if left > 1 else self.prompt(st, "last_hint")
        parts: list[dict[str, Any]] = [{"type": "text", "text": f"<information>\n[HINT]{hint}[/HINT]\n"}]
        for i, info_id in enumerate(ids, 1):
            parts += self._doc(st, i, info_id)
        parts.append({"type": "text", "text": "\n</information>"})
        st.history = [{"role": "assistant", "content": reply}, {"role": "user", "content": join_text(parts)}]

    def _doc(self, st: EpisodeState, i: int, info_id: str) -> list[dict[str, Any]]:
        """`Doc {i}(Title: {title}) {text}` and a newline (DP lines 24-31); a picture or clip after its line."""
        ev = st.evidence.get(info_id)
        if ev.kind == "text":
            lines = (ev.text or "")[:TEXT_EXCERPT].split("\n")
            return [{"type": "text", "text": f"Doc {i}(Title: {lines[0]}) {' '.join(lines[1:])}\n"}]
        shown = self.toolbox.show(st, [info_id])[1:]  # the pixels, without the toolbox's label line
        return [{"type": "text", "text": f"Doc {i}(Title: {ev.citation()}) "}, *shown, {"type": "text", "text": "\n"}]

    # -- a reply -------------------------------------------------------------------------------------------
    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        reply = cut_reply(text)
        think = re.search(r"<think>(.*?)</think>", reply, re.S)
        query, answer = _SEARCH.search(reply), _ANSWER.search(reply)
        if query and query.group(1).strip():
            return Action("search", {"query": query.group(1).strip()}, reply, think.group(1).strip() if think else "")
        if answer and answer.group(1).strip():
            return Action("answer", {"answer": answer.group(1).strip()}, reply, think.group(1).strip() if think else "")
        return Rejection(reason="no_action", observation="the reply held neither <search> nor <answer>", raw=text)

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        """No action ends the episode without an answer (DP lines 160-161)."""
        events = super().reject(st, message, raw)
        st.done = True
        return events

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        a = action.args
        if kind == "answer":
            return self.finish_chain(st, a["answer"])
        node_id = fresh_id(st.graph, "search")
        ids = [e.info_id for e in self.toolbox.search(st, node_id, a["query"], k=TOP_K)]  # a failure adds no node
        node = chain(st, "search", a["query"], node_id)
        node.summary = action.think[:300]  # the internal state it wrote this turn
        remember(st, node.id, ids)
        self.observe(st, action.raw, ids)
        return [SearchResults(st.step, node_id=node.id, query=a["query"], results=result_rows(st, ids))]
