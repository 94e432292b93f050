"""The action parser's rejections: one hand-written example per reason, each naming the problem and ending with a
correct call that runs, and the checks around them (a box partly outside, no context, every problem listed)."""

import pytest

from agent.actions import Action
from agent.protocols import parse
from tests.agent.parsing import CROP, call, ctx, ok, rejected


# ---- rejections, one per reason ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "protocol,text,reason,words",
    [
        ("vimrag", "", "empty_output", ["empty"]),
        ("vimrag", "   \n", "empty_output", ["empty"]),
        ("vimrag", "I will now search for the revenue.", "no_tool_call", ["<tool_call>", "add_search_node"]),
        ("vimrag", "<search>q</search>", "no_tool_call", ["VRAG-style tags"]),
        (
            "vimrag",
            '<tool_call>{"name": "crop", "arguments": {"image" = "Picture 1"}}</tool_call>',
            "bad_json",
            ["could not be read", "'='"],
        ),
        ("vimrag", '{"name": "crop", "arguments": {"image" = "Picture 1"}}', "bad_json", ["could not be read"]),
        (
            "react",
            '<tool_call>{"name": "answer", "arguments": {"answer": "The total is 12 mil',
            "bad_json",
            ["never closed", "cut off"],
        ),  # a half answer must not run as if complete
        ("vimrag", '<tool_call>{"tool_name_missing": 1}</tool_call>', "not_a_call", ['"name"']),
        ("vimrag", "<tool_call>[1, 2]</tool_call>", "not_a_call", ['"name"']),
        ("react", call("serch", {"query": "q"}), "unknown_tool", ["'serch'", "Did you mean 'search'"]),
        ("react", call("add_search_node", {"id": "s2"}), "unknown_tool", ["search, crop, scale, answer"]),
        ("vimrag", call("crop", {"image": "Picture 1"}), "missing_argument", ["`bbox`"]),
        ("vimrag", call("add_answer_node", {"answer": "x"}), "missing_argument", ["`parent_ids`"]),
        (
            "vimrag",
            call("add_answer_node", {"answer": "x", "parent_ids": []}),
            "missing_argument",
            ["`parent_ids` must list at least 1"],
        ),
        (
            "vimrag",
            call("summarize_and_memorize", {"summarize": "x", "memorize": [{"information_id": "Text 1"}]}),
            "missing_argument",
            ["`memorize[0].is_useful`", "`memorize[0].priority_score`"],
        ),
        (
            "vimrag",
            '<tool_call>{"name": "crop", "arguments": ["Picture 1"]}</tool_call>',
            "bad_type",
            ["must be a JSON object"],
        ),
        (
            "vimrag",
            '<tool_call>{"name": "crop", "arguments": "image=Picture 1"}</tool_call>',
            "bad_type",
            ["must be a JSON object"],
        ),
        (
            "vimrag",
            '<tool_call>{"name": "crop", "arguments": "{\\"image\\": @}"}</tool_call>',
            "bad_json",
            ["not a JSON object", "'@'"],
        ),
        ("react", call("answer", {"answer": {"text": "x"}}), "bad_type", ["`answer` must be a string"]),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [{"information_id": "Text 1", "is_useful": "maybe", "priority_score": 3}],
                },
            ),
            "bad_type",
            ["`memorize[0].is_useful` must be true or false"],
        ),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [{"information_id": "Text 1", "is_useful": True, "priority_score": 2.5}],
                },
            ),
            "bad_type",
            ["whole number"],
        ),
        ("react", call("scale", {"image": "Picture 1", "factor": "double"}), "bad_type", ["`factor` must be a number"]),
        ("react", call("scale", {"image": "Picture 1", "factor": True}), "bad_type", ["`factor` must be a number"]),
        (
            "react",
            '<tool_call>{"name": "scale", "arguments": {"image": "Picture 1", "factor": NaN}}</tool_call>',
            "bad_type",
            ["finite"],
        ),
        (
            "vimrag",
            call("add_search_node", {"id": " ", "query": "q", "parent_ids": ["root"]}),
            "empty_value",
            ["`id` is empty"],
        ),
        ("react", call("answer", {"answer": "  "}), "empty_answer", ["`answer` is empty"]),
        ("vimrag", call("add_answer_node", {"answer": "", "parent_ids": ["s1"]}), "empty_answer", ["`answer`"]),
        ("vimrag", call("add_search_node", {"id": "s2", "parent_ids": ["root"]}), "missing_query", ["`query`"]),
        (
            "vimrag",
            call("add_search_node", {"id": "s2", "query": "q", "parent_ids": ["root"], "bbox": [1, 2, 3, 4]}),
            "missing_argument",
            ["`image` must name that image"],
        ),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {"summarize": "x", "memorize": [{"information_id": "Text 1", "is_useful": True, "priority_score": 7}]},
            ),
            "out_of_range",
            ["`memorize[0].priority_score` is 7", "1..5"],
        ),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [{"information_id": "Text 1", "is_useful": True, "priority_score": "0"}],
                },
            ),
            "out_of_range",
            ["1..5"],
        ),
        ("react", call("scale", {"image": "Picture 1", "factor": 10}), "out_of_range", ["`factor` is 10", "0.25..4"]),
        ("react", call("crop", {"image": "Picture 1", "bbox": [1, 2, 3e30, 4]}), "out_of_range", ["too large"]),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [
                        {"information_id": "Video 1", "is_useful": True, "priority_score": 3, "key_timestamp": [-1]}
                    ],
                },
            ),
            "out_of_range",
            [">= 0"],
        ),
        (
            "vimrag",
            call("add_search_node", {"id": "s2", "query": "q", "parent_ids": ["s9"]}),
            "unknown_node",
            ["'s9'", "'root', 's1'"],
        ),
        ("vimrag", call("crop", {**CROP, "parent_ids": ["ghost"]}), "unknown_node", ["'ghost'"]),
        (
            "vimrag",
            call("add_search_node", {"id": "S1", "query": "q", "parent_ids": ["root"]}),
            "duplicate_id",
            ["'S1' is already used", "'s2'"],
        ),
        (
            "vimrag",
            call("crop", {"image": "Picture 9", "bbox": [1, 2, 3, 4]}),
            "unknown_info_id",
            ["'Picture 9'", "'Picture 1'"],
        ),
        ("react", call("scale", {"image": "Text 7", "factor": 2}), "unknown_info_id", ["'Text 7'"]),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [{"information_id": "Picture 1", "is_useful": True, "priority_score": 3}],
                },
            ),
            "not_memorizable",
            ["not among the current search results", "'Picture 2'"],
        ),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [{"information_id": "Picture 7", "is_useful": True, "priority_score": 3}],
                },
            ),
            "unknown_info_id",
            ["'Picture 7'"],
        ),
        (
            "vimrag",
            call("crop", {"image": "Text 1", "bbox": [1, 2, 30, 40]}),
            "not_an_image",
            ["'Text 1' is not an image", "'Picture 1', 'Picture 2'"],
        ),
        ("react", call("crop", {"image": "Video 1", "bbox": [1, 2, 30, 40]}), "not_an_image", ["not an image"]),
        ("vimrag", call("crop", {"image": "Picture 1", "bbox": [1, 2, 3]}), "bad_bbox", ["exactly 4 numbers", "got 3"]),
        ("vimrag", call("crop", {"image": "Picture 1", "bbox": "left half"}), "bad_bbox", ["[x1, y1, x2, y2]"]),
        (
            "vimrag",
            call("crop", {"image": "Picture 1", "bbox": [300, 20, 10, 400]}),
            "bad_bbox",
            ["empty or inverted", "x1 < x2"],
        ),
        ("vimrag", call("crop", {"image": "Picture 1", "bbox": [10, 20, 10, 400]}), "bad_bbox", ["empty or inverted"]),
        (
            "vimrag",
            call("crop", {"image": "Picture 1", "bbox": [0.1, 0.2, 0.5, 0.6]}),
            "bad_bbox",
            ["fractions", "640x480"],
        ),
        (
            "vimrag",
            call("crop", {"image": "Picture 1", "bbox": [700, 10, 900, 50]}),
            "bbox_outside",
            ["entirely outside Picture 1", "640x480"],
        ),
        ("vimrag", call("crop", {"image": "Picture 1", "bbox": [-50, -50, -1, -1]}), "bbox_outside", ["0..640"]),
        (
            "vimrag",
            call(
                "summarize_and_memorize",
                {
                    "summarize": "x",
                    "memorize": [
                        {"information_id": "Text 1", "is_useful": True, "priority_score": 3},
                        {"information_id": "text 1", "is_useful": False, "priority_score": 1},
                    ],
                },
            ),
            "duplicate_item",
            ["'Text 1'"],
        ),
    ],
)
def test_each_rejection_names_the_problem(protocol, text, reason, words):
    rejected(text, protocol, None, reason, *words)


def test_bbox_partly_outside_is_allowed():
    assert ok(call("crop", {"image": "Picture 1", "bbox": [-20, 400, 800, 900]})).args["bbox"] == [-20, 400, 800, 900]


def test_without_context_only_the_schema_is_checked():
    a = parse(call("crop", {"image": "Picture 42", "bbox": [1, 2, 3, 4]}), "vimrag")
    assert isinstance(a, Action) and a.args["image"] == "Picture 42"
    r = parse(call("crop", {"image": "Picture 42", "bbox": [3, 2, 1, 4]}), "vimrag")
    assert r.reason == "bad_bbox" and "Picture 1" in r.observation  # the example still shows a call


def test_all_problems_are_listed_not_just_the_first():
    r = parse(call("crop", {"image": "Text 1", "bbox": [5, 5, 1, 1]}), "vimrag", ctx())
    assert "not an image" in r.observation and "empty or inverted" in r.observation


def test_memorize_example_uses_current_results():
    r = parse("nothing", "vimrag", ctx())
    assert r.reason == "no_tool_call" and "summarize_and_memorize" in r.observation  # results are pending
    assert '"information_id": "Picture 2"' in r.observation


def test_non_text_input_and_unknown_protocol():
    assert parse(None, "react").reason == "empty_output"
    assert isinstance(parse(call("search", {"query": "q"}).encode(), "react"), Action)
    with pytest.raises(ValueError, match="unknown protocol 'nope'; choose one of vimrag, vrag, react, vanilla"):
        parse("x", "nope")
