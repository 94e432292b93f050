"""The graph picture: sane sizes, no overlapping boxes, PNG output, thumbnails and fitted text."""

import numpy as np
import pytest
from PIL import Image, ImageFont

from memory_graph.draw import _font, _wrap, depths, draw_graph, layout
from memory_graph.energy import allocate
from memory_graph.graph import Item, MemoryGraph


def twenty_nodes() -> MemoryGraph:
    g = MemoryGraph("Which region earned most, and why did the CEO say it grew? " * 3)
    ids = ["root"]
    for i in range(19):
        kind = ["search", "crop", "scale", "search"][i % 4]
        parents = [ids[(i * 7) % len(ids)]] + ([ids[-1]] if i % 3 == 0 and ids[-1] != ids[(i * 7) % len(ids)] else [])
        g.add_node(f"n{i}", kind, parents, "a long sub-query about regional revenue " * (1 + i % 4))
        g.nodes[f"n{i}"].summary = "found a table and a chart " * (i % 3)
        for j in range(i % 5):
            modality = ["page", "image", "video", "text"][j % 4]
            g.nodes[f"n{i}"].items.append(
                Item(
                    f"Picture {i}.{j}",
                    f"u{i}{j}",
                    modality,
                    1 + (i + j) % 5,
                    key_timestamps=[1.0, 5.0] if modality == "video" else [],
                )
            )
        ids.append(f"n{i}")
    g.add_node("ans", "answer", [ids[-1], ids[-3]], "Europe")
    return g


def overlaps(boxes):
    boxes = list(boxes)
    return [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


def test_root_only_graph_draws():
    img = draw_graph(MemoryGraph("q?"))
    assert img.mode == "RGB" and 300 <= img.width <= 1600 and 100 <= img.height <= 600


def test_twenty_nodes_fit_the_width_without_overlaps(tmp_path):
    g = twenty_nodes()
    assert len(g.nodes) == 21
    for max_width in (1600, 700):
        img = draw_graph(g, max_width=max_width)
        boxes = layout(g, max_width=max_width)
        assert set(boxes) == set(g.nodes)
        assert img.width <= max_width and img.height > 5 * 100
        assert not overlaps(boxes.values())
        assert all(0 <= b[0] and b[2] <= img.width and b[3] <= img.height for b in boxes.values())
        # every edge points down: a child's box starts below each parent's box
        for node in g.nodes.values():
            for p in node.parents:
                assert boxes[node.id][1] > boxes[p][3]


def test_writes_a_png(tmp_path):
    path = tmp_path / "sub" / "graph.png"
    img = draw_graph(twenty_nodes(), path=path)
    with Image.open(path) as back:
        assert back.format == "PNG" and back.size == img.size


def test_thumbnails_are_drawn():
    g = MemoryGraph("What is red?")
    g.add_node("s1", "search", ["root"], "red things")
    g.nodes["s1"].items.append(Item("Picture 1", "u1", "image", priority=5))
    red = lambda item: Image.new("RGB", (120, 90), (255, 0, 0))  # noqa: E731

    def red_pixels(img):
        a = np.asarray(img).astype(int)  # (h, w, 3)
        return int(((a[..., 0] > 220) & (a[..., 1] < 40) & (a[..., 2] < 40)).sum())

    assert red_pixels(draw_graph(g)) == 0  # nothing in the palette is pure red
    assert red_pixels(draw_graph(g, thumbnails=red)) > 1000
    # an item compressed to text is shown faded, not in full colour
    faded = allocate(g)
    faded[0].pixels = 0
    assert red_pixels(draw_graph(g, allocations=faded, thumbnails=red)) == 0


def test_depth_is_the_longest_path_from_the_root():
    g = MemoryGraph("q")
    g.add_node("a", "search", ["root"])
    g.add_node("b", "search", ["a"])
    g.add_node("c", "search", ["root", "b"])  # reachable in one step, but drawn below b
    assert depths(g) == {"root": 0, "a": 1, "b": 2, "c": 3}


def test_text_is_wrapped_and_cut_to_the_box():
    font = _font(12)
    if not (isinstance(font, ImageFont.FreeTypeFont) and "DejaVu" in font.getname()[0]):
        pytest.skip("matplotlib's DejaVu fonts are absent; PIL's default font is used")
    lines = _wrap("word " * 100 + "x" * 300, font, 200, 2)
    assert len(lines) == 2 and lines[-1].endswith("…")
    assert all(font.getlength(ln) <= 200 for ln in lines)
    one = _wrap("y" * 500, font, 120, 3)  # a single unbreakable word is split by characters
    assert len(one) == 3 and all(font.getlength(ln) <= 120 for ln in one)
    assert _wrap("short", font, 200, 2) == ["short"]
