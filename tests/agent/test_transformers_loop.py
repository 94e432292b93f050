"""The transformers backend inside the real agent loop, on a tiny random Qwen2.5-VL built from a config.

A random model writes gibberish, so one test wraps it: the model really runs on every step's messages
(images included), and the episode is steered by scripted calls. That shows the pixels the model received
are exactly the allocated ones. A second test lets the raw model drive: every reply is malformed, and the
loop must turn each into an observation and stop at the step limit without raising.
"""

import pytest

from agent.backends.base import Policy, PolicyConfig, load_policy
from agent.call_format import format_call
from agent.events import ErrorEvent, Finished, LimitReached
from agent.loop import Agent
from agent.media import model_view
from agent.settings import AgentConfig
from retrieval.retriever import Retriever
from tests.tiny_vlm import build_tiny_qwen2_5_vl


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("tiny_qwen25"))
    policy = load_policy(PolicyConfig(backend="transformers", model=str(path), max_new_tokens=6))
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


class SteeredModel(Policy):
    """Runs the real model on the messages, records what it saw, then replies with the scripted call."""

    def __init__(self, model, script):
        self.model, self.script, self.seen = model, script, []
        self.patch = model.patch

    def stream(self, messages, view=None):
        out = self.model.generate(messages)
        assert isinstance(out, str)
        self.seen.append((messages, dict(self.model.last_inputs_info)))
        entry = self.script[min(len(self.seen) - 1, len(self.script) - 1)]
        yield entry(view) if callable(entry) else entry


def test_model_sees_exactly_the_counted_pixels(tiny, retriever):
    script = [
        format_call("add_search_node", {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}),
        lambda v: format_call(
            "summarize_and_memorize",
            {
                "summarize": "pages",
                "memorize": [
                    {"information_id": v.label_of(i), "is_useful": True, "priority_score": 5 - n}
                    for n, i in enumerate(v.pending)
                ],
            },
        ),
        format_call("add_answer_node", {"answer": "Europe", "parent_ids": ["s1"]}),
    ]
    policy = SteeredModel(tiny, script)
    cfg = AgentConfig(s_total=200_704, max_image_pixels=100_352)  # small, for a fast CPU run
    events = list(Agent(retriever, policy, cfg).stream("Which region had the most revenue?"))
    trace = events[-1].trace
    assert isinstance(events[-1], Finished) and trace.status == "answered"
    with_images = 0
    for (messages, info), step in zip(policy.seen, trace.steps):
        parts = [p for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
        # the demo's JPEG sizes are off the grid; the processor snaps each exactly as agent.media.model_view says
        views = [model_view(*p["image"].size, 28, p["max_pixels"]) for p in parts]
        assert [[1, h // 14, w // 14] for w, h in views] == [list(g) for g in info.get("image_grid_thw", [])]
        assert sum(info.get("image_pixels", [])) == step.image_pixels == sum(w * h for w, h in views)
        with_images += bool(parts)
    assert with_images >= 2  # the results, then the rebuilt memory
    memory = [p for p in policy.seen[2][0][1]["content"] if isinstance(p, dict) and p["type"] == "image"]
    assert (
        memory
        and sum(
            model_view(*p["image"].size, 28, p["max_pixels"])[0] * model_view(*p["image"].size, 28, p["max_pixels"])[1]
            for p in memory
        )
        <= cfg.s_total
    )


def test_raw_random_model_drives_the_loop_to_the_step_limit(tiny, retriever):
    events = list(Agent(retriever, tiny, AgentConfig(max_steps=2)).stream("What was revenue in 2025?"))
    assert isinstance(events[-1], Finished)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    limit = [e for e in events if isinstance(e, LimitReached)]
    assert len(errors) == 2 and len(limit) == 1  # gibberish becomes corrective observations, not exceptions
    assert events[-1].trace.status == "limit" and "transformers" in events[-1].trace.backend
