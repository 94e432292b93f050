"""Rollouts read their training segments off the agent's event stream: the tokens, log-probs and inputs a
policy returns with each reply become that step's segment, exactly."""

import json

import pytest
import torch

from agent.backends.base import PolicyError, Tokens
from agent.backends.scripted import ScriptedPolicy
from agent.settings import AgentConfig
from eval.datasets import EvalItem, Gold
from retrieval.retriever import Retriever
from rl.rollout import rollout_one


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


SCRIPT = [
    call("add_search_node", {"id": "s1", "query": "revenue 2025 annual report", "parent_ids": ["root"]}),
    "no tool call here",
    call("add_answer_node", {"answer": "48.6 million dollars", "parent_ids": ["s1"]}),
]


class TokenScripted(ScriptedPolicy):
    """Scripted replies, each followed by made-up tokens whose values name the call (step k: ids k, 10k, 100k)."""

    def stream(self, messages, view=None):
        yield from super().stream(messages, view)
        k = len(self.calls)
        ids = [k, 10 * k, 100 * k]
        yield Tokens(ids, [-0.5 * k, -0.25, -0.125], {"input_ids": torch.full((1, 4), k)})


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


def item(evidence):
    return EvalItem(
        id="rev", question="What was total revenue in 2025?", answers=["48.6 million dollars"], evidence=evidence
    )


def test_segments_are_the_tokens_the_events_carry(retriever):
    gold = [Gold("aurora_annual_report_2025.pdf")]
    traj = rollout_one(TokenScripted(script=SCRIPT), retriever, item(gold), AgentConfig(max_steps=4), reward="answer")
    segs, steps = traj.segments, traj.trace.steps
    assert [s.step for s in segs] == [r.step for r in steps] == [1, 2, 3]
    for k, seg in enumerate(segs, 1):
        assert seg.gen_ids.tolist() == [k, 10 * k, 100 * k] and seg.gen_ids.dtype == torch.long
        assert seg.old_logp.tolist() == [-0.5 * k, -0.25, -0.125]
        assert seg.inputs["input_ids"].tolist() == [[k] * 4]
        assert seg.text == steps[k - 1].output
    # what each reply did comes from the same stream: the tool it called and the node it made
    assert [s.tool for s in segs] == ["add_search_node", "", "add_answer_node"]
    assert [s.node_id for s in segs] == [r.node_id for r in steps] and segs[0].node_id == "s1"
    assert segs[0].gold_hit is True and segs[1].gold_hit is None  # the search found the report
    assert traj.reward == 1.0 and traj.masks == [0.0, 1.0, 0.0]  # success: the malformed reply is masked
    # the saved trace keeps the ids and log-probs, not the inputs
    done = [e for e in traj.trace.events if e["type"] == "model_output"]
    assert [e["token_ids"] for e in done] == [[1, 10, 100], [2, 20, 200], [3, 30, 300]]
    assert all("model_inputs" not in e for e in done)


def test_a_policy_without_tokens_cannot_be_trained(retriever):
    with pytest.raises(PolicyError, match="without its token ids"):
        rollout_one(ScriptedPolicy(script=SCRIPT), retriever, item([]), AgentConfig(max_steps=4), reward="answer")
