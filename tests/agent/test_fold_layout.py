"""The exact layout of fold (DeepAgent's memory folding), turn by turn, on scripted episodes over fixed results."""

from __future__ import annotations

from agent.call_format import format_call
from tests.agent.layouts import Fixed, run


# --------------------------------------------------------------------------------------------- fold
def _call(name, **args):
    return format_call(name, args)


def _text(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_fold_writes_three_memories_then_goes_on_from_the_first_prompt(mixed):
    """DeepAgent (src/run_deep_agent.py lines 560-590): <fold_thought> starts three memory calls, each one user
    turn holding the whole output; the episode then goes on from the first prompt with the memories before its
    last line, the pictures and every earlier turn gone."""
    script = [
        _call("search", query="pilot customers"),
        "Thin results; I fold.\n\n<fold_thought>",
        '```json\n{"key_events": [{"step": "1", "outcome": "12 customers"}]}\n```',
        '{"immediate_goal": "confirm"}',
        '{"tools_used": []}',
        "<think>From memory.</think>\nIt is \\boxed{12}.",
    ]
    _, trace, policy = run(Fixed(mixed), script, protocol="fold", question="How many customers?")
    assert trace.answer == "12" and [len(c) for c in policy.calls] == [1, 3, 1, 1, 1, 1]
    memory_prompts = [_text(c[0]["content"]) for c in policy.calls[2:5]]
    assert all("Step 1: <tool_call>" in m and "Step 3: Thin results; I fold." in m for m in memory_prompts)
    assert '"tool_call": "{\\"name\\": \\"search\\"' in memory_prompts[2]  # the tool memory gets the calls
    assert '"task_description"' in memory_prompts[0] and '"immediate_goal"' in memory_prompts[1]
    last = policy.calls[5][0]["content"]
    assert isinstance(last, str)  # one text turn: no picture survives a fold
    head, tail = last.split("Memory of previous folded thoughts:\n\nEpisode Memory:\n", 1)
    assert tail.startswith('{"key_events": [{"step": "1", "outcome": "12 customers"}]}\n\nWorking Memory:\n')
    assert tail.endswith('Now, begin your reasoning for question "How many customers?" with the available tools.\n')
    kinds = [n["kind"] for n in trace.graph["nodes"]]
    assert kinds == ["root", "search", "memory", "answer"]


def test_fold_refuses_repeats_a_fourth_fold_and_reports_failed_calls(mixed, monkeypatch):
    """A repeated call is not run (lines 495-499); a fourth fold is refused with a system message (lines 559-568);
    a call that fails comes back as `Error calling tool: ...` (lines 546-557); the episode goes on."""
    from agent.protocols.fold import FOLD_LIMIT

    memories = ["{}", "{}", "{}"]
    script = [
        _call("search", query="pilot"),
        _call("search", query="pilot"),
        _call("crop", image="Picture 9", bbox=[0, 0, 10, 10]),
        *(["<fold_thought>", *memories] * 3),
        "<fold_thought>",
        "\\boxed{12}",
    ]
    _, trace, policy = run(Fixed(mixed), script, protocol="fold", max_steps=20)
    assert trace.answer == "12" and len(policy.calls) == len(script)
    second, third = _text(policy.calls[2][-1]["content"]), _text(policy.calls[3][-1]["content"])
    assert second == "<tool_call_result>You have already called this tool with the same arguments.</tool_call_result>"
    assert third.startswith("<tool_call_result>Error calling tool: ") and "Picture 9" in third
    assert sum(n["kind"] == "memory" for n in trace.graph["nodes"]) == 3
    assert policy.calls[-1][-1]["content"] == FOLD_LIMIT.replace("{n}", "3")
    assert policy.calls[-1][-2]["content"] == "<fold_thought>"


def test_fold_at_the_action_limit_asks_for_the_answer(mixed, monkeypatch):
    """Past 50 actions (here 2) nothing more runs: a system message, and the next reply is the answer (lines
    443 and 615-643)."""
    import agent.protocols.fold as fold

    monkeypatch.setattr(fold, "MAX_ACTIONS", 2)
    script = [_call("search", query="pilot"), _call("search", query="more"), "I think \\boxed{12}"]
    _, trace, policy = run(Fixed(mixed), script, protocol="fold")
    assert trace.answer == "12" and len(policy.calls) == 3
    assert policy.calls[2][-1]["content"] == fold.LAST_TURN
    assert sum(n["kind"] == "search" for n in trace.graph["nodes"]) == 1  # the second search never ran


def test_fold_folds_by_itself_past_its_budget(mixed):
    """The issue's budget: once the context passes fold_budget tokens the next call writes the episode memory,
    unasked; 0 leaves folding to the model, as DeepAgent does."""
    script = [_call("search", query="pilot"), "{}", "{}", "{}", "\\boxed{12}"]
    _, trace, policy = run(Fixed(mixed), script, protocol="fold", fold_budget=500)
    assert trace.answer == "12" and [len(c) for c in policy.calls] == [1, 1, 1, 1, 1]
    assert "episode memory" in _text(policy.calls[1][0]["content"])
    _, trace, policy = run(Fixed(mixed), script[:1] + ["\\boxed{12}"], protocol="fold", fold_budget=0)
    assert trace.answer == "12" and [len(c) for c in policy.calls] == [1, 3]


def test_fold_ends_without_an_answer_on_an_empty_reply(mixed):
    _, trace, policy = run(Fixed(mixed), ["<think>hmm</think>\n"], protocol="fold")
    assert len(policy.calls) == 1 and trace.answer is None and trace.status == "no_answer"
