"""The action parser: every tolerance it promises, VRAG's tags and the records, by hand-written example; each
rejection reason is tests/agent/test_rejections.py's."""

import json

import pytest

from agent.actions import MAX_CHARS, Action
from agent.call_format import format_call, format_vrag
from agent.protocols import parse, validate
from agent.rejections import Rejection
from agent.validate import Context
from tests.agent.parsing import CROP, call, ctx, ok, rejected, tool_specs

VALID = {
    "vimrag": [
        ("add_search_node", {"id": "s2", "query": "revenue 2023", "parent_ids": ["root", "s1"]}),
        (
            "add_search_node",
            {"id": "s2", "query": "", "parent_ids": ["s1"], "image": "Picture 1", "bbox": [0, 0, 100, 50.5]},
        ),
        (
            "summarize_and_memorize",
            {
                "summarize": "Picture 2 has the table.",
                "memorize": [
                    {"information_id": "Picture 2", "is_useful": True, "priority_score": 5},
                    {"information_id": "Video 1", "is_useful": False, "priority_score": 1, "key_timestamp": [0, 12.5]},
                ],
            },
        ),
        ("summarize_and_memorize", {"summarize": "nothing useful", "memorize": []}),
        ("crop", CROP),
        ("crop", {**CROP, "id": "c1", "parent_ids": ["s1"]}),
        ("scale", {"image": "Video 1", "factor": 0.25}),
        ("scale", {"image": "Picture 2", "factor": 4}),
        ("add_answer_node", {"answer": '42 ✓ "quoted" </tool_call>', "parent_ids": ["s1"]}),
    ],
    "react": [
        ("search", {"query": "q"}),
        ("crop", CROP),
        ("scale", {"image": "Picture 1", "factor": 1.5}),
        ("answer", {"answer": "Paris"}),
    ],
    "vrag": [
        ("search", {"query": "annual revenue"}),
        ("crop", {"bbox": [1, 2, 299, 899]}),
        ("answer", {"answer": "Paris <b>really</b>"}),
    ],
}


@pytest.mark.parametrize("protocol,name,args", [(p, n, a) for p, calls in VALID.items() for n, a in calls])
def test_format_functions_round_trip(protocol, name, args):
    text = format_vrag(name, args) if protocol == "vrag" else format_call(name, args)
    a = ok(text, protocol)
    assert (a.name, a.args, a.raw, a.warnings) == (name, args, text, [])
    assert validate(name, args, protocol, ctx()) == []
    thought = format_vrag(name, args, think="plan") if protocol == "vrag" else format_call(name, args, think="plan")
    assert ok(thought, protocol).think == "plan"


def test_format_vrag_refuses_what_tags_cannot_hold():
    with pytest.raises(ValueError, match="</answer>"):
        format_vrag("answer", {"answer": "a</answer>b"})
    with pytest.raises(ValueError, match="unknown VRAG action"):
        format_vrag("add_answer_node", {"answer": "a"})


# ---- tolerances ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}\n```',
        '<tool_call>\n```json\n{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}\n```',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}',  # no close tag
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400',  # cut short
        "<tool_call>{'name': 'crop', 'arguments': {'image': 'Picture 1', 'bbox': [10, 20, 300, 400]}}</tool_call>",
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400,],},}</tool_call>',
        '<tool_call>{name: "crop", arguments: {image: "Picture 1", bbox: [10, 20, 300, 400]}}</tool_call>',
        "<tool_call>{name: crop, arguments: {image: Picture 1, bbox: [10, 20, 300, 400]}}</tool_call>",  # bare words
        '{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}',  # bare object
        'I will zoom in. {"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}',
        '<tool_call>{"name": "crop", "parameters": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}</tool_call>',
        '<tool_call>{"name": "crop", "args": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}</tool_call>',
        '<tool_call>{"name": "crop", "arguments": "{\\"image\\": \\"Picture 1\\", \\"bbox\\": [10, 20, 300, 400]}"}'
        "</tool_call>",  # arguments as a JSON string
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": "[10, 20, 300, 400]"}}</tool_call>',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": "10, 20, 300, 400"}}</tool_call>',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": ["10", "20", "300", "400"]}}',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [[10, 20, 300, 400]]}}',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": (10, 20, 300, 400)}}',  # tuple
        '<tool_call>{"name": "crop", "arguments": {"image": "picture1", "bbox": [10, 20, 300, 400]}}',  # id spelling
        '<tool_call>{"name": "Crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}',
        '<tool_call>{"type": "function", "function": {"name": "crop", "arguments": '
        '"{\\"image\\": \\"Picture 1\\", \\"bbox\\": [10, 20, 300, 400]}"}}</tool_call>',  # OpenAI wrapper
        '<tool_call>{"name": "crop", "image": "Picture 1", "bbox": [10, 20, 300, 400]}</tool_call>',  # flattened
        '<tool_call>{"crop": {"image": "Picture 1", "bbox": [10, 20, 300, 400]}}</tool_call>',
        '<tool_call>{"name": "crop", // zoom\n "arguments": {"image": "Picture 1" /* p1 */ "bbox": [10 20 300 400]}}',
        '<tool_call>{"name": "crop", "arguments": {"image": "Picture 1", "bbox": [10, 20, 300, 400], "id": null}}',
    ],
)
def test_lenient_forms_of_one_crop(text):
    a = ok(text)
    assert (a.name, a.args) == ("crop", CROP)


def test_python_literals_numeric_strings_and_aliases():
    text = (
        "<tool_call>{'name': 'summarize_and_memorize', 'arguments': {'summary': 'ok', 'memorize': "
        "[{'info_id': 'picture 2', 'useful': True, 'priority': '4', 'key_timestamps': None}, "
        "{'information_id': 'Video 1', 'is_useful': 'false', 'priority_score': 2.0, "
        "'key_timestamp': ['01:05', '3.5', 7]}]}}</tool_call>"
    )
    a = ok(text)
    assert a.args == {
        "summarize": "ok",
        "memorize": [
            {"information_id": "Picture 2", "is_useful": True, "priority_score": 4},
            {"information_id": "Video 1", "is_useful": False, "priority_score": 2, "key_timestamp": [65, 3.5, 7]},
        ],
    }


def test_single_values_become_lists_and_repeats_collapse():
    a = ok(call("add_answer_node", {"answer": 42, "parent_id": "s1"}))
    assert a.args == {"answer": "42", "parent_ids": ["s1"]}
    a = ok(call("add_search_node", {"id": "s2", "query": "q", "parent_ids": ["s1", "S1", "root"]}))
    assert a.args["parent_ids"] == ["s1", "root"]
    a = ok(
        call(
            "summarize_and_memorize",
            {"summarize": "x", "memorize": {"information_id": "Text 1", "is_useful": 1, "priority_score": 3}},
        )
    )
    assert a.args["memorize"] == [{"information_id": "Text 1", "is_useful": True, "priority_score": 3}]


def test_python_only_syntax_falls_back_to_literal_eval():
    a = ok("<tool_call>{'name': 'answer', 'arguments': {'answer': 'Par' 'is'}}</tool_call>", "react")
    assert a.args == {"answer": "Paris"}


def test_unknown_arguments_are_dropped_with_a_warning():
    a = ok(call("search", {"query": "q", "top_k": 5}), "react")
    assert a.args == {"query": "q"}
    assert any("top_k" in w and "query" in w for w in a.warnings)


def test_only_the_first_of_several_calls_runs():
    two = call("search", {"query": "first"}) + "\n" + call("answer", {"answer": "x"})
    a = ok(two, "react")
    assert a.args == {"query": "first"} and "only one tool call per turn" in a.warnings[0]
    bare = 'Plan {a} then {"name": "search", "arguments": {"query": "one"}} {"name": "search", "arguments": {}}'
    a = ok(bare, "react")
    assert a.args == {"query": "one"} and "ignored the other 1" in a.warnings[0]
    listed = (
        '<tool_call>[{"name": "search", "arguments": {"query": "a"}}, {"name": "answer", '
        '"arguments": {"answer": "b"}}]</tool_call>'
    )
    assert ok(listed, "react").warnings


def test_think_and_prose_are_kept():
    assert ok("<think>need the table</think>\n" + call("search", {"query": "q"}), "react").think == "need the table"
    assert ok("I should look.\n" + call("search", {"query": "q"}), "react").think == "I should look."
    # Qwen3's template opens <think> itself, so the output starts inside it
    assert ok("reasoning here</think>" + call("search", {"query": "q"}), "react").think == "reasoning here"
    # a call quoted in the reasoning is not the call; the one after </think> is
    quoted = "<think>maybe " + call("answer", {"answer": "no"}) + "</think>" + call("search", {"query": "yes"})
    assert ok(quoted, "react").args == {"query": "yes"}
    # an unclosed think that holds the call still yields it
    assert ok("<think>let me search " + call("search", {"query": "q"}), "react").think == "let me search"


def test_overlong_output_is_read_up_to_the_cap():
    a = ok(call("search", {"query": "q"}) + " " * (MAX_CHARS * 3), "react")
    assert any(str(MAX_CHARS) in w for w in a.warnings)
    rejected(" " * MAX_CHARS + call("search", {"query": "q"}), "react", None, "empty_output")


# ---- VRAG tags -----------------------------------------------------------------------------------------
def test_vrag_action_is_the_first_complete_tag_think_included():
    # VRAG-RL (generation.py lines 93-108, 652-658): the first <search|answer|bbox> match in the kept tags, so a
    # search written inside <think> runs before the answer after it
    a = ok("<think>I could <search>x</search> first</think><answer>y</answer>", "vrag")
    assert (a.name, a.args, a.think) == ("search", {"query": "x"}, "I could <search>x</search> first")
    assert a.warnings == []  # later tags are ignored silently, as in VRAG-RL
    a = ok("<think>I could <answer>guess</answer> but</think>\n<search>revenue 2023</search><answer>x</answer>", "vrag")
    assert (a.name, a.args) == ("answer", {"answer": "guess"})
    a = ok("<think>t</think><search>unclosed <answer>done</answer>", "vrag")  # leftmost *complete* tag
    assert (a.name, a.args) == ("answer", {"answer": "done"})
    assert ok("<think>only inside <answer>x</answer></think>", "vrag").args == {"answer": "x"}
    assert ok("Sure. <search> revenue by region </search> then", "vrag").args == {"query": "revenue by region"}


def test_vrag_is_exact_where_vrag_rl_calls_an_action_invalid():
    # case-sensitive, no stop strings (so an unclosed tag is no action), bbox read by json.loads: 4 numbers >= 0
    rejected("<ANSWER> Paris </ANSWER>", "vrag", None, "no_action", "<search>")
    rejected("<think>t</think><answer>Paris<|im_end|>", "vrag", None, "no_action", "complete")
    for body in ("10, 20, 30, 40", "[10.5, '20', 30, 40,]", "[[10, 20, 30, 40]]", "[1, 2, -3, 4]", "[1, 2, 3]"):
        rejected(f"<bbox>{body}</bbox>", "vrag", None, "bad_bbox", "JSON list of four numbers >= 0")
    assert ok("<bbox>[10.5, 20, 30, 40]</bbox>", "vrag").args == {"bbox": [10.5, 20, 30, 40]}
    c = ctx()
    c.current_image = "Picture 1"  # 640x480: a box at y=600 is outside it, though inside Picture 2
    rejected("<bbox>[10, 600, 30, 700]</bbox>", "vrag", c, "bbox_outside", "Picture 1", "640x480")
    assert ok("<bbox>[10, 600, 30, 700]</bbox>", "vrag").args["bbox"] == [10, 600, 30, 700]  # last image: Picture 2


def test_vrag_rejections():
    rejected("I think the answer is 5.", "vrag", None, "no_action", "<search>")
    rejected(call("search", {"query": "q"}), "vrag", None, "no_action", "tool calls are not this protocol")
    rejected("<search>   </search>", "vrag", None, "empty_value", "`query` is empty")
    rejected("<answer></answer>", "vrag", None, "empty_answer", "`answer` is empty")
    rejected("<bbox>the top left corner</bbox>", "vrag", None, "bad_bbox", "got 'the top left corner'")
    no_image = Context(node_ids={"root"}, info_ids={"Text 1": None})
    r = parse("<bbox>[1, 2, 30, 40]</bbox>", "vrag", no_image)
    assert r.reason == "not_an_image" and "search> first" in r.observation


def test_records_round_trip():
    a = ok(call("search", {"query": "q", "k": 1}), "react")
    assert Action.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    r = parse("x", "react")
    assert Rejection.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_tool_specs_are_plain_function_schemas():
    names = {p: [s["function"]["name"] for s in tool_specs(p)] for p in ("vimrag", "react", "vrag")}
    assert names == {
        "vimrag": ["add_search_node", "summarize_and_memorize", "crop", "scale", "add_answer_node"],
        "react": ["search", "crop", "scale", "answer"],
        "vrag": ["search", "crop", "answer"],
    }
    text = json.dumps(tool_specs("vimrag"))
    assert '"x-' not in text  # our private schema keys stay private
    crop = tool_specs("vimrag")[2]["function"]
    assert crop["parameters"]["required"] == ["image", "bbox"] and crop["description"]
    assert crop["parameters"]["properties"]["bbox"]["minItems"] == 4
    memo = tool_specs("vimrag")[1]["function"]["parameters"]["properties"]["memorize"]["items"]
    assert memo["properties"]["priority_score"]["maximum"] == 5
