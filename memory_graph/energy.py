"""Graph-modulated visual memory: node energy, and the pixel budget it buys each memorized item.

Pure functions over a `MemoryGraph` (VimRAG, DESIGN.md section 4.2, after the official demo):

- intrinsic energy   E(m) = (p/5) * (1 + outdeg(i)) * exp(-lambda * (T - t_i)),   lambda = 0.1
- back-propagated    Omega(m) = E(m) + gamma * sum_{c in children(i)} mean(Omega of c's items),   gamma = 0.3,
                     computed from the newest node to the oldest so children are done first
- allocation         the top-K items by Omega (K = 5) share S_total pixels: int(S_total * (Omega / sum)),
                     and the frames of one video split their item's budget with //. No per-item cap: the demo
                     passes image_max_pixels but never applies it (vimrag_utils.py lines 216-269), so one item
                     alone is allowed all 2,007,040. The image is snapped to the model's patch grid where it
                     is drawn (agent/media.py), not here.
The arithmetic is the demo's, operation for operation, so every share is the same integer: numpy's exp and
mean (they can differ from math.exp and sum()/len in the last bit), and the share divided before it is scaled
(S * (w / sum) and S * w / sum differ by one pixel in a few graphs in a thousand).
Only visual memory takes part (`Item.in_memory`: useful pictures, and videos with kept frames), as in the
demo, where nothing else is ever stored (demo/vimrag_agent.py lines 295-337; demo/vimrag_utils.py
lines 156-213).
Items outside the top K get 0 pixels; the model keeps only their node's summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memory_graph.graph import MemoryGraph

LAMBDA = 0.1
GAMMA = 0.3
TOP_K = 5
S_TOTAL = 2_007_040  # demo constant; the paper uses 5 * 256 * 32 * 32
MAX_IMAGE_PIXELS = 1_003_520  # the demo's cap on each picture as encoded (not on its memory share)
MAX_FRAME_PIXELS = 401_408  # and on each video frame


def item_key(node_id: str, index: int) -> tuple[str, int]:
    """Items are addressed by (node id, position in that node's item list)."""
    return node_id, index


def _children(graph: MemoryGraph) -> dict[str, list[str]]:
    """node id -> its children in creation order: graph.children of every node, in one pass over the graph."""
    kids: dict[str, list[str]] = {n: [] for n in graph.nodes}
    for node in graph.nodes.values():
        for p in dict.fromkeys(node.parents):
            if p in kids:
                kids[p].append(node.id)
    return kids


def intrinsic_energy(
    graph: MemoryGraph, lam: float = LAMBDA, kids: dict[str, list[str]] | None = None
) -> dict[tuple[str, int], float]:
    T = graph.newest_index
    kids = _children(graph) if kids is None else kids
    out = {}
    for node in graph.nodes.values():
        deg = len(kids[node.id])
        decay = np.exp(-lam * (T - node.index))  # numpy's exp, as the demo (vimrag_utils.py line 187)
        for j, item in enumerate(node.items):
            if item.in_memory:
                out[item_key(node.id, j)] = float((item.priority / 5.0) * (1 + deg) * decay)
    return out


def energy(graph: MemoryGraph, lam: float = LAMBDA, gamma: float = GAMMA) -> dict[tuple[str, int], float]:
    """Omega for every memorized item, with children's mean energy propagated to their parents."""
    kids = _children(graph)
    base = intrinsic_energy(graph, lam, kids)
    omega: dict[tuple[str, int], float] = {}
    node_mean: dict[str, float | None] = {}
    for node in sorted(graph.nodes.values(), key=lambda n: -n.index):  # newest first: children before parents
        inherited = 0.0
        for c in kids[node.id]:
            if node_mean.get(c) is not None:
                inherited += node_mean[c]  # children in creation order, as the demo's adjacency lists
        vals = []
        for j, _ in enumerate(node.items):
            k = item_key(node.id, j)
            if k not in base:  # not visual memory: no energy, and no part in its node's mean
                continue
            omega[k] = base[k] + gamma * inherited
            vals.append(omega[k])
        node_mean[node.id] = float(np.mean(vals)) if vals else None  # np.mean: pairwise, as the demo
    return omega


@dataclass
class Allocation:
    node_id: str
    item_index: int
    omega: float
    pixels: int  # the item's whole budget (shared by its frames for a video); 0 = text summary only
    frames: int = 1


def allocate(
    graph: MemoryGraph,
    k: int = TOP_K,
    s_total: int = S_TOTAL,
    lam: float = LAMBDA,
    gamma: float = GAMMA,
) -> list[Allocation]:
    """Every visual-memory item with its Omega and pixel budget, best first (ties: older node, then listing
    order, as the demo's stable sort). The top `k` share `s_total` as the demo divides it (vimrag_utils.py
    lines 224-266); the rest get 0."""
    omega = energy(graph, lam, gamma)
    rows = []
    for node, j, item in ((n, j, it) for n in graph.nodes.values() for j, it in enumerate(n.items)):
        if item_key(node.id, j) in omega:
            rows.append((omega[item_key(node.id, j)], node, j, item))
    rows.sort(key=lambda r: (-r[0], r[1].index, r[2]))
    visual = rows[:k]
    total = sum(r[0] for r in visual) if visual else 1.0
    budget = {(node.id, j): int(s_total * (om / total)) for om, node, j, _ in visual}
    return [
        Allocation(
            node.id,
            j,
            om,
            budget.get((node.id, j), 0),
            max(1, len(item.key_timestamps)) if item.modality == "video" else 1,
        )
        for om, node, j, item in rows
    ]
