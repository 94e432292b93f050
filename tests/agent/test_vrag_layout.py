"""The exact layout of vrag (VRAG-RL's `generation.py`), turn by turn, on scripted episodes over pages of known
sizes, so every size below is worked by hand from the published rules (agent/media.py cites them)."""

from __future__ import annotations

import math

import pytest

from agent.call_format import format_vrag
from agent.media import VRAG_MAX_PIXELS, VRAG_MIN_PIXELS, model_view, vrag_size
from agent.protocols import read_prompt_file
from agent.settings import AgentConfig
from tests.agent.layouts import Fixed, picture, run


# --------------------------------------------------------------------------------------------- vrag
@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    return [picture(folder, f"doc_{i}.png", (1700, 2200) if i else (300, 200), seed=i) for i in range(12)]


def test_vrag_first_turn_is_one_user_message_with_the_question(pages):
    _, trace, policy = run(Fixed(pages), ["<answer>x</answer>"], protocol="vrag")
    first = policy.calls[0]
    assert [m["role"] for m in first] == ["user"]  # no system message: the chat template adds its default
    assert isinstance(first[0]["content"], str) and first[0]["content"].endswith("Question: What does the poster say?")


def test_vrag_prompt_file_goes_where_the_user_says(pages, tmp_path):
    f = tmp_path / "vrag.txt"
    f.write_text("OFFICIAL INSTRUCTION. Question: {question}")
    prompts = read_prompt_file(f, "vrag")
    _, _, policy = run(Fixed(pages), ["<answer>x</answer>"], protocol="vrag", prompts=prompts)
    assert policy.calls[0] == [{"role": "user", "content": "OFFICIAL INSTRUCTION. Question: What does the poster say?"}]
    as_system = read_prompt_file(
        f.with_name("sys.txt") if f.with_name("sys.txt").write_text("SYS") else f, "vrag", "system"
    )
    _, _, policy = run(Fixed(pages), ["<answer>x</answer>"], protocol="vrag", prompts=as_system)
    assert policy.calls[0] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Question: What does the poster say?"},
    ]
    f.write_text("no placeholder here")
    with pytest.raises(ValueError, match=r"must contain \{question\}"):
        read_prompt_file(f, "vrag")
    with pytest.raises(ValueError, match="has no prompt"):
        read_prompt_file(f, "vrag", "summary")


def test_vrag_inserts_the_first_unseen_of_the_top_10_as_an_image_alone(pages):
    ret = Fixed(pages)
    script = [format_vrag("search", {"query": "q"}, think="t")] * 11 + ["<answer>done</answer>"]
    events, trace, policy = run(ret, script, protocol="vrag", max_steps=12)
    assert all(k == 10 for _, k in ret.queries)  # VRAG's engine returns the top 10
    inserted = [
        trace.evidence[r["info_id"]]["unit"]["uid"]
        for e in trace.events
        if e["type"] == "search_results"
        for r in e["results"]
    ]
    # ten searches insert the ten results in rank order; the 11th finds none unseen and shows the 10th again
    assert inserted == [f"doc_{i}.png" for i in range(10)] + ["doc_9.png"]
    obs = policy.calls[1][-1]
    assert obs["role"] == "user" and [p["type"] for p in obs["content"]] == ["image"]  # no label, no text
    # the assistant turn keeps the tags only, re-joined
    assert policy.calls[1][-2] == {"role": "assistant", "content": "<think>t</think>\n<search>q</search>"}


def test_vrag_images_are_resized_into_its_pixel_range(pages):
    script = [
        format_vrag("search", {"query": "q"}),
        format_vrag("search", {"query": "q"}),
        format_vrag("crop", {"bbox": [10, 10, 60, 40]}),
        "<answer>x</answer>",
    ]
    _, trace, policy = run(Fixed(pages), script, protocol="vrag")
    small = policy.calls[1][-1]["content"][0]["image"]  # a 300x200 page grows to the floor
    big = policy.calls[2][-1]["content"][0]["image"]  # a 1700x2200 page shrinks to the ceiling
    crop = policy.calls[3][-1]["content"][0]["image"]
    assert small.size == vrag_size(300, 200) == (548, 365)
    assert big.size == vrag_size(1700, 2200) == (556, 720)
    for im in (small, big, crop):
        assert VRAG_MIN_PIXELS * 0.99 <= im.width * im.height <= VRAG_MAX_PIXELS
    # the crop: [10, 10, 60, 40] padded by 28 in the 556x720 view, scaled to the 1700x2200 raw page with int()
    assert trace.events[[e["type"] for e in trace.events].index("cropped")]["bbox_raw"] == [
        0,
        0,
        int(1700 * 88 / 556),
        int(2200 * 68 / 720),
    ]
    # counted as the processor will see it: 556x720 snaps to 560x728
    assert trace.steps[2].image_pixels == small_and_big_pixels(small, big)


def small_and_big_pixels(small, big) -> int:
    return sum(math.prod(model_view(*im.size)) for im in (small, big))


def test_vrag_asks_for_the_answer_on_the_last_call(pages):
    events, trace, policy = run(Fixed(pages), [format_vrag("search", {"query": "q"})], protocol="vrag", max_steps=3)
    last_obs = policy.calls[2][-1]["content"]
    assert [p["type"] for p in last_obs] == ["image", "text"] and "answer" in last_obs[-1]["text"].lower()
    assert all(p["type"] == "image" for p in policy.calls[1][-1]["content"])  # not before
    assert trace.status == "limit"
    assert AgentConfig(protocol="vrag").max_steps == 11  # the demo's 10 actions, then one that must answer


def test_vrag_runs_a_search_written_inside_think_before_the_answer_after_it(pages):
    """Acceptance: VRAG-RL reads the first action tag of the reply's kept tags, think blocks included."""
    first = "<think>I need the table <search>revenue table</search> first.</think>\n<answer>42</answer>"
    events, trace, policy = run(Fixed(pages), [first, "<answer>done</answer>"], protocol="vrag")
    calls = [e["name"] for e in trace.events if e["type"] == "tool_call"]
    assert calls == ["search", "answer"] and trace.answer == "done"
    assert [e["query"] for e in trace.events if e["type"] == "search_results"] == ["revenue table"]
    # the turn kept in the history is VRAG-RL's: the complete tags (the think, holding the search), re-joined
    assert policy.calls[1][-2] == {
        "role": "assistant",
        "content": "<think>I need the table <search>revenue table</search> first.</think>\n<answer>42</answer>",
    }


def test_vrag_invalid_action_turns(pages):
    """No action, or a box VRAG-RL cannot read: the kept tags, then a user turn with the invalid-action text
    (VRAG-RL has one for boxes and one for the rest: generation.py lines 629 and 632)."""
    prompts = {"invalid": "<INVALID>", "invalid_bbox": "<INVALID BBOX>"}
    script = ["No tags at all.", "<think>zoom</think><bbox>10, 20, 30, 40</bbox>", "<answer>x</answer>"]
    _, trace, policy = run(Fixed(pages), script, protocol="vrag", prompts=prompts)
    assert policy.calls[1][-2:] == [{"role": "assistant", "content": ""}, {"role": "user", "content": "<INVALID>"}]
    assert policy.calls[2][-2:] == [
        {"role": "assistant", "content": "<think>zoom</think>\n<bbox>10, 20, 30, 40</bbox>"},
        {"role": "user", "content": "<INVALID BBOX>"},
    ]
    assert [e["type"] for e in trace.events].count("error") == 2 and trace.answer == "x"
    _, _, policy = run(Fixed(pages), script, protocol="vrag")  # ours by default: the corrective message
    assert "<search>" in policy.calls[1][-1]["content"] and "four numbers" in policy.calls[2][-1]["content"]
