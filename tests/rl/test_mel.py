"""Meta-Experience Learning (rl/mel.py): one pair worked by hand with a scripted reflector (the bifurcation step, the
lesson as an NLL target, its weight in the loss), replies that are refused with a reason, and the trainer going on
through them in one process (under `accelerate launch` with two: tests/rl/test_trainer.py's shared launch)."""

import json
import math
from types import SimpleNamespace

import pytest
import torch

from rl.mel import (
    LessonTarget,
    MalformedReflection,
    lesson_nll,
    lesson_target,
    parse_reflection,
    reflect,
    reflection_prompt,
)
from rl.update import Piece, update_policy
from tests.rl.test_update import Toy, accelerator, cfg, one_token
from tests.rl.tiny_config import tiny_config


def trajectory(reward: float, outputs: list[str], question: str = "Which access code does Tufo Misu use?"):
    steps = [SimpleNamespace(output=o) for o in outputs]
    return SimpleNamespace(item_id="q1", reward=reward, trace=SimpleNamespace(question=question, steps=steps))


GOOD = ["<search>Tufo Misu</search>", "<answer>3466</answer>"]
BAD = ["<search>Tufo Misu</search>", "<answer>1234</answer>"]
LESSON = "Answer with the code printed on the person's own page, not a code seen elsewhere."


def test_one_pair_by_hand_the_prompt_the_bifurcation_step_and_the_files(tmp_path):
    """A group of three: the success 1.0 and the failure 0.0 are paired (0.3 is a failure too, but not the worst);
    the reflector sees both by step and names step 2, where the replies do part; the lesson is written with both."""
    seen = []

    def scripted(prompt: str) -> str:
        seen.append(prompt)
        return 'Here it is: {"step": 2, "lesson": "' + LESSON + '"}'

    group = [trajectory(0.3, BAD), trajectory(1.0, GOOD), trajectory(0.0, BAD[:1])]
    got = reflect([group], {"q1": "3466"}, scripted, update=4, out=tmp_path)
    assert seen == [reflection_prompt(group[1].trace.question, GOOD, BAD[:1])]
    assert "Succeeded:\nStep 1: <search>Tufo Misu</search>\nStep 2: <answer>3466</answer>" in seen[0]
    assert "Failed:\nStep 1: <search>Tufo Misu</search>\n" in seen[0]
    (lesson,) = got["lessons"].values()
    assert list(got["lessons"]) == [id(group[2])]  # the lesson rides with the failed trajectory
    assert (lesson.step, lesson.diverges_at, lesson.lesson, lesson.rewards) == (2, 2, LESSON, (1.0, 0.0))
    row = json.loads((tmp_path / "lessons.jsonl").read_text())
    assert row["update"] == 4 and row["step"] == 2 and row["success"] == GOOD and row["failure"] == BAD[:1]
    assert got["skipped"] == [] and (tmp_path / "skipped.jsonl").read_text() == ""


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("I think step two.", "no JSON object"),
        ('{"step": 2, "lesson": ', "does not parse"),
        ('{"step": "two", "lesson": "x"}', "`step` must be an integer"),
        ('{"step": 0, "lesson": "x"}', "not a step of the pair"),
        ('{"step": 1, "lesson": ""}', "non-empty string"),
        ('{"step": 1, "lesson": "' + "A. " * 5 + '"}', "5 sentences"),
        ('{"step": 1, "lesson": "' + "x" * 601 + '"}', "601 characters"),
        ('{"step": 1, "lesson": "The code is 3466."}', "states this question's answer"),
    ],
)
def test_a_malformed_reply_is_refused_with_its_reason(reply, reason):
    with pytest.raises(MalformedReflection, match=reason):
        parse_reflection(reply, steps=2, answer="3466")


def test_a_skipped_pair_is_logged_and_written_and_the_others_kept(tmp_path, caplog):
    replies = iter(["no idea", '{"step": 1, "lesson": "Search the full name."}'])
    groups = [[trajectory(1.0, GOOD), trajectory(0.0, BAD)], [trajectory(1.0, GOOD), trajectory(0.0, BAD)]]
    groups.append([trajectory(1.0, GOOD), trajectory(1.0, GOOD)])  # no failure: no pair, no call
    got = reflect(groups, {}, lambda p: next(replies), update=1, out=tmp_path, rank=1)
    assert len(got["lessons"]) == 1 and got["skipped"][0]["reason"].startswith("no JSON object")
    assert "pair skipped (no JSON object" in caplog.text
    assert (tmp_path / "skipped.rank1.jsonl").is_file() and (tmp_path / "lessons.rank1.jsonl").is_file()

    def down(prompt: str) -> str:
        raise ConnectionError("the reflector at http://127.0.0.1:9 refused the connection")

    got = reflect(groups[:1], {}, down, update=2, out=None)
    assert got["skipped"][0]["reason"].startswith("ConnectionError: the reflector")


def test_the_lesson_is_an_nll_target_after_the_question(tmp_path):
    """The target's context is the question as the policy's chat template encodes a user turn; its tokens are the
    lesson's and the stop; lesson_nll is minus the sum of their log-probs, computed here by hand from the logits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.policy import TextPolicy
    from rl.tiny import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    pol = TextPolicy(model, tok)
    q = "Which access code does Tufo Misu use?"
    t = lesson_target(pol, q, LESSON)
    assert torch.equal(t.inputs["input_ids"], pol.encode([{"role": "user", "content": q}])["input_ids"])
    assert t.gen_ids.tolist() == tok(LESSON, add_special_tokens=False)["input_ids"] + [pol.stop_ids[0]]
    ids = torch.cat([t.inputs["input_ids"][0], t.gen_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids[None]).logits[0].float(), -1)  # (P+N, V)
        p = t.inputs["input_ids"].shape[1]
        by_hand = -sum(logp[p - 1 + k, int(g)] for k, g in enumerate(t.gen_ids))
        assert lesson_nll(model, t).item() == pytest.approx(float(by_hand), rel=1e-5)


def test_the_lesson_weight_in_the_loss_worked_by_hand():
    """Toy's logits are [theta, 0]. One RL segment (token 0, advantage +1, old log-prob log 0.5) and a lesson of
    tokens [0, 0, 1]; mel_coef 0.5, SGD lr 1, theta = 0.

    RL: d(-r A)/d theta = -(1 - sigmoid(0)) = -0.5.
    Lesson: NLL = -2 log sigmoid(theta) - log(1 - sigmoid(theta)) = 3 log 2 at 0; d NLL / d theta = -2 (1 - s) + s
    = -0.5; the token mean over 3 tokens times 0.5 gives -0.5 / 3 * 0.5 = -1/12.
    So theta = 0 + 0.5 + 1/12 = 0.583333, and the logged NLL is 3 log 2 over 3 tokens."""
    ids = torch.tensor([[1, 1]])
    target = LessonTarget({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, torch.tensor([0, 0, 1]))
    assert lesson_nll(Toy(), target).item() == pytest.approx(3 * math.log(2), abs=1e-6)
    for coef, expected in ((0.5, 0.5 + 1 / 12), (0.0, 0.5)):
        model = Toy()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        pieces = [Piece([one_token(1, math.log(0.5))], [1.0], [1.0], target)]
        out = update_policy(accelerator(), model, opt, pieces, cfg(mel=True, mel_coef=coef, group_size=1), seed=0)
        assert model.theta.item() == pytest.approx(expected, abs=1e-6)
        assert (out.mel_nll, out.mel_tokens) == (pytest.approx(3 * math.log(2), abs=1e-6), 3)
    assert out.per_step[0]["loss"] == pytest.approx(-1.0, abs=1e-6)  # coef 0: the RL loss -r A alone


def test_a_mel_setting_that_cannot_work_is_refused_by_name():
    with pytest.raises(ValueError, match="mel_reflector is `policy` or an http"):
        cfg(mel=True, mel_reflector="gpt").validate()
    with pytest.raises(ValueError, match="needs mel_reflector_model"):
        cfg(mel=True, mel_reflector="http://127.0.0.1:8000/v1").validate()
    with pytest.raises(ValueError, match="mel_coef must be >= 0"):
        cfg(mel=True, mel_coef=-1.0).validate()


@pytest.mark.slow
def test_the_trainer_learns_lessons_and_goes_on_past_a_malformed_reply(
    tiny_vl, task, tmp_path, parity_reward, monkeypatch
):
    """Two updates with a scripted reflector: the first reply is a lesson, the second is not JSON. The first update
    trains on the lesson (its NLL is logged), the second skips the pair with the reason, and training finishes."""
    import rl.mel
    from rl.trainer import Trainer

    replies = iter(['{"step": 1, "lesson": "' + LESSON + '"}', "Sorry, I cannot tell."])
    monkeypatch.setattr(rl.mel, "make_reflector", lambda *a, **k: lambda prompt: next(replies))
    c = tiny_config(tiny_vl, task, tmp_path / "run", updates=2, mel=True, save_every=0)
    logs = Trainer(c).train(progress=False)
    assert [(lg["mel_pairs"], lg["mel_lessons"], lg["mel_skipped"]) for lg in logs] == [(1, 1, 0), (1, 0, 1)]
    assert logs[0]["mel_nll"] > 0 and logs[1]["mel_nll"] == 0
    row = json.loads((tmp_path / "run/mel/lessons.jsonl").read_text())
    assert row["lesson"] == LESSON and row["step"] == 1 and row["diverges_at"] >= 1
    assert "no JSON object" in (tmp_path / "run/mel/skipped.jsonl").read_text()


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory):
    from rl.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("vl") / "m")


def test_a_reflector_keeps_the_reply_text_and_drops_reasoning_and_tokens(tmp_path):
    """PolicyReflector joins what the policy streams as its reply, without a server's separate reasoning or a
    trainable policy's Tokens; `make_reflector` with `mel_reflector: policy` reflects with the model in process."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agent.backends.base import Reasoning, Tokens
    from rl.mel import PolicyReflector, make_reflector
    from rl.policy import TextPolicy
    from rl.tiny import build_tiny_causal_lm

    class Streams:
        def stream(self, messages):
            assert messages == [{"role": "user", "content": "compare"}]
            yield from [Reasoning('thinking {"step": 9}'), '{"step": 1, ', '"lesson": "x."}', Tokens([1], [0.0], {})]

    assert PolicyReflector(Streams())("compare") == '{"step": 1, "lesson": "x."}'
    path = build_tiny_causal_lm(tmp_path / "lm")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    reflector = make_reflector(cfg(mel=True, mel_max_new_tokens=5), model, tok, False, update=0)
    assert isinstance(reflector.policy, TextPolicy) and reflector.policy.greedy
    assert isinstance(reflector("Which step went wrong?"), str)
