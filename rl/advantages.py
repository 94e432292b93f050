"""Advantage rules beyond GRPO's group normalisation: ADORA's utility weight and ToolPO's tool-token attribution.

Both start from the group advantages of rl/ggpo.py (`group_advantages`) and reshape them; both are pure
functions of rewards, lengths and token masks, tested on values worked by hand (tests/rl/test_methods.py).
The trainer picks them through the method registry (rl/methods.py): `method=adora`, and `tool_advantage=`
on any method.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

ADORA_LAMBDA = 0.1  # ADORA's `lamda` default (ADORA/verl/trainer/config/ppo_trainer.yaml, `Length_weight`)


def adora_weight(
    rewards: Sequence[float],
    lengths: Sequence[int],
    truncated: Sequence[bool],
    correct: float = 0.5,
    lam: float = ADORA_LAMBDA,
) -> float:
    """ADORA's weight for one group: 1 if its longest correct response is longer than the mean length of its
    incorrect, non-truncated ones (a "temporarily advantageous" sample), else `lam`.

    Every advantage of the group (positive and negative) is multiplied by it: A_i <- w A_i. ADORA (Ren et al.,
    arXiv 2602.10019) publishes this as `compute_grpo_outcome_advantage_ADORA`, ShadeCloak/ADORA
    `ADORA/verl/trainer/ppo/core_algos.py` lines 144-158 (the classification) and 175-179 (the x lambda),
    commit c518485. Its edge cases are followed: with no correct response max = -inf, so the group is
    scaled; with no non-truncated incorrect one mean = -inf, so it is not. (The VL fork,
    `ADORA_VL/.../experience_maker_vl.py` `weight_func`, treats both the other way round; we follow the
    verl version, which the repository's README presents.) ADORA counts a response correct when its score
    exceeds `correct_score`; ours is binary, so `correct` is 0.5 (rl/ggpo.py `is_success`). Truncated means a
    response that hit the length cap (`max_length_threshold`); for an agent, an episode that ran out of steps
    or tokens without answering. Lengths are generated tokens, summed over the trajectory's steps.

    Worked by hand, rewards [1, 1, 0, 0]: lengths [300, 500, 400, 450] -> max correct 500 > mean 425 -> 1;
    [300, 350, 400, 450] -> 350 <= 425 -> 0.1; [300, 420, 400, 4096] with the last truncated -> 420 > 400 -> 1.

    >>> adora_weight([1, 1, 0, 0], [300, 500, 400, 450], [False] * 4)
    1.0
    >>> adora_weight([1, 1, 0, 0], [300, 350, 400, 450], [False] * 4)
    0.1
    >>> adora_weight([1, 1, 0, 0], [300, 420, 400, 4096], [False, False, False, True])
    1.0
    """
    if not (len(rewards) == len(lengths) == len(truncated)):
        raise ValueError(
            f"one length and truncation flag per reward; got {len(rewards)}, {len(lengths)}, {len(truncated)}"
        )
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"ADORA's lambda attenuates, so it must be in [0, 1]; got {lam}")
    pos = [n for r, n in zip(rewards, lengths) if r > correct]
    neg = [n for r, n, t in zip(rewards, lengths, truncated) if r <= correct and not t]
    max_pos = max(pos) if pos else float("-inf")
    mean_neg = sum(neg) / len(neg) if neg else float("-inf")
    return 1.0 if max_pos > mean_neg else float(lam)


def tool_call_advantages(
    success_adv: torch.Tensor, action_adv: torch.Tensor, tool_mask: torch.Tensor, coef: float = 1.0
) -> torch.Tensor:
    """ToolPO's per-token advantage: A(y_i) = A_succ(tau) + M(y_i) coef A_action(tau).

    `success_adv` (S,) is each segment's trajectory-level advantage (the task reward's), `action_adv` (S,) its
    trajectory's advantage of the action reward (correct tool calls), and `tool_mask` (S, L) is 1 on the tokens
    of a tool call. DeepAgent (Li et al., arXiv 2510.21618, section 3.5 "Global and Tool-Call Advantage
    Attribution") adds the action advantage only on the tool-call tokens. No training code is published
    (RUC-NLPIR/DeepAgent at 376a141 has none; its issue #5 says it is still being organised), so this follows
    the paper's formula; which tokens are the call, and what makes a call correct, are rl/methods.py's.

    Worked by hand: A_succ = 0.5, A_action = 1 on a segment whose tokens 2..3 are the call: [0.5, 0.5, 1.5, 1.5].

    >>> tool_call_advantages(torch.tensor([0.5]), torch.tensor([1.0]), torch.tensor([[0.0, 0.0, 1.0, 1.0]])).tolist()
    [[0.5, 0.5, 1.5, 1.5]]
    """
    S = success_adv.shape[0]
    if success_adv.shape != (S,) or action_adv.shape != (S,) or tool_mask.dim() != 2 or tool_mask.shape[0] != S:
        raise ValueError(
            f"success_adv and action_adv must be (S,) and tool_mask (S, L); got {tuple(success_adv.shape)}, "
            f"{tuple(action_adv.shape)}, {tuple(tool_mask.shape)}"
        )
    return success_adv[:, None] + tool_mask.to(success_adv.dtype) * coef * action_adv[:, None]  # (S, L)


def span_token_mask(token_ends: Sequence[int], start: int, end: int) -> list[float]:
    """1.0 for each token whose text overlaps the character span [start, end), else 0.0.

    `token_ends[i]` is where token i's text ends in the decoded reply (so token i covers
    [token_ends[i-1], token_ends[i])). Used to find a tool call's tokens from its place in the text.

    >>> span_token_mask([3, 5, 9, 12], 4, 10)   # tokens cover [0,3) [3,5) [5,9) [9,12)
    [0.0, 1.0, 1.0, 1.0]
    """
    out, prev = [], 0
    for e in token_ends:
        out.append(1.0 if prev < end and e > start and e > prev else 0.0)
        prev = e
    return out


AEPO_ENTROPY_COEF = 0.2  # hard-coded in AEPO's core_algos.py line 638


def entropy_aware_advantages(
    advantages: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor, coef: float = AEPO_ENTROPY_COEF
) -> torch.Tensor:
    """AEPO's entropy-aware advantage: A_t (1 + coef z(H_t)), z the token entropy standardised over the batch.

    `advantages`, `entropy` and `mask` are (S, L): each token's advantage, the entropy (nats) of the distribution
    it was sampled from, and 1 on generated tokens. z = (H - mean) / std over the masked tokens (sample std; a
    std of 0 counts as 1), as in AEPO (Dong et al., arXiv 2510.14545): ARPO repository's AEPO code,
    `AEPO/verl_aepo_entropy/verl/trainer/ppo/core_algos.py` lines 621-638 (upstream commit ff66660, via the
    multi-agent-deep-research/ARPO fork; the dongguanting/ARPO snapshot predates AEPO). There the statistics are
    a micro-batch's; here they are the update's tokens on this process. The published run never executes it:
    entropy is only computed when `entropy_coeff != 0` (dp_actor.py lines 532-538) and its scripts keep 0. Here
    it runs whenever method=aepo.

    Worked by hand: H = [2, 1, 0.5, 0.5] has mean 1 and std 0.7071, so z = [1.414, 0, -0.707, -0.707] and
    A = [1, 1, -1, -1] becomes [1.283, 1.0, -0.859, -0.859].

    >>> out = entropy_aware_advantages(torch.tensor([[1.0, 1.0, -1.0, -1.0]]), torch.tensor([[2.0, 1.0, 0.5, 0.5]]),
    ...                                torch.ones(1, 4))
    >>> [round(x, 3) for x in out[0].tolist()]
    [1.283, 1.0, -0.859, -0.859]
    """
    if not (advantages.shape == entropy.shape == mask.shape) or advantages.dim() != 2:
        raise ValueError(
            f"advantages, entropy and mask must share one (S, L) shape; got {tuple(advantages.shape)}, "
            f"{tuple(entropy.shape)}, {tuple(mask.shape)}"
        )
    on = mask > 0  # (S, L)
    valid = entropy[on]  # (n,)
    if valid.numel() == 0:
        return advantages
    mean = valid.mean()  # ()
    std = valid.std() if valid.numel() > 1 else torch.tensor(0.0)  # ()
    std = torch.where(std == 0, torch.ones_like(std), std)  # ()
    z = (entropy - mean) / std  # (S, L)
    return advantages * (1.0 + coef * z.detach())  # (S, L)
