"""The trainer's policy-gradient methods, as recipes over one loss, and the options that compose with them.

A method is a named recipe (`METHODS`): the ratio level, whether GGPO's step mask is on, which clamp the loss
uses (rl/clipping.py) and how group advantages are reshaped (rl/advantages.py). Every method trains through
the same `ppo_clip_loss` (rl/loss.py), so they differ only where their papers do.

| method | level    | step mask | clamp                          | advantage                 | source                |
|--------|----------|-----------|--------------------------------|---------------------------|-----------------------|
| grpo   | token    | off       | PPO                            | group                     | DeepSeekMath          |
| gspo   | sequence | off       | PPO                            | group                     | GSPO 2507.18071       |
| ggpo   | setting  | on        | PPO                            | group                     | VimRAG, DESIGN.md 4.3 |
| gppo   | token    | off       | gradient-preserving, dual 3    | group                     | Klear-Reasoner        |
| aepo   | token    | off       | upper bound preserving, dual 3 | x (1 + 0.2 z(H)) per token| AEPO 2510.14545       |
| adora  | token    | off       | PPO                            | x ADORA's group weight    | ADORA 2602.10019      |

Options that compose with any method (TrainConfig): `step_mask` (GGPO's mu_t on top of, say, GPPO),
`tool_advantage` (ToolPO's tool-call attribution, token level), `branching` (ARPO / AEPO rollouts) and
`horizons` (ScalingInter-RL's curriculum).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl.loss import ppo_clip_loss

GGPO_DEFAULT_LEVEL = "sequence"  # the paper builds GGPO on its GSPO baseline
KLEAR_CLIP_C = 3.0  # verl's dual-clip bound, on in Klear-Reasoner's and AEPO's published runs
TOKEN_CLIP = (0.2, 0.2)  # PPO's range below and above 1 (Schulman et al. 2017, arXiv 1707.06347, section 6.1)
# GSPO's own sequence-level range: "the left and right clipping ranges ... 3e-4 and 4e-4" (arXiv 2507.18071, 5.1)
SEQUENCE_CLIP = (3e-4, 4e-4)


@dataclass(frozen=True)
class Method:
    level: str | None  # the ratio level it trains at; None: the `level` setting (default sequence)
    step_mask: bool  # GGPO's success mask mu_t, unless the `step_mask` setting says otherwise
    preserve: str = "none"  # rl/clipping.py: none (PPO), both (GPPO), high (AEPO)
    clip_c: float | None = None  # dual clip for negative advantages
    advantage: str = "group"  # group, adora (x its weight per group) or aepo (x 1 + 0.2 z(H) per token)


METHODS: dict[str, Method] = {
    "grpo": Method("token", False),
    "gspo": Method("sequence", False),
    "ggpo": Method(None, True),
    "gppo": Method("token", False, "both", KLEAR_CLIP_C),
    "aepo": Method("token", False, "high", KLEAR_CLIP_C, "aepo"),
    "adora": Method("token", False, advantage="adora"),
}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; use one of {', '.join(METHODS)}")
    return METHODS[name]


def method_level(method: str, level: str | None = None) -> str:
    """The ratio level a method trains at: its own, or for ggpo `level` (default sequence).

    >>> method_level("grpo"), method_level("gspo"), method_level("ggpo"), method_level("ggpo", "token")
    ('token', 'sequence', 'sequence', 'token')
    >>> method_level("gppo"), method_level("aepo"), method_level("adora")
    ('token', 'token', 'token')
    """
    fixed = get_method(method).level
    if fixed is not None:
        if level is not None and level != fixed:
            raise ValueError(f"{method} trains at {fixed} level; drop level={level!r} or use method='ggpo'")
        return fixed
    level = level or GGPO_DEFAULT_LEVEL
    if level not in ("token", "sequence"):
        raise ValueError(f"level {level!r} must be 'token' or 'sequence'")
    return level


def clip_range(level: str, clip_eps: float | None = None, clip_eps_high: float | None = None) -> tuple[float, float]:
    """The clip range (below 1, above 1) a ratio level trains with: the settings where given, else the level's
    published default, PPO's 0.2 at token level and GSPO's 3e-4 / 4e-4 at sequence level. A sequence ratio is a
    geometric mean over the segment's tokens, so it moves far less than a token's: PPO's 0.2 would never clip it.
    An explicit `clip_eps` alone sets both sides (clip_eps_high defaults to it, as before).

    >>> clip_range("token"), clip_range("sequence"), clip_range("sequence", 0.2), clip_range("token", 0.2, 0.28)
    ((0.2, 0.2), (0.0003, 0.0004), (0.2, 0.2), (0.2, 0.28))
    """
    if level not in ("token", "sequence"):
        raise ValueError(f"level {level!r} must be 'token' or 'sequence'")
    low, high = TOKEN_CLIP if level == "token" else SEQUENCE_CLIP
    if clip_eps is not None:
        low, high = clip_eps, clip_eps
    return low, high if clip_eps_high is None else clip_eps_high


def uses_step_mask(method: str, step_mask: bool | None = None) -> bool:
    """Whether GGPO's mask weighs the segments: the `step_mask` setting, else the method's default (ggpo only).

    >>> uses_step_mask("ggpo"), uses_step_mask("gppo"), uses_step_mask("gppo", True), uses_step_mask("ggpo", False)
    (True, False, True, False)
    """
    default = get_method(method).step_mask
    return default if step_mask is None else bool(step_mask)


def segment_weights(method: str, masks: Sequence[float], step_mask: bool | None = None) -> torch.Tensor:
    """Loss weight of each step segment: 1 - mu_t where GGPO's mask is on (`uses_step_mask`), else 1.

    >>> segment_weights("ggpo", [1.0, 0.0]).tolist(), segment_weights("gspo", [1.0, 0.0]).tolist()
    ([0.0, 1.0], [1.0, 1.0])
    >>> segment_weights("gppo", [1.0, 0.0], step_mask=True).tolist()
    [0.0, 1.0]
    """
    mu = torch.as_tensor(list(masks), dtype=torch.float32)  # (S,)
    return 1.0 - mu if uses_step_mask(method, step_mask) else torch.ones_like(mu)  # (S,)


def clip_kwargs(method: str, clip_c: float | None = None) -> dict[str, Any]:
    """The clamp settings `ppo_clip_loss` takes for a method (`clip_c` overrides its dual-clip bound).

    >>> clip_kwargs("grpo"), clip_kwargs("gppo"), clip_kwargs("aepo", 5.0)
    ({'preserve': 'none', 'clip_c': None}, {'preserve': 'both', 'clip_c': 3.0}, {'preserve': 'high', 'clip_c': 5.0})
    """
    m = get_method(method)
    return {"preserve": m.preserve, "clip_c": m.clip_c if clip_c is None else clip_c}


def method_loss(
    method: str,
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    token_mask: torch.Tensor,
    advantages: torch.Tensor,
    masks: Iterable[float],
    logp_ref: torch.Tensor | None = None,
    level: str | None = None,
    step_mask: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`ppo_clip_loss` with the weights, the level and the clamp a method prescribes; `masks` are the segments'
    mu_t (used where the step mask is on). `advantages` are already the method's (`group_token_advantages`)."""
    weights = segment_weights(method, list(masks), step_mask).to(logp_new.device)  # (S,)
    return ppo_clip_loss(
        logp_new,
        logp_old,
        token_mask,
        advantages,
        weights,
        logp_ref,
        level=method_level(method, level),
        **{**clip_kwargs(method), **kwargs},
    )


# -- the advantages a method trains each segment with ------------------------------------------------------
_CALL = re.compile(r"<(tool_call|search|bbox)>.*?</\1>", re.DOTALL)  # the tag protocols' calls (VRAG's action rule)


def tool_call_span(text: str) -> tuple[int, int] | None:
    """Where a reply's tool call is, as a character span: its first `<tool_call>`, `<search>` or `<bbox>` block,
    tags included (DeepAgent leaves open whether its markers count; they are generated tokens, so they do).

    >>> tool_call_span('think <search>cats</search> more')
    (6, 27)
    >>> tool_call_span('<answer>4</answer>') is None
    True
    """
    m = _CALL.search(text)
    return (m.start(), m.end()) if m else None


def tool_token_mask(tokenizer, seg) -> torch.Tensor:
    """(N,) 1.0 on the tokens of a segment's tool call (`tool_call_span`), found by decoding each prefix; all 0
    when the step called no tool or answered (an answer is not a tool invocation)."""
    from agent.protocols import tool_kinds
    from rl.advantages import span_token_mask

    ids = seg.gen_ids.tolist()
    if not seg.tool or tool_kinds().get(seg.tool) == "answer":
        return torch.zeros(len(ids))
    text = tokenizer.decode(ids, skip_special_tokens=True)
    span = tool_call_span(text)
    if span is None:
        return torch.zeros(len(ids))
    ends = [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)) for i in range(len(ids))]
    return torch.tensor(span_token_mask(ends, *span))  # (N,)


def correct_calls(segments) -> int:
    """ToolPO's action reward: the tool calls that did their job. A search is correct when its results held
    gold evidence (known from the dataset); another tool (crop, scale, memorize) when it was called and ran."""
    from agent.protocols import tool_kinds

    kinds = tool_kinds()
    n = 0
    for s in segments:
        if not s.tool or kinds.get(s.tool) == "answer":
            continue
        n += int(s.gold_hit) if s.gold_hit is not None else 1
    return n


@dataclass
class Advantages:
    """Per segment of one update, in segment order: a float (one advantage for all its tokens) or an (N,)
    tensor (one per token), with counts for the metrics."""

    values: list[float | torch.Tensor]
    attenuated_groups: int = 0  # ADORA: groups whose advantages were scaled by lambda
    tool_tokens: int = 0  # ToolPO: tokens that received the tool-call advantage


def segment_advantages(groups, cfg, tokenizer=None) -> Advantages:
    """The advantages each segment of `groups` (lists of rl.rollout.Trajectory, one list per question) trains
    with under `cfg` (a TrainConfig): GRPO's group advantage, reshaped per the method and `tool_advantage`."""
    from rl.advantages import adora_weight, entropy_aware_advantages, tool_call_advantages
    from rl.ggpo import group_advantages

    m = get_method(cfg.method)
    out = Advantages([])
    for trajs in groups:
        rewards = torch.tensor([t.reward for t in trajs])  # (G,)
        adv = group_advantages(rewards)  # (G,)
        if m.advantage == "adora":
            lengths = [sum(int(s.gen_ids.numel()) for s in t.segments) for t in trajs]
            cut = [
                t.trace.status == "limit" or any(int(s.gen_ids.numel()) >= cfg.max_new_tokens for s in t.segments)
                for t in trajs
            ]
            w = adora_weight(rewards.tolist(), lengths, cut, lam=cfg.adora_lambda)
            out.attenuated_groups += int(w != 1.0 and bool(adv.abs().sum() > 0))
            adv = adv * w  # (G,)
        if cfg.tool_advantage:  # ToolPO's action reward: correct tool calls, normalised in the group like the task's
            act = group_advantages(torch.tensor([float(correct_calls(t.segments)) for t in trajs])).tolist()  # (G,)
        else:
            act = [0.0] * len(trajs)
        for t, a, b in zip(trajs, adv.tolist(), act):
            for seg in t.segments:
                if not cfg.tool_advantage:
                    out.values.append(a)
                    continue
                mask = tool_token_mask(tokenizer, seg)[None]  # (1, N)
                out.tool_tokens += int(mask.sum())
                both = tool_call_advantages(torch.tensor([a]), torch.tensor([b]), mask, cfg.tool_advantage)  # (1, N)
                out.values.append(both[0])
    if m.advantage == "aepo":
        out.values = _entropy_aware(groups, out.values, cfg.aepo_entropy_coef, entropy_aware_advantages)
    return out


def _entropy_aware(groups, values, coef: float, fn) -> list[torch.Tensor]:
    segs = [s for trajs in groups for t in trajs for s in t.segments]
    if any(s.entropy is None for s in segs):
        raise ValueError(
            "aepo needs each reply's token entropies; sample with rl/policy.py's or rl/served.py's policy, which "
            "record them"
        )
    n = max((int(s.gen_ids.numel()) for s in segs), default=0)
    adv = torch.zeros(len(segs), n)  # (S, L)
    ent = torch.zeros(len(segs), n)  # (S, L)
    mask = torch.zeros(len(segs), n)  # (S, L)
    for i, (s, v) in enumerate(zip(segs, values)):
        k = int(s.gen_ids.numel())
        adv[i, :k], ent[i, :k], mask[i, :k] = v if isinstance(v, torch.Tensor) else float(v), s.entropy[:k], 1.0
    shaped = fn(adv, ent, mask, coef)  # (S, L)
    return [shaped[i, : int(s.gen_ids.numel())].clone() for i, s in enumerate(segs)]
