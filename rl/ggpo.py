"""The model-free core of Graph-Guided Policy Optimization: step masks, group advantages, PPO-clip losses.

GGPO (DESIGN.md 4.3) is a GRPO-family objective over the *step segments* of a trajectory: one segment
is the tokens the policy generated at one agent step (observation tokens are never trained on). Each
step t gets a mask from the memory graph,

    mu_t = 1[r = 1] * 1[v_t not in P_ans] + 1[r = 0] * 1[v_t in R_val]

where v_t is the node the step created or closed, P_ans the nodes on paths from the root to the
answer node and R_val the search nodes whose results held gold evidence. A step's tokens enter the
loss with weight (1 - mu_t): a successful trajectory does not reinforce its dead ends, and a failed
one does not punish the searches that did find the evidence.

Everything here is a pure function of traces, graphs and tensors, so it is tested on hand-built
graphs and hand-computed numbers. Left out on purpose: tokenisation, rollouts and the optimiser loop
(rl/rollout.py builds segments from the agent's events; the trainer calls `ppo_clip_loss`).

Methods: "grpo" (weights 1, token-level ratios; DeepSeekMath, arXiv 2402.03300), "gspo" (weights 1,
sequence-level ratios; arXiv 2507.18071, the VimRAG paper's baseline) and "ggpo" (weights 1 - mu_t,
sequence level by default because it is built on GSPO, or token level on request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import torch

from agent.events import SearchResults, Trace

Method = Literal["ggpo", "grpo", "gspo"]
Level = Literal["token", "sequence"]
LengthNorm = Literal["token_mean", "seq_mean"]

# The ratio level each method uses; None means the caller picks (GGPO is a masking rule, not a ratio).
METHODS: dict[str, str | None] = {"grpo": "token", "gspo": "sequence", "ggpo": None}
GGPO_DEFAULT_LEVEL = "sequence"  # the paper builds GGPO on its GSPO baseline
SUCCESS_THRESHOLD = 0.5  # reward >= this counts as r = 1 (VimRAG's reward is binary; see `is_success`)


# ---------------------------------------------------------------------------------------------------
# Masks from the memory graph
# ---------------------------------------------------------------------------------------------------


def _graph_nodes(graph: Any) -> dict[str, tuple[str, list[str]]]:
    """node id -> (kind, parents), from a MemoryGraph or its to_dict()."""
    if hasattr(graph, "nodes") and isinstance(graph.nodes, Mapping):  # a MemoryGraph
        return {nid: (n.kind, list(n.parents)) for nid, n in graph.nodes.items()}
    if isinstance(graph, Mapping):
        return {n["id"]: (n["kind"], list(n.get("parents") or [])) for n in graph.get("nodes", [])}
    raise TypeError(f"graph must be a MemoryGraph or its to_dict(), not {type(graph).__name__}")


def answer_ancestors(graph: Any) -> set[str]:
    """P_ans: the answer node and every node on a path from the root to it (the root included).

    Empty when the graph has no answer node (the episode hit its step limit or failed). If a graph
    ever holds several answer nodes, P_ans is the union of their ancestries.

    >>> g = {"question": "q", "nodes": [
    ...     {"id": "root", "kind": "root", "parents": []},
    ...     {"id": "s1", "kind": "search", "parents": ["root"]},
    ...     {"id": "s2", "kind": "search", "parents": ["root"]},
    ...     {"id": "a", "kind": "answer", "parents": ["s2"]}]}
    >>> sorted(answer_ancestors(g))
    ['a', 'root', 's2']
    """
    nodes = _graph_nodes(graph)
    path: set[str] = set()
    stack = [nid for nid, (kind, _) in nodes.items() if kind == "answer"]
    while stack:
        nid = stack.pop()
        if nid in path or nid not in nodes:
            continue
        path.add(nid)
        stack.extend(nodes[nid][1])
    return path


def dead_end_searches(graph: Any) -> int:
    """How many search nodes lie off every path to the answer (all of them when nothing was answered).

    A training statistic: the dead ends a successful GGPO trajectory does not reinforce. Linear
    protocols (vrag, react) chain every node, so their answered graphs never have dead ends.

    >>> g = {"question": "q", "nodes": [
    ...     {"id": "root", "kind": "root", "parents": []},
    ...     {"id": "s1", "kind": "search", "parents": ["root"]},
    ...     {"id": "s2", "kind": "search", "parents": ["root"]},
    ...     {"id": "a", "kind": "answer", "parents": ["s2"]}]}
    >>> dead_end_searches(g)
    1
    """
    p_ans = answer_ancestors(graph)
    return sum(1 for nid, (kind, _) in _graph_nodes(graph).items() if kind == "search" and nid not in p_ans)


def is_success(reward: float) -> bool:
    """r = 1 in the mask formula. VimRAG's reward is binary (0 or 1); a continuous reward (an ANLS
    score, the VRAG composite) is binarised at SUCCESS_THRESHOLD = 0.5, so 0.7 counts as success."""
    return float(reward) >= SUCCESS_THRESHOLD


def _node_id(step: Any) -> str:
    if isinstance(step, Mapping):
        return step.get("node_id") or ""
    return getattr(step, "node_id", "") or ""


def step_masks(
    steps: Sequence[Any], graph: Any, reward: float, valid_retrieval: set[str] | Callable[[str], bool]
) -> list[float]:
    """mu_t for each step (1.0 = masked out of the loss, 0.0 = trained); the loss weight is 1 - mu_t.

    `steps` are StepRecords or their dicts; only `node_id` is read. A step without a node ("" — a
    malformed reply, a failed tool) is neither on the answer path nor a valid retrieval: it is masked
    in a success (not reinforced) and trained in a failure (punished). Several steps can share a node
    (add_search_node and the summarize_and_memorize that closes it) and then share its mask.
    `valid_retrieval` is R_val as a set of node ids, or a predicate on a node id.

    Edge case: when every step is masked (`all_masked`), the trajectory contributes exactly zero
    gradient. The masks are still returned, so the trainer can count such trajectories and, if it
    wants, drop them before the forward pass.

    >>> g = {"question": "q", "nodes": [
    ...     {"id": "root", "kind": "root", "parents": []},
    ...     {"id": "s1", "kind": "search", "parents": ["root"]},
    ...     {"id": "s2", "kind": "search", "parents": ["root"]},
    ...     {"id": "a", "kind": "answer", "parents": ["s2"]}]}
    >>> steps = [{"node_id": n} for n in ["s1", "s1", "s2", "s2", "", "a"]]
    >>> step_masks(steps, g, 1.0, set())          # success: the dead end s1 and the bad reply are masked
    [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    >>> step_masks(steps, g, 0.0, {"s1"})         # failure: s1 found the gold page, so it is spared
    [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    """
    in_rval = valid_retrieval if callable(valid_retrieval) else set(valid_retrieval).__contains__
    ids = [_node_id(s) for s in steps]
    if is_success(reward):
        p_ans = answer_ancestors(graph)
        return [0.0 if nid and nid in p_ans else 1.0 for nid in ids]
    return [1.0 if nid and in_rval(nid) else 0.0 for nid in ids]


def all_masked(masks: Sequence[float]) -> bool:
    """Whether no step of the trajectory is trained (every mu_t = 1, or no steps at all).

    >>> all_masked([1.0, 1.0]), all_masked([1.0, 0.0]), all_masked([])
    (True, False, True)
    """
    return all(float(m) >= 1.0 for m in masks)


def valid_retrievals(trace: Any, gold: Callable[[dict[str, Any]], bool]) -> set[str]:
    """R_val: the node ids of search steps whose results contain gold evidence.

    Reads the trace's `SearchResults` events (their node and hits) and resolves each hit through
    trace.evidence[info_id]["unit"]; `gold(unit_dict) -> bool` says whether a unit is gold,
    e.g. `lambda u: any(g.matches(u) for g in item.evidence)` with eval.datasets.Gold. `trace` is a
    Trace or its to_dict(). Results whose evidence is missing from the trace are skipped.

    >>> from agent.events import SearchHit
    >>> trace = Trace("q", "vimrag", "scripted", events=[
    ...     SearchResults(1, node_id="s1", results=[SearchHit("Picture 1")]).to_dict(),
    ...     SearchResults(3, node_id="s2", results=[SearchHit("Picture 2")]).to_dict()],
    ...     evidence={"Picture 1": {"unit": {"source": "a.pdf", "page": 1}},
    ...               "Picture 2": {"unit": {"source": "a.pdf", "page": 7}}})
    >>> valid_retrievals(trace, lambda u: u["page"] == 7)
    {'s2'}
    """
    if isinstance(trace, Mapping):
        trace = Trace.from_dict(trace)
    found: set[str] = set()
    for ev in trace.events_of(SearchResults):
        if not ev.node_id or ev.node_id in found:
            continue
        units = [trace.evidence[hit.info_id]["unit"] for hit in ev.results if hit.info_id in trace.evidence]
        if any(gold(u) for u in units):
            found.add(ev.node_id)
    return found


# ---------------------------------------------------------------------------------------------------
# Group-normalised advantages
# ---------------------------------------------------------------------------------------------------


def batched_group_advantages(rewards: torch.Tensor, eps: float = 1e-6, scale: bool = True) -> torch.Tensor:
    """Advantages for Q groups of G rollouts each: (r - mean) / (std + eps) within each row.

    std is the *sample* standard deviation (Bessel's correction, divide by G - 1), as GRPO
    implementations compute it (torch.std's default). `scale=False` only centres (Dr. GRPO,
    arXiv 2503.20783). A group whose rewards are all equal (or that has one rollout) carries no
    learning signal and gets exactly zero advantages.

    >>> adv = batched_group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]))
    >>> [[round(a, 4) for a in row] for row in adv.tolist()]  # sample std of row 0 is 0.5
    [[1.5, -0.5, -0.5, -0.5], [0.0, 0.0, 0.0, 0.0]]
    """
    if rewards.dim() != 2:
        raise ValueError(
            f"rewards must be (Q, G), got shape {tuple(rewards.shape)}; use group_advantages for one group"
        )
    r = rewards.float()  # (Q, G)
    if r.shape[1] < 2:
        return torch.zeros_like(r)  # (Q, 1): one rollout has no group to compare with
    centred = r - r.mean(dim=1, keepdim=True)  # (Q, G)
    if scale:
        centred = centred / (r.std(dim=1, keepdim=True) + eps)  # (Q, G), sample std (correction=1)
    flat = r.amax(dim=1, keepdim=True) == r.amin(dim=1, keepdim=True)  # (Q, 1)
    # exact zeros: the float mean of equal rewards can differ from them by one ulp
    return torch.where(flat, torch.zeros_like(centred), centred)  # (Q, G)


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6, scale: bool = True) -> torch.Tensor:
    """Advantages for one group of G rollouts of the same question (see `batched_group_advantages`).

    >>> [round(a, 4) for a in group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0])).tolist()]
    [1.5, -0.5, -0.5, -0.5]
    """
    if rewards.dim() != 1:
        raise ValueError(
            f"rewards must be (G,), got shape {tuple(rewards.shape)}; use batched_group_advantages for (Q, G)"
        )
    return batched_group_advantages(rewards[None], eps, scale)[0]  # (G,)


# ---------------------------------------------------------------------------------------------------
# Methods and segment weights
# ---------------------------------------------------------------------------------------------------


def method_level(method: str, level: str | None = None) -> str:
    """The ratio level a method trains at: grpo -> token, gspo -> sequence, ggpo -> `level` or sequence.

    >>> method_level("grpo"), method_level("gspo"), method_level("ggpo"), method_level("ggpo", "token")
    ('token', 'sequence', 'sequence', 'token')
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}")
    fixed = METHODS[method]
    if fixed is not None:
        if level is not None and level != fixed:
            raise ValueError(f"{method} trains at {fixed} level; drop level={level!r} or use method='ggpo'")
        return fixed
    level = level or GGPO_DEFAULT_LEVEL
    if level not in ("token", "sequence"):
        raise ValueError(f"level {level!r} must be 'token' or 'sequence'")
    return level


def segment_weights(method: str, masks: Sequence[float]) -> torch.Tensor:
    """Loss weight of each step segment: 1 - mu_t for ggpo, 1 for grpo and gspo (which ignore masks).

    >>> segment_weights("ggpo", [1.0, 0.0]).tolist(), segment_weights("gspo", [1.0, 0.0]).tolist()
    ([0.0, 1.0], [1.0, 1.0])
    """
    method_level(method)  # validates the name
    mu = torch.as_tensor(list(masks), dtype=torch.float32)  # (S,)
    return 1.0 - mu if method == "ggpo" else torch.ones_like(mu)  # (S,)


# ---------------------------------------------------------------------------------------------------
# The clipped surrogate
# ---------------------------------------------------------------------------------------------------


def k3_kl(logp_new: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(new || ref): exp(ref - new) - (ref - new) - 1, always >= 0
    (Schulman, "Approximating KL divergence", 2020; the "low_var_kl" of VRAG-RL / verl).

    >>> round(k3_kl(torch.tensor(0.0), torch.tensor(0.5)).item(), 6)  # e^0.5 - 0.5 - 1
    0.148721
    """
    d = logp_ref - logp_new  # (...)
    return torch.exp(d) - d - 1.0  # (...)


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
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip loss (to minimise) over S padded step segments of up to L generated tokens each.

    Inputs: `logp_new`, `logp_old`, `logp_ref` (S, L) log-probabilities of the generated tokens under
    the current, the rollout and the reference policy; `token_mask` (S, L) 1 for generated action
    tokens, 0 for padding (observation tokens are never in a segment); `advantages` (S,) the
    trajectory's group advantage, repeated for each of its segments; `weights` (S,) 1 - mu_t for
    GGPO, 1 for GRPO/GSPO.

    level="token" (GRPO): ratio_t = exp(new_t - old_t), objective min(ratio·A, clip(ratio)·A) per token,
    clip range [1 - clip_eps, 1 + clip_eps_high] (clip_eps_high defaults to clip_eps; a larger one is
    DAPO's clip-higher). Tokens are averaged per `length_norm`:
      - "token_mean": sum over the unmasked tokens of all segments / their count (DAPO, arXiv
        2503.14476): every token weighs the same, so long segments count more;
      - "seq_mean": mean over each segment's tokens, then mean over segments (original GRPO):
        every segment weighs the same, whatever its length.
    level="sequence" (GSPO): one ratio per segment, s = exp(mean over its tokens of (new - old)),
    objective min(s·A, clip(s)·A) per segment, mean over segments; `length_norm` does not apply. (GSPO
    itself uses a much narrower clip range, 3e-4 / 4e-4; pass it explicitly.)

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
    with A > 0, or below 1 - eps with A < 0) and "ratio_mean" (mean ratio over the same).

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
    if advantages.shape != (S,) or weights.shape != (S,):
        raise ValueError(
            f"advantages and weights must be (S,) = ({S},); got {tuple(advantages.shape)}, {tuple(weights.shape)}"
        )
    if logp_ref is not None and logp_ref.shape != logp_new.shape:
        raise ValueError(f"logp_ref must be (S, L) = {tuple(logp_new.shape)}; got {tuple(logp_ref.shape)}")
    eps_low = clip_eps
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high

    mask = token_mask.to(logp_new.dtype)  # (S, L)
    on = mask > 0  # (S, L)
    adv = advantages.to(logp_new.dtype).detach()  # (S,)
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
        }

    if level == "token":
        ratio = torch.exp(log_ratio)  # (S, L)
        a = adv[:, None].expand_as(ratio)  # (S, L)
        obj = torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)  # (S, L)
        pol_tok = -obj * w[:, None] * mask  # (S, L)
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
        obj = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv)  # (S,)
        policy_loss = (-obj * w * has_tok).sum() / n_seg  # ()
        kl_seg = kl_tok.sum(dim=1) / n_tok.clamp(min=1.0)  # (S,)
        kl = (kl_seg * w * has_tok).sum() / n_seg  # ()
        stats = clip_stats(ratio, adv, has_tok)

    loss = policy_loss + kl_coef * kl  # ()
    stats = {"policy_loss": float(policy_loss.detach()), "kl": float(kl.detach()), **stats}
    return loss, stats


def method_loss(
    method: str,
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    token_mask: torch.Tensor,
    advantages: torch.Tensor,
    masks: Iterable[float],
    logp_ref: torch.Tensor | None = None,
    level: str | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`ppo_clip_loss` with the weights and the level a method prescribes (`segment_weights`,
    `method_level`); `masks` are the segments' mu_t (ignored by grpo and gspo)."""
    weights = segment_weights(method, list(masks)).to(logp_new.device)  # (S,)
    return ppo_clip_loss(
        logp_new, logp_old, token_mask, advantages, weights, logp_ref, level=method_level(method, level), **kwargs
    )
