"""rl/ggpo.py: GGPO masks on hand-built memory graphs, group advantages and the PPO-clip losses on
hand-computed tensors (token level = GRPO, sequence level = GSPO), gradients included."""

import math

import pytest
import torch

from agent.events import StepRecord, Trace
from eval.datasets import Gold
from memory_graph.graph import MemoryGraph
from rl.ggpo import (
    all_masked,
    answer_ancestors,
    batched_group_advantages,
    group_advantages,
    is_success,
    step_masks,
    valid_retrievals,
)
from rl.loss import k3_kl, ppo_clip_loss
from rl.methods import method_level, method_loss, segment_weights

NEG_INF = float("-inf")


# -- graphs and traces --------------------------------------------------------------------------------
def success_graph() -> MemoryGraph:
    """root -> s1 (dead end); root -> s2 -> c1 (crop) -> a1 (answer)."""
    g = MemoryGraph("How many charts?")
    g.add_node("s1", "search", ["root"], "wrong query")
    g.add_node("s2", "search", ["root"], "right query")
    g.add_node("c1", "crop", ["s2"])
    g.add_node("a1", "answer", ["c1"])
    return g


def steps_of(*node_ids: str) -> list[StepRecord]:
    return [StepRecord(step=i + 1, messages=[], node_id=n) for i, n in enumerate(node_ids)]


def failed_trace() -> Trace:
    """Three searches; only s2's results hold the gold page (b.pdf p.7); the answer is wrong."""
    g = MemoryGraph("q")
    for nid in ("s1", "s2", "s3"):
        g.add_node(nid, "search", ["root"])
    g.add_node("a1", "answer", ["s3"])
    units = {
        "Picture 1": ("u1", "/docs/a.pdf", 1),
        "Picture 2": ("u2", "/docs/b.pdf", 7),
        "Picture 3": ("u3", "/docs/b.pdf", 8),
        "Picture 4": ("u4", "/docs/a.pdf", 2),
    }
    evidence = {
        i: {"info_id": i, "unit": {"uid": u, "source": src, "page": p}, "parent": ""}
        for i, (u, src, p) in units.items()
    }
    events = [
        {"type": "search_results", "step": 1, "node_id": "s1", "results": [{"info_id": "Picture 1"}]},
        {
            "type": "search_results",
            "step": 3,
            "node_id": "s2",
            "results": [{"info_id": "Picture 3"}, {"info_id": "Picture 2"}],
        },
        {
            "type": "search_results",
            "step": 5,
            "node_id": "s3",
            "results": [{"info_id": "Picture 4"}, {"info_id": "Picture 404"}],
        },  # missing evidence is skipped
    ]
    steps = steps_of("s1", "s1", "s2", "s2", "s3", "s3", "a1")
    return Trace(
        question="q",
        protocol="vimrag",
        backend="fake",
        status="answered",
        answer="wrong",
        graph=g.to_dict(),
        evidence=evidence,
        steps=steps,
        events=events,
    )


def gold_pred(golds: list[Gold]):
    return lambda unit: any(g.matches(unit) for g in golds)


# -- P_ans ------------------------------------------------------------------------------------------------
def test_answer_ancestors_follow_every_path_to_the_answer():
    g = success_graph()
    assert answer_ancestors(g) == {"root", "s2", "c1", "a1"}
    assert answer_ancestors(g.to_dict()) == answer_ancestors(g)  # the dict form gives the same set
    # an answer with two parents: the second path root -> s1 -> s3 -> a puts s1 and s3 on it too
    g2 = MemoryGraph("q")
    g2.add_node("s1", "search")
    g2.add_node("s2", "search")
    g2.add_node("s3", "search", ["s1"])
    g2.add_node("s4", "search", ["s1"])  # a dead end below s1
    g2.add_node("a", "answer", ["s2", "s3"])
    assert answer_ancestors(g2) == {"root", "s1", "s2", "s3", "a"}


def test_answer_ancestors_empty_without_answer_node():
    g = MemoryGraph("q")
    g.add_node("s1", "search")
    assert answer_ancestors(g) == set()
    with pytest.raises(TypeError, match="MemoryGraph"):
        answer_ancestors(["not", "a", "graph"])


# -- masks ------------------------------------------------------------------------------------------------
def test_success_masks_the_dead_end_branch_and_keeps_the_answer_path():
    steps = steps_of("s1", "s1", "s2", "s2", "c1", "a1")
    masks = step_masks(steps, success_graph(), reward=1.0, valid_retrieval={"s1", "s2"})  # R_val ignored on success
    assert masks == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert segment_weights("ggpo", masks).tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert not all_masked(masks)


def test_failure_spares_the_search_that_found_gold():
    trace = failed_trace()
    r_val = valid_retrievals(trace, gold_pred([Gold("b.pdf", 7)]))
    assert r_val == {"s2"}
    masks = step_masks(trace.steps, trace.graph, reward=0.0, valid_retrieval=r_val)
    assert masks == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    # the same answer from the trace's dict form and a predicate instead of a set
    d = trace.to_dict()
    assert valid_retrievals(d, gold_pred([Gold("b.pdf", 7)])) == {"s2"}
    assert step_masks(d["steps"], d["graph"], 0.0, lambda nid: nid == "s2") == masks


def test_failure_without_valid_retrieval_masks_nothing():
    trace = failed_trace()
    r_val = valid_retrievals(trace, gold_pred([Gold("c.pdf", 1)]))
    assert r_val == set()
    masks = step_masks(trace.steps, trace.graph, reward=0.0, valid_retrieval=r_val)
    assert masks == [0.0] * 7
    assert segment_weights("ggpo", masks).tolist() == [1.0] * 7


def test_valid_retrievals_reads_only_search_results_events():
    trace = failed_trace()
    # a memorized/answer event naming s1 must not make s1 a retrieval that found gold
    trace.events.append({"type": "memorized", "step": 2, "node_id": "s1", "items": [{"info_id": "Picture 2"}]})
    assert valid_retrievals(trace, gold_pred([Gold("b.pdf", 7)])) == {"s2"}
    assert valid_retrievals(trace, gold_pred([Gold("a.pdf")])) == {"s1", "s3"}  # a file-level gold


def test_all_masked_edge_cases():
    # A success whose graph has no answer node (P_ans is empty): every step is masked.
    g = MemoryGraph("q")
    g.add_node("s1", "search")
    steps = steps_of("s1", "s1")
    masks = step_masks(steps, g, reward=1.0, valid_retrieval=set())
    assert masks == [1.0, 1.0] and all_masked(masks)
    # A failure that hit the step limit after one search that did find the gold page.
    masks = step_masks(steps, g, reward=0.0, valid_retrieval={"s1"})
    assert masks == [1.0, 1.0] and all_masked(masks)
    # Such a trajectory contributes exactly zero gradient.
    new = torch.randn(2, 3, requires_grad=True)  # (S, L)
    loss, _ = ppo_clip_loss(
        new,
        torch.zeros(2, 3),
        torch.ones(2, 3),
        torch.tensor([1.0, 1.0]),
        segment_weights("ggpo", masks),
        logp_ref=torch.zeros(2, 3),
        kl_coef=0.1,
    )
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(new.grad, torch.zeros(2, 3))
    assert all_masked([]) and not all_masked([1.0, 0.0])


def test_steps_without_node_id():
    g = success_graph()
    steps = [{"node_id": ""}, {"node_id": None}, {"node_id": "a1"}, {}]  # malformed replies carry no node
    assert step_masks(steps, g, 1.0, set()) == [1.0, 1.0, 0.0, 1.0]  # not on the answer path: masked
    # not a valid retrieval either, even for a predicate that accepts anything: punished in a failure
    assert step_masks(steps, g, 0.0, lambda nid: True) == [0.0, 0.0, 1.0, 0.0]


def test_reward_is_binarised_at_one_half():
    assert [is_success(r) for r in (1.0, 0.7, 0.5, 0.49, 0.0)] == [True, True, True, False, False]
    steps = steps_of("s1", "a1")
    assert step_masks(steps, success_graph(), 0.7, {"s1"}) == [1.0, 0.0]  # success rule: s1 is a dead end
    assert step_masks(steps, success_graph(), 0.3, set()) == [0.0, 0.0]  # failure rule, nothing valid


# -- advantages -------------------------------------------------------------------------------------------
def test_group_advantages_hand_computed_sample_std():
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]))  # (G,)
    # mean 0.25, sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5; population std would give 1.732
    assert torch.allclose(adv, torch.tensor([1.5, -0.5, -0.5, -0.5]), atol=1e-5)
    adv = group_advantages(torch.tensor([2.0, 0.0]), eps=0.0)  # sample std sqrt(2)
    assert torch.allclose(adv, torch.tensor([1.0, -1.0]) / math.sqrt(2), atol=1e-6)
    centred = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), scale=False)
    assert torch.allclose(centred, torch.tensor([0.75, -0.25, -0.25, -0.25]))


def test_equal_rewards_give_exact_zeros():
    for rewards in ([1.0] * 5, [0.0] * 5, [0.1] * 3, [0.7]):
        adv = group_advantages(torch.tensor(rewards))
        assert torch.equal(adv, torch.zeros(len(rewards))), rewards


def test_batched_advantages_shape_and_rows():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0], [0.0] * 5, [0.3, 0.9, 0.1, 0.5, 0.5]])  # (Q, G)
    adv = batched_group_advantages(rewards)  # (Q, G)
    assert adv.shape == (3, 5)
    for q in range(3):
        assert torch.allclose(adv[q], group_advantages(rewards[q]))
    assert torch.equal(adv[1], torch.zeros(5))
    assert torch.allclose(adv[0].mean(), torch.tensor(0.0), atol=1e-6)
    with pytest.raises(ValueError, match=r"\(Q, G\)"):
        batched_group_advantages(torch.zeros(4))
    with pytest.raises(ValueError, match=r"\(G,\)"):
        group_advantages(torch.zeros(2, 4))


# -- the loss: token level ------------------------------------------------------------------------------
def one_token_segments(ratios: list[float], pad: float = 0.0):
    """S segments of one generated token (ratio against old = 0) plus one padding slot holding `pad`."""
    new = torch.tensor([[math.log(r), pad] for r in ratios], requires_grad=True)  # (S, 2)
    old = torch.tensor([[0.0, pad] for _ in ratios])  # (S, 2)
    mask = torch.tensor([[1.0, 0.0] for _ in ratios])  # (S, 2)
    return new, old, mask


def test_token_level_clipping_both_sides_both_signs():
    new, old, mask = one_token_segments([1.5, 1.5, 0.5, 0.5], pad=NEG_INF)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])  # (S,)
    loss, stats = ppo_clip_loss(new, old, mask, adv, torch.ones(4))
    # per token: min(1.5, 1.2) = 1.2 | min(-1.5, -1.2) = -1.5 | min(0.5, 0.8) = 0.5 | min(-0.5, -0.8) = -0.8
    assert loss.item() == pytest.approx(-(1.2 - 1.5 + 0.5 - 0.8) / 4)
    loss.backward()
    # clipped tokens get no gradient; the others get -A * ratio / 4 (d ratio / d logp = ratio)
    assert torch.allclose(new.grad[:, 0], torch.tensor([0.0, 1.5, -0.5, 0.0]) / 4)
    assert torch.equal(new.grad[:, 1], torch.zeros(4))  # padding, even holding -inf
    assert stats["clip_frac"] == pytest.approx(0.5) and stats["ratio_mean"] == pytest.approx(1.0)


def test_clip_higher_widens_only_the_upper_bound():
    new, old, mask = one_token_segments([1.25, 0.75])
    adv = torch.tensor([1.0, -1.0])  # (S,)
    sym, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(2), clip_eps=0.2)
    high, stats = ppo_clip_loss(new, old, mask, adv, torch.ones(2), clip_eps=0.2, clip_eps_high=0.28)
    assert sym.item() == pytest.approx(-(1.2 - 0.8) / 2)  # both clipped
    assert high.item() == pytest.approx(-(1.25 - 0.8) / 2)  # 1.25 < 1.28 is no longer clipped
    assert stats["clip_frac"] == pytest.approx(0.5)


def length_norm_batch():
    """Segment 0: one token with A = +1; segment 1: three tokens with A = -2; on-policy (ratio 1)."""
    new = torch.tensor([[0.0, 9.0, 9.0], [0.0, 0.0, 0.0]], requires_grad=True)  # (S, L); 9.0 is padding
    old = torch.zeros(2, 3)  # (S, L)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # (S, L)
    return new, old, mask, torch.tensor([1.0, -2.0])


def test_length_normalisation_variants_differ_as_documented():
    new, old, mask, adv = length_norm_batch()
    tok, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(2), length_norm="token_mean")
    seq, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(2), length_norm="seq_mean")
    # per-token losses -A: -1 (one token), +2 (three tokens)
    assert tok.item() == pytest.approx((-1 + 3 * 2) / 4)  # token_mean: 1.25
    assert seq.item() == pytest.approx((-1 + 2) / 2)  # seq_mean: 0.5
    seq.backward()
    assert torch.allclose(new.grad, torch.tensor([[-0.5, 0, 0], [1 / 3, 1 / 3, 1 / 3]]))
    # a masked segment still counts in the denominators: masking removes its signal, it does not
    # up-weight the remaining segments
    w = torch.tensor([0.0, 1.0])  # (S,)
    assert ppo_clip_loss(new, old, mask, adv, w, length_norm="token_mean")[0].item() == pytest.approx(6 / 4)
    assert ppo_clip_loss(new, old, mask, adv, w, length_norm="seq_mean")[0].item() == pytest.approx(2 / 2)
    assert ppo_clip_loss(new, old, mask, adv, w, level="sequence")[0].item() == pytest.approx(2 / 2)


def test_k3_kl_value_gradient_and_zero_when_ref_equals_new():
    assert k3_kl(torch.tensor(0.0), torch.tensor(0.5)).item() == pytest.approx(math.exp(0.5) - 1.5)
    x = torch.randn(50)  # (N,)
    assert (k3_kl(x, torch.randn(50)) >= 0).all()
    new = torch.zeros(1, 2, requires_grad=True)  # (S, L)
    ref = torch.tensor([[0.5, 123.0]])  # (S, L); the padding slot must not count
    mask = torch.tensor([[1.0, 0.0]])  # (S, L)
    loss, stats = ppo_clip_loss(new, torch.zeros(1, 2), mask, torch.zeros(1), torch.ones(1), logp_ref=ref, kl_coef=0.1)
    assert stats["kl"] == pytest.approx(math.exp(0.5) - 1.5)
    assert loss.item() == pytest.approx(stats["policy_loss"] + 0.1 * stats["kl"])
    loss.backward()
    assert new.grad[0, 0].item() == pytest.approx(0.1 * (1 - math.exp(0.5)))  # d k3 / d new = 1 - e^(ref-new)
    assert new.grad[0, 1].item() == 0.0
    same = torch.randn(3, 4)  # (S, L)
    adv, w, m = torch.tensor([1.0, -1.0, 0.5]), torch.ones(3), torch.ones(3, 4)
    with_ref, st = ppo_clip_loss(same, torch.zeros(3, 4), m, adv, w, logp_ref=same.clone(), kl_coef=1.0)
    without, _ = ppo_clip_loss(same, torch.zeros(3, 4), m, adv, w)
    assert st["kl"] == 0.0 and with_ref.item() == pytest.approx(without.item())


def test_kl_is_averaged_like_the_surrogate():
    new, old, mask, _ = length_norm_batch()
    ref = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])  # (S, L): only segment 0's token differs
    k = math.exp(0.5) - 1.5
    _, tok = ppo_clip_loss(new, old, mask, torch.zeros(2), torch.ones(2), logp_ref=ref, length_norm="token_mean")
    _, seq = ppo_clip_loss(new, old, mask, torch.zeros(2), torch.ones(2), logp_ref=ref, length_norm="seq_mean")
    _, gs = ppo_clip_loss(new, old, mask, torch.zeros(2), torch.ones(2), logp_ref=ref, level="sequence")
    assert tok["kl"] == pytest.approx(k / 4)
    assert seq["kl"] == pytest.approx(k / 2)
    assert gs["kl"] == pytest.approx(k / 2)


# -- the loss: sequence level ---------------------------------------------------------------------------
def two_token_segments():
    """Segments with token log-ratios (0.2, 0.4) -> s = e^0.3 and (-0.5, -0.9) -> s = e^-0.7, plus -inf padding."""
    new = torch.tensor([[0.2, 0.4, NEG_INF], [-0.5, -0.9, NEG_INF]] * 2, requires_grad=True)  # (4, 3)
    old = torch.tensor([[0.0, 0.0, NEG_INF]] * 4)  # (4, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]] * 4)  # (4, 3)
    return new, old, mask


def test_sequence_level_ratio_and_clipping_both_sides_both_signs():
    new, old, mask = two_token_segments()
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])  # (S,)
    s_hi, s_lo = math.exp(0.3), math.exp(-0.7)  # 1.35 > 1.2, 0.50 < 0.8
    loss, stats = ppo_clip_loss(new, old, mask, adv, torch.ones(4), level="sequence")
    # A>0: min(1.35, 1.2) = 1.2 (clipped) | min(0.50, 0.8) = 0.50
    # A<0: -1.35 (kept) | min(-0.50, -0.8) = -0.8 (clipped)
    assert loss.item() == pytest.approx(-(1.2 + s_lo - s_hi - 0.8) / 4)
    assert stats["clip_frac"] == pytest.approx(0.5)
    assert stats["ratio_mean"] == pytest.approx((s_hi + s_lo) / 2)
    loss.backward()
    # d s / d new_t = s / n_tokens; each unclipped segment spreads -A * s / 2 over its two tokens, / 4 segments
    expected = torch.tensor([[0.0, 0.0], [-s_lo / 2, -s_lo / 2], [s_hi / 2, s_hi / 2], [0.0, 0.0]]) / 4
    assert torch.allclose(new.grad[:, :2], expected)
    assert torch.equal(new.grad[:, 2], torch.zeros(4))


def test_sequence_level_differs_from_token_level():
    new, old, mask = two_token_segments()
    adv = torch.tensor([-1.0, -1.0, -1.0, -1.0])  # (S,)
    tok, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(4), level="token")
    seq, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(4), level="sequence")
    # token level, A = -1: tokens e^0.2, e^0.4 kept (upper side), e^-0.5 = 0.61 and e^-0.9 = 0.41 clipped to 0.8
    per_tok = (math.exp(0.2) + math.exp(0.4) + 0.8 + 0.8) / 4
    assert tok.item() == pytest.approx(per_tok)
    assert seq.item() == pytest.approx((math.exp(0.3) + 0.8) / 2)
    assert tok.item() != pytest.approx(seq.item())


# -- masking gives exactly zero gradient ------------------------------------------------------------------
@pytest.mark.parametrize("level,norm", [("token", "token_mean"), ("token", "seq_mean"), ("sequence", "token_mean")])
def test_zero_weight_segment_gets_exactly_zero_gradient(level, norm):
    torch.manual_seed(0)
    new = (torch.randn(3, 5) * 0.3).requires_grad_()  # (S, L)
    old = torch.randn(3, 5) * 0.3  # (S, L)
    ref = torch.randn(3, 5) * 0.3  # (S, L)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.float32)  # (S, L)
    weights = torch.tensor([1.0, 0.0, 1.0])  # (S,)
    loss, _ = ppo_clip_loss(
        new,
        old,
        mask,
        torch.tensor([0.7, -1.3, -0.4]),
        weights,
        logp_ref=ref,
        level=level,
        length_norm=norm,
        kl_coef=0.05,
    )
    loss.backward()
    assert torch.equal(new.grad[1], torch.zeros(5))
    assert new.grad[0, :3].abs().sum() > 0 and new.grad[2, :2].abs().sum() > 0
    assert torch.isfinite(new.grad).all()
    # and the masked segment's numbers do not move the loss at all
    new2 = new.detach().clone()
    new2[1] += 5.0
    loss2, _ = ppo_clip_loss(
        new2,
        old,
        mask,
        torch.tensor([0.7, -1.3, -0.4]),
        weights,
        logp_ref=ref,
        level=level,
        length_norm=norm,
        kl_coef=0.05,
    )
    assert loss2.item() == pytest.approx(loss.item())


# -- shapes and contracts ---------------------------------------------------------------------------------
def test_loss_shapes_stats_and_bad_inputs():
    S, L = 4, 6
    new = torch.randn(S, L, requires_grad=True)  # (S, L)
    args = (new, torch.randn(S, L), torch.ones(S, L), torch.randn(S), torch.ones(S))
    for level in ("token", "sequence"):
        loss, stats = ppo_clip_loss(*args, logp_ref=torch.randn(S, L), level=level, kl_coef=0.01)
        assert loss.shape == () and loss.requires_grad
        assert set(stats) == {"policy_loss", "kl", "clip_frac", "ratio_mean", "ratio_max"}
        assert all(isinstance(v, float) for v in stats.values())
        assert 0.0 <= stats["clip_frac"] <= 1.0
        assert loss.item() == pytest.approx(stats["policy_loss"] + 0.01 * stats["kl"], rel=1e-5)
    with pytest.raises(ValueError, match="advantages"):
        ppo_clip_loss(new, torch.randn(S, L), torch.ones(S, L), torch.randn(S + 1), torch.ones(S))
    with pytest.raises(ValueError, match=r"\(S, L\)"):
        ppo_clip_loss(new, torch.randn(S, L + 1), torch.ones(S, L), torch.randn(S), torch.ones(S))
    with pytest.raises(ValueError, match="level"):
        ppo_clip_loss(*args, level="segment")
    with pytest.raises(ValueError, match="length_norm"):
        ppo_clip_loss(*args, length_norm="sum")


def test_no_generated_tokens_gives_zero_loss_that_still_backpropagates():
    new = torch.randn(2, 3, requires_grad=True)  # (S, L)
    for level in ("token", "sequence"):
        loss, stats = ppo_clip_loss(
            new, torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2), torch.ones(2), level=level
        )
        loss.backward()
        assert loss.item() == 0.0 and stats["clip_frac"] == 0.0
        assert torch.equal(new.grad, torch.zeros(2, 3))


# -- methods ----------------------------------------------------------------------------------------------
def test_methods_pick_weights_and_levels():
    masks = [1.0, 0.0, 1.0]
    assert segment_weights("ggpo", masks).tolist() == [0.0, 1.0, 0.0]
    assert segment_weights("grpo", masks).tolist() == [1.0, 1.0, 1.0]
    assert segment_weights("gspo", masks).tolist() == [1.0, 1.0, 1.0]
    assert (method_level("grpo"), method_level("gspo"), method_level("ggpo")) == ("token", "sequence", "sequence")
    assert method_level("ggpo", "token") == "token"
    with pytest.raises(ValueError, match="unknown method"):
        segment_weights("ppo", masks)
    with pytest.raises(ValueError, match="gspo trains at sequence"):
        method_level("gspo", "token")


def test_method_loss_matches_explicit_weights():
    torch.manual_seed(1)
    new, old, mask, adv = torch.randn(3, 4), torch.randn(3, 4), torch.ones(3, 4), torch.randn(3)  # (S, L) x3, (S,)
    ggpo, _ = method_loss("ggpo", new, old, mask, adv, [1.0, 0.0, 0.0])
    explicit, _ = ppo_clip_loss(new, old, mask, adv, torch.tensor([0.0, 1.0, 1.0]), level="sequence")
    assert ggpo.item() == pytest.approx(explicit.item())
    grpo, _ = method_loss("grpo", new, old, mask, adv, [1.0, 0.0, 0.0])
    plain, _ = ppo_clip_loss(new, old, mask, adv, torch.ones(3), level="token")
    assert grpo.item() == pytest.approx(plain.item())
    assert ggpo.item() != pytest.approx(method_loss("gspo", new, old, mask, adv, [1.0, 0.0, 0.0])[0].item())


def test_trace_to_masked_gradient_end_to_end():
    """A failed trace: the segments of s2 (which found the gold page) receive no gradient under GGPO."""
    trace = failed_trace()
    masks = step_masks(trace.steps, trace.graph, 0.0, valid_retrievals(trace, gold_pred([Gold("b.pdf", 7)])))
    S = len(trace.steps)
    new = torch.randn(S, 4, requires_grad=True)  # (S, L)
    adv = torch.full((S,), -1.0)  # (S,): the failed trajectory's advantage, on each of its segments
    loss, _ = method_loss("ggpo", new, new.detach() - 0.05, torch.ones(S, 4), adv, masks, level="token")
    loss.backward()
    spared = [i for i, m in enumerate(masks) if m == 1.0]
    assert spared == [2, 3]
    assert torch.equal(new.grad[spared], torch.zeros(2, 4))
    assert (new.grad[[0, 1, 4, 5, 6]].abs().sum(dim=1) > 0).all()


def test_gppo_has_ppos_value_and_a_gradient_where_ppo_clips():
    # KlearReasoner verl/trainer/ppo/core_algos.py compute_gppo_loss, lines 505-512 and 519-526
    from rl.clipping import gppo_token_loss

    g = torch.Generator().manual_seed(0)
    log_ratio = (torch.randn(4, 16, generator=g) * 0.4).requires_grad_()  # (S, L)
    adv = torch.randn(4, 1, generator=g)  # (S, 1)
    ppo_lr = log_ratio.detach().clone().requires_grad_()
    r = torch.exp(ppo_lr)
    ppo = torch.maximum(-adv * r, -adv * torch.clamp(r, 0.8, 1.2))
    ppo = torch.where(adv < 0, torch.minimum(ppo, -adv * 3.0), ppo)  # (S, L)
    gppo = gppo_token_loss(log_ratio, adv)
    assert torch.allclose(gppo, ppo)  # the same loss values
    gppo.sum().backward()
    ppo.sum().backward()
    clipped = ppo_lr.grad == 0
    assert clipped.any() and (~clipped).any()
    assert torch.allclose(log_ratio.grad[~clipped], ppo_lr.grad[~clipped])  # inside the range: PPO's gradient
    a = adv.expand_as(gppo)
    dual = (a < 0) & torch.isclose(ppo, -a * 3.0)  # held at -A c: no gradient in either
    bound = torch.where(r.detach() > 1.0, 1.2, 0.8)  # the bound that clipped the token
    held = clipped & ~dual
    assert held.any() and torch.allclose(log_ratio.grad[held], (-a * bound)[held])  # GPPO: d/d log r = -A b
    assert (log_ratio.grad[dual] == 0).all()
