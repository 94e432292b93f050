"""What the model reads of the memory graph: the action graph as JSON, and which memory keeps which pixels.

VimRAG rebuilds the context after every memorize step instead of appending to a growing history
(DESIGN.md 4.1-4.2). This module gives the two graph-derived pieces of that rebuild, in the official demo's
form (`demo/vimrag_agent.py` and `demo/vimrag_utils.py`):

- `action_graph(graph)`: a JSON list. First the root `{"id": "root", "name": "Initial Node", "content":
  "Initial query from user: ..."}`, then every step in creation order as the arguments its call was written
  with, plus its `summary` (vimrag_agent.py lines 362-366, 298 and 421).
- `memory_plan(graph, ...)`: the Multimodal Memory section's layout: the top-K items by energy, grouped by
  node in graph order, items inside a node best first, each with the pixels per frame it was allocated
  (vimrag_utils.py lines 216-269). Items outside the top K get nothing: only their node's
  summary in the action graph remains.

Pure and free of I/O: the protocol turns the plan into image parts (agent/protocols/vimrag.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_graph.energy import TOP_K, allocate
from memory_graph.graph import Item, MemoryGraph

ROOT_NAME = "Initial Node"  # vimrag_agent.py line 364: the root node's name
ROOT_CONTENT = "Initial query from user: {question}"  # line 365: its content


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


def graph_entry(node) -> dict:
    """A step as the action graph shows it: its call's arguments as written, then its summary."""
    args = dict(node.args) if node.args else {"id": node.id, "query": node.query, "parent_ids": list(node.parents)}
    if "id" not in args:
        args = {"id": node.id, **args}
    return {**args, "summary": node.summary}


def action_graph(graph: MemoryGraph) -> list[dict]:
    """The action graph the model reads: the root, then every step but the answer, in creation order.

    >>> g = MemoryGraph("Who won?")
    >>> n = g.add_node("s1", "search", ["root"], "winner")
    >>> n.args, n.summary = {"id": "s1", "query": "winner", "parent_ids": ["root"]}, "p.3 names the winner"
    >>> root, step = action_graph(g)
    >>> root
    {'id': 'root', 'name': 'Initial Node', 'content': 'Initial query from user: Who won?'}
    >>> step
    {'id': 's1', 'query': 'winner', 'parent_ids': ['root'], 'summary': 'p.3 names the winner'}
    """
    out = [{"id": "root", "name": ROOT_NAME, "content": ROOT_CONTENT.format(question=graph.question)}]
    for node in sorted(graph.nodes.values(), key=lambda n: n.index):
        if node.kind not in ("root", "answer"):
            out.append(graph_entry(node))
    return out


@dataclass
class Slot:
    """One memory item in the Multimodal Memory section."""

    node_id: str
    item_index: int
    item: Item
    omega: float
    pixels: int  # the item's whole budget
    per_frame: int  # pixels per image: the budget split evenly over a video's kept frames


def memory_plan(graph: MemoryGraph, k: int = TOP_K, **budget) -> list[tuple[str, list[Slot]]]:
    """[(node id, slots)] of the memory section: nodes in graph order, each node's selected items best first.

    `k` and `budget` (s_total, lam, gamma) are `energy.allocate`'s knobs, with its defaults.

    >>> g = MemoryGraph("q")
    >>> _ = g.add_node("s1", "search", ["root"], "a")
    >>> g.nodes["s1"].items += [Item("Picture 1", "u1", "page", priority=2),
    ...                         Item("Picture 2", "u2", "page", priority=5)]
    >>> [(n, [(s.item.info_id, s.pixels) for s in slots]) for n, slots in memory_plan(g)]
    [('s1', [('Picture 2', 1433600), ('Picture 1', 573440)])]
    """
    chosen = [a for a in allocate(graph, k=k, **budget) if a.pixels > 0][:k]
    by_node: dict[str, list[Slot]] = {}
    for a in chosen:  # best first, so each node's list is best first too
        item = graph.nodes[a.node_id].items[a.item_index]
        frames = max(1, len(item.key_timestamps)) if item.modality == "video" else 1
        by_node.setdefault(a.node_id, []).append(
            Slot(a.node_id, a.item_index, item, a.omega, a.pixels, a.pixels // frames)
        )
    order = sorted(graph.nodes.values(), key=lambda n: n.index)
    return [(n.id, by_node[n.id]) for n in order if n.id in by_node]
