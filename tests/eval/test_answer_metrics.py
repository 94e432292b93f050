"""Hand-worked cases for eval/answer_metrics.py: MMLongBench-Doc's rules by format, its accuracy/F1,
rule-based extraction, and the generic metrics."""

import pytest

from eval.answer_extract import extract_answer
from eval.answer_metrics import anls, exact_match, numeric_match, score_item, token_f1
from eval.mmlb_rules import (
    NOT_ANSWERABLE,
    anls_score,
    clean_string,
    float_equal,
    is_exact_match_string,
    mmlb_acc_f1,
    mmlb_score,
    parse_list,
)

# --- cleaning and exact-match strings ------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("  Berlin School (Germany) ", "berlin school"),
        ("'red'", "red"),
        ('"$1200"', "1200"),
        ("72.3%", "72.3"),
        ("300 miles", "300 miles"),  # upstream's unit stripping is a no-op; we keep the unit too
        ("5 million", "5 million"),
    ],
)
def test_clean_string(raw, clean):
    assert clean_string(raw) == clean


@pytest.mark.parametrize(
    "s, exact",
    [
        ("https://github.com/x", True),
        ("train.py", True),
        ("demo.ipynb", True),
        ("page 12", True),
        ("555-1234", True),
        ("555 1234", True),
        ("42", True),
        ("10 a.m.", True),
        ("2019-05-01", True),
        ("2019 05", True),
        ("me@example.org", True),
        ("less well-off", False),
        ("12.5", False),
    ],
)
def test_exact_match_strings(s, exact):
    assert is_exact_match_string(s) is exact


# --- Str / None --------------------------------------------------------------------------------


def test_str_anls_and_threshold_edge():
    # "less well-off" vs "less well off": 1 edit over 13 characters.
    assert mmlb_score("Less well-off", "less well off", "Str") == pytest.approx(1 - 1 / 13)
    assert anls_score("abcd", "abce") == pytest.approx(0.75)
    assert anls_score("ab", "ax") == 0.0  # exactly 0.5 is zeroed
    assert anls_score("abc", "abx") == pytest.approx(2 / 3)
    assert mmlb_score("ab", "ax", "Str") == 0.0


def test_str_exact_match_strings_do_not_get_partial_credit():
    assert mmlb_score("https://example.org/a", "https://example.org/b", "Str") == 0.0
    assert mmlb_score("https://example.org/a", "https://example.org/a", "Str") == 1.0
    assert mmlb_score("2019-05-01", "2019-05-02", "Str") == 0.0
    assert mmlb_score("2015-2016", "2015-2016", "Str") == 1.0
    assert mmlb_score("2015-2016", "2015-2017", "Str") == 0.0
    assert mmlb_score("$1200", "1200", "Str") == 1.0


def test_str_units_kept_like_upstream():
    # 1 - 6/9 = 0.33 <= 0.5 -> 0; upstream scores it 0 too because its unit stripping is discarded.
    assert mmlb_score("300 miles", "300", "Str") == 0.0
    assert mmlb_score("Berlin School (Germany)", "berlin school", "Str") == 1.0


def test_not_answerable_scoring():
    assert mmlb_score(NOT_ANSWERABLE, NOT_ANSWERABLE, "None") == 1.0
    assert mmlb_score(NOT_ANSWERABLE, "not answerable", "None") == 1.0
    assert mmlb_score(NOT_ANSWERABLE, "3", "None") == 0.0
    assert mmlb_score("red", NOT_ANSWERABLE, "Str") == 0.0


# --- Int ---------------------------------------------------------------------------------------


def test_int_rule():
    assert mmlb_score("12", "12.0", "Int") == 1.0
    assert mmlb_score("12", "12.7", "Int") == 1.0  # int(float(pred)) truncates, as upstream
    assert mmlb_score("12", "13", "Int") == 0.0
    assert mmlb_score("12", "twelve", "Int") == 0.0
    assert mmlb_score("12", "", "Int") == 0.0
    assert mmlb_score("12", "nan", "Int") == 0.0


# --- Float -------------------------------------------------------------------------------------


def test_float_percent_forms():
    assert mmlb_score("18.29%", "18.3", "Float") == 1.0  # |18.29-18.3| <= 1% of 18.3
    assert mmlb_score("18.29%", "0.1829", "Float") == 1.0  # gold/100
    assert mmlb_score("18.29%", "18.29%", "Float") == 1.0
    assert mmlb_score("0.45", "45%", "Float") == 1.0  # gold*100
    assert mmlb_score("18.29%", "19", "Float") == 0.0
    assert mmlb_score("21%", "21 percent", "Float") == 0.0  # not a float after cleaning
    assert mmlb_score("21%", "", "Float") == 0.0


def test_float_rounding_beyond_tolerance():
    # 0.0054 is 8% off 0.005, but both round to 0.005 at min(4, 3) = 3 places.
    assert float_equal(0.005, 0.0054)
    assert mmlb_score("0.005", "0.0054", "Float") == 1.0
    # 0.0056 rounds to 0.006; gold/100 and gold*100 do not match either.
    assert mmlb_score("0.005", "0.0056", "Float") == 0.0


# --- List --------------------------------------------------------------------------------------


def test_list_parsing():
    assert parse_list("['a', 'b']") == ["a", "b"]
    assert parse_list("[1500, 8000]") == [1500, 8000]
    assert parse_list("[a, b and c]") == ["a", "b", "c"]  # not a literal: split the content
    assert parse_list("__import__('os')") == ["__import__('os')"]  # never evaluated
    assert parse_list("[__import__('os')]") == ["__import__('os')"]


def test_list_order_and_case_do_not_matter():
    assert mmlb_score("['Circle', 'Rectangle']", "['rectangle', 'circle']", "List") == 1.0
    assert mmlb_score("[16, 19, 25]", "['25', '16', '19']", "List") == 1.0


def test_list_length_mismatch_scores_zero():
    assert mmlb_score("['a', 'b']", "['a']", "List") == 0.0
    assert mmlb_score("['circle', 'rectangle']", "circle, rectangle", "List") == 0.0  # one item
    assert mmlb_score("[]", "['a']", "List") == 0.0


def test_list_numeric_is_exact_text_is_min_anls():
    assert mmlb_score("[16, 19, 25]", "[16, 19, 26]", "List") == 0.0
    # green/green = 1, yellow/yelow = 1 - 1/6: the minimum over pairs.
    assert mmlb_score("['green', 'yellow']", "['Green', 'yelow']", "List") == pytest.approx(5 / 6)
    assert mmlb_score("['green', 'yellow']", "['green', 'purple']", "List") == 0.0
    assert mmlb_score("[]", "[]", "List") == 1.0


# --- accuracy and F1 ---------------------------------------------------------------------------


def test_acc_f1_hand_worked():
    rows = [
        {"gold": ["A"], "extracted": "A", "score": 1.0},
        {"gold": ["B"], "extracted": "x", "score": 0.0},
        {"gold": [NOT_ANSWERABLE], "extracted": NOT_ANSWERABLE, "score": 1.0},
        {"gold": ["C"], "extracted": NOT_ANSWERABLE, "score": 0.0},
        {"gold": ["D"], "extracted": "D"},  # unscored rows are left out
    ]
    acc, f1 = mmlb_acc_f1(rows)
    assert acc == pytest.approx(0.5)
    # recall = 1/3 (three answerable golds), precision = 1/2 (two non-NA predictions)
    assert f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_acc_f1_zero_denominators():
    only_na = [{"gold": [NOT_ANSWERABLE], "extracted": NOT_ANSWERABLE, "score": 1.0}]
    assert mmlb_acc_f1(only_na) == (1.0, 0.0)  # no answerable gold
    all_declined = [{"gold": ["A"], "extracted": NOT_ANSWERABLE, "score": 0.0}]
    assert mmlb_acc_f1(all_declined) == (0.0, 0.0)  # no non-NA prediction
    all_wrong = [{"gold": ["A"], "extracted": "B", "score": 0.0}]
    assert mmlb_acc_f1(all_wrong) == (0.0, 0.0)  # P + R == 0
    assert mmlb_acc_f1([]) == (0.0, 0.0)
    assert mmlb_acc_f1([{"gold": "A", "extracted": "A", "score": 1.0}]) == (1.0, 1.0)  # gold as str


# --- extraction --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pred, fmt, out",
    [
        (None, "Int", ""),
        ("   ", "Str", ""),
        ("This is not mentioned in the document.", "Str", NOT_ANSWERABLE),
        ("The value cannot be determined from page 3.", "Int", NOT_ANSWERABLE),
        ("There is no information about it.", "List", NOT_ANSWERABLE),
        ("Unanswerable", "Float", NOT_ANSWERABLE),
        ("There are 1,240 respondents.", "Int", "1240"),
        ("Answer: 12.0", "Int", "12"),
        ("12.0", "Int", "12"),
        ("Answer: twelve charts", "Int", "12"),
        ("twelve figures appear", "Int", "12"),
        ("There are two charts on page 5.", "Int", "2"),  # the first number, digits or words
        ("COVID-19 caused 3 waves", "Int", "19"),  # hyphen is not a minus sign
        ("no digits here", "Int", "no digits here"),
        ("About 18.29% of adults.", "Float", "18.29%"),
        ("It rose by 7 percent.", "Float", "7%"),
        ("The total is $1,240.50.", "Float", "1240.50"),
        ("The change was -0.45", "Float", "-0.45"),
        ("The ratio is -0.45", "Float", "-0.45"),
        ("The colors are ['green', 'yellow'].", "List", "['green', 'yellow']"),
        ("See [1]: the items are ['a', 'b']", "List", "['a', 'b']"),
        ("[1500, 8000]", "List", "['1500', '8000']"),
        ("Answer: circle, rectangle and triangle.", "List", "['circle', 'rectangle', 'triangle']"),
        ("red; blue", "List", "['red', 'blue']"),
        ("1,240 and 2,300", "List", "['1,240', '2,300']"),  # thousands separators are not splits
        ("1. red\n2. blue", "List", "['red', 'blue']"),
        ("Answer: Less well-off.", "Str", "Less well-off"),
        ("Eiffel Tower", "", "Eiffel Tower"),
    ],
)
def test_extract_answer(pred, fmt, out):
    assert extract_answer(pred, fmt) == out


def test_extracted_lists_round_trip_through_the_scorer():
    extracted = extract_answer("The shapes are Rectangle and Circle.", "List")
    assert mmlb_score("['Circle', 'Rectangle']", extracted, "List") == 1.0


# --- generic metrics ---------------------------------------------------------------------------


def test_anls_generic():
    assert anls("The  CAT ", ["the cat"]) == 1.0
    assert anls("cat", ["dog", "cats"]) == pytest.approx(0.75)  # best over golds
    assert anls("ab", ["ax"]) == 0.0
    assert anls(None, ["x"]) == 0.0


def test_exact_match_and_token_f1():
    assert exact_match("The Paris!", ["paris"]) == 1.0
    assert exact_match("an  apple", "apple") == 1.0
    assert exact_match("Paris, France", ["Paris"]) == 0.0
    assert token_f1("Paris France", ["Paris"]) == pytest.approx(2 / 3)
    assert token_f1("Paris France", ["Lyon", "France Paris"]) == 1.0
    assert token_f1("", [""]) == 1.0
    assert token_f1("x", ["y"]) == 0.0


def test_numeric_match():
    assert numeric_match("about 18%", ["0.18"]) == 1.0
    assert numeric_match("0.18", ["18%"]) == 1.0
    assert numeric_match("18.1", ["18.2"]) == 1.0  # within 1%
    assert numeric_match("18.5", ["18.2"]) == 0.0
    assert numeric_match("3", ["300"]) == 0.0  # no percent sign: no x100 variant
    assert numeric_match("page 4 shows 1,240", ["1240 people"]) == 0.0  # two numbers: which one is the answer?
    assert numeric_match("1,240 people", ["1240 people"]) == 1.0
    assert numeric_match("12", ["Not answerable"]) is None
    assert numeric_match("0.5", ["0.5"], rel_tol=0.0) == 1.0


# --- one row -----------------------------------------------------------------------------------


def test_score_item_mmlb_row():
    out = score_item({"pred": "The answer is 0.1829", "gold": ["18.29%"], "answer_format": "Float"})
    assert out["extracted"] == "0.1829"
    assert out["scores"]["mmlb"] == 1.0 and out["score"] == 1.0
    assert out["scores"]["judge"] is None
    assert set(out["scores"]) == {"mmlb", "anls", "em", "f1", "num", "judge"} and out["scored_by"] == "mmlb"


def test_score_item_not_answerable_row():
    row = {"pred": "The report does not say; not answerable.", "gold": [NOT_ANSWERABLE], "answer_format": "None"}
    out = score_item(row)
    assert out["extracted"] == NOT_ANSWERABLE and out["score"] == 1.0
    assert out["scores"]["num"] is None


def test_score_item_without_format_uses_generic_scores():
    out = score_item({"pred": "Roughly 18 percent", "gold": ["0.18"], "answer_format": ""})
    assert out["scores"]["mmlb"] is None
    assert out["scores"]["num"] == 1.0 and out["score"] == 1.0
    near = score_item({"pred": "Eiffel Towr", "gold": ["Eiffel Tower"], "answer_format": ""})
    assert near["scores"]["em"] == 0.0 and near["scores"]["anls"] > 0.5 and near["score"] == 1.0
    miss = score_item({"pred": None, "gold": ["Eiffel Tower"], "answer_format": ""})
    assert miss["extracted"] == "" and miss["score"] == 0.0


@pytest.mark.parametrize(
    "pred",
    ["They include: circle, rectangle", "These shapes are circle and rectangle.", "- rectangle\n- circle"],
)
def test_list_lead_ins_are_dropped(pred):
    assert mmlb_score("['Circle', 'Rectangle']", extract_answer(pred, "List"), "List") == 1.0


def test_trailing_period_kept_after_initials():
    assert extract_answer("1884 April 5, 10 45 a.m.", "Str") == "1884 April 5, 10 45 a.m."
    assert mmlb_score("1884 April 5, 10 45 a.m.", extract_answer("1884 April 5, 10 45 a.m.", "Str"), "Str") == 1.0
    assert extract_answer("Melinda D.", "Str") == "Melinda D."
    assert extract_answer("Scott Bradley.", "Str") == "Scott Bradley"


# --- a scorer that cannot be fooled (issue 31) ------------------------------------------------------------
THREE_M = "Operating margin for 3M fell by 1.7% in FY2022, mainly because of higher raw material costs"


def test_a_sentence_that_mentions_a_number_is_not_a_numeric_gold():
    out = score_item({"pred": "effect on 3M's consolidated results of", "gold": [THREE_M], "answer_format": ""})
    assert out["scores"]["num"] is None and out["scored_by"] == "overlap" and out["score"] == 0.0
    close = score_item({"pred": "3M's operating margin fell by 1.7% in FY2022", "gold": [THREE_M]})
    assert close["score"] == 1.0  # the sentence's gist, by token overlap


def test_the_answer_number_is_the_one_given_not_any_mentioned():
    assert score_item({"pred": "1373, 1577", "gold": ["$1577.00"], "answer_format": ""})["score"] == 0.0
    assert score_item({"pred": "1,577", "gold": ["$1577.00"], "answer_format": ""})["score"] == 1.0
    assert score_item({"pred": "$1,577 million", "gold": ["$1577.00"]})["score"] == 1.0  # a scale on one side
    assert score_item({"pred": "15,900,000", "gold": ["15.9 million"]})["score"] == 1.0


def test_digits_in_names_are_not_numbers():
    year = "In which fiscal year did the operating margin peak?"
    assert score_item({"pred": "FY2022", "gold": ["2022"], "question": "How many plants were opened?"})["score"] == 0.0
    assert score_item({"pred": "FY2022", "gold": ["2022"], "question": year})["score"] == 1.0
    for pred in ("3M", "Q3", "COVID-19", "A4"):
        assert numeric_match(pred, ["3"]) == 0.0 and numeric_match(pred, ["19"]) == 0.0
    assert numeric_match("$3M", ["3 million"]) == 1.0  # a currency makes the M a scale
