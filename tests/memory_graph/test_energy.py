"""Energy and pixel allocation against hand-computed values (DESIGN.md section 4.2)."""

import math

import pytest

from memory_graph.energy import S_TOTAL, allocate, energy, intrinsic_energy
from memory_graph.graph import Item, MemoryGraph


def chain() -> MemoryGraph:
    g = MemoryGraph("q")
    g.add_node("s1", "search", ["root"])
    g.nodes["s1"].items.append(Item("Picture 1", "u1", "page", priority=5))
    g.add_node("s2", "search", ["s1"])
    g.nodes["s2"].items.append(Item("Picture 2", "u2", "page", priority=3))
    return g


def test_intrinsic_and_backpropagated_energy_by_hand():
    g = chain()
    e = intrinsic_energy(g)
    # s2 is newest (T = 2): (3/5) * (1 + 0) * exp(0); s1: (5/5) * (1 + 1) * exp(-0.1 * 1)
    assert e[("s2", 0)] == pytest.approx(0.6)
    assert e[("s1", 0)] == pytest.approx(2 * math.exp(-0.1))
    om = energy(g)
    assert om[("s2", 0)] == pytest.approx(0.6)
    assert om[("s1", 0)] == pytest.approx(2 * math.exp(-0.1) + 0.3 * 0.6)


def test_allocation_shares_and_top_k():
    g = chain()
    alloc = {(a.node_id, a.item_index): a for a in allocate(g)}
    total = 2 * math.exp(-0.1) + 0.18 + 0.6
    assert alloc[("s1", 0)].pixels == int(S_TOTAL * ((2 * math.exp(-0.1) + 0.18) / total))  # 1.54 M: no cap
    assert alloc[("s2", 0)].pixels == int(S_TOTAL * (0.6 / total))
    # Only the top K items get pixels; the rest keep their text summary.
    for i in range(6):
        g.add_node(f"x{i}", "search", ["root"])
        g.nodes[f"x{i}"].items.append(Item(f"Picture {i + 3}", f"v{i}", "image", priority=1))
    rows = allocate(g, k=5)
    assert sum(1 for r in rows if r.pixels > 0) == 5
    assert [r.omega for r in rows] == sorted((r.omega for r in rows), reverse=True)


def test_video_frames_share_their_item_budget_and_text_gets_none():
    g = MemoryGraph("q")
    g.add_node("s1", "search", ["root"])
    g.nodes["s1"].items += [
        Item("Video 1", "v", "video", priority=5, key_timestamps=[1.0, 2.0]),
        Item("Text 1", "t", "text", priority=5),
    ]
    rows = {r.item_index: r for r in allocate(g)}
    assert rows[0].frames == 2 and rows[0].pixels == S_TOTAL  # the one item takes the whole budget
    assert 1 not in rows  # a text item is no visual memory: no energy, no pixels


def test_not_useful_items_are_left_out():
    g = chain()
    g.nodes["s2"].items[0].useful = False
    assert [(r.node_id, r.item_index) for r in allocate(g)] == [("s1", 0)]
