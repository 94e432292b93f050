"""What the model reads of the graph (memory_graph/render.py): the demo's action-graph list and memory plan.

Energies are worked by hand: E = (p/5)(1 + outdeg) e^(-0.1 (T - t)), Omega = E + 0.3 * sum of the children's
mean Omega, and the top 5 share 2,007,040 pixels in proportion to Omega, capped per image.
"""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_graph.graph import Item, MemoryGraph
from memory_graph.render import action_graph, memory_plan, visual_tokens


def chain() -> MemoryGraph:
    g = MemoryGraph("Which region earned most?")
    s1 = g.add_node("s1", "search", ["root"], "revenue by region")
    s1.args, s1.summary = {"id": "s1", "query": "revenue by region", "parent_ids": ["root"]}, "table on p.2"
    s1.items.append(Item("Picture 1", "r:p2", "page", priority=5, source="report.pdf p.2"))
    s2 = g.add_node("s2", "search", ["s1"], "regional growth")
    s2.args, s2.summary = {"query": "regional growth", "id": "s2", "parent_ids": ["s1"], "note": "x"}, "chart"
    s2.items.append(Item("Picture 2", "r:p7", "page", priority=3, source="report.pdf p.7"))
    return g


def plan_pixels(plan):
    return [(node, [(s.item.info_id, s.pixels, s.per_frame) for s in slots]) for node, slots in plan]


def test_visual_tokens_by_hand():
    assert visual_tokens(448, 448) == 16 * 16  # Qwen2.5-VL: one token per 28x28 px
    assert visual_tokens(840, 1176) == 30 * 42
    assert visual_tokens(1024, 512, patch=32) == 32 * 16  # Qwen3-VL: 32 px per token; (width, height) order
    assert visual_tokens(27, 1000) == 0  # under one patch wide: nothing


def test_action_graph_is_the_demos_list_of_raw_arguments_plus_summary():
    g = chain()
    g.add_node("answer", "answer", ["s2"]).summary = "Europe"
    assert action_graph(g) == [
        {"id": "root", "name": "Initial Node", "content": "Initial query from user: Which region earned most?"},
        {"id": "s1", "query": "revenue by region", "parent_ids": ["root"], "summary": "table on p.2"},
        # the model's own key order and extra keys are kept; the summary comes last
        {"query": "regional growth", "id": "s2", "parent_ids": ["s1"], "note": "x", "summary": "chart"},
    ]  # the answer node is not shown: the demo appends it only after the last model call
    crop = g.add_node("crop1", "crop", ["s1"], "crop")
    crop.args = {"image": "Picture 1", "bbox": [1, 2, 3, 4]}
    assert action_graph(g)[-1] == {"id": "crop1", "image": "Picture 1", "bbox": [1, 2, 3, 4], "summary": ""}


def test_memory_plan_by_hand():
    # T = 2. s1 (t=1, one child): E = 1.0 * 2 * e^-0.1 = 1.8097; s2 (t=2): E = 0.6.
    # Omega(s2) = 0.6; Omega(s1) = 1.8097 + 0.3 * 0.6 = 1.9897; sum 2.5897.
    # s1: int(2,007,040 * (1.9897 / 2.5897)) = 1,542,030, no cap (the demo has none);
    # s2: int(2,007,040 * (0.6 / 2.5897)) = 465,009.
    plan = memory_plan(chain())
    assert plan_pixels(plan) == [
        ("s1", [("Picture 1", 1_542_030, 1_542_030)]),
        ("s2", [("Picture 2", 465_009, 465_009)]),
    ]
    omega = {s.item.info_id: s.omega for _, slots in plan for s in slots}
    assert math.isclose(omega["Picture 1"], 2 * math.exp(-0.1) + 0.3 * 0.6)
    assert math.isclose(omega["Picture 2"], 0.6)


def test_text_and_not_useful_items_take_no_part_in_energy():
    """The demo stores only useful pictures and videos; before the fix, these entered s2's mean and moved
    Omega(s1)."""
    g = chain()
    g.nodes["s2"].items += [
        Item("Text 1", "notes:0", "text", priority=5),
        Item("Picture 3", "r:p9", "page", priority=5, useful=False),
    ]
    assert plan_pixels(memory_plan(g)) == plan_pixels(memory_plan(chain()))


def test_items_outside_the_top_k_get_nothing_and_groups_follow_graph_order():
    g = chain()
    g.nodes["s2"].items.append(Item("Picture 4", "r:p8", "page", priority=5))
    plan = memory_plan(g, k=2)
    # s2 now holds p3 and p5 pages: Omega(s1) = 1.8097 + 0.3 * mean(0.6, 1.0) = 2.0497, the p5 page 1.0
    assert [(n, [s.item.info_id for s in slots]) for n, slots in plan] == [("s1", ["Picture 1"]), ("s2", ["Picture 4"])]
    both = memory_plan(g, k=3)
    assert [s.item.info_id for s in both[1][1]] == ["Picture 4", "Picture 2"]  # inside a node: best first


def test_video_frames_share_the_item_budget_and_a_video_without_frames_is_not_memory():
    g = MemoryGraph("What is shown?")
    g.add_node("s1", "search", ["root"], "demo")
    g.nodes["s1"].items.append(Item("Video 1", "v:c0", "video", priority=4, key_timestamps=[3.0, 12.0]))
    assert plan_pixels(memory_plan(g, s_total=200_704)) == [("s1", [("Video 1", 200_704, 100_352)])]
    alone = memory_plan(g, s_total=2_007_041)  # an odd budget: each frame gets its // share, no cap
    assert plan_pixels(alone) == [("s1", [("Video 1", 2_007_041, 1_003_520)])]
    g.nodes["s1"].items[0].key_timestamps = []  # no timestamp matched a sampled frame: the demo drops it
    assert memory_plan(g) == []


sizes = st.integers(1, 5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(
        st.tuples(
            st.sampled_from(["page", "image", "video", "text"]), st.integers(1, 5), st.integers(0, 4), st.booleans()
        ),
        min_size=1,
        max_size=8,
    ),
    s_total=st.integers(1, 4_000_000),
    k=st.integers(1, 6),
)
def test_plan_stays_within_budget_and_holds_only_memory(items, s_total, k):
    g = MemoryGraph("q")
    for i, (modality, prio, n_frames, useful) in enumerate(items):
        g.add_node(f"s{i}", "search", [f"s{i - 1}" if i else "root"])
        ts = [float(t) for t in range(n_frames)] if modality == "video" else []
        g.nodes[f"s{i}"].items.append(Item(f"I{i}", f"u{i}", modality, prio, useful=useful, key_timestamps=ts))
    plan = memory_plan(g, k=k, s_total=s_total)
    slots = [s for _, group in plan for s in group]
    assert len(slots) <= k and sum(s.pixels for s in slots) <= s_total
    assert all(s.item.in_memory for s in slots)
    for s in slots:
        frames = len(s.item.key_timestamps) if s.item.modality == "video" else 1
        assert s.per_frame == s.pixels // frames
    order = [g.nodes[n].index for n, _ in plan]
    assert order == sorted(order)
