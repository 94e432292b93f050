"""rl/rewards.py: each reward on hand-worked inputs, called the way TRL calls reward functions
(prompts, completions, **per-sample columns), the judge fallback with a stub judge, and the columns
built from an agent Trace."""

import math

import pytest

from agent.events import StepRecord, Trace
from eval.datasets import EvalItem, Gold
from rl.rewards import (
    REWARDS,
    answer_reward,
    collate_reward_inputs,
    format_reward,
    retrieval_reward,
    trajectory_reward_inputs,
    vimrag_binary_reward,
    vrag_composite_reward,
    vrag_exact_reward,
    vrag_ndcg,
)


class StubJudge:
    """Answers from a script keyed by prediction; records every question it is asked."""

    def __init__(self, verdicts: dict[str, float | None]):
        self.verdicts = verdicts
        self.calls: list[tuple[str, list[str], str]] = []

    def score(self, question, gold_answers, pred):
        self.calls.append((question, list(gold_answers), pred))
        return self.verdicts.get(pred)


# -- answer -----------------------------------------------------------------------------------------------
def test_answer_reward_rules_by_format():
    completions = ["Answer: 18.3%", "There are 12 charts.", "twelve", "Scott Bradly", "the Eiffel Tower.", "Rome"]
    gold = [["18.29%"], ["12"], ["13"], ["Scott Bradley"], ["Eiffel Tower"], ["Paris"]]
    fmt = ["Float", "Int", "Int", "Str", "", ""]
    out = answer_reward(["q"] * 6, completions, gold=gold, answer_format=fmt)
    # Str uses ANLS: 1 - 1/13 (one letter missing); unformatted rows use max(EM, numeric, ANLS >= 0.5)
    assert out == pytest.approx([1.0, 1.0, 0.0, 1 - 1 / 13, 1.0, 0.0])


def test_answer_reward_empty_answers_and_conversations():
    out = answer_reward(
        ["q"] * 3, [None, "  ", [{"role": "assistant", "content": "12"}]], gold=[["12"]] * 3, answer_format=["Int"] * 3
    )
    assert out == [0.0, 0.0, 1.0]
    # answer_format may be left out entirely: generic rules
    assert answer_reward(["q"], ["Paris"], gold=[["paris"]]) == [1.0]
    assert answer_reward(["q"], ["Paris"], gold=["Paris"]) == [1.0]  # a bare string gold is one answer


def test_answer_reward_uses_the_judge_and_falls_back_on_unclear_verdicts():
    judge = StubJudge({"twelve-ish": 1.0, "12": None, "13": 0.0})
    prompts = [[{"role": "user", "content": "How many charts?"}]] * 4
    out = answer_reward(
        prompts, ["twelve-ish", "12", "13", ""], gold=[["12"]] * 4, answer_format=["Int"] * 4, judge=judge
    )
    # judge says yes | unclear -> rules (12 == 12) | judge says no | empty: 0 without asking the judge
    assert out == [1.0, 1.0, 0.0, 0.0]
    assert [c[2] for c in judge.calls] == ["twelve-ish", "12", "13"]
    assert judge.calls[0][:2] == ("How many charts?", ["12"])  # the question is the prompt's text
    answer_reward(["prompt text"], ["x"], gold=[["y"]], question=["the real question"], judge=judge)
    assert judge.calls[-1][0] == "the real question"  # an explicit question column wins


def test_judge_overrides_rules_in_both_directions():
    judge = StubJudge({"12": 0.0})
    assert answer_reward(["q"], ["12"], gold=[["12"]], answer_format=["Int"], judge=judge) == [0.0]
    assert answer_reward(["q"], ["12"], gold=[["12"]], answer_format=["Int"]) == [1.0]


# -- retrieval and format -------------------------------------------------------------------------------
def test_retrieval_reward_ndcg_hand_computed():
    g1, g2 = ("a.pdf", 3, None), ("a.pdf", 9, None)
    ranked = [("unit", "u7"), g1, g2]
    out = retrieval_reward(
        ["q"] * 4, ["x"] * 4, retrieved=[ranked, ranked, [], ranked], gold_pages=[[g1, g2], [g1], [g1], []]
    )
    ideal2 = 1 + 1 / math.log2(3)
    assert out[0] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal2)  # 0.6934
    assert out[1] == pytest.approx(1 / math.log2(3))
    assert out[2] == 0.0  # nothing retrieved
    assert out[3] == 0.0  # no gold: 0, not an error
    assert retrieval_reward(["q"], ["x"], retrieved=[ranked], gold_pages=[[g1]], k=1) == [0.0]


def test_retrieval_reward_reads_json_lists_as_keys():
    # after a JSON round trip the tuple keys are lists; they must still match
    out = retrieval_reward(
        ["q"], ["x"], retrieved=[[["unit", "u1"], ["a.pdf", 3, None]]], gold_pages=[[("a.pdf", 3, None)]]
    )
    assert out == [pytest.approx(1 / math.log2(3))]


def test_format_reward():
    assert format_reward(["q"] * 3, ["a", "b", None], format_ok=[True, False, True]) == [1.0, 0.0, 1.0]


def test_missing_or_misaligned_columns_name_the_fix():
    with pytest.raises(KeyError, match="format_ok"):
        format_reward(["q"], ["a"])
    with pytest.raises(ValueError, match="'gold' has 2 entries for 1 completions"):
        answer_reward(["q"], ["a"], gold=[["a"], ["b"]])


# -- composites -------------------------------------------------------------------------------------------
def composite_kwargs(n: int, **over):
    kw = {
        "gold": [["12"]] * n,
        "answer_format": ["Int"] * n,
        "retrieved": [[("x",), ("g",)]] * n,
        "gold_pages": [[("g",)]] * n,
        "format_ok": [True] * n,
        "searched": [True] * n,
        "replies": ["<search>q</search>\n<answer>12</answer>"] * n,
        "inserted": [[("x",), ("g",)]] * n,
    }
    kw.update(over)
    return kw


def test_vrag_composite_hand_worked():
    kw = composite_kwargs(3, format_ok=[True, False, True])
    out = vrag_composite_reward(["q"] * 3, ["12", "12", "13"], **kw)
    ndcg = 1 / math.log2(3)  # gold at rank 2
    assert out[0] == pytest.approx(0.7 + 0.2 * ndcg + 0.1)
    assert out[1] == pytest.approx(0.7 + 0.2 * ndcg)  # malformed call somewhere: no format point
    assert out[2] == pytest.approx(0.2 * ndcg + 0.1)  # wrong answer keeps retrieval and format credit


def test_vrag_composite_is_zero_unless_searched_and_answered():
    kw = composite_kwargs(4, searched=[False, True, True, True])
    out = vrag_composite_reward(["q"] * 4, ["12", None, "   ", "12"], **kw)
    assert out[:3] == [0.0, 0.0, 0.0]
    assert out[3] > 0.9


def test_vimrag_binary_reward_thresholds_at_one_half():
    completions = ["Scott Bradly", "Sc Brad", "S B", "12", "Rome"]
    gold = [["Scott Bradley"], ["Scott Bradley"], ["Scott Bradley"], ["12"], ["Paris"]]
    fmt = ["Str", "Str", "Str", "Int", "Str"]
    cont = answer_reward(["q"] * 5, completions, gold=gold, answer_format=fmt)
    # ANLS against "scott bradley" (13 chars): 1 - 1/13; 1 - 6/13 = 0.538 (just above 0.5); 1 - 10/13 -> 0
    assert cont[:3] == pytest.approx([1 - 1 / 13, 1 - 6 / 13, 0.0])
    out = vimrag_binary_reward(["q"] * 5, completions, gold=gold, answer_format=fmt)
    assert out == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert out == [1.0 if c >= 0.5 else 0.0 for c in cont]
    judged = vimrag_binary_reward(["q"], ["Rome"], gold=[["Paris"]], judge=StubJudge({"Rome": 1.0}))
    assert judged == [1.0]


def test_every_registered_reward_has_the_trl_signature():
    assert set(REWARDS) == {"answer", "retrieval", "format", "vrag_exact", "vrag_ndcg5", "vimrag"}
    prompts = [[{"role": "user", "content": "How many?"}]] * 2
    completions = [[{"role": "assistant", "content": "12"}], [{"role": "assistant", "content": "7"}]]
    for name, fn in REWARDS.items():
        out = fn(prompts=prompts, completions=completions, **composite_kwargs(2), trainer_state=None)
        assert isinstance(out, list) and len(out) == 2 and all(isinstance(v, float) for v in out), name
        assert out[0] >= out[1], name  # the right answer never scores below the wrong one


# -- from a trace -----------------------------------------------------------------------------------------
def unit(uid: str, source: str, page: int) -> dict:
    return {"uid": uid, "source": source, "page": page, "modality": "page"}


def make_trace(answer: str | None = "12", malformed: bool = True, search: bool = True) -> Trace:
    evidence = {
        "Picture 1": {"info_id": "Picture 1", "unit": unit("u1", "/d/a.pdf", 1), "parent": ""},
        "Picture 2": {"info_id": "Picture 2", "unit": unit("u2", "/d/a.pdf", 3), "parent": ""},
        "Picture 3": {"info_id": "Picture 3", "unit": unit("u2", "/d/a.pdf", 3), "parent": "Picture 2"},  # a crop
        "Text 1": {"info_id": "Text 1", "unit": unit("u9", "/d/a.pdf", 3), "parent": ""},  # same page, as text
        "Picture 4": {"info_id": "Picture 4", "unit": unit("u4", "/d/b.pdf", 5), "parent": ""},
    }
    steps = [
        StepRecord(
            1,
            [],
            action={"name": "add_search_node", "args": {"query": "q"}} if search else None,
            node_id="s1" if search else "",
            observation="" if search else "not a tool call",
        ),
        StepRecord(2, [], action=None, observation="malformed tool call: missing 'id'")
        if malformed
        else StepRecord(2, [], action={"name": "summarize_and_memorize", "args": {}}, node_id="s1"),
        # a well-formed call whose tool failed: not a format error
        StepRecord(3, [], action={"name": "crop", "args": {}}, observation="the crop tool failed: box outside"),
        StepRecord(4, [], action={"name": "add_answer_node", "args": {"answer": answer}}, node_id="a1"),
    ]
    events = [{"type": "search_results", "step": 1, "node_id": "s1", "results": [{"info_id": "Picture 1"}]}]
    return Trace(
        question="How many?",
        protocol="vimrag",
        backend="fake",
        status="answered",
        answer=answer,
        evidence=evidence,
        steps=steps,
        events=events if search else [],
    )


def item(evidence_ok: bool = True) -> EvalItem:
    return EvalItem(
        id="q1",
        question="How many?",
        answers=["12"],
        evidence=[Gold("a.pdf", 3)],
        answer_format="Int",
        evidence_ok=evidence_ok,
    )


def test_trajectory_reward_inputs_from_a_trace():
    row = trajectory_reward_inputs(make_trace(), item())
    assert row["completion"] == "12" and row["question"] == "How many?"
    assert row["gold"] == ["12"] and row["answer_format"] == "Int"
    # a.pdf p.1 (not gold), then p.3 once: the crop is skipped and the text chunk of the same page is a repeat
    assert row["retrieved"] == [("unit", "u1"), ("a.pdf", 3, None), ("unit", "u4")]
    assert row["gold_pages"] == [("a.pdf", 3, None)]
    assert row["searched"] is True and row["format_ok"] is False
    clean = trajectory_reward_inputs(make_trace(malformed=False).to_dict(), item())  # a dict trace works too
    assert clean["format_ok"] is True  # the failed crop tool does not count as a format error
    assert trajectory_reward_inputs(make_trace(), item(evidence_ok=False))["gold_pages"] == []
    no_search = trajectory_reward_inputs(make_trace(search=False, malformed=False), item())
    assert no_search["searched"] is False and no_search["format_ok"] is False  # step 1 did not parse
    assert trajectory_reward_inputs(make_trace(answer=None), item())["completion"] == ""


def test_trace_columns_feed_the_trl_rewards():
    rows = [
        trajectory_reward_inputs(make_trace(malformed=False), item()),
        trajectory_reward_inputs(make_trace(), item()),
        trajectory_reward_inputs(make_trace(search=False), item()),
        trajectory_reward_inputs(make_trace(answer=None), item()),
    ]
    completions, kwargs = collate_reward_inputs(rows)
    assert completions == ["12", "12", "12", ""]
    assert set(kwargs) == {
        "question",
        "gold",
        "answer_format",
        "retrieved",
        "gold_pages",
        "format_ok",
        "searched",
        "replies",
        "inserted",
    }
    assert vrag_exact_reward(["q"] * 4, completions, **kwargs) == [0.0] * 4  # no VRAG tags in these replies
    prompts = ["How many?"] * 4
    ndcg = 1 / math.log2(3)
    assert retrieval_reward(prompts, completions, **kwargs)[0] == pytest.approx(ndcg)
    out = vrag_composite_reward(prompts, completions, **kwargs)
    assert out[0] == pytest.approx(0.7 + 0.2 * ndcg + 0.1)
    assert out[1] == pytest.approx(0.7 + 0.2 * ndcg)  # one malformed call
    assert out[2:] == [0.0, 0.0]  # never searched; never answered
    assert vimrag_binary_reward(prompts, completions, **kwargs) == [1.0, 1.0, 1.0, 0.0]


def test_vrag_ndcg_by_hand_against_vrag_rl():
    # rm.py: DCG over the inserted pages (no cut-off), ideal DCG over *all* gold pages, binary relevance
    assert vrag_ndcg([("g1",)], [("g1",), ("g2",)]) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert vrag_ndcg([("x",), ("g1",)], [("g1",)]) == pytest.approx(1 / math.log2(3))
    # beyond rank 5 still counts: a gold page inserted 7th
    assert vrag_ndcg([("x",)] * 6 + [("g1",)], [("g1",)]) == pytest.approx(1 / math.log2(8))
    # NDCG@5 (our variant) gives that 0
    assert retrieval_reward(["q"], ["a"], retrieved=[[("x",)] * 6 + [("g1",)]], gold_pages=[[("g1",)]]) == [0.0]


def test_vrag_exact_from_a_vrag_trace():
    """A vrag-shaped trace: one search that inserted a.pdf p.3 (gold), then the answer."""
    trace = make_trace(malformed=False)
    trace.steps[0].output = "<think>find it</think>\n<search>q</search>"
    trace.steps[-1].output = "<think>p.3 says 12</think>\n<answer>12</answer>"
    trace.events = [{"type": "search_results", "step": 1, "node_id": "s1", "results": [{"info_id": "Picture 2"}]}]
    row = trajectory_reward_inputs(trace, item())
    assert row["inserted"] == [("a.pdf", 3, None)]
    c, kw = collate_reward_inputs([row])
    assert vrag_exact_reward(["q"], c, **kw) == pytest.approx([0.7 + 0.1 + 0.2])
    # the format term is VRAG-RL's constant once both tags appear, malformed steps or not
    trace.steps[1] = StepRecord(2, [], output="garbage", observation="not a tool call")
    c, kw = collate_reward_inputs([trajectory_reward_inputs(trace, item())])
    assert vrag_exact_reward(["q"], c, **kw) == pytest.approx([1.0])
    assert vrag_composite_reward(["q"], c, **kw)[0] < 1.0  # ours withholds the format point
    wrong = collate_reward_inputs([{**row, "completion": "13"}])
    assert vrag_exact_reward(["q"], *wrong[:1], **wrong[1]) == pytest.approx([0.3])  # 0.1 + 0.2 NDCG
