"""The rebuilt context (DESIGN.md 4.1/4.2): question + action graph JSON + the Multimodal Memory section.

Sizes below are worked by hand through qwen-vl-utils' smart_resize: round each side to the patch grid, and
when that is over the budget scale by beta = sqrt(h * w / budget) and floor each side to the grid.
"""

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from memory_graph.energy import MIN_PIXELS
from memory_graph.graph import Item, MemoryGraph
from memory_graph.render import RenderedContext, action_graph_json, render_messages, visual_tokens

RED = (255, 0, 0)


def chain() -> MemoryGraph:
    g = MemoryGraph("Which region earned most?")
    g.add_node("s1", "search", ["root"], "revenue by region")
    g.nodes["s1"].summary = "table on p.2"
    g.nodes["s1"].items.append(Item("Picture 1", "r:p2", "page", priority=5, summary="revenue table",
                                    source="report.pdf p.2"))
    g.add_node("s2", "search", ["s1"], "regional growth")
    g.nodes["s2"].items.append(Item("Picture 2", "r:p7", "page", priority=3, summary="growth chart",
                                    source="report.pdf p.7"))
    return g


def pages(item: Item) -> list[tuple[Image.Image, str]]:
    if item.modality == "text":
        return []
    if item.modality == "video":
        return [(Image.new("RGB", (640, 360), RED), f"t=00:{int(t):02d}") for t in item.key_timestamps]
    return [(Image.new("RGB", (1000, 1400), RED), "")]  # a portrait page, width 1000, height 1400


def image_parts(ctx: RenderedContext) -> list[dict]:
    return [p for p in ctx.messages[1]["content"] if p["type"] == "image"]


def texts(ctx: RenderedContext) -> str:
    return "\n".join(p["text"] for p in ctx.messages[1]["content"] if p["type"] == "text")


def test_visual_tokens_by_hand():
    assert visual_tokens(448, 448) == 16 * 16  # Qwen2.5-VL: one token per 28x28 px
    assert visual_tokens(840, 1176) == 30 * 42
    assert visual_tokens(1024, 512, patch=32) == 32 * 16  # Qwen3-VL: 32 px per token; (width, height) order
    assert visual_tokens(27, 1000) == 0  # under one patch wide: nothing


def test_messages_hold_question_graph_json_and_memory_section():
    g = chain()
    ctx = render_messages(g, "You are VimRAG.", pages)
    system, user = ctx.messages
    assert system == {"role": "system", "content": "You are VimRAG."} and user["role"] == "user"
    first = user["content"][0]["text"]
    assert first.startswith("Question: Which region earned most?\n\nAction graph:\n")
    shown = json.loads(first.split("Action graph:\n", 1)[1])
    assert shown == action_graph_json(g)
    assert [n["id"] for n in shown["nodes"]] == ["root", "s1", "s2"]
    assert shown["nodes"][2]["parent_ids"] == ["s1"]
    assert shown["nodes"][1]["memorized"] == [{"information_id": "Picture 1", "source": "report.pdf p.2",
                                               "priority": 5, "summary": "revenue table"}]
    assert user["content"][1] == {"type": "text", "text": "## Multimodal Memory"}


def test_top_k_images_at_their_allocation_by_hand():
    ctx = render_messages(chain(), "sys", pages)
    budget = {f"{a.node_id}/{a.item_index}": a.pixels for a in ctx.allocations}
    # Omega: s1 = 2 e^-0.1 + 0.3 * 0.6 = 1.990, s2 = 0.6; s1's share 1.54 M is capped at 1,003,520 per image,
    # s2 gets int(2,007,040 * 0.6 / 2.590) = 465,009.
    assert budget == {"s1/0": 1_003_520, "s2/0": 465_009}
    imgs = image_parts(ctx)
    assert [p["ref"] for p in imgs] == ["Picture 1", "Picture 2"]  # best first
    # Picture 1: 1400x1008 on the grid is over 1,003,520; beta = 1.181 -> floor(1185/28) = 42, floor(847/28) = 30
    assert imgs[0]["image"].size == (30 * 28, 42 * 28)
    # Picture 2: beta = sqrt(1.4e6 / 465,009) = 1.735 -> floor(807/28) = 28, floor(576/28) = 20
    assert imgs[1]["image"].size == (20 * 28, 28 * 28)
    assert ctx.item_pixels == {"s1/0": 840 * 1176, "s2/0": 560 * 784}
    for key, px in ctx.item_pixels.items():
        assert px <= budget[key]
    for p in imgs:
        w, h = p["image"].size
        assert w % 28 == 0 and h % 28 == 0
    assert ctx.image_pixels == 840 * 1176 + 560 * 784
    assert ctx.visual_tokens == 30 * 42 + 20 * 28
    labels = texts(ctx)
    assert "[Picture 1] from node s1 (search) · report.pdf p.2 · priority 5 · 987,840 px" in labels


def test_items_outside_the_top_k_are_text_only():
    g = chain()
    g.nodes["s2"].items.append(Item("Text 1", "notes:0", "text", priority=5, summary="Europe led with 41%"))
    ctx = render_messages(g, "sys", pages, k=1)
    assert [p["ref"] for p in image_parts(ctx)] == ["Picture 1"]
    assert ctx.item_pixels["s2/0"] == 0 and ctx.item_pixels["s2/1"] == 0
    memory = texts(ctx).split("## Multimodal Memory", 1)[1]
    assert "[Picture 2] node s2 (report.pdf p.7), priority 3: growth chart" in memory
    assert "[Text 1] node s2, priority 5: Europe led with 41%" in memory
    # without an image source everything is text, and nothing is counted
    bare = render_messages(g, "sys", None)
    assert image_parts(bare) == [] and bare.image_pixels == 0 and bare.visual_tokens == 0
    assert "[Picture 1] node s1 (report.pdf p.2), priority 5: revenue table" in texts(bare)


def test_video_frames_share_the_item_budget():
    g = MemoryGraph("What is shown?")
    g.add_node("s1", "search", ["root"], "demo")
    g.nodes["s1"].items.append(Item("Video 1", "v:c0", "video", priority=4, key_timestamps=[3.0, 12.0],
                                    source="talk.mp4 [00:00-00:60]"))
    ctx = render_messages(g, "sys", pages, s_total=200_704)
    assert ctx.allocations[0].pixels == 200_704  # the only item takes the whole budget (< 2 frames' cap)
    frames = image_parts(ctx)
    assert [p["ref"] for p in frames] == ["Video 1", "Video 1"]
    # each frame gets 100,352: 364x644 on the grid is over it; beta = 1.515 -> floor(237.6/28) = 8, 15
    assert [p["image"].size for p in frames] == [(420, 224), (420, 224)]
    assert ctx.item_pixels["s1/0"] == 2 * 420 * 224 <= 200_704
    assert "t=00:03" in texts(ctx) and "t=00:12" in texts(ctx)
    # the per-frame cap binds when the share is larger
    capped = render_messages(g, "sys", lambda it: [(Image.new("RGB", (2000, 2000)), "")] * 2,
                             max_frame=50_000)
    assert all(p["image"].width * p["image"].height <= 50_000 for p in image_parts(capped))


def test_tail_is_appended_and_counted():
    tail = [{"type": "text", "text": "Search results:"},
            {"type": "image", "image": Image.new("RGB", (280, 280)), "ref": "Picture 9"}]
    base = render_messages(chain(), "sys", pages)
    ctx = render_messages(chain(), "sys", pages, tail=tail)
    assert ctx.messages[1]["content"][-2:] == tail
    assert ctx.image_pixels == base.image_pixels + 280 * 280
    assert ctx.visual_tokens == base.visual_tokens + 10 * 10
    assert ctx.item_pixels == base.item_pixels  # the observation is not memory


def test_patch_32_grid_and_tiny_budgets():
    ctx = render_messages(chain(), "sys", pages, patch=32)
    for p in image_parts(ctx):
        assert p["image"].width % 32 == 0 and p["image"].height % 32 == 0
    # a budget under qwen-vl-utils' 4-token floor buys no image: the item falls back to its summary
    g = chain()
    ctx = render_messages(g, "sys", pages, s_total=MIN_PIXELS - 1)
    assert image_parts(ctx) == [] and "revenue table" in texts(ctx)


def test_extreme_aspect_ratio_stays_on_budget():
    ctx = render_messages(chain(), "sys", lambda it: [(Image.new("RGB", (20_000, 30)), "")], s_total=300_000)
    for p in image_parts(ctx):
        w, h = p["image"].size
        assert w % 28 == 0 and h % 28 == 0 and w * h <= 300_000


def test_to_dict_has_no_pil_and_is_json():
    tail = [{"type": "image", "image": Image.new("RGB", (56, 56)), "ref": "Picture 9"}]
    d = render_messages(chain(), "sys", pages, tail=tail).to_dict()

    def walk(x):
        assert not isinstance(x, Image.Image)
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(d)
    back = json.loads(json.dumps(d))
    imgs = [p for p in back["messages"][1]["content"] if p["type"] == "image"]
    assert [(p["ref"], p["width"], p["height"]) for p in imgs] == [("Picture 1", 840, 1176),
                                                                    ("Picture 2", 560, 784),
                                                                    ("Picture 9", 56, 56)]
    assert back["allocations"][0]["node_id"] == "s1" and back["image_pixels"] == sum(i["pixels"]
                                                                                     for i in back["images"])


sizes = st.tuples(st.integers(1, 3000), st.integers(1, 3000))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(st.tuples(st.sampled_from(["page", "image", "video", "text"]), st.integers(1, 5),
                                st.integers(1, 4), sizes), min_size=1, max_size=8),
       s_total=st.integers(1, 400_000), k=st.integers(1, 6), max_frame=st.integers(784, 200_000),
       patch=st.sampled_from([28, 32]))
def test_memory_images_never_exceed_their_budget(items, s_total, k, max_frame, patch):
    g = MemoryGraph("q")
    raw = {}
    for i, (modality, prio, n_frames, (w, h)) in enumerate(items):
        g.add_node(f"s{i}", "search", [f"s{i - 1}" if i else "root"])
        ts = [float(t) for t in range(n_frames)] if modality == "video" else []
        g.nodes[f"s{i}"].items.append(Item(f"I{i}", f"u{i}", modality, prio, key_timestamps=ts))
        raw[f"I{i}"] = (w, h, max(1, len(ts)))

    def source(item):
        w, h, n = raw[item.info_id]
        return [] if item.modality == "text" else [(Image.new("RGB", (w, h)), "") for _ in range(n)]

    ctx = render_messages(g, "sys", source, k=k, s_total=s_total, max_image=s_total, max_frame=max_frame,
                          patch=patch)
    budget = {f"{a.node_id}/{a.item_index}": a for a in ctx.allocations}
    assert sum(ctx.item_pixels.values()) <= s_total
    for key, px in ctx.item_pixels.items():
        assert px <= budget[key].pixels
    for img in ctx.images:
        assert img["width"] % patch == 0 and img["height"] % patch == 0
        if g.nodes[img["key"].split("/")[0]].items[0].modality == "video":
            assert img["pixels"] <= max_frame
    assert ctx.visual_tokens == sum(math.prod((i["width"] // patch, i["height"] // patch)) for i in ctx.images)
