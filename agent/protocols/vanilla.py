"""Vanilla RAG, the one-shot baseline: the top-k results in context and one answer, no tools."""

from __future__ import annotations

from typing import Any

from agent.actions import Action
from agent.events import Event
from agent.protocols import schema as S
from agent.protocols.base import Protocol, remember, strip_answer
from agent.rejections import Rejection
from agent.state import EpisodeState

TOOLS = {
    "answer": S.tool(
        "answer",
        "The answer, as plain text or inside <answer> tags.",
        {"answer": S.text("the final answer")},
        ["answer"],
    )
}
SYSTEM = """Answer the question using only the retrieved evidence below. Reply with a short answer and no
explanation. If the evidence does not contain the answer, reply "Not answerable"."""


class VanillaProtocol(Protocol):
    name = "vanilla"
    order = 3
    summary = "the top-k results in context and one answer (baseline)"
    syntax = "answer"
    tools = TOOLS
    PROMPTS = {"system": SYSTEM}
    max_steps = 3  # one answer; an empty reply is asked again
    one_shot = True

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        if not st.graph.children("root"):
            ids = [e.info_id for e in self.toolbox.search(st, "search1", st.question, k=st.config.vanilla_k)]
            node = st.graph.add_node("search1", "search", ["root"], st.question)  # only once retrieval worked
            st.pending, st.pending_node = ids, node.id
            remember(st, node.id, ids)
        parts = [{"type": "text", "text": f"Question: {st.question}"}]
        parts += self.toolbox.show(st, st.pending, header="Retrieved evidence:")
        return [{"role": "system", "content": self.prompt(st, "system")}, {"role": "user", "content": parts}]

    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        answer = strip_answer(text)
        if not answer:
            return Rejection(reason="empty_answer", observation="The reply was empty; give a short answer.", raw=text)
        return Action(name="answer", args={"answer": answer}, raw=text)

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        node = st.graph.add_node("answer", "answer", ["search1"])
        node.summary = action.args["answer"]
        return self.finish(st, action.args["answer"], node.id)
