"""The model-free core of Graph-Guided Policy Optimization: step masks from the memory graph, group advantages.

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
(rl/rollout.py builds segments from the agent's events), the clipped loss (rl/loss.py) and the other methods
and their options (rl/methods.py, where GGPO's mask composes with each of them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from agent.events import SearchResults, Trace

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


MASK_KINDS = ("dead_end", "valuable", "answer", "malformed", "path")


def step_kinds(node_ids: Sequence[str], graph: Any, valid_retrieval: set[str]) -> list[str]:
    """What each step is, for the mask's report: "malformed" (no node: a reply that could not run), "answer", "valuable"
    (its node is in R_val), "dead_end" (its node is off every path to the answer; every node, when nothing was
    answered), else "path". The masks themselves come from `step_masks`; this says which kind they fell on.

    >>> g = {"question": "q", "nodes": [
    ...     {"id": "root", "kind": "root", "parents": []},
    ...     {"id": "s1", "kind": "search", "parents": ["root"]},
    ...     {"id": "s2", "kind": "search", "parents": ["root"]},
    ...     {"id": "a", "kind": "answer", "parents": ["s2"]}]}
    >>> step_kinds(["s1", "s1", "", "s2", "s2", "a"], g, {"s2"})
    ['dead_end', 'dead_end', 'malformed', 'valuable', 'valuable', 'answer']
    """
    nodes = _graph_nodes(graph)
    p_ans = answer_ancestors(graph)
    out = []
    for nid in node_ids:
        if not nid or nid not in nodes:
            out.append("malformed")
        elif nodes[nid][0] == "answer":
            out.append("answer")
        elif nid in valid_retrieval:
            out.append("valuable")
        elif nid not in p_ans:
            out.append("dead_end")
        else:
            out.append("path")
    return out


def mask_report(episodes: Sequence[tuple[float, Sequence[str], Any, set[str], Sequence[float]]]) -> dict[str, float]:
    """Counts for the mask's report over (reward, step node ids, graph, R_val, step loss weights) episodes, with a fixed
    set of names (so processes can sum them): steps in successes and failures, the masked ones (weight 0) by kind,
    successful episodes, and those holding a dead-end search with their dead-end searches.

    >>> g = {"question": "q", "nodes": [{"id": "root", "kind": "root", "parents": []},
    ...     {"id": "s1", "kind": "search", "parents": ["root"]}, {"id": "s2", "kind": "search", "parents": ["root"]},
    ...     {"id": "a", "kind": "answer", "parents": ["s2"]}]}
    >>> r = mask_report([(1.0, ["s1", "s1", "s2", "s2", "a"], g, set(), [0, 0, 1, 1, 1])])
    >>> r["success_steps"], r["success_masked_dead_end"], r["successes_with_dead_end"], r["success_dead_ends"]
    (5.0, 2.0, 1.0, 1.0)
    """
    out = {f"{o}_{k}": 0.0 for o in ("success", "failure") for k in ("steps", *(f"masked_{m}" for m in MASK_KINDS))}
    out.update(successes=0.0, successes_with_dead_end=0.0, success_dead_ends=0.0)
    for reward, ids, graph, valid, weights in episodes:
        o = "success" if is_success(reward) else "failure"
        out[f"{o}_steps"] += len(ids)
        for kind, w in zip(step_kinds(ids, graph, valid), weights):
            if float(w) == 0.0:
                out[f"{o}_masked_{kind}"] += 1
        if o == "success":
            dead = dead_end_searches(graph)
            out["successes"] += 1
            out["successes_with_dead_end"] += float(dead > 0)
            out["success_dead_ends"] += dead
    return out


def mask_shares(r: Mapping[str, float]) -> dict[str, float]:
    """From summed `mask_report` counts: the share of success and failure steps masked, in all and by kind, dead-end
    searches per successful episode, and the share of successful episodes holding one."""
    out = {}
    for o in ("success", "failure"):
        n = max(1.0, r[f"{o}_steps"])
        out[f"masked_{o}"] = sum(r[f"{o}_masked_{k}"] for k in MASK_KINDS) / n
        out.update({f"masked_{o}_{k}": r[f"{o}_masked_{k}"] / n for k in MASK_KINDS})
    wins = max(1.0, r["successes"])
    out["dead_ends_per_success"] = r["success_dead_ends"] / wins
    out["successes_with_dead_end"] = r["successes_with_dead_end"] / wins
    return out


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
