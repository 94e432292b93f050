"""The clipped policy-gradient loss over step segments, shared by every method (rl/methods.py).

A batch is S step segments of up to L generated tokens (rl/rollout.py). The loss is PPO-clip's at token level
(GRPO's ratios) or sequence level (GSPO's), weighted per segment (GGPO's 1 - mu_t) and averaged per token or
per segment, with an optional k3 KL to a reference policy. The clamp itself is rl/clipping.py's, so GPPO's
gradient-preserving clip and verl's dual clip are switches, not copies.
"""

from __future__ import annotations

import torch

from rl.clipping import clipped_loss


def k3_kl(logp_new: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(new || ref): exp(ref - new) - (ref - new) - 1, always >= 0
    (Schulman, "Approximating KL divergence", 2020; the "low_var_kl" of VRAG-RL / verl).

    >>> round(k3_kl(torch.tensor(0.0), torch.tensor(0.5)).item(), 6)  # e^0.5 - 0.5 - 1
    0.148721
    """
    d = logp_ref - logp_new  # (...)
    return torch.exp(d) - d - 1.0  # (...)


def behaviour_weight(log_w: torch.Tensor, cap: float | None = None) -> torch.Tensor:
    """exp(log_w), the decoupled objective's pi_prox / pi_behav, set to 0 where it exceeds `cap` (AReaL's
    rejection of tokens whose behaviour policy is too far off; None: no cap).

    >>> behaviour_weight(torch.log(torch.tensor([0.5, 2.0, 8.0])), cap=5.0)
    tensor([0.5000, 2.0000, 0.0000])
    """
    w = torch.exp(log_w)  # (...)
    return w if cap is None else torch.where(w > cap, torch.zeros_like(w), w)  # (...)


def ppo_clip_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    token_mask: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    logp_ref: torch.Tensor | None = None,
    level: str = "token",
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    kl_coef: float = 0.0,
    length_norm: str = "token_mean",
    preserve: str = "none",
    clip_c: float | None = None,
    logp_behav: torch.Tensor | None = None,
    behav_cap: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip loss (to minimise) over S padded step segments of up to L generated tokens each.

    Inputs: `logp_new`, `logp_old`, `logp_ref` (S, L) log-probabilities of the generated tokens under
    the current, the rollout and the reference policy; `token_mask` (S, L) 1 for generated action
    tokens, 0 for padding (observation tokens are never in a segment); `advantages` (S,) the
    trajectory's group advantage, repeated for each of its segments, or (S, L) one per token at token level
    (ToolPO's tool-call tokens, AEPO's entropy-aware advantage); `weights` (S,) 1 - mu_t where GGPO's step
    mask is on, else 1.

    level="token" (GRPO): ratio_t = exp(new_t - old_t), objective min(ratio·A, clip(ratio)·A) per token,
    clip range [1 - clip_eps, 1 + clip_eps_high] (clip_eps_high defaults to clip_eps; a larger one is
    DAPO's clip-higher). Tokens are averaged per `length_norm`:
      - "token_mean": sum over the unmasked tokens of all segments / their count (DAPO, arXiv
        2503.14476): every token weighs the same, so long segments count more;
      - "seq_mean": mean over each segment's tokens, then mean over segments (original GRPO):
        every segment weighs the same, whatever its length.
    level="sequence" (GSPO): one ratio per segment, s = exp(mean over its tokens of (new - old)),
    objective min(s·A, clip(s)·A) per segment, mean over segments; `length_norm` does not apply. (GSPO
    itself uses a much narrower clip range, 3e-4 / 4e-4: rl/methods.py `clip_range` gives it by level.)

    `preserve` ("both": GPPO, "high": AEPO) keeps the same values but lets clipped ratios pass a bounded gradient, and
    `clip_c` caps the loss of negative advantages at -A c (verl's dual clip); see rl/clipping.py.

    Decoupled objective (asynchronous rollouts, AReaL: Fu et al. 2025, arXiv 2505.24298): when
    `logp_behav` (S, L) is given, the tokens were sampled by an older behaviour policy, `logp_old` is the proximal
    policy's, and each token's surrogate is multiplied by the detached importance weight
    w_t = exp(prox_t - behav_t): J = E[w_t · min(r_t A, clip(r_t) A)] with r_t = pi_theta / pi_prox. A token with
    w_t above `behav_cap` is left out (its loss is 0, it still counts in the denominators). At sequence level w
    is the geometric mean over the segment's tokens, and the cap tests that mean. Where prox == behav, w is exactly
    1 and the loss is the synchronous one bit for bit. AReaL `areal/utils/functional/functional.py` (4aef98d)
    lines 509-539: the ratio against the proximal log-probs, then `pg_loss * behave_imp_weight`; the cap is its
    rejection sampling's `upper` (mask action, ratio metric, default 5.0; `areal/api/cli_args.py` lines 1299-1300).

    KL: when `logp_ref` is given, the per-token k3 estimate (`k3_kl`) is averaged exactly like the
    surrogate (token_mean / seq_mean at token level; per-segment mean then mean over segments at
    sequence level) and the loss is policy_loss + kl_coef · KL.

    Weights multiply both the surrogate and the KL of each segment, so a segment with weight 0
    contributes nothing and its gradient is exactly zero. It still counts in the denominators (its
    tokens under token_mean, the segment itself under seq_mean / sequence level): masking removes a
    step's signal, it does not up-weight the others. Segments without any unmasked token are left
    out of the means over segments. With no unmasked token at all the loss is 0 (still attached to
    the graph, so backward() works).

    Returns (loss, stats): stats holds floats "policy_loss", "kl" (the averaged, weighted k3 term that
    was multiplied by kl_coef; 0 without logp_ref), "clip_frac" (fraction of unmasked tokens, or of
    non-empty segments at sequence level, whose gradient the clip removed: ratio above 1 + eps_high
    with A > 0, or below 1 - eps with A < 0), "ratio_mean" and "ratio_max" (the mean and the largest ratio over
    the same).

    >>> new = torch.log(torch.tensor([[1.5, 1.0], [0.5, 1.0]]))   # ratios against old = 0
    >>> old, mask = torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    >>> loss, stats = ppo_clip_loss(new, old, mask, torch.tensor([1.0, 1.0]), torch.ones(2))
    >>> round(loss.item(), 4), stats["clip_frac"]   # -(min(1.5, 1.2) + min(0.5, 0.8)) / 2
    (-0.85, 0.5)
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level {level!r} must be 'token' (GRPO) or 'sequence' (GSPO)")
    if length_norm not in ("token_mean", "seq_mean"):
        raise ValueError(f"length_norm {length_norm!r} must be 'token_mean' or 'seq_mean'")
    if logp_new.dim() != 2 or logp_old.shape != logp_new.shape or token_mask.shape != logp_new.shape:
        raise ValueError(
            f"logp_new, logp_old and token_mask must share one (S, L) shape; got "
            f"{tuple(logp_new.shape)}, {tuple(logp_old.shape)}, {tuple(token_mask.shape)}"
        )
    S = logp_new.shape[0]
    per_token = advantages.dim() == 2
    if advantages.shape not in ((S,), tuple(logp_new.shape)) or weights.shape != (S,):
        raise ValueError(
            f"advantages must be (S,) = ({S},) or (S, L) = {tuple(logp_new.shape)} and weights (S,); got "
            f"{tuple(advantages.shape)}, {tuple(weights.shape)}"
        )
    if per_token and level == "sequence":
        raise ValueError("per-token advantages need level='token': a sequence-level ratio has one advantage")
    if logp_behav is not None and logp_behav.shape != logp_new.shape:
        raise ValueError(f"logp_behav must be (S, L) = {tuple(logp_new.shape)}; got {tuple(logp_behav.shape)}")
    if logp_ref is not None and logp_ref.shape != logp_new.shape:
        raise ValueError(f"logp_ref must be (S, L) = {tuple(logp_new.shape)}; got {tuple(logp_ref.shape)}")
    eps_low = clip_eps
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high

    mask = token_mask.to(logp_new.dtype)  # (S, L)
    on = mask > 0  # (S, L)
    adv = advantages.to(logp_new.dtype).detach()  # (S,) or (S, L)
    w = weights.to(logp_new.dtype).detach()  # (S,)
    zero = torch.zeros_like(logp_new)  # (S, L)
    # Padding may hold anything (-inf, garbage): keep it out of exp() so it cannot turn 0 · inf into NaN.
    log_ratio = torch.where(on, logp_new - logp_old.detach(), zero)  # (S, L)
    n_tok = mask.sum(dim=1)  # (S,)
    has_tok = (n_tok > 0).to(logp_new.dtype)  # (S,)
    n_seg = has_tok.sum().clamp(min=1.0)  # ()

    if logp_ref is not None:
        # mask the difference before exp(): where() after it would still back-propagate 0 · inf = NaN
        ref_minus_new = torch.where(on, logp_ref.detach() - logp_new, zero)  # (S, L)
        kl_tok = k3_kl(zero, ref_minus_new)  # (S, L), exactly 0 at padding
    else:
        kl_tok = zero  # (S, L)

    def clip_stats(ratio: torch.Tensor, a: torch.Tensor, where: torch.Tensor) -> dict[str, float]:
        clipped = ((ratio > 1 + eps_high) & (a > 0)) | ((ratio < 1 - eps_low) & (a < 0))  # same shape as ratio
        count = where.sum().clamp(min=1.0)  # ()
        return {
            "clip_frac": float((clipped.to(where.dtype) * where).sum() / count),
            "ratio_mean": float((ratio.detach() * where).sum() / count),
            "ratio_max": float(torch.where(where > 0, ratio.detach(), torch.zeros_like(ratio)).max())
            if ratio.numel()
            else 0.0,
        }

    behav_log = None
    if logp_behav is not None:  # log(pi_prox / pi_behav), detached, 0 at padding
        behav_log = torch.where(on, logp_old.detach() - logp_behav.detach(), zero)  # (S, L)

    if level == "token":
        ratio = torch.exp(log_ratio)  # (S, L)
        a = adv if per_token else adv[:, None].expand_as(ratio)  # (S, L)
        pol_tok = clipped_loss(ratio, a, eps_low, eps_high, preserve, clip_c) * w[:, None] * mask  # (S, L)
        if behav_log is not None:
            pol_tok = pol_tok * behaviour_weight(behav_log, behav_cap)  # (S, L)
        kl_w = kl_tok * w[:, None] * mask  # (S, L)
        if length_norm == "token_mean":
            denom = mask.sum().clamp(min=1.0)  # ()
            policy_loss = pol_tok.sum() / denom  # ()
            kl = kl_w.sum() / denom  # ()
        else:
            per_seg = n_tok.clamp(min=1.0)  # (S,)
            policy_loss = (pol_tok.sum(dim=1) / per_seg).sum() / n_seg  # ()
            kl = (kl_w.sum(dim=1) / per_seg).sum() / n_seg  # ()
        stats = clip_stats(ratio, a, mask)
    else:
        seq_log_ratio = log_ratio.sum(dim=1) / n_tok.clamp(min=1.0)  # (S,)
        ratio = torch.exp(seq_log_ratio)  # (S,)
        seg_loss = clipped_loss(ratio, adv, eps_low, eps_high, preserve, clip_c)  # (S,)
        if behav_log is not None:  # the geometric mean of the segment's weights
            seg_loss = seg_loss * behaviour_weight(behav_log.sum(dim=1) / n_tok.clamp(min=1.0), behav_cap)  # (S,)
        policy_loss = (seg_loss * w * has_tok).sum() / n_seg  # ()
        kl_seg = kl_tok.sum(dim=1) / n_tok.clamp(min=1.0)  # (S,)
        kl = (kl_seg * w * has_tok).sum() / n_seg  # ()
        stats = clip_stats(ratio, adv, has_tok)

    loss = policy_loss + kl_coef * kl  # ()
    stats = {"policy_loss": float(policy_loss.detach()), "kl": float(kl.detach()), **stats}
    return loss, stats
