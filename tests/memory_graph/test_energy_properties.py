"""Properties of energy and allocation over random DAGs and items (DESIGN.md 4.2), checked with hypothesis."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_graph.energy import allocate, energy, intrinsic_energy
from memory_graph.graph import Item, MemoryGraph

text = st.text(max_size=12)
floats = st.floats(min_value=0, max_value=3600, allow_nan=False)


@st.composite
def items(draw, tag: str, words) -> Item:
    modality = draw(st.sampled_from(["page", "image", "video", "text"]))
    box = None
    if draw(st.booleans()):
        x1, y1 = draw(floats), draw(floats)
        box = [x1, y1, x1 + draw(st.floats(0.5, 900)), y1 + draw(st.floats(0.5, 900))]
    return Item(
        info_id=f"Item {tag}",
        unit_uid=draw(words),
        modality=modality,
        priority=draw(st.integers(1, 5)),
        useful=draw(st.booleans()),
        summary=draw(words),
        key_timestamps=draw(st.lists(floats, max_size=6)) if modality == "video" else [],
        crop_box=box,
        source=draw(words),
    )


@st.composite
def graphs(draw, words=st.just("")) -> MemoryGraph:
    """A random DAG: each new node picks 1-3 parents among the nodes before it, then memorizes 0-4 items.

    Energy tests leave the strings empty (they play no part, and generating them is the slow part)."""
    g = MemoryGraph(draw(words))
    for i in range(draw(st.integers(0, 12))):
        existing = list(g.nodes)
        parents = draw(st.lists(st.sampled_from(existing), min_size=1, max_size=3, unique=True))
        node = g.add_node(f"n{i}", draw(st.sampled_from(["search", "crop", "scale"])), parents, draw(words))
        node.summary = draw(words)
        node.items = [draw(items(f"{i}.{j}", words)) for j in range(draw(st.integers(0, 4)))]
    return g


budgets = dict(k=st.integers(1, 8), s_total=st.integers(0, 3_000_000))


@settings(max_examples=200, deadline=None)
@given(g=graphs(), **budgets)
def test_allocation_never_exceeds_the_budgets(g, k, s_total):
    rows = allocate(g, k=k, s_total=s_total)
    assert sum(r.pixels for r in rows) <= s_total
    assert sum(1 for r in rows if r.pixels > 0) <= k
    for r in rows:
        item = g.nodes[r.node_id].items[r.item_index]
        assert r.pixels >= 0 and item.useful
        if item.modality == "text":
            assert r.pixels == 0
        elif item.modality == "video":
            assert r.frames == max(1, len(item.key_timestamps))


@settings(max_examples=200, deadline=None)
@given(g=graphs(), **budgets)
def test_allocation_is_monotone_in_energy(g, k, s_total):
    rows = allocate(g, k=k, s_total=s_total)
    assert [r.omega for r in rows] == sorted((r.omega for r in rows), reverse=True)
    images = [r for r in rows if g.nodes[r.node_id].items[r.item_index].modality in ("page", "image")]
    for a in images:
        for b in images:
            if a.omega > b.omega:  # more energy never buys fewer pixels
                assert a.pixels >= b.pixels
    shared = [r for r in images if r.pixels > 0]
    for a in shared:  # shares are proportional to Omega, up to integer rounding
        for b in shared:
            assert abs(a.pixels * b.omega - b.pixels * a.omega) <= max(a.omega, b.omega) + 1e-6 * s_total


@settings(max_examples=100, deadline=None)
@given(g=graphs(), lam=st.floats(0, 2), gamma=st.floats(0, 1))
def test_backpropagated_energy_is_at_least_intrinsic(g, lam, gamma):
    base, omega = intrinsic_energy(g, lam), energy(g, lam, gamma)
    memory = {(n.id, j) for n in g.nodes.values() for j, it in enumerate(n.items) if it.in_memory}
    assert base.keys() == omega.keys() == memory  # only useful pictures and videos with frames have energy
    for key, e in base.items():
        assert e >= 0 and omega[key] >= e - 1e-12
    if gamma == 0:
        assert omega == base


@settings(max_examples=100, deadline=None)
@given(g=graphs(text))
def test_to_dict_from_dict_round_trip_is_exact(g):
    d = g.to_dict()
    back = MemoryGraph.from_dict(json.loads(json.dumps(d)))
    assert back.to_dict() == d
    assert energy(back) == energy(g)
    assert [(a.node_id, a.item_index, a.omega, a.pixels) for a in allocate(back)] == [
        (a.node_id, a.item_index, a.omega, a.pixels) for a in allocate(g)
    ]
