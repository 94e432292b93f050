"""The action parser: every tolerance it promises and every rejection reason, by hand-written example."""

import json
import re

import pytest

from agent.actions import MAX_CHARS, Action
from agent.call_format import format_call, format_vrag
from agent.protocols import get, parse, validate
from agent.protocols.schema import specs
from agent.rejections import REASONS, Rejection
from agent.validate import Context


def tool_specs(protocol: str) -> list[dict]:
    return specs(get(protocol).tools)


def ctx() -> Context:
    return Context(
        node_ids={"root", "s1"},
        info_ids={"Picture 1": (640, 480), "Picture 2": (300, 900), "Text 1": None, "Video 1": None},
        memorizable={"Picture 2", "Text 1", "Video 1"},
    )


def call(name, args, tag=True):
    body = json.dumps({"name": name, "arguments": args})
    return f"<tool_call>{body}</tool_call>" if tag else body


def ok(text, protocol="vimrag", c=None) -> Action:
    r = parse(text, protocol, ctx() if c is None else c)
    assert isinstance(r, Action), getattr(r, "observation", r)
    return r


def rejected(text, protocol="vimrag", c=None, reason=None, *words) -> Rejection:
    r = parse(text, protocol, ctx() if c is None else c)
    assert isinstance(r, Rejection), r
    assert r.reason in REASONS and r.observation.strip()
    if reason:
        assert r.reason == reason, r.observation
    for w in words:
        assert w in r.observation, (w, r.observation)
    example = re.split(r"(?i)for example:\n", r.observation)
    assert len(example) == 2, r.observation  # every rejection ends with a correct call ...
    assert isinstance(parse(example[1], protocol, ctx() if c is None else c), Action)  # ... that runs
    return r


CROP = {"image": "Picture 1", "bbox": [10, 20, 300, 400]}

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
