"""The trainer's methods and options (rl/methods.py and the pure functions behind them) on values worked by hand,
each test citing the published code it follows: GPPO, AEPO's update and rollouts, ARPO's rollouts, ADORA,
ScalingInter-RL's horizon schedule and ToolPO's tool-call attribution; then one update of each in the trainer."""

import json
import random
from types import SimpleNamespace

import pytest
import torch

from agent.backends.base import Policy, Tokens
from agent.settings import AgentConfig
from eval.datasets import EvalItem
from retrieval.retriever import Retriever
from rl.advantages import adora_weight, entropy_aware_advantages, span_token_mask
from rl.branching import aepo_branches, aepo_root_rollouts, arpo_branches, reply_entropy
from rl.clipping import clipped_loss
from rl.curriculum import horizon
from rl.loss import ppo_clip_loss
from rl.methods import METHODS, correct_calls, method_loss, segment_advantages, segment_weights, tool_call_span
from rl.policy import Segment
from rl.rollout import Trajectory, rollout_branching


# -- GPPO and AEPO's clamp -------------------------------------------------------------------------------------
def grads(preserve: str, clip_c=3.0):
    # (r, A) = (1.5, +1), (1.1, +1), (0.5, -1), (1.5, -1): clipped above, inside, clipped below, dual-clip region
    log_r = torch.log(torch.tensor([1.5, 1.1, 0.5, 1.5])).requires_grad_()
    loss = clipped_loss(torch.exp(log_r), torch.tensor([1.0, 1.0, -1.0, -1.0]), 0.2, 0.2, preserve, clip_c)
    loss.sum().backward()
    return [round(x, 4) for x in loss.tolist()], [round(x, 4) for x in log_r.grad.tolist()]


def test_the_three_clamps_share_values_and_differ_only_in_which_clipped_tokens_pass_a_gradient():
    # values: -min(1.5, 1.2), -1.1, max(0.5, 0.8), min(max(1.5, 1.2), 3) for every clamp
    # PPO: no gradient where clipped. GPPO (KlearReasoner core_algos.py 505-512): -A b at both bounds.
    # AEPO (ARPO repo, AEPO core_algos.py 655-658, commit ff66660): -A b at the upper bound only.
    assert grads("none") == ([-1.2, -1.1, 0.8, 1.5], [0.0, -1.1, 0.0, 1.5])
    assert grads("both") == ([-1.2, -1.1, 0.8, 1.5], [-1.2, -1.1, 0.8, 1.5])
    assert grads("high") == ([-1.2, -1.1, 0.8, 1.5], [-1.2, -1.1, 0.0, 1.5])
    with pytest.raises(ValueError, match="preserve must be"):
        clipped_loss(torch.ones(1), torch.ones(1), preserve="gppo")


def test_gppo_through_the_trainers_loss_is_the_token_mean_of_the_pure_function():
    from rl.clipping import gppo_token_loss

    g = torch.Generator().manual_seed(2)
    old = torch.zeros(3, 5)
    new = (torch.randn(3, 5, generator=g) * 0.5).requires_grad_()  # (S, L)
    adv = torch.tensor([1.0, -2.0, 0.5])  # (S,)
    loss, stats = method_loss("gppo", new, old, torch.ones(3, 5), adv, [0.0, 0.0, 0.0])
    expect = gppo_token_loss(new, adv[:, None]).mean()
    assert loss.item() == pytest.approx(expect.item(), abs=1e-6) and stats["clip_frac"] > 0
    loss.backward()
    assert (new.grad != 0).all()  # no token's gradient is cut: every clipped one passes -A b / (S L)


def test_gppo_composes_with_ggpos_step_mask():
    new = torch.zeros(2, 3, requires_grad=True)
    loss, _ = method_loss("gppo", new, torch.zeros(2, 3), torch.ones(2, 3), torch.ones(2), [1.0, 0.0], step_mask=True)
    loss.backward()
    assert new.grad[0].eq(0).all() and new.grad[1].ne(0).all()  # the masked step is left out
    assert segment_weights("gppo", [1.0, 0.0]).tolist() == [1.0, 1.0]  # off unless asked


def test_per_token_advantages_train_at_token_level_only():
    new, old, mask = torch.zeros(1, 2, requires_grad=True), torch.zeros(1, 2), torch.ones(1, 2)
    loss, _ = ppo_clip_loss(new, old, mask, torch.tensor([[1.0, 3.0]]), torch.ones(1))
    assert loss.item() == pytest.approx(-2.0)  # -(1 + 3) / 2 at ratio 1
    with pytest.raises(ValueError, match="need level='token'"):
        ppo_clip_loss(new, old, mask, torch.tensor([[1.0, 3.0]]), torch.ones(1), level="sequence")


# -- AEPO's entropy-aware advantage -------------------------------------------------------------------------------
def test_aepo_entropy_aware_advantage_uses_the_batchs_valid_tokens():
    # AEPO core_algos.py 621-638: A (1 + 0.2 (H - mean) / std), statistics over the valid tokens only
    adv = torch.tensor([[1.0, 1.0, 9.0], [-1.0, -1.0, 9.0]])
    ent = torch.tensor([[2.0, 1.0, 100.0], [0.5, 0.5, 100.0]])  # the padding's 100 must not count
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    out = entropy_aware_advantages(adv, ent, mask)
    assert [round(x, 3) for x in out[mask > 0].tolist()] == [1.283, 1.0, -0.859, -0.859]
    flat = entropy_aware_advantages(adv, torch.ones(2, 3), mask)  # std 0 counts as 1: z = 0, nothing changes
    assert torch.equal(flat, adv)


# -- ADORA --------------------------------------------------------------------------------------------------------
def test_adora_weight_follows_the_published_edge_cases():
    # ShadeCloak/ADORA c518485, ADORA/verl/trainer/ppo/core_algos.py 144-158 and 175-179
    assert adora_weight([1, 1, 0, 0], [300, 350, 400, 450], [False] * 4) == 0.1
    assert adora_weight([1, 1, 0, 0], [300, 500, 400, 450], [False] * 4) == 1.0
    assert adora_weight([1, 1, 0, 0], [300, 425, 400, 450], [False] * 4) == 0.1  # equal is not longer (425 > 425)
    assert adora_weight([0, 0, 0, 0], [10, 20, 30, 40], [False] * 4) == 0.1  # no correct: max = -inf
    assert adora_weight([1, 1, 0, 0], [1, 2, 30, 40], [False, False, True, True]) == 1.0  # no valid wrong: -inf
    assert adora_weight([1, 0], [5, 9], [False, False], lam=0.25) == 0.25
    with pytest.raises(ValueError, match="one length"):
        adora_weight([1, 0], [5], [False])


# -- ScalingInter-RL ----------------------------------------------------------------------------------------------
def test_horizon_schedule_matches_a_fresh_published_run_and_is_the_same_after_resume():
    # AgentGym-RL 82402a9 ray_trainer.py 222-245, fresh run with rounds [10, 20, 30], steps_scaling_inter 100,
    # worked by hand: the stage advances after steps 100 and 200
    sched = [horizon(u, [10, 20, 30], 100) for u in range(1, 302)]
    assert sched[:100] == [10] * 100 and sched[100:200] == [20] * 100 and sched[200:] == [30] * 101
    # a pure function of the update: a run resumed at 100 gives update 102 the horizon 20, where the published
    # counter, re-seeded by set_global_steps(100), advances twice and gives 30
    assert horizon(102, [10, 20, 30], 100) == 20
    with pytest.raises(ValueError, match="horizons"):
        horizon(1, [], 10)
    with pytest.raises(ValueError, match="at least one update"):
        horizon(1, [2], 0)


# -- ToolPO -------------------------------------------------------------------------------------------------------
class CharTokenizer:
    """One token per character: ids are code points."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)

    def __len__(self):
        return 256


def seg(text: str, tool: str, gold_hit=None) -> Segment:
    ids = torch.tensor([ord(c) for c in text])
    return Segment(1, {}, ids, torch.zeros(len(text)), text, tool=tool, gold_hit=gold_hit)


def test_tool_call_span_and_its_tokens():
    assert tool_call_span("a <bbox>[1,2,3,4]</bbox> b") == (2, 24)
    assert tool_call_span('<tool_call>{"name": "crop"}</tool_call>') == (0, 39)
    assert span_token_mask([2, 4, 6], 3, 5) == [0.0, 1.0, 1.0]
    assert span_token_mask([2, 2, 6], 0, 2) == [1.0, 0.0, 0.0]  # a token with no text of its own is not in it


ANSWER = '<tool_call>{"name": "add_answer_node"}</tool_call>'  # a call in form, but an answer, not a tool


def test_toolpo_adds_the_correct_call_advantage_on_the_call_tokens_only():
    # DeepAgent (arXiv 2510.21618, section 3.5; no published training code): A = A_succ + M A_action.
    # Rewards [1, 1, 0, 0]; correct calls [2, 1, 1, 0] (a search counts when it found gold evidence).
    # Group-normalised like GRPO's (sample std): A_succ = +-0.8660, A_action = [1.2247, 0, 0, -1.2247].
    s_ok, s_bad = seg("x<search>q</search>", "search", True), seg("x<search>q</search>", "search", False)
    crop, ans = seg("<bbox>[0,0,1,1]</bbox>", "crop"), seg(ANSWER, "add_answer_node")
    trajs = [
        Trajectory("q", None, [s_ok, crop, ans], 1.0),
        Trajectory("q", None, [s_ok, s_bad, ans], 1.0),
        Trajectory("q", None, [s_bad, crop, ans], 0.0),
        Trajectory("q", None, [s_bad, s_bad, ans], 0.0),
    ]
    assert [correct_calls(t.segments) for t in trajs] == [2, 1, 1, 0]
    cfg = SimpleNamespace(method="grpo", tool_advantage=1.0, max_new_tokens=64, adora_lambda=0.1)
    out = segment_advantages([trajs], cfg, CharTokenizer())
    first = out.values[0]  # trajectory 1, its search: "x" then the 18 characters of the call
    assert first[0].item() == pytest.approx(0.8660, abs=1e-4)
    assert first[1:].tolist() == pytest.approx([0.8660 + 1.2247] * 18, abs=1e-4)
    last_search = out.values[9]  # trajectory 4's first search: A_succ - A_action on the call
    assert last_search[1].item() == pytest.approx(-0.8660 - 1.2247, abs=1e-4)
    answer = out.values[2]  # an answer is not a tool call: the task's advantage only
    assert answer.tolist() == pytest.approx([0.8660] * len(ANSWER), abs=1e-4)
    assert out.tool_tokens == 18 * 6 + 22 * 2  # 6 searches, 2 crops
    plain = segment_advantages([trajs], SimpleNamespace(**(cfg.__dict__ | {"tool_advantage": 0.0})))
    assert plain.values[0] == pytest.approx(0.8660, abs=1e-4) and plain.tool_tokens == 0


def test_adora_scales_a_whole_group_in_segment_advantages():
    short = [seg("ab", "answer")]
    long = [seg("a" * 9, "answer")]
    trace = SimpleNamespace(status="answered")
    group = [Trajectory("q", trace, short, 1.0), Trajectory("q", trace, long, 0.0)]  # the correct one is shorter
    cfg = SimpleNamespace(method="adora", tool_advantage=0.0, max_new_tokens=64, adora_lambda=0.1)
    out = segment_advantages([group], cfg)
    assert out.values == pytest.approx([0.1 * 0.7071, -0.1 * 0.7071], abs=1e-4) and out.attenuated_groups == 1
    grpo = segment_advantages([group], SimpleNamespace(**(cfg.__dict__ | {"method": "grpo"})))
    assert grpo.values == pytest.approx([0.7071, -0.7071], abs=1e-4)


# -- ARPO / AEPO branching ----------------------------------------------------------------------------------------
def test_branch_decisions_match_the_published_arithmetic():
    # ARPO (dongguanting/ARPO e257337) vllm_rollout_with_tools.py 470-477: branch iff clip(u - w dH) <= tau
    u = [i / 1000 for i in range(1000)]
    assert sum(arpo_branches(x, 0.5) for x in u) / 1000 == pytest.approx(0.6, abs=2e-3)
    assert sum(arpo_branches(x, -1.0) for x in u) / 1000 == pytest.approx(0.3, abs=2e-3)
    # AEPO (commit ff66660) 947-968: ((u + w dH)(1 - 0.05 c)) >= tau; c = 2 gives 1 - (0.5 / 0.9 - 0.1)
    assert sum(aepo_branches(x, 0.5, 2) for x in u) / 1000 == pytest.approx(1 - (0.5 / 0.9 - 0.1), abs=2e-3)
    assert not any(aepo_branches(x, 0.5, 20) for x in u)
    # AEPO 541-550: int(k sigmoid(0.5 (H_root - H_tool))) + 1, within [1, k]
    assert aepo_root_rollouts(16, 0.8, 0.4) == 9 and aepo_root_rollouts(4, -50.0, 0.0) == 1
    assert aepo_root_rollouts(4, 50.0, 0.0) == 4
    assert reply_entropy([1.0] * 25, vocab_size=256) == pytest.approx(20 / 5.545177, abs=1e-5)


class TreePolicy(Policy):
    """Step 1 searches; step 2 answers with a word drawn from its own RNG. The entropy of step 2's reply is
    `rise` nats per token higher than step 1's, so dH > 0 invites a fork there when rise > 0."""

    is_vlm = False
    name = "tree"

    def __init__(self, rise: float) -> None:
        self.rise, self.rng, self.fresh = rise, random.Random(0), 0

    def stream(self, messages, view=None):
        if view.step == 1:
            self.fresh += 1
            text = '<tool_call>{"name": "add_search_node", "arguments": {"id": "s1", "query": "revenue 2025", '
            text += '"parent_ids": ["root"]}}</tool_call>'
            ent = 1.0
        else:
            word = self.rng.choice(["48.6 million dollars", "31 percent"])
            text = (
                f'<tool_call>{{"name": "add_answer_node", "arguments": {{"answer": "{word}", "parent_ids": ["s1"]}}}}'
            )
            text += "</tool_call>"
            ent = 1.0 + self.rise
        ids = [ord(c) for c in text[:30]]
        yield text
        yield Tokens(ids, [-0.1] * len(ids), {"input_ids": torch.tensor([ids])}, [ent] * len(ids))


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    from rl.tiny import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "m")


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


ITEM = EvalItem(id="rev", question="What was total revenue in 2025?", answers=["48.6 million dollars"])


def grow(pol, retriever, rule: str):
    """A group of 4 from 2 roots, every fork decided by a seeded draw."""
    cfg = AgentConfig(max_steps=3)
    return rollout_branching(
        pol, retriever, ITEM, cfg, 4, "answer", rule=rule, initial=2, vocab_size=256, rng=random.Random(1)
    )


@pytest.mark.parametrize("rule", ["arpo", "aepo"])
def test_a_rising_entropy_forks_and_the_fork_replays_its_parent_exactly(retriever, rule):
    pol = TreePolicy(rise=100.0)  # dH = 20 tokens x 100 / ln 256 >> 0: every branch point forks
    trajs = grow(pol, retriever, rule)
    assert len(trajs) == 4 and pol.fresh == 2  # two roots; the other two replayed a root's search
    for fork in trajs[2:]:
        parent = next(t for t in trajs[:2] if t.segments[0].text == fork.segments[0].text)
        a, b = fork.segments[0], parent.segments[0]
        assert torch.equal(a.gen_ids, b.gen_ids) and torch.equal(a.old_logp, b.old_logp)
        assert fork.trace.steps[0].output == parent.trace.steps[0].output
        assert len(fork.segments) == 2 and fork.segments[1].tool == "add_answer_node"
    assert {t.reward for t in trajs} <= {0.0, 1.0}


def test_a_falling_entropy_never_forks_and_the_group_is_refilled_from_the_question(retriever):
    pol = TreePolicy(rise=-100.0)
    trajs = grow(pol, retriever, "arpo")
    assert len(trajs) == 4 and pol.fresh == 4


def test_branching_without_entropies_says_which_policy_records_them(retriever):
    from agent.backends.base import PolicyError

    class NoEntropy(TreePolicy):
        def stream(self, messages, view=None):
            for x in super().stream(messages, view):
                yield Tokens(x.token_ids, x.logprobs, x.model_inputs) if isinstance(x, Tokens) else x

    with pytest.raises(PolicyError, match="token entropies"):
        rollout_branching(NoEntropy(0.0), retriever, ITEM, AgentConfig(max_steps=3), 4, "answer", vocab_size=256)


# -- config and trainer -------------------------------------------------------------------------------------------
def test_the_configs_method_choices_are_the_registry():
    from rl.config import TrainConfig

    field = TrainConfig.__dataclass_fields__["method"]
    assert set(field.metadata["choices"]) == set(METHODS)
    with pytest.raises(ValueError, match="token-level ratios"):
        TrainConfig.load(None, ["model=m", "dataset=d", "method=gspo", "tool_advantage=1"])
    with pytest.raises(ValueError, match="initial_rollouts"):
        TrainConfig.load(None, ["model=m", "dataset=d", "branching=arpo", "initial_rollouts=9"])
    with pytest.raises(ValueError, match="horizons"):
        TrainConfig.load(None, ["model=m", "dataset=d", "horizons=[0]"])
    assert TrainConfig.load(None, ["model=m", "dataset=d", "method=ggpo", "level=token", "tool_advantage=1"])


@pytest.mark.parametrize(
    "overrides, metric",
    [
        ({"method": "gppo"}, "clip_frac"),
        ({"method": "aepo"}, "clip_frac"),
        ({"method": "adora"}, "adora_attenuated"),
        ({"method": "grpo", "tool_advantage": 1.0}, "tool_token_share"),
        ({"method": "gppo", "step_mask": True, "branching": "arpo"}, "masked_fraction"),
        ({"method": "grpo", "branching": "aepo", "horizons": [1, 2], "horizon_every": 1}, "horizon"),
    ],
)
def test_each_method_and_option_trains_one_update(tmp_path, task, parity_reward, overrides, metric, tiny_text):
    from rl.trainer import Trainer
    from tests.rl.tiny_config import tiny_config

    tr = Trainer(tiny_config(tiny_text, task, tmp_path / "run", **overrides))
    before = torch.cat([p.detach().flatten().clone() for p in tr.model.parameters()])
    log = tr.step()
    after = torch.cat([p.detach().flatten().clone() for p in tr.model.parameters()])
    assert metric in log and torch.isfinite(torch.tensor(log["loss"]))
    assert not torch.equal(before, after)
    if "horizons" in overrides:
        assert log["horizon"] == 1 and log["steps"] == 1.0  # stage one caps the episode at one model call
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["update"] == 1
