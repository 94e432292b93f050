"""OpenAIPolicy with native tool calls (`--tool-calling native|auto|text`) and reasoning a server returns apart
(`reasoning_content`), against the fake OpenAI-compatible server (tests/agent/openai_fake.py): streamed and whole
tool calls read back as the protocol's own text, the fallback to text, and reasoning kept in the trace.
"""

from __future__ import annotations

import json
import logging

import pytest

from agent.backends.base import PolicyError
from tests.agent.openai_fake import body, delta, has_key, sse


# --- native tool calls and reasoning ---------------------------------------------------------------------
def chunk(**delta_fields) -> str:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta_fields, 'finish_reason': None}]})}\n\n"


class View:
    """What the loop hands a backend: the protocol's tools."""

    def __init__(self, protocol: str = "vimrag"):
        from agent.protocols import get
        from agent.protocols.schema import specs

        self.tool_specs = specs(get(protocol).tools)


SEARCH_ARGS = {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}


def test_native_streamed_tool_call_and_reasoning_become_the_same_text(server, make_policy):
    from agent.backends.base import Reasoning
    from agent.protocols import parse

    args = json.dumps(SEARCH_ARGS)
    server.replies[:] = [
        sse(
            chunk(role="assistant"),
            chunk(reasoning_content="I need the "),
            chunk(reasoning_content="table."),
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "add_search_node", "arguments": ""},
                    }
                ]
            ),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": args[:20]}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": args[20:]}}]),
        )
    ]
    policy = make_policy(tool_calling="native")
    out = list(policy.stream([{"role": "user", "content": "q"}], view=View()))
    thoughts = [c for c in out if isinstance(c, Reasoning)]
    text = "".join(c for c in out if not isinstance(c, Reasoning))
    assert "".join(thoughts) == "I need the table."
    sent = server.posts()[0]["json"]
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "add_search_node",
        "summarize_and_memorize",
        "crop",
        "scale",
        "add_answer_node",
    ]
    assert not has_key(sent["tools"], "x-ref") and not has_key(sent["tools"], "x-kind")
    assert sent["tool_choice"] == "auto"  # sent whenever tools are
    action = parse(text, "vimrag")
    assert action.name == "add_search_node" and action.args == SEARCH_ARGS
    assert policy.native_tools  # so the protocol leaves the tool list out of its prompt


def test_native_tool_calls_in_a_whole_message(server, make_policy):
    from agent.backends.base import Reasoning
    from agent.protocols import parse

    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "thinking",
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {
                    "name": "add_answer_node",
                    "arguments": json.dumps({"answer": "Europe", "parent_ids": ["s1"]}),
                },
            }
        ],
    }
    server.replies[:] = [body(200, {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})]
    out = list(make_policy(tool_calling="native").stream([{"role": "user", "content": "q"}], view=View()))
    assert out[0] == "thinking" and isinstance(out[0], Reasoning)
    action = parse("".join(out[1:]), "vimrag")
    assert action.name == "add_answer_node" and action.args == {"answer": "Europe", "parent_ids": ["s1"]}


def test_auto_falls_back_to_text_when_the_server_refuses_tools(server, make_policy, caplog):
    refusal = {
        "object": "error",
        "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "code": 400,
    }
    server.replies[:] = [body(400, refusal), sse(delta("<answer>x</answer>")), sse(delta("again"))]
    policy = make_policy(tool_calling="auto")
    with caplog.at_level(logging.WARNING):
        assert policy.generate([{"role": "user", "content": "q"}], view=View()) == "<answer>x</answer>"
        assert policy.generate([{"role": "user", "content": "q"}], view=View()) == "again"
    posts = [r["json"] for r in server.posts()]
    assert ["tools" in p for p in posts] == [True, False, False]  # refused once, then text from then on
    assert "tool calls are read from the reply text" in caplog.text
    server.replies[:] = [body(400, refusal)]
    with pytest.raises(PolicyError, match="enable-auto-tool-choice"):  # native does not fall back
        make_policy(tool_calling="native").generate([{"role": "user", "content": "q"}], view=View())


def test_text_mode_sends_no_tools_and_bad_modes_are_refused(server, make_policy):
    make_policy().generate([{"role": "user", "content": "q"}], view=View())
    assert "tools" not in server.posts()[-1]["json"] and "tool_choice" not in server.posts()[-1]["json"]
    with pytest.raises(PolicyError, match="tool_calling"):
        make_policy(tool_calling="sometimes")


def test_native_loop_keeps_reasoning_in_the_trace_and_out_of_the_reply(server, make_policy, mixed_index):
    from agent.loop import Agent
    from agent.settings import AgentConfig
    from retrieval.retriever import Retriever

    def call(name, args, thought):
        return sse(
            chunk(reasoning_content=thought),
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "c",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
            ),
        )

    server.replies[:] = [
        call("add_search_node", SEARCH_ARGS, "search first"),
        call("summarize_and_memorize", {"summarize": "s", "memorize": []}, "nothing useful"),
        call("add_answer_node", {"answer": "Europe", "parent_ids": ["s1"]}, "done"),
    ]
    trace = Agent(Retriever(mixed_index), make_policy(tool_calling="native"), AgentConfig()).ask("Which region?")
    assert trace.status == "answered" and trace.answer == "Europe"
    assert [s.reasoning for s in trace.steps] == ["search first", "nothing useful", "done"]
    assert all("<tool_call>" in s.output and "search first" not in s.output for s in trace.steps)
    bodies = [r["json"] for r in server.posts()]
    assert all("tools" in b for b in bodies)
    system = bodies[0]["messages"][0]["content"]
    assert "Tools:" not in system and '"parameters"' not in system  # the schemas went natively, not in the prompt
    assert bodies[1]["messages"][2] == {"role": "assistant", "content": trace.steps[0].output}  # no reasoning
