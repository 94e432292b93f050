"""The state of one episode (what the embedded and scripted policies read); its configuration is
agent/settings.py's `AgentConfig`.

`EpisodeState` is the structured `view` passed to a policy next to the rendered messages: model backends
ignore it; the embedded controller and the scripted test policy use it to choose their next call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.evidence import EvidenceStore
from memory_graph.graph import MemoryGraph

if TYPE_CHECKING:  # annotation only: AgentConfig sits above the protocols, which import this module
    from agent.settings import AgentConfig


@dataclass
class EpisodeState:
    question: str
    config: AgentConfig
    graph: MemoryGraph = None  # type: ignore[assignment]
    evidence: EvidenceStore = field(default_factory=EvidenceStore)
    step: int = 0
    pending: list[str] = field(default_factory=list)  # info ids shown and not yet memorized
    pending_node: str = ""  # the node those results belong to
    feedback: str = ""  # corrective observation for the next turn
    history: list[dict[str, Any]] = field(default_factory=list)  # turns appended since the context was built
    base: list[dict[str, Any]] | None = None  # vimrag: the rebuilt context; None = rebuild on the next turn
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> {"Picture 1": information id}
    inserted: list[str] = field(default_factory=list)  # vrag: unit uids of the pages searches put in context
    tool_specs: list[dict[str, Any]] = field(default_factory=list)  # the protocol's tools, for native calling
    generation: dict[str, Any] = field(default_factory=dict)  # sampling settings (Policy.generation), for backends
    notes: dict[str, Any] = field(default_factory=dict)  # a protocol's own state (memagent: its memory, chunks read)
    last_image: str = ""  # vrag: the latest image, which <bbox> crops
    searched: list[str] = field(default_factory=list)  # queries so far
    answer: str | None = None
    answer_node: str = ""
    support: dict[str, Any] | None = None  # what a reader says the answer rests on (Reading.to_dict())
    resize_cache: dict = field(default_factory=dict, repr=False)  # resized views, reused across turns
    done: bool = False

    def __post_init__(self) -> None:
        if self.graph is None:
            self.graph = MemoryGraph(self.question)

    @property
    def protocol(self) -> str:
        return self.config.protocol

    def memorized_ids(self) -> list[str]:
        return [it.info_id for _, it in self.graph.items() if it.useful]

    def label_of(self, info_id: str, node_id: str = "") -> str:
        """The name the model saw `info_id` under in node `node_id`'s results (default: the pending ones);
        the information id itself where results are not relabelled per response."""
        for label, i in self.labels.get(node_id or self.pending_node, {}).items():
            if i == info_id:
                return label
        return info_id
