"""The memory shares, integer for integer, against the VimRAG demo's algorithm re-stated step by step.

`demo_shares` below re-states `calculate_intuitive_memory_energy` and `generate_multimodal_messages`
(demo/vimrag_utils.py lines 156-213 and 216-269) over the action graph as the demo builds it: the root, then
the steps in creation order, each with its parent ids; memory holds each step's useful pictures and videos.
It is written here from that description, in the demo's own order of operations (numpy's exp and mean,
Python's stable sort, int(S * (omega / sum)), frames splitting their item's share with //), so the property
test proves `memory_graph.render.memory_plan` gives the same pixels per image, not merely close ones.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_graph.render import memory_plan
from tests.memory_graph.test_energy_properties import graphs


def demo_shares(graph, top_k=5, s_total=2_007_040, lam=0.1, gamma=0.3) -> dict[tuple[str, str], int]:
    """(node id, information id) -> max_pixels of each image part, as the demo computes it."""
    action_graph = [
        {"id": n.id, "parent_ids": list(n.parents)} for n in sorted(graph.nodes.values(), key=lambda n: n.index)
    ]
    memory = {
        n.id: [{"item": it, "priority_score": it.priority} for it in n.items if it.in_memory]
        for n in graph.nodes.values()
    }
    node_ids = [node["id"] for node in action_graph]
    t_max = len(node_ids) - 1
    adj = {node_id: [] for node_id in node_ids}
    out_degree = {node_id: 0 for node_id in node_ids}
    for node in action_graph:
        for p_id in node.get("parent_ids", []):
            if p_id in adj:
                adj[p_id].append(node["id"])
                out_degree[p_id] += 1
    intrinsic = {}
    for i, node_id in enumerate(node_ids):
        phi = 1 + out_degree[node_id]
        intrinsic[node_id] = [
            (m["priority_score"] / 5.0 * phi) * np.exp(-lam * (t_max - i)) for m in memory.get(node_id, [])
        ]
    omegas = {node_id: list(intrinsic[node_id]) for node_id in node_ids}
    for node_id in reversed(node_ids):
        if not adj[node_id]:
            continue
        feedback = 0
        for c_id in adj[node_id]:
            if omegas[c_id]:
                feedback += np.mean(omegas[c_id])
        for m in range(len(omegas[node_id])):
            omegas[node_id][m] += gamma * feedback
    every = [
        {**m, "omega": omegas[node_id][j], "node_id": node_id}
        for node_id in node_ids
        for j, m in enumerate(memory.get(node_id, []))
    ]
    every.sort(key=lambda x: x["omega"], reverse=True)
    chosen = every[:top_k]
    total = sum(x["omega"] for x in chosen) if chosen else 1.0
    out = {}
    for x in chosen:
        item_total = int(s_total * (x["omega"] / total))
        frames = len(x["item"].key_timestamps) if x["item"].modality == "video" else 1
        out[(x["node_id"], x["item"].info_id)] = item_total // frames if frames > 0 else 0
    return out


@settings(max_examples=500, deadline=None)
@given(g=graphs(), s_total=st.sampled_from([2_007_040, 5 * 256 * 32 * 32, 1_000_003]), k=st.integers(1, 6))
def test_every_share_is_the_demos_integer(g, s_total, k):
    plan = memory_plan(g, k=k, s_total=s_total)
    ours = {(node_id, s.item.info_id): s.per_frame for node_id, slots in plan for s in slots}
    theirs = {key: v for key, v in demo_shares(g, k, s_total).items() if v > 0}
    assert ours == theirs


def test_one_item_alone_gets_the_whole_budget():
    """The demo's golden case: a single memorized picture is sent with max_pixels 2,007,040, uncapped."""
    from memory_graph.graph import Item, MemoryGraph

    g = MemoryGraph("q")
    g.add_node("s1", "search", ["root"], "q").items.append(Item("Picture 1", "u", "page", priority=5))
    assert demo_shares(g) == {("s1", "Picture 1"): 2_007_040}
    assert [(n, [s.per_frame for s in slots]) for n, slots in memory_plan(g)] == [("s1", [2_007_040])]
