"""The exact layouts of vimrag (the VimRAG demo), the react and vanilla baselines, MemAgent and MEM1, turn by turn, on
scripted episodes.

A fake retriever returns fixed results (pictures of known sizes, a text chunk, a 60 s video), so every size
below is worked by hand from the published rules (agent/media.py cites them). vrag's layout is
tests/agent/test_vrag_layout.py's, fold's tests/agent/test_fold_layout.py's.
"""

from __future__ import annotations

import pytest

from agent.call_format import format_call, format_vrag
from agent.events import ErrorEvent, Memorized
from agent.media import DEMO_MAX_BYTES, time_key
from agent.settings import AgentConfig
from tests.agent.layouts import Fixed, picture, run


# --------------------------------------------------------------------------------------------- vimrag
def test_vimrag_step_limit_is_the_demos():
    """vimrag_agent.py lines 31 and 374-377: max_mem_steps = 20 model calls."""
    assert AgentConfig().max_steps == 20 and AgentConfig(protocol="vimrag", max_steps=7).max_steps == 7
    _, trace, policy = run(Fixed([]), ["no call here"] * 25)
    assert trace.status == "limit" and len(policy.calls) == 20


def test_vimrag_search_appends_reply_tool_response_and_summary_prompt(mixed):
    script = [
        format_call("add_search_node", {"id": "s1", "query": "pilot", "parent_ids": ["root"]}),
        format_call("add_search_node", {"id": "s2", "query": "again", "parent_ids": ["root"]}),
        format_call("add_answer_node", {"answer": "12", "parent_ids": ["s1"]}),
    ]
    events, trace, policy = run(Fixed(mixed), script, top_k=4)
    assert [m["role"] for m in policy.calls[0]] == ["system", "user"]
    after = policy.calls[1]
    assert [m["role"] for m in after] == ["system", "user", "assistant", "user", "user"]
    assert after[2]["content"] == script[0]
    response = after[3]["content"]
    texts = [p["text"] for p in response if p["type"] == "text"]
    # texts first, then pictures, then videos, each numbered within this response
    assert texts[:4] == [
        "<tool_response>\nHere are the retrieved information:",
        "Text 1:",
        "The pilot admits 12 customers.",
        "Picture 1:",
    ]
    assert "Picture 2:" in texts and texts.index("Picture 2:") < texts.index("Video 1:")
    assert texts[-1] == "\n</tool_response>"
    assert after[4]["role"] == "user" and "summarize_and_memorize" in after[4]["content"]
    # a second search before memorizing is refused, and the refusal is shown after the reply
    err = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(err) == 1 and "not memorized yet" in err[0].message
    assert policy.calls[2][-2:] == [
        {"role": "assistant", "content": script[1]},
        {"role": "user", "content": err[0].message},
    ]
    assert trace.answer == "12"


def test_vimrag_pictures_travel_as_the_demos_jpeg(mixed):
    script = [
        format_call("add_search_node", {"id": "s1", "query": "pilot", "parent_ids": ["root"]}),
        format_call("add_answer_node", {"answer": "12", "parent_ids": ["s1"]}),
    ]
    _, _, policy = run(Fixed(mixed[:1]), script)
    part = next(p for p in policy.calls[1][3]["content"] if p["type"] == "image")
    assert part["mime"] == "image/jpeg" and len(part["data"]) <= DEMO_MAX_BYTES
    # noise does not compress: the 1,003,520-px cap gives 1226x818, over 38 KB, so it shrank once more
    assert part["image"].width * part["image"].height < 1226 * 818 and part["image"].width / part[
        "image"
    ].height == pytest.approx(1.5, rel=0.01)
    _, _, png = run(Fixed(mixed[:1]), script, demo_jpeg=False)
    part = next(p for p in png.calls[1][3]["content"] if p["type"] == "image")
    assert "data" not in part and part["image"].width * part["image"].height <= 1_003_520


def test_vimrag_memorize_keeps_useful_visual_items_and_rebuilds(mixed):
    script = [
        format_call("add_search_node", {"id": "s1", "query": "pilot", "parent_ids": ["root"]}),
        format_call(
            "summarize_and_memorize",
            {
                "summarize": "the poster and the note",
                "memorize": [
                    {"information_id": "Picture 1", "is_useful": True, "priority_score": 5},
                    {"information_id": "Text 1", "is_useful": True, "priority_score": 5},
                    {"information_id": "Picture 2", "is_useful": False, "priority_score": 2},
                ],
            },
        ),
        format_call("add_answer_node", {"answer": "12", "parent_ids": ["s1"]}),
    ]
    events, trace, policy = run(Fixed(mixed), script, top_k=4)
    mem = next(e for e in events if isinstance(e, Memorized))
    assert [(i.label, i.in_memory) for i in mem.items] == [
        ("Picture 1", True),
        ("Text 1", False),
        ("Picture 2", False),
    ]
    rebuilt = policy.calls[2]
    assert [m["role"] for m in rebuilt] == ["system", "user"]
    parts = rebuilt[1]["content"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert texts[1:] == ["### Multimodal Memory\nHistorical information for reference only.\n", "Node: s1"]
    assert [p["ref"] for p in parts if p["type"] == "image"] == [mem.items[0].info_id]  # bare, one picture
    graph = texts[0].split("Action graph:\n", 1)[1]
    assert graph.startswith('[{"id": "root", "name": "Initial Node", "content": "Initial query from user: ')
    assert '{"id": "s1", "query": "pilot", "parent_ids": ["root"], "summary": "the poster and the note"}' in graph


def test_a_60_second_clip_is_sampled_across_its_whole_span(mixed):
    """Acceptance: the observation carries frames from the clip's start to its end, at 1 fps up to 32."""
    script = [
        format_call("add_search_node", {"id": "s1", "query": "talk", "parent_ids": ["root"]}),
        lambda m, v: format_call(
            "summarize_and_memorize",
            {
                "summarize": "the talk",
                "memorize": [
                    {
                        "information_id": "Video 1",
                        "is_useful": True,
                        "priority_score": 4,
                        "key_timestamp": [0, 30.0, 28.8, 59.8],
                    }
                ],
            },
        ),
        format_call("add_answer_node", {"answer": "x", "parent_ids": ["s1"]}),
    ]
    events, trace, policy = run(Fixed([mixed[2]]), script)
    response = policy.calls[1][3]["content"]
    labels = [p["text"] for p in response if p["type"] == "text" and p["text"].endswith(" seconds>")]
    times = [float(t[1:].split()[0]) for t in labels]
    assert len(times) == 32 and len([p for p in response if p["type"] == "image"]) == 32
    # 300 frames at 5 fps; frame int(299 * i / 31) of 300, at index / 300 * 60 s: 0.0 ... 28.8 (i=15) ... 59.8
    assert times[0] == 0.0 and times[15] == 28.8 and times[-1] == 59.8  # the whole minute, not its first 16 s
    assert all(0 < b - a <= 2.0 for a, b in zip(times, times[1:]))  # evenly spread: 300 frames, 32 picks
    # key timestamps keep the frames whose labels they match to 0.1 s; 30.0 matches no frame
    assert time_key(30.0) not in {time_key(t) for t in times}
    mem = next(e for e in events if isinstance(e, Memorized)).items[0]
    assert [time_key(t) for t in mem.key_timestamps] == ["0.0", "28.8", "59.8"] and mem.in_memory
    memory = [p for p in policy.calls[2][1]["content"] if p["type"] == "image"]
    assert [p["time"] for p in memory] == mem.key_timestamps  # exactly those frames, in that order


@pytest.mark.parametrize("protocol", ["react", "vanilla"])
def test_react_and_vanilla_show_the_whole_clip(mixed, protocol):
    """Acceptance: a 60 s clip is shown by the sampler every protocol shares (1 fps, at most 32 frames, across
    the clip), so the baselines see its last 15 s too, not its first 4 keyframes."""
    script = [format_call("search", {"query": "talk"}), format_call("answer", {"answer": "x"})]
    if protocol == "vanilla":
        script = ["<answer>x</answer>"]
    _, trace, policy = run(Fixed([mixed[2]]), script, protocol=protocol)
    shown = policy.calls[-1]  # react: the search's observation is in the last context; vanilla: its one context
    frames = [p for m in shown if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
    times = [p["time"] for p in frames]
    assert len(times) == 32 and times[0] == 0.0 and times[-1] > 59  # the same frames vimrag samples
    assert [t for t in times if t >= 45.0]  # frames from the clip's last 15 s
    assert all(p["image"].width * p["image"].height <= 401_408 for p in frames)  # the demo's per-frame cap


class Failing(Fixed):
    """Fixed results, except that a query containing "down" fails as a search server that went away does."""

    def search(self, query, k=3, filters=None, mode="hybrid"):
        from retrieval.errors import RetrievalError

        if "down" in str(query):
            raise RetrievalError("the search server at http://127.0.0.1:9/search did not answer")
        return super().search(query, k, filters, mode)


@pytest.mark.parametrize("protocol", ["vimrag", "vrag", "react"])
def test_a_failed_search_adds_no_node_and_leaves_energy_unchanged(mixed, protocol):
    """Acceptance: a search whose retrieval fails is a tool error that adds no node, so Omega is unchanged."""
    from memory_graph.energy import energy

    first = {
        "vimrag": format_call("add_search_node", {"id": "s1", "query": "poster", "parent_ids": ["root"]}),
        "vrag": format_vrag("search", {"query": "poster"}),
        "react": format_call("search", {"query": "poster"}),
    }[protocol]
    memorize = format_call(
        "summarize_and_memorize",
        {
            "summarize": "the poster",
            "memorize": [{"information_id": "Picture 1", "is_useful": True, "priority_score": 4}],
        },
    )
    failing = {
        "vimrag": format_call("add_search_node", {"id": "s2", "query": "server down", "parent_ids": ["s1"]}),
        "vrag": format_vrag("search", {"query": "server down"}),
        "react": format_call("search", {"query": "server down"}),
    }[protocol]
    answer = {
        "vimrag": format_call("add_answer_node", {"answer": "x", "parent_ids": ["s1"]}),
        "vrag": "<answer>x</answer>",
        "react": format_call("answer", {"answer": "x"}),
    }[protocol]
    script = [first] + ([memorize] if protocol == "vimrag" else []) + [failing, answer]
    seen = []

    def snapshot(messages, view):
        seen.append((sorted(view.graph.nodes), energy(view.graph)))
        return script[len(seen) - 1]

    events, trace, _ = run(Failing([mixed[0], mixed[1]]), [snapshot] * len(script), protocol=protocol)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "did not answer" in errors[0].message
    before_fail, after_fail = seen[-2], seen[-1]
    assert after_fail[0] == before_fail[0]  # no node for the failed search
    assert after_fail[1] == before_fail[1] and after_fail[1]  # every Omega exactly as before
    assert trace.answer == "x"


def test_a_picture_met_before_is_decoded_not_encoded_again(mixed, tmp_path):
    """The demo's encoding of a picture is kept per process by what the picture is (file, crop, frame): a second
    episode gets the same bytes without encoding again, and a file rewritten in place is encoded afresh."""
    from agent.media import ENCODED

    ENCODED.clear()
    poster = picture(tmp_path, "poster.png", (1500, 1000), seed=5)
    script = [
        format_call("add_search_node", {"id": "s1", "query": "poster", "parent_ids": ["root"]}),
        format_call("add_answer_node", {"answer": "x", "parent_ids": ["s1"]}),
    ]
    _, _, first = run(Fixed([poster]), script)
    assert (ENCODED.hits, ENCODED.misses) == (0, 1)
    _, _, again = run(Fixed([poster]), script)
    assert (ENCODED.hits, ENCODED.misses) == (1, 1)
    sent = [[p for p in c[-2]["content"] if p["type"] == "image"][0] for c in (first.calls[1], again.calls[1])]
    assert sent[0]["data"] == sent[1]["data"] and sent[0]["image"].tobytes() == sent[1]["image"].tobytes()
    picture(tmp_path, "poster.png", (1500, 1000), seed=6)  # the same name, other pixels
    _, _, changed = run(Fixed([poster]), script)
    assert ENCODED.misses == 2
    assert [p for p in changed.calls[1][-2]["content"] if p["type"] == "image"][0]["data"] != sent[0]["data"]


def test_memagent_rewrites_one_memory_a_result_then_answers_from_it(mixed):
    """MemAgent (recurrent/impls/memory.py): one user turn a call, no history; each reply replaces the memory
    whole (an empty one leaves 'No previous memory', a think block is dropped); the last call answers in \\boxed{}."""
    script = ["m1", "   ", "<think>the clip</think>m3", "m4", "The answer is \\boxed{12}."]
    _, trace, policy = run(Fixed(mixed), script, protocol="memagent", vanilla_k=4, question="How many customers?")
    assert trace.answer == "12" and len(policy.calls) == 5
    assert all(len(call) == 1 and call[0]["role"] == "user" for call in policy.calls)  # no history, no system

    def text(call):
        c = call[0]["content"]
        return c if isinstance(c, str) else "".join(p.get("text", "") for p in c)

    memories = [text(c).split("<memory>\n", 1)[1].split("\n</memory>", 1)[0] for c in policy.calls]
    assert memories == ["No previous memory", "m1", "No previous memory", "m3", "m4"]
    sections = [c[0]["content"] for c in policy.calls[:4]]
    assert [p["type"] for p in sections[0]] == ["text", "text", "image", "text"]  # the poster, as a picture
    assert "The pilot admits 12 customers." in text(policy.calls[1])  # the note, as its text
    assert sum(p["type"] == "image" for p in sections[2]) == 32  # the clip, as the shared sampler's frames
    assert text(policy.calls[4]).endswith("</memory>\n\nYour answer:\n") and "<section>" not in text(policy.calls[4])
    kinds = [n["kind"] for n in trace.graph["nodes"]]
    assert kinds == ["root", "search", "memory", "memory", "memory", "memory", "answer"]


def test_mem1_keeps_only_the_last_reply_and_observation(mixed):
    """MEM1 (Mem1/inference/data_pipelines.py): the prompt, the last reply cut at its first action tag, and the last
    observation; every earlier turn dropped; the hint counts the turns left, the last one asks for the answer."""
    from agent.protocols.mem1 import LAST_HINT

    script = [
        "<think>s1</think><search>pilot</search><answer>too early</answer>",
        "<think>s2</think><search>customers</search>",
        "<think>s3</think><answer>12</answer>",
    ]
    _, trace, policy = run(Fixed(mixed), script, protocol="mem1", max_steps=3, question="How many customers?")
    assert trace.answer == "12" and [len(c) for c in policy.calls] == [1, 3, 3]
    assert policy.calls[1][1] == {"role": "assistant", "content": "<think>s1</think><search>pilot</search>"}
    assert policy.calls[2][1]["content"] == "<think>s2</think><search>customers</search>"  # s1's turn is gone
    obs = policy.calls[2][2]["content"]
    first = obs[0]["text"]
    assert first.startswith("<information>\n[HINT]") and LAST_HINT in first  # 3 - 2 = 1 turn left
    assert "2 turns remain." in policy.calls[1][2]["content"][0]["text"]
    docs = [p["text"] for p in obs if p["type"] == "text" and p["text"].startswith("Doc ")]
    assert [d.split("(")[0] for d in docs] == ["Doc 1", "Doc 2", "Doc 3"]  # the top 3
    assert [s.get("action", {}).get("name") for s in trace.to_dict()["steps"]] == ["search", "search", "answer"]


def test_mem1_ends_without_an_answer_when_a_reply_holds_no_action(mixed):
    _, trace, policy = run(Fixed(mixed), ["<think>hmm</think> I am not sure."], protocol="mem1")
    assert len(policy.calls) == 1 and trace.answer is None and trace.status == "no_answer"
