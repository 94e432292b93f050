"""Rebuild the model's context from the memory graph, each turn, within the pixel budget.

VimRAG does not append to a growing history (DESIGN.md 4.1/4.2). After every memorize step the context is
rebuilt: the system prompt, then one user turn holding the question and the action graph as JSON, then a
"Multimodal Memory" section with the top-K evidence at the resolution `energy.allocate` bought it. Items
outside the top K (and text items) keep only their text summary. The current observation (fresh search
results) may follow as `tail` parts; its pixels are counted but are not part of the memory budget.

This module knows nothing of retrieval or files: the caller passes an `ImageSource` that returns an item's
raw images (crop already applied; one image per key frame for a video). Image parts carry PIL images
already resized here, so every backend sends exactly the pixels counted.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from PIL import Image

from memory_graph.energy import (GAMMA, LAMBDA, MAX_FRAME_PIXELS, MAX_IMAGE_PIXELS, MIN_PIXELS, S_TOTAL, TOP_K,
                                 Allocation, allocate, fit_to_budget)
from memory_graph.graph import Item, MemoryGraph

# item -> [(raw image, label)], e.g. [(frame, "t=00:12"), ...] for a video; [] when it has no pixels
ImageSource = Callable[[Item], list[tuple[Image.Image, str]]]

MAX_RATIO = 200  # qwen-vl-utils refuses images whose long/short side ratio exceeds this


def visual_tokens(width: int, height: int, patch: int = 28) -> int:
    """Visual tokens a Qwen-VL model spends on an image already on its patch grid.

    Qwen2.5-VL cuts 14 px patches and merges 2x2 of them into one token, so one token covers 28x28 px;
    Qwen3-VL uses 16 px patches merged 2x2, i.e. 32 px per token (Qwen2.5-VL / Qwen3-VL tech reports).

    >>> visual_tokens(448, 448)  # 16 x 16 tokens
    256
    >>> visual_tokens(1024, 512, patch=32)  # 16 rows x 32 columns
    512
    """
    return (int(height) // patch) * (int(width) // patch)


def _item_view(item: Item) -> dict[str, Any]:
    d: dict[str, Any] = {"information_id": item.info_id, "source": item.source, "priority": item.priority,
                         "summary": item.summary}
    if item.key_timestamps:
        d["key_timestamps"] = list(item.key_timestamps)
    if item.crop_box is not None:
        d["crop_box"] = list(item.crop_box)
    if not item.useful:
        d["useful"] = False
    return d


def action_graph_json(graph: MemoryGraph) -> dict[str, Any]:
    """The compact view of the graph the model reads: nodes in creation order and what each memorized."""
    nodes = []
    for node in sorted(graph.nodes.values(), key=lambda n: n.index):
        nodes.append({"id": node.id, "type": node.kind, "parent_ids": list(node.parents), "query": node.query,
                      "summary": node.summary, "memorized": [_item_view(it) for it in node.items]})
    return {"question": graph.question, "nodes": nodes}


@dataclass
class RenderedContext:
    messages: list[dict]
    allocations: list[Allocation]
    item_pixels: dict[str, int] = field(default_factory=dict)  # "node_id/idx" -> pixels actually sent
    image_pixels: int = 0  # every image in the context, memory and tail
    visual_tokens: int = 0
    images: list[dict] = field(default_factory=list)  # ref, width, height, pixels (+ key, label) per image

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: image parts become their ref and size, never the PIL object."""
        return {"messages": [_message_dict(m) for m in self.messages],
                "allocations": [dataclasses.asdict(a) for a in self.allocations],
                "item_pixels": dict(self.item_pixels), "image_pixels": self.image_pixels,
                "visual_tokens": self.visual_tokens, "images": [dict(i) for i in self.images]}


def _message_dict(message: dict) -> dict:
    content = message.get("content")
    if not isinstance(content, list):
        return dict(message)
    parts = []
    for part in content:
        img = part.get("image") if isinstance(part, dict) else None
        if isinstance(img, Image.Image):
            part = {k: v for k, v in part.items() if k != "image"}
            part.update(width=img.width, height=img.height)
        parts.append(part)
    return {**message, "content": parts}


def _fit(width: int, height: int, budget: int, patch: int) -> tuple[int, int] | None:
    """(h, w) on the patch grid with h * w <= budget, or None when the budget buys no legal image."""
    if budget < MIN_PIXELS:  # below qwen-vl-utils' 4-token floor the item is better told as text
        return None
    # An extreme strip would make smart_resize refuse; squash it to the largest ratio it accepts.
    if max(width, height) > MAX_RATIO * min(width, height):
        if width > height:
            height = -(-width // MAX_RATIO)
        else:
            width = -(-height // MAX_RATIO)
    h, w = fit_to_budget(width, height, budget, patch=patch)
    # smart_resize can land a patch over the budget (its floor pads up) or at 0 for thin strips: enforce both.
    h, w = max(h, patch), max(w, patch)
    while h * w > budget:
        if h >= w and h > patch:
            h -= patch
        elif w > patch:
            w -= patch
        else:
            return None
    return h, w


def _resize(img: Image.Image, budget: int, patch: int, cache: dict | None = None) -> Image.Image | None:
    hw = _fit(img.width, img.height, budget, patch)
    if hw is None:
        return None
    h, w = hw
    key = (id(img), w, h)
    if cache is not None and key in cache:
        return cache[key][1]
    out = img.convert("RGB") if img.mode != "RGB" else img  # backends may encode JPEG: no alpha or palette
    if out.size != (w, h):
        out = out.resize((w, h), Image.Resampling.BICUBIC, reducing_gap=2.0)
    if cache is not None:
        cache[key] = (img, out)  # keeping `img` alive keeps its id from being reused by another image
    return out


def _fmt_pixels(px: int) -> str:
    return f"{px:,} px"


def render_messages(graph: MemoryGraph, system_prompt: str, images: ImageSource | None, *,
                    tail: list[dict] | None = None, k: int = TOP_K, s_total: int = S_TOTAL,
                    max_image: int = MAX_IMAGE_PIXELS, max_frame: int = MAX_FRAME_PIXELS, patch: int = 28,
                    lam: float = LAMBDA, gamma: float = GAMMA, cache: dict | None = None) -> RenderedContext:
    """[system, user] rebuilt from the graph: question + action graph JSON + the Multimodal Memory section.

    `cache` (a dict the caller keeps for the episode) remembers resized images: between turns most items
    keep their size, so rebuilding the context then costs no resampling.
    """
    allocations = allocate(graph, k=k, s_total=s_total, max_image=max_image, max_frame=max_frame, lam=lam,
                           gamma=gamma)
    graph_json = json.dumps(action_graph_json(graph), ensure_ascii=False)
    parts: list[dict] = [{"type": "text", "text": f"Question: {graph.question}\n\nAction graph:\n{graph_json}"},
                         {"type": "text", "text": "## Multimodal Memory"}]
    ctx = RenderedContext(messages=[], allocations=allocations)
    text_only: list[tuple[Allocation, Item]] = []

    def count(img: Image.Image, ref: str, key: str | None, label: str) -> None:
        px = img.width * img.height
        ctx.image_pixels += px
        ctx.visual_tokens += visual_tokens(img.width, img.height, patch)
        ctx.images.append({"ref": ref, "width": img.width, "height": img.height, "pixels": px, "key": key,
                           "label": label})

    for a in allocations:
        node = graph.nodes[a.node_id]
        item = node.items[a.item_index]
        key = f"{a.node_id}/{a.item_index}"
        ctx.item_pixels[key] = 0
        raw = images(item) if (images is not None and a.pixels > 0 and item.modality != "text") else []
        if not raw:
            text_only.append((a, item))
            continue
        # A video's frames share its budget evenly; any multi-image item is split the same way.
        cap = max_frame if item.modality == "video" else max_image
        per = min(a.pixels // len(raw), cap)
        resized = [(_resize(img, per, patch, cache), label) for img, label in raw]
        resized = [(img, label) for img, label in resized if img is not None]
        if not resized:
            text_only.append((a, item))  # the budget buys no legal image
            continue
        sent = sum(img.width * img.height for img, _ in resized)
        ctx.item_pixels[key] = sent
        cite = f" · {item.source}" if item.source else ""
        frames = f", {len(resized)} frames" if item.modality == "video" else ""
        parts.append({"type": "text", "text": f"[{item.info_id}] from node {node.id} ({node.kind}){cite} · "
                                              f"priority {item.priority} · {_fmt_pixels(sent)}{frames}"})
        for img, label in resized:
            if label:
                parts.append({"type": "text", "text": label})
            parts.append({"type": "image", "image": img, "ref": item.info_id})
            count(img, item.info_id, key, label)

    if text_only:
        lines = ["Other memorized evidence (text summaries only):"]
        for a, item in text_only:
            cite = f" ({item.source})" if item.source else ""
            lines.append(f"- [{item.info_id}] node {a.node_id}{cite}, priority {item.priority}: "
                         f"{item.summary or '(no summary)'}")
        parts.append({"type": "text", "text": "\n".join(lines)})
    elif not any(p["type"] == "image" for p in parts):
        parts.append({"type": "text", "text": "(nothing memorized yet)"})

    for part in tail or []:
        parts.append(part)
        img = part.get("image") if isinstance(part, dict) else None
        if isinstance(img, Image.Image):
            count(img, str(part.get("ref", "")), None, "observation")

    ctx.messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": parts}]
    return ctx
