"""Several optimizer steps per batch (rl/update.py): the default is today's single step bit for bit, later mini-batches
see ratios away from 1, the clipping methods act there, and a 2-mini-batch update is worked by hand.

The semantics tested are verl's actor update as VRAG-RL's fork has it (`VRAG-RL/verl/workers/actor/dp_actor.py`
`update_policy`, VRAG commit 24f8d05): the mini-batches are made once before the epochs (lines 243-250), one
optimizer step each (lines 269, 330), against the rollout's old log-probs (line 283)."""

import math
from types import SimpleNamespace

import pytest
import torch

from rl.config import TrainConfig
from rl.policy import Segment
from rl.update import Piece, compute_gradients, split_minibatches, update_policy


def accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True)


class Toy(torch.nn.Module):
    """A two-token policy with one parameter: the logits are [theta, 0] at every position, so a generated token 0
    has log-prob log sigmoid(theta) whatever the prompt."""

    def __init__(self, theta: float = 0.0) -> None:
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor(theta))

    def forward(self, input_ids, attention_mask=None, **kw):
        n = input_ids.shape[1]
        row = torch.stack([self.theta, torch.zeros_like(self.theta)])  # (2,)
        return SimpleNamespace(logits=row.expand(1, n, 2))  # (1, n, 2)


def one_token(i: int, old: float) -> Segment:
    ids = torch.tensor([[1, 1]])  # (1, 2): the prompt does not matter to Toy
    return Segment(
        i, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, torch.tensor([0]), torch.tensor([old])
    )


def cfg(**kw) -> TrainConfig:
    base = dict(model="m", dataset="d", method="grpo", max_grad_norm=0.0, questions_per_update=1, group_size=2)
    return TrainConfig(**{**base, **kw})


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@pytest.mark.parametrize("method", ["grpo", "gppo"])
def test_a_two_minibatch_update_worked_by_hand(method):
    """Two trajectories of one token 0 each, both with advantage +1, sampled at theta = 0 (old log-prob log 0.5);
    SGD with lr 2, clip 0.2, two mini-batches of one trajectory.

    Step 1, ratio 1: loss -r, d loss / d theta = -(1 - sigmoid(0)) = -0.5, so theta = 0 + 2 * 0.5 = 1.
    Step 2, ratio sigmoid(1) / 0.5 = 1.462117 > 1.2 with A > 0: PPO's clip removes the gradient, theta stays 1;
    GPPO passes -A (1 + eps) d log r / d theta = -1.2 (1 - sigmoid(1)) = -0.322730, so theta = 1 + 2 * 0.322730."""
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=2.0)
    pieces = [Piece([one_token(1, math.log(0.5))], [1.0], [1.0]), Piece([one_token(1, math.log(0.5))], [1.0], [1.0])]
    out = update_policy(accelerator(), model, opt, pieces, cfg(method=method, mini_batch_size=1), seed=0)
    assert out.optimizer_steps == 2
    first, second = out.per_step
    assert first["ratio_mean"] == 1.0 and first["clip_frac"] == 0.0
    assert second["ratio_mean"] == pytest.approx(sig(1.0) / 0.5, abs=1e-6)  # 1.462117
    assert second["clip_frac"] == 1.0  # the clip acted on the one token
    expected = 1.0 if method == "grpo" else 1.0 + 2 * 1.2 * (1 - sig(1.0))  # 1.645459
    assert model.theta.item() == pytest.approx(expected, abs=1e-6)


def test_a_negative_advantage_in_the_second_minibatch_is_worked_by_hand():
    """A = +1 then A = -1 (the order the seed's shuffle gives), SGD lr 1: step 1 takes theta to 0.5; step 2 sees
    r = sigmoid(0.5) / 0.5 = 1.244918 with A < 0, which PPO does not clip (the bound that binds is 0.8), and its
    gradient r (1 - sigmoid(0.5)) = 0.470008 takes theta to 0.029992."""
    order = split_minibatches(2, 2, seed=5)
    adv = {order[0][0]: 1.0, order[1][0]: -1.0}
    model = Toy()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    pieces = [Piece([one_token(1, math.log(0.5))], [adv[i]], [1.0]) for i in range(2)]
    out = update_policy(accelerator(), model, opt, pieces, cfg(mini_batch_size=1), seed=5)
    r = sig(0.5) / 0.5
    assert out.per_step[1]["ratio_mean"] == pytest.approx(r, abs=1e-6) and out.per_step[1]["clip_frac"] == 0.0
    assert model.theta.item() == pytest.approx(0.5 - r * (1 - sig(0.5)), abs=1e-6)


def lm_segments(vocab: int, n: int = 4):
    g = torch.Generator().manual_seed(123)
    out = []
    for i in range(n):
        p, m = 10 + 3 * i, 4 + 2 * i
        ids = torch.randint(10, vocab, (1, p), generator=g)  # (1, P)
        gen = torch.randint(10, vocab, (m,), generator=g)  # (M,)
        out.append(Segment(i + 1, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, gen, torch.zeros(m)))
    return out


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from rl.tiny import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "m")


def fresh(tiny_lm):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm)
    with torch.no_grad():  # the recorded log-probs are the model's own, as a rollout's are
        segs = lm_segments(model.config.vocab_size)
        from rl.policy import sequence_logprobs

        for s in segs:
            s.old_logp = sequence_logprobs(model, s.inputs, s.gen_ids).detach()
    return model, segs


@pytest.mark.parametrize("method", ["grpo", "ggpo", "gppo"])
def test_the_default_update_is_one_step_on_the_whole_batch_bit_for_bit(tiny_lm, method):
    """ppo_epochs=1 and one mini-batch: the weights equal those of the single step the trainer took before
    rl/update.py (one backward over every segment, gradient clipping, one AdamW step), with torch.equal."""
    advs, wts = [1.0, -0.5, 0.8, -1.2], [1.0, 0.0, 1.0, 1.0]
    c = cfg(method=method, max_grad_norm=1.0, questions_per_update=2, group_size=2)
    after = []
    for path in ("before", "update_policy"):
        model, segs = fresh(tiny_lm)
        acc = accelerator()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        model, opt = acc.prepare(model, opt)
        if path == "before":  # the trainer's update as it was: compute_gradients on the batch, clip, one step
            with acc.accumulate(model):
                compute_gradients(acc, model, segs, advs, wts, c)
                acc.clip_grad_norm_(model.parameters(), c.max_grad_norm)
                opt.step()
                opt.zero_grad()
        else:
            pieces = [Piece(segs[:2], advs[:2], wts[:2]), Piece(segs[2:], advs[2:], wts[2:])]
            assert update_policy(acc, model, opt, pieces, c, seed=9).optimizer_steps == 1
        after.append(torch.cat([p.detach().flatten() for p in acc.unwrap_model(model).parameters()]))
    assert torch.equal(after[0], after[1])


def test_the_second_minibatch_sees_ratios_away_from_one(tiny_lm):
    model, segs = fresh(tiny_lm)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pieces = [Piece([s], [a], [1.0]) for s, a in zip(segs, [1.0, -0.5, 0.8, -1.2])]
    out = update_policy(accelerator(), model, opt, pieces, cfg(mini_batch_size=2, ppo_epochs=2), seed=1)
    assert out.optimizer_steps == 4  # 2 mini-batches x 2 epochs
    first, *later = out.per_step
    assert abs(first["ratio_mean"] - 1.0) < 1e-6 and abs(first["ratio_max"] - 1.0) < 1e-6
    assert all(abs(p["ratio_mean"] - 1.0) > 1e-4 for p in later)


def test_gppo_and_grpo_gradients_differ_exactly_on_clipped_tokens():
    """One fixed batch of ratios: tokens 0 and 3 are clipped (r = 1.5 with A > 0, r = 0.5 with A < 0), tokens 1
    and 2 are inside the range. GPPO's gradient differs from GRPO's on 0 and 3 only, where GRPO's is 0."""
    from rl.methods import method_loss

    ratios = torch.tensor([[1.5, 1.1, 0.9, 0.5]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    grads = {}
    for method in ("grpo", "gppo"):
        logp = torch.log(ratios).clone().requires_grad_()
        loss, stats = method_loss(method, logp, torch.zeros(1, 4), torch.ones(1, 4), adv, [0.0])
        loss.backward()
        grads[method] = logp.grad[0]
        assert stats["clip_frac"] == 0.5
    grpo, gppo = grads["grpo"], grads["gppo"]
    assert grpo[0] == 0 and grpo[3] == 0  # PPO's clip stops the gradient
    assert gppo[0] == pytest.approx(-1.2 / 4) and gppo[3] == pytest.approx(0.8 / 4)  # -A (1 + eps), -A (1 - eps)
    assert torch.equal(grpo[1:3], gppo[1:3])


def test_sequence_ratios_clip_at_gspos_published_range():
    # "the left and right clipping ranges in Equation (5) ... 3e-4 and 4e-4" (GSPO, arXiv 2507.18071, section 5.1)
    from rl.methods import clip_range

    assert clip_range("sequence") == (3e-4, 4e-4) and clip_range("token") == (0.2, 0.2)
    assert TrainConfig(model="m", dataset="d", method="gspo").clip_eps is None  # resolved per level at the loss


def test_async_several_steps_train_against_the_weights_the_update_started_from(tiny_lm):
    """A stale batch, two epochs: pi_prox is computed once before the first step, so the first step's loss equals the
    single-step update's (where pi_prox = sg(pi_theta) of the same forward pass)."""
    losses = []
    for epochs in (1, 2):
        model, segs = fresh(tiny_lm)
        for s in segs:
            s.version, s.old_logp = 3, s.old_logp - 0.1  # sampled one version ago
        c = cfg(rollout_mode="async", behav_cap=None, ppo_epochs=epochs)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        out = update_policy(accelerator(), model, opt, [Piece(segs, [1.0, -1.0, 0.5, -0.5], [1.0] * 4)], c, version=4)
        losses.append([p["loss"] for p in out.per_step])
    assert len(losses[1]) == 2 and losses[1][0] == pytest.approx(losses[0][0], rel=1e-6)
    assert losses[1][1] != pytest.approx(losses[1][0], rel=1e-4)  # the second epoch's ratios moved off 1


def test_bad_step_settings_are_refused():
    with pytest.raises(ValueError, match="ppo_epochs"):
        cfg(ppo_epochs=0).validate()
    with pytest.raises(ValueError, match="grad_accum"):
        TrainConfig(model="m", dataset="d", ppo_epochs=2, grad_accum=2).validate()
