"""Injected tool latency (agent/latency.py): the SPEC's parts, its errors, the draws, and where the delays land
(search and crop inside the agent loop, the trace's `tool_s` against `model_s`)."""

import random
import statistics

import pytest

from agent.latency import Latency, parse_latency


def test_heavy_latency_has_its_median_and_a_heavy_tail():
    rng = random.Random(1)
    xs = sorted(Latency("heavy", 0.2).draw(rng) for _ in range(4000))
    assert statistics.median(xs) == pytest.approx(0.2, rel=0.1)
    assert statistics.fmean(xs) == pytest.approx(0.2 * 1.6487, rel=0.1)  # lognormal mean: M e^(sigma^2 / 2)
    assert xs[int(0.99 * len(xs))] > 8 * 0.2  # p99 ~ M e^2.33 = 10.3 M


@pytest.mark.parametrize(
    "spec, words",
    [("slow:1", "KIND"), ("search=fixed", "KIND:SECONDS"), ("ocr=fixed:1", "unknown tool 'ocr'"), ("fixed:-1", "KIND")],
)
def test_bad_specs_name_the_bad_part(spec, words):
    with pytest.raises(ValueError, match=words):
        parse_latency(spec)


def test_an_agent_config_refuses_a_bad_spec():
    from agent.settings import AgentConfig

    with pytest.raises(ValueError, match="tool-latency"):
        AgentConfig(tool_latency="sometimes")


def test_injected_search_latency_is_waiting_on_tools_in_the_trace(bundled_index):
    from agent.backends.scripted import ScriptedPolicy
    from agent.loop import Agent
    from agent.settings import AgentConfig
    from retrieval.retriever import Retriever

    policy = ScriptedPolicy(script=["<search>revenue</search>", "<search>margin</search>", "<answer>x</answer>"])
    cfg = AgentConfig(protocol="vrag", tool_latency="search=fixed:0.3")
    trace = Agent(Retriever(bundled_index), policy, cfg).ask("What was revenue?")
    assert trace.answer == "x"
    assert 0.6 <= trace.timings["tool_s"] < 1.5 and trace.timings["retrieval_s"] >= 0.6
    assert trace.timings["model_s"] < 0.3


def test_a_delayed_judge_waits_before_each_call_and_answers_as_the_judge():
    import time

    from agent.latency import DelayedJudge

    class Judge:
        model = "stand-in"

        def complete(self, messages):
            return "yes"

    judge = DelayedJudge(Judge(), parse_latency("judge=fixed:0.2"))
    t0 = time.perf_counter()
    assert judge.complete([{"role": "user", "content": "same?"}]) == "yes"
    assert time.perf_counter() - t0 >= 0.2 and judge.model == "stand-in"
    untouched = DelayedJudge(Judge(), parse_latency("search=fixed:5"))  # no judge delay: no wait
    t0 = time.perf_counter()
    untouched.complete([])
    assert time.perf_counter() - t0 < 1.0
