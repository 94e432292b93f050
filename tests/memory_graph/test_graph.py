"""The DAG: acyclic by construction, clear errors, exact round trips."""

import json

import pytest

from memory_graph.graph import GraphError, Item, MemoryGraph


def build() -> MemoryGraph:
    g = MemoryGraph("Which region earned most?")
    g.add_node("s1", "search", ["root"], "revenue by region")
    g.nodes["s1"].items.append(Item("Picture 1", "abc:p2", "page", priority=5, summary="table"))
    g.add_node("c1", "crop", ["s1"], "crop table")
    g.nodes["c1"].items.append(Item("Crop 1", "abc:p2", "page", priority=4, crop_box=[10, 20, 300, 200]))
    g.add_node("s2", "search", ["root"], "shipments")
    g.nodes["s2"].items.append(Item("Video 1", "vid:c0", "video", priority=2, key_timestamps=[3.0, 13.5]))
    g.add_node("a", "answer", ["c1", "s2"], "Europe")
    return g


def test_structure():
    g = build()
    assert g.children("root") == ["s1", "s2"] and g.children("s1") == ["c1"]
    assert g.ancestors("a") == {"c1", "s1", "s2", "root"}
    assert [n.index for n in g.nodes.values()] == [0, 1, 2, 3, 4] and g.newest_index == 4
    assert g.out_degree("s1") == 1 and g.out_degree("a") == 0


@pytest.mark.parametrize(
    "args, words",
    [
        (("s1", "search", ["root"]), "already exists"),
        (("x", "search", ["nope"]), "unknown parent"),
        (("x", "search", ["x"]), "own parent"),
        (("x", "dance", ["root"]), "not allowed"),
        (("x", "root", ["root"]), "not allowed"),
        (("x", "search", ["a"]), "cannot have children"),
    ],
)
def test_bad_nodes_are_refused(args, words):
    with pytest.raises(GraphError, match=words):
        build().add_node(*args)


def test_edges_that_would_cycle_are_refused():
    g = build()
    with pytest.raises(GraphError, match="cycle"):
        g.add_edge("c1", "s1")
    with pytest.raises(GraphError, match="cycle"):
        g.add_edge("s1", "s1")
    with pytest.raises(GraphError, match="newer step"):
        g.add_edge("s2", "c1")
    with pytest.raises(GraphError, match="unknown node"):
        g.add_edge("zz", "c1")
    g.add_edge("s1", "s2")
    assert g.nodes["s2"].parents == ["root", "s1"]


def test_bad_items_are_refused():
    with pytest.raises(GraphError, match="1..5"):
        Item("P", "u", "page", priority=6)
    with pytest.raises(GraphError, match="inverted"):
        Item("P", "u", "page", crop_box=[50, 50, 10, 60])


def test_round_trip_is_exact():
    g = build()
    d = g.to_dict()
    again = MemoryGraph.from_dict(json.loads(json.dumps(d)))
    assert again.to_dict() == d
    assert again.nodes["c1"].items[0].crop_box == [10, 20, 300, 200]


def test_from_dict_refuses_forward_references():
    d = build().to_dict()
    d["nodes"][1]["parents"] = ["a"]  # s1 naming the later answer node as its parent
    with pytest.raises(GraphError, match="do not come before"):
        MemoryGraph.from_dict(d)
