"""Clipped surrogates beyond PPO's: GPPO's gradient-preserving clip (Klear-Reasoner, arXiv 2508.07629).

PPO-clip's `clamp(r, 1-eps_low, 1+eps_high)` has zero gradient outside the range, so a clipped token stops
teaching. GPPO keeps the clipped value in the forward pass but lets a bounded gradient through: the bound b is
written as `b / sg(r) * r` (sg = stop-gradient), which equals b and has d/d log r = b. Published code:
Kwai-Klear/KlearReasoner `verl/trainer/ppo/core_algos.py` `compute_gppo_loss`, lines 505-512 (the clamp with
`/ ratio.detach() * ratio` bounds) and 519-526 (verl's dual clip, c = 3, for negative advantages). Its
`only_higher` branch reads a name the function never defines (the parameter is `only_high`), so only the
two-sided form, the one its default path runs, is followed here.

`clipped_loss` is the one per-token (or per-sequence) clipped loss every method of rl/methods.py trains with:
PPO's clamp, or GPPO's gradient-preserving one, with verl's optional dual clip.
"""

from __future__ import annotations

import torch


def clipped_loss(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    preserve: str = "none",
    clip_c: float | None = None,
) -> torch.Tensor:
    """Elementwise clipped loss (to minimise): max(-A r, -A clamp(r, 1-eps_low, 1+eps_high)).

    `ratio` (...) is pi_new / pi_old of each token (or sequence); `advantages` broadcasts to it.
    `preserve="both"`: GPPO's clamp, whose bounds b are written b / sg(r) * r, so a clipped element keeps its
    value and passes d loss / d log r = -A b instead of 0. `preserve="high"`: AEPO's entropy clipping-balanced
    clamp, the same for the upper bound only (clipped tokens with A > 0, the high-entropy exploration its paper
    keeps learning from; the lower bound stays a constant): ARPO repository, AEPO
    `verl_aepo_entropy/verl/trainer/ppo/core_algos.py` lines 655-658, upstream commit ff66660.
    `clip_c`: for A < 0 the loss is capped at -A c (verl's dual clip, `clip_ratio_c`; Klear-Reasoner lines 519-526).

    >>> r = torch.tensor([1.5, 0.5, 1.1])
    >>> clipped_loss(r, torch.tensor([1.0, -1.0, 1.0])).tolist()   # -min(1.5, 1.2), -(-max(0.5, 0.8)), -1.1
    [-1.2000000476837158, 0.800000011920929, -1.100000023841858]
    """
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(f"clip range must satisfy 0 <= eps_low < 1 and eps_high >= 0, got {eps_low}, {eps_high}")
    if preserve not in ("none", "both", "high"):
        raise ValueError(f"preserve must be none, both (GPPO) or high (AEPO); got {preserve!r}")
    if preserve == "none":
        clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)  # (...)
    else:
        scale = ratio / ratio.detach()  # (...) 1 in value, d/d log r = 1
        low = (1.0 - eps_low) * scale if preserve == "both" else torch.full_like(ratio, 1.0 - eps_low)  # (...)
        clipped = torch.clamp(ratio, low, (1.0 + eps_high) * scale)  # (...)
    loss = torch.maximum(-advantages * ratio, -advantages * clipped)  # (...)
    if clip_c is not None:
        if clip_c <= 1.0:
            raise ValueError(f"the dual-clip bound must be above 1, got {clip_c}")
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * clip_c), loss)  # (...)
    return loss


def gppo_token_loss(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    clip_c: float | None = 3.0,
) -> torch.Tensor:
    """Per-token GPPO loss (to minimise), the same value as PPO-clip's, with gradient on clipped tokens.

    `log_ratio` (..., L) is log pi_new - log pi_old of each token; `advantages` broadcasts to it. With
    r = exp(log_ratio) and A the advantage:

        loss = max(-A r, -A clamp_g(r, 1-eps_low, 1+eps_high)),  clamp_g's bounds b -> b / sg(r) * r
        and, for A < 0 with `clip_c`, min(loss, -A c)  (verl's dual clip)

    Worked by hand, A = +1, r = 1.5, eps 0.2: PPO's loss -1.2 with gradient 0; GPPO's loss -1.2 with
    d loss / d log r = -1.2 (= -A (1+eps)). A = -1, r = 0.5: loss 0.8, gradient +0.8. Inside the range the
    two are PPO: A = +1, r = 1.1 gives -1.1 and -1.1.

    >>> lr = torch.log(torch.tensor([1.5, 0.5, 1.1])).requires_grad_()
    >>> loss = gppo_token_loss(lr, torch.tensor([1.0, -1.0, 1.0]))
    >>> loss.sum().backward()
    >>> [round(x, 4) for x in loss.tolist()], [round(x, 4) for x in lr.grad.tolist()]
    ([-1.2, 0.8, -1.1], [-1.2, 0.8, -1.1])
    """
    return clipped_loss(torch.exp(log_ratio), advantages, eps_low, eps_high, "both", clip_c)  # (..., L)
