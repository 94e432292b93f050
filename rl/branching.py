"""ARPO's and AEPO's entropy-driven branching: where a rollout forks, and how many start from the root.

ARPO (Dong et al., arXiv 2507.19849) samples a few full trajectories per question, then, after a tool call,
forks a trajectory again when the model's entropy has risen since its first reply: uncertainty right after
a tool's result is where another try is worth most. AEPO (arXiv 2510.14545) sets the number of root rollouts
from how uncertain the question is compared with its tool steps, and penalises branching again and again.

These are the pure decisions, each reproducing the published code's arithmetic with the uniform draw u passed
in (so a test can pin it); rl/rollout.py `rollout_branching` runs them on real trajectories. Published code:
- ARPO: dongguanting/ARPO at e257337, `ARPO/verl_arpo_entropy/verl/workers/rollout/vllm_rollout/
  vllm_rollout_with_tools.py` lines 172-177 and 283-305 (the entropy), 466-487 (the decision);
- AEPO: the same repository's `AEPO/verl_aepo_entropy/.../vllm_rollout_with_tools.py`, upstream commit ff66660
  (read through the multi-agent-deep-research/ARPO fork), lines 541-550 (root budget) and 945-968 (penalty).

Where this differs from the published code, on purpose:
- the entropy of a reply is the exact entropy of each token's tempered distribution, summed over its first
  20 tokens and divided by ln |V|; ARPO sums the top-10 log-prob terms of the same tokens (vLLM returns only
  those), which approximates it from below;
- a fork is decided on the reply that follows the tool's result (the paper's description). The published
  loop compares the reply *before* the call with a stale per-index dictionary (`initial_entropy_dict` is never
  cleared between batches), so its first decision always sees a change of 0;
- AEPO's consecutive-branch count is kept along each path (the paper's "consecutive high-entropy branching");
  the published counter is per question and also counts fresh refills.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ENTROPY_TOKENS = 20  # ARPO measures the first 20 tokens of a reply (line 291)
AEPO_PENALTY = 0.05  # per consecutive branch (AEPO line 953)
AEPO_SIGMOID_BETA = 0.5  # AEPO line 543


def reply_entropy(token_entropies: Sequence[float], vocab_size: int, n_tokens: int = ENTROPY_TOKENS) -> float:
    """The entropy ARPO compares: the sum over a reply's first `n_tokens` tokens of their entropy, / ln |V|.

    >>> round(reply_entropy([math.log(4)] * 30, vocab_size=4), 4)   # 20 tokens, each uniform over 4
    20.0
    """
    if vocab_size < 2:
        raise ValueError(f"the vocabulary must have at least 2 tokens; got {vocab_size}")
    return float(sum(token_entropies[:n_tokens])) / math.log(vocab_size)


def arpo_branches(u: float, delta_h: float, threshold: float = 0.5, weight: float = 0.2) -> bool:
    """ARPO's decision to fork one more copy: clip(u - weight * dH, 0, 1) <= threshold (lines 470-477).

    With u uniform this branches with probability clip(threshold + weight * dH, 0, 1): for threshold 0.5 and
    weight 0.2 (its scripts' values), dH = +0.5 gives 0.6 and dH = -1 gives 0.3.

    >>> arpo_branches(0.59, 0.5), arpo_branches(0.61, 0.5), arpo_branches(0.29, -1.0), arpo_branches(0.31, -1.0)
    (True, False, True, False)
    """
    return max(0.0, min(1.0, u - weight * delta_h)) <= threshold


def aepo_branches(u: float, delta_h: float, consecutive: int, threshold: float = 0.5, weight: float = 0.2) -> bool:
    """AEPO's decision with its consecutive-branch penalty: clip((u + weight dH)(1 - 0.05 c), 0, 1) >= threshold
    (lines 947-968), c the branches taken in a row before this one.

    The probability is 1 - clip(threshold / f - weight dH, 0, 1) with f = max(0, 1 - 0.05 c): for threshold 0.5,
    weight 0.2 and dH = 0.5, c = 0 gives 0.6, c = 2 gives 0.544 and c = 10 gives 0.1; c >= 20 never branches.

    >>> aepo_branches(0.41, 0.5, 0), aepo_branches(0.39, 0.5, 0)       # 0.41 + 0.1 = 0.51 >= 0.5
    (True, False)
    >>> aepo_branches(0.46, 0.5, 2), aepo_branches(0.45, 0.5, 2)       # (u + 0.1) 0.9 >= 0.5 iff u >= 0.4556
    (True, False)
    >>> aepo_branches(0.99, 0.5, 20)
    False
    """
    f = max(0.0, 1.0 - AEPO_PENALTY * consecutive)
    return max(0.0, min(1.0, (u + weight * delta_h) * f)) >= threshold


def aepo_root_rollouts(group_size: int, root_entropy: float, tool_entropy: float) -> int:
    """AEPO's entropy pre-monitoring: m = clip(int(k sigmoid(0.5 (H_root - H_tool))) + 1, 1, k) trajectories
    start from the question and k - m are left for branches (lines 541-550).

    H_root is the entropy of the question's first reply, H_tool the mean over the replies after tool results.
    A question less certain than its tool steps gets more root rollouts. Worked by hand: k = 16, H_root = 0.8,
    H_tool = 0.4 gives int(16 * 0.5498) + 1 = 9; equal entropies give int(8) + 1 = 9 (the code's "+ 1" rounds
    up only when k sigma is not whole).

    >>> aepo_root_rollouts(16, 0.8, 0.4), aepo_root_rollouts(16, 0.5, 0.5), aepo_root_rollouts(12, 0.5, 0.5)
    (9, 9, 7)
    """
    if group_size < 1:
        raise ValueError(f"a group needs at least one rollout; got {group_size}")
    s = 1.0 / (1.0 + math.exp(-AEPO_SIGMOID_BETA * (root_entropy - tool_entropy)))
    return max(1, min(int(group_size * s) + 1, group_size))
