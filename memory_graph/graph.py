"""The DAG working memory: nodes (reasoning steps) and the evidence items they memorized.

Nodes are the root (the question), search steps, crop/scale steps and the answer. Each node has parents,
a sub-query, a summary and memorized items. The graph stays acyclic by construction: a node may only
name existing nodes as parents, so every edge points from an older node to a newer one; unknown parents,
duplicate ids and self-references are refused with clear errors. Everything round-trips through
`to_dict` / `from_dict` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_graph.record import Record

NODE_KINDS = ("root", "search", "crop", "scale", "memory", "answer")  # memory: a baseline's rewritten memory
VISUAL = ("page", "image", "video")  # modalities with pixels


class GraphError(ValueError):
    """An edit that would break the graph (unknown parent, cycle, duplicate id), with what to do instead."""


@dataclass
class Item(Record):
    """One memorized piece of evidence: a unit (page, image, video clip, text chunk) or a crop/scale of one."""

    info_id: str  # the id the model used to name it ("Picture 2", "Video 1", ...)
    unit_uid: str  # retrieval unit id, the provenance of the pixels
    modality: str  # "page" | "image" | "video" | "text"
    priority: int = 3  # 1..5, set by the model when memorizing
    useful: bool = True
    summary: str = ""
    key_timestamps: list[float] = field(default_factory=list)  # seconds, video items only
    crop_box: list[float] | None = None  # [x1, y1, x2, y2] in raw pixels of the source image, for crops
    source: str = ""  # human citation of the evidence ("report.pdf p.3", "talk.mp4 [00:12-00:58]")

    def __post_init__(self) -> None:
        if not 1 <= int(self.priority) <= 5:
            raise GraphError(f"priority of {self.info_id!r} is {self.priority}; it must be 1..5")
        self.priority = int(self.priority)
        if self.crop_box is not None:
            x1, y1, x2, y2 = self.crop_box
            if x2 <= x1 or y2 <= y1:
                raise GraphError(f"crop box {self.crop_box} of {self.info_id!r} is empty or inverted")

    @property
    def in_memory(self) -> bool:
        """Whether the item is visual memory: useful, with pixels, and for a video with frames kept. Only such
        items take part in energy and allocation; the official demo stores nothing else
        (demo/vimrag_agent.py lines 295-337: only is_useful Picture / Video items, and a video only when a
        key timestamp matched a sampled frame)."""
        return self.useful and self.modality in VISUAL and (self.modality != "video" or bool(self.key_timestamps))


@dataclass
class Node(Record):
    id: str
    kind: str
    parents: list[str] = field(default_factory=list)
    query: str = ""  # the sub-query (search) or the action's argument summary (crop/scale)
    summary: str = ""
    items: list[Item] = field(default_factory=list)
    index: int = 0  # creation order t_i: the root is 0, the newest node is T
    args: dict[str, Any] = field(default_factory=dict)  # the call's arguments as the model wrote them


class MemoryGraph:
    """A DAG of nodes in creation order. Edges run parent -> child, always from older to newer."""

    def __init__(self, question: str) -> None:
        self.question = question
        self.nodes: dict[str, Node] = {}
        self.nodes["root"] = Node(id="root", kind="root", query=question, index=0)

    # -- edits --------------------------------------------------------------------------------------
    def add_node(self, node_id: str, kind: str, parents: list[str] | None = None, query: str = "") -> Node:
        if kind not in NODE_KINDS or kind == "root":
            raise GraphError(f"node kind {kind!r} is not allowed; use one of {NODE_KINDS[1:]}")
        if not node_id or not isinstance(node_id, str):
            raise GraphError("a node needs a non-empty string id")
        if node_id in self.nodes:
            raise GraphError(f"node id {node_id!r} already exists; pick a new id (existing: {list(self.nodes)})")
        parents = list(dict.fromkeys(parents or ["root"]))
        if node_id in parents:
            raise GraphError(f"node {node_id!r} cannot be its own parent (that would be a cycle)")
        unknown = [p for p in parents if p not in self.nodes]
        if unknown:
            raise GraphError(f"unknown parent ids {unknown}; existing nodes are {list(self.nodes)}")
        if any(self.nodes[p].kind == "answer" for p in parents):
            raise GraphError("the answer node ends the episode and cannot have children")
        node = Node(id=node_id, kind=kind, parents=parents, query=query, index=len(self.nodes))
        self.nodes[node_id] = node
        return node

    def add_edge(self, parent: str, child: str) -> None:
        """Add parent -> child between existing nodes, refusing any edge that would close a cycle."""
        for n in (parent, child):
            if n not in self.nodes:
                raise GraphError(f"unknown node id {n!r}; existing nodes are {list(self.nodes)}")
        if parent == child or child in self.ancestors(parent):
            raise GraphError(f"edge {parent!r} -> {child!r} would form a cycle")
        if self.nodes[parent].index > self.nodes[child].index:
            raise GraphError(
                f"edge {parent!r} -> {child!r} points from a newer step to an older one; "
                "edges run from earlier steps to later ones"
            )
        if parent not in self.nodes[child].parents:
            self.nodes[child].parents.append(parent)

    # -- structure ----------------------------------------------------------------------------------
    def children(self, node_id: str) -> list[str]:
        return [n.id for n in self.nodes.values() if node_id in n.parents]

    def out_degree(self, node_id: str) -> int:
        return len(self.children(node_id))

    def ancestors(self, node_id: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.nodes[node_id].parents)
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self.nodes[n].parents)
        return seen

    @property
    def newest_index(self) -> int:
        return max(n.index for n in self.nodes.values())

    def items(self) -> list[tuple[Node, Item]]:
        return [(n, it) for n in self.nodes.values() for it in n.items]

    # -- serialization ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "nodes": [n.to_dict() for n in self.nodes.values()]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MemoryGraph":
        g = cls(d["question"])
        g.nodes = {}
        for nd in d["nodes"]:
            node = Node.from_dict(nd)
            unknown = [p for p in node.parents if p not in g.nodes]
            if unknown:  # parents always precede children, so this also rules out cycles
                raise GraphError(f"node {node.id!r} names parents {unknown} that do not come before it")
            g.nodes[node.id] = node
        if "root" not in g.nodes:
            raise GraphError("a serialized graph must contain the root node")
        return g
