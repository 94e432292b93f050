"""Lenient JSON on its own: each repair it makes, each refusal, and where a value ends in prose."""

import math

import pytest

from agent.lenient_json import MAX_DEPTH, ParseError, loads, loads_any, value_end


@pytest.mark.parametrize(
    "text, want",
    [
        ("{'a': 'b'}", {"a": "b"}),  # single quotes
        ("{a: 1, b_2: 2}", {"a": 1, "b_2": 2}),  # unquoted keys
        ('{"n": Picture 1, "m": None of the above}', {"n": "Picture 1", "m": "None of the above"}),  # bare words
        ("[1, 2, 3,]", [1, 2, 3]),  # trailing comma
        ("{a: 1,, b: 2}", {"a": 1, "b": 2}),  # doubled comma
        ("[1 2 3]", [1, 2, 3]),  # missing commas
        ('// why\n{"a": /* inline */ 1}', {"a": 1}),  # comments
        ("[True, False, None, null, undefined]", [True, False, None, None, None]),  # Python / JS literals
        ("[0x1F, +5, -2, .5, 1e3]", [31, 5, -2, 0.5, 1000.0]),  # hex, signs, bare fractions, exponents
        ("(1, (2, 3))", [1, [2, 3]]),  # tuples read as lists
        (']]{"a": 1}', {"a": 1}),  # stray closers before the value
        ('{"a": [1, 2}', {"a": [1, 2]}),  # an inner list left open
        ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),  # output cut off after a complete value
        ('{"a": }', {"a": None}),  # a key whose value never came
        (r'{"s": "\x41\u00e9\n\q"}', {"s": "A\u00e9\nq"}),  # escapes, including ones JSON lacks
        ('{"a": 1} and then {"b": 2}', {"a": 1}),  # only the first value is read
    ],
)
def test_repairs(text, want):
    assert loads(text) == want


def test_non_finite_numbers():
    got = loads("[NaN, Infinity, -Infinity, inf, 1e400, -1e400]")
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf, math.inf, math.inf, -math.inf]


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"answer": "cut off mid-val', "never closed"),  # a half answer must not run as if complete
        ("'ends on an escaped quote\\'", "never closed"),
        ("", "no JSON value"),
        ("  // only a comment", "no JSON value"),
        ('{"a": @}', "unexpected character '@'"),
        ("9" * 401, "too long"),
        ("[" * (MAX_DEPTH + 1), f"more than {MAX_DEPTH} levels"),
    ],
)
def test_refusals_say_why(text, words):
    with pytest.raises(ParseError, match=words):
        loads(text)


CUT_OFF = [  # a reply truncated by max tokens inside a string: repairing it would run a half answer as complete
    '{"name": "add_answer_node", "arguments": {"answer": "the capital is Par',
    "{'name': 'search', 'arguments': {'query': 'revenue by reg",
    '{"memorize": [{"information_id": "Picture 1"}, {"information_id": "Pict',
    '{"name": "crop", "argu',  # inside a key
    '{"summarize": "line one\\nline tw',  # after an escape
    '{"answer": "ends right after a backslash \\',
    '{"answer": "é 中 😀',
    '["one", "two", "thr',
]


@pytest.mark.parametrize("text", CUT_OFF)
def test_strings_cut_off_mid_value_are_refused(text):
    with pytest.raises(ParseError, match="never closed.*cut off"):
        loads(text)
    with pytest.raises(ParseError, match="never closed"):
        loads_any(text)


@pytest.mark.parametrize(
    "text, want",
    [
        ('{"answer": "Paris"', {"answer": "Paris"}),
        ('{"answer": "Paris", "parent_ids": ["s1"', {"answer": "Paris", "parent_ids": ["s1"]}),
        ("{'query': 'revenue', 'k': 3", {"query": "revenue", "k": 3}),
    ],
)
def test_cut_off_after_a_complete_string_is_repaired(text, want):
    assert loads(text) == want


def test_nesting_up_to_the_limit_is_read():
    want = []
    for _ in range(MAX_DEPTH - 1):
        want = [want]
    assert loads("[" * MAX_DEPTH) == want


def test_parse_error_is_a_value_error():
    assert issubclass(ParseError, ValueError)


def test_loads_any_falls_back_to_python_literals():
    assert loads_any("{1: 'x', (2, 3): b'y'}") == {1: "x", (2, 3): b"y"}
    assert loads_any("{'a': 1}") == {"a": 1}  # the repair pass answers first


def test_loads_any_keeps_the_repair_error_when_both_fail():
    with pytest.raises(ParseError, match="never closed"):
        loads_any('{"a": "open')
    # a long text is not handed to ast.literal_eval (its parser is recursive), even when it would read it
    with pytest.raises(ParseError):
        loads_any("{1: " + " " * 5_000 + "2}")


def test_value_end_skips_brackets_in_strings():
    text = "call {'q': '}', \"r\": \"]\"} then {'x': 1}"
    end, closed = value_end(text, text.index("{"))
    assert closed and text[text.index("{") : end] == "{'q': '}', \"r\": \"]\"}"


def test_value_end_of_an_unclosed_value_is_the_end_of_the_text():
    assert value_end('x = [1, {"a": 2}', 4) == (16, False)
