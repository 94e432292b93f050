"""Asynchronous rollouts (rl/pipeline.py) and AReaL's decoupled objective (rl/loss.py): the staleness bound holds
from the recorded versions, drops are counted, a worker's error reaches the trainer, the loss matches values
worked by hand, and at staleness 0 it is the synchronous loss bit for bit."""

import math
import random
import threading
import time
from dataclasses import dataclass, field

import pytest
import torch

from rl.loss import ppo_clip_loss
from rl.pipeline import Pipeline
from rl.policy import Segment


@dataclass
class FakeTraj:
    segments: list = field(default_factory=list)


def fake_group(delay: float):
    """A sampler whose groups take `delay(job)` seconds and hold two one-token segments."""

    def sample(model, version, job):
        time.sleep(delay(job))
        return [FakeTraj([Segment(0, {}, torch.zeros(1), torch.zeros(1)) for _ in range(2)])]

    return sample


def counter():
    n = iter(range(10**6))
    return lambda: next(n)


def run_trainer(pipe: Pipeline, updates: int, train_s: float = 0.01) -> list[tuple[int, list[int]]]:
    """A trainer loop over `pipe`: what each update trained on, as (version, the versions its segments record)."""
    model = torch.nn.Linear(2, 2)
    pipe.publish(0, model)
    seen = []
    try:
        for u in range(updates):
            ready, info = pipe.take(u, timeout=20)
            seen.append((u, [s.version for r in ready for t in r.group for s in t.segments]))
            time.sleep(train_s)  # the optimizer step
            pipe.publish(u + 1, model)
    finally:
        pipe.close()
    return seen


@pytest.mark.parametrize("bound", [0, 1, 2])
def test_no_trajectory_older_than_the_bound_is_trained_on(bound):
    rng = random.Random(bound)
    delays = {}

    def delay(job):  # heavy-tailed: mostly quick, sometimes 20x slower
        return delays.setdefault(job, 0.002 if rng.random() < 0.8 else 0.04)

    pipe = Pipeline(fake_group(delay), counter(), per_update=3, max_staleness=bound, workers=4)
    seen = run_trainer(pipe, updates=12)
    staleness = [u - v for u, vs in seen for v in vs]
    assert len(seen) == 12 and all(len(vs) == 6 for _, vs in seen)  # 3 groups x 2 segments each
    assert max(staleness) <= bound and min(staleness) >= 0
    if bound:  # workers really ran ahead of the trainer
        assert max(staleness) >= 1


def test_a_straggler_staler_than_the_bound_is_dropped_and_counted():
    # job 0 takes far longer than two updates; everything else is quick
    pipe = Pipeline(fake_group(lambda job: 0.5 if job == 0 else 0.001), counter(), 2, max_staleness=1, workers=3)
    model = torch.nn.Linear(2, 2)
    pipe.publish(0, model)
    dropped, versions = 0, []
    try:
        for u in range(4):
            ready, info = pipe.take(u, timeout=20)
            dropped += info.dropped
            versions += [(u, r.version, r.job) for r in ready]
            if u == 1:
                time.sleep(0.6)  # the straggler finishes while update 2 is being computed
            pipe.publish(u + 1, model)
    finally:
        pipe.close()
    assert dropped >= 1 and pipe.dropped == dropped  # the straggler (and, on a loaded machine, maybe another)
    assert 0 not in [job for _, _, job in versions]  # the straggler was never trained on
    assert all(u - v <= 1 for u, v, _ in versions)


def test_a_worker_error_reaches_the_trainer():
    def sample(model, version, job):
        raise OSError("the search server is gone")

    pipe = Pipeline(sample, counter(), 1, 1, 2)
    pipe.publish(0, torch.nn.Linear(1, 1))
    with pytest.raises(RuntimeError, match="search server is gone"):
        pipe.take(0, timeout=10)
    pipe.close()


def test_workers_sample_from_a_copy_that_the_trainer_does_not_change():
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, 0.0)
    gate, seen = threading.Event(), []

    def sample(m, version, job):
        gate.wait(5)
        seen.append((version, float(m.weight)))
        return [FakeTraj()]

    pipe = Pipeline(sample, counter(), 1, max_staleness=1, workers=1)
    pipe.publish(0, model)
    with torch.no_grad():
        model.weight.fill_(1.0)  # the trainer's step, while the worker is mid-episode on version 0
    gate.set()
    pipe.take(0, timeout=10)
    pipe.publish(1, model)
    pipe.take(1, timeout=10)
    pipe.close()
    assert seen[0] == (0, 0.0)  # the trainer's step mid-episode did not reach the worker's copy
    assert all(w == float(v) for v, w in seen)  # each snapshot holds its version's weights


def test_bad_pipeline_settings_are_refused():
    with pytest.raises(ValueError, match="max_staleness"):
        Pipeline(fake_group(lambda j: 0), counter(), per_update=1, max_staleness=-1, workers=1)


# -- the decoupled objective ------------------------------------------------------------------------------
def test_decoupled_loss_matches_hand_worked_values():
    """AReaL's decoupled objective, as `areal/utils/functional/functional.py` (4aef98d) lines 509-539 compute it:
    the ratio against the proximal log-probs, the clip, then `pg_loss * behave_imp_weight`, tokens whose weight
    exceeds the rejection cap (`areal/api/cli_args.py` lines 1299-1300, upper 5.0, mask) left out but counted.
    Token level, eps 0.2, A = +1 on both tokens:
    token 1: pi_theta 0.55, pi_prox 0.5, pi_behav 0.25 -> r = 1.1 (inside the clip), w = 2: loss -2 * 1.1 = -2.2;
    token 2: pi_theta 0.5, pi_prox 0.5, pi_behav 0.05 -> w = 10 > cap 5: left out, still counted.
    token_mean: (-2.2 + 0) / 2 = -1.1; d loss / d logp_theta = -w r A / 2: -1.1 and 0."""
    new = torch.log(torch.tensor([[0.55, 0.5]])).requires_grad_()
    prox = torch.log(torch.tensor([[0.5, 0.5]]))
    behav = torch.log(torch.tensor([[0.25, 0.05]]))
    ones = (torch.ones(1, 2), torch.tensor([1.0]), torch.ones(1))
    loss, _ = ppo_clip_loss(new, prox, *ones, logp_behav=behav, behav_cap=5.0)
    assert loss.item() == pytest.approx(-1.1, abs=1e-6)
    loss.backward()
    assert new.grad[0].tolist() == pytest.approx([-1.1, 0.0], abs=1e-6)
    # without the cap token 2 counts: w 10, r 1 -> -10; (-2.2 - 10) / 2 = -6.1
    uncapped, _ = ppo_clip_loss(new.detach(), prox, *ones, logp_behav=behav)
    assert uncapped.item() == pytest.approx(-6.1, abs=1e-5)


def test_decoupled_loss_at_sequence_level_uses_the_geometric_mean_weight():
    """GSPO level: s = exp(mean(new - prox)) = exp(0) = 1; w = exp(mean(log 2, log 8)) = exp(log 4) = 4;
    A = -1: loss = -(w * min(sA, clip(s)A)) = -(4 * -1) = 4; with cap 3 the segment is left out: 0."""
    new = torch.zeros(1, 2)
    behav = torch.log(torch.tensor([[0.5, 0.125]]))  # prox 1 (log 0): weights 2 and 8
    kw = dict(level="sequence", logp_behav=behav)
    loss, _ = ppo_clip_loss(new, torch.zeros(1, 2), torch.ones(1, 2), torch.tensor([-1.0]), torch.ones(1), **kw)
    assert loss.item() == pytest.approx(4.0, abs=1e-6)
    capped, _ = ppo_clip_loss(
        new, torch.zeros(1, 2), torch.ones(1, 2), torch.tensor([-1.0]), torch.ones(1), behav_cap=3.0, **kw
    )
    assert capped.item() == 0.0 and math.isfinite(capped.item())


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_decoupled_loss_at_staleness_zero_is_the_synchronous_loss_bit_for_bit(level):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 5, generator=g) * 3
    new0 = old + torch.randn(3, 5, generator=g) * 0.3
    mask = (torch.rand(3, 5, generator=g) > 0.2).float()
    adv, w = torch.randn(3, generator=g), torch.tensor([1.0, 0.0, 1.0])
    a, b = new0.clone().requires_grad_(), new0.clone().requires_grad_()
    sync, _ = ppo_clip_loss(a, old, mask, adv, w, level=level)
    dec, _ = ppo_clip_loss(b, old, mask, adv, w, level=level, logp_behav=old.clone(), behav_cap=5.0)
    sync.backward()
    dec.backward()
    assert torch.equal(sync, dec) and torch.equal(a.grad, b.grad)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from rl.tiny import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "m", hidden=32, layers=1)


def segments_of(model, tok, n=3, seed=0):
    """n segments sampled from `model`, as a rollout records them."""
    from rl.policy import TextPolicy

    torch.manual_seed(seed)
    pol = TextPolicy(model, tok, max_new_tokens=6)
    out = []
    for i in range(n):
        inputs = pol.encode([{"role": "user", "content": f"question {i}"}])
        gen, logp, ent = pol.sample(inputs)
        out.append(Segment(i, inputs, gen, logp, entropy=ent))
    return out


def test_trainer_loss_at_staleness_zero_equals_the_synchronous_loss_bit_for_bit(tiny_lm, tmp_path):
    """`compute_gradients` on one fixed batch: sync, and async with every segment of the current version."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.update import TrainConfig, compute_gradients

    class One:
        num_processes, device = 1, "cpu"

        def reduce(self, t, reduction="sum"):
            return t

        def gather(self, t):
            return t

        def backward(self, loss):
            loss.backward()

    tok = AutoTokenizer.from_pretrained(tiny_lm)
    grads, losses = [], []
    for mode in ("sync", "async"):
        model = AutoModelForCausalLM.from_pretrained(tiny_lm)
        segs = segments_of(model, tok)
        for s in segs:
            s.version = 4
        cfg = TrainConfig(model="m", dataset="d", method="grpo", rollout_mode=mode)
        stats = compute_gradients(One(), model, segs, [1.0, -0.5, 0.25], [1.0, 1.0, 1.0], cfg, version=4)
        losses.append(stats["loss"])
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert losses[0] == losses[1] and torch.equal(grads[0], grads[1])


def test_a_stale_segment_is_weighted_by_prox_over_behaviour(tiny_lm):
    """A segment one version old: r = pi_theta / sg(pi_theta) = 1 and the loss is -mean_t(w_t A), w_t = exp(logp_t
    - behav_t), with the recorded log-probs as the behaviour policy's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.policy import sequence_logprobs
    from rl.update import TrainConfig, segment_loss

    tok = AutoTokenizer.from_pretrained(tiny_lm)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm)
    seg = segments_of(model, tok, n=1)[0]
    seg.old_logp = seg.old_logp - 0.3  # the behaviour policy liked these tokens less: w = e^0.3 each
    seg.version = 2
    cfg = TrainConfig(model="m", dataset="d", method="grpo", rollout_mode="async", behav_cap=None)
    loss, _ = segment_loss(model, seg, 1.0, 1.0, cfg, 1.0, version=3)
    with torch.no_grad():
        logp = sequence_logprobs(model, seg.inputs, seg.gen_ids)
    expected = -torch.exp(logp - seg.old_logp).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert loss.item() == pytest.approx(-math.exp(0.3), rel=1e-4)


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory):
    from rl.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("vl") / "m")


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [{}, {"method": "aepo", "branching": "aepo", "tool_advantage": 0.5}, {"method": "gspo", "horizons": [1, 2]}],
    ids=["ggpo", "aepo+branching+toolpo", "gspo+scalinginter"],
)
def test_async_training_never_trains_on_a_trajectory_older_than_the_bound(
    tiny_vl, task, tmp_path, parity_reward, overrides
):
    """The trainer in async mode, with GGPO's masks and with the other methods' options: what each update trains on,
    read from the segments' recorded versions."""
    import json

    import rl.update
    from rl.trainer import Trainer
    from tests.rl.tiny_config import tiny_config

    seen = []
    real = rl.update.compute_gradients

    def spy(acc, model, segments, *a, version=None, **kw):
        seen.append((version, [s.version for s in segments]))
        return real(acc, model, segments, *a, version=version, **kw)

    out = tmp_path / "run"
    cfg = tiny_config(
        tiny_vl, task, out, updates=4, rollout_mode="async", max_staleness=1, rollout_workers=2, **overrides
    )
    tr = Trainer(cfg)
    try:
        rl.update.compute_gradients = spy
        tr.train(progress=False)
    finally:
        rl.update.compute_gradients = real
    assert [v for v, _ in seen] == [0, 1, 2, 3]
    assert all(0 <= v - sv <= 1 for v, svs in seen for sv in svs) and all(svs for _, svs in seen)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    assert all(r["staleness_0"] + r["staleness_1"] == 1 for r in rows)  # one question per update
    assert all(0 <= r["idle_share"] <= 1 and r["updates_per_hour"] > 0 for r in rows)
    assert rows[-1]["dropped_total"] == sum(r["dropped"] for r in rows)
    assert tr.pipe is None and (out / "checkpoint-000004").is_dir()
