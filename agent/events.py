"""The typed event stream the agent loop yields, and the Trace it ends with.

This is the one seam between the core and its consumers: the Gradio app turns events into chat messages,
eval turns traces into predictions and cost figures, rl turns step records into training segments. Every
event and the trace are dataclasses with `to_dict` / `from_dict`, so a run can be saved, replayed and
diffed. Model inputs are stored without pixels: each image part becomes its reference and size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class Event:
    kind: ClassVar[str] = "event"
    step: int

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **dataclasses.asdict(self)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Event":
        d = dict(d)
        cls = EVENT_TYPES[d.pop("type")]
        if cls is Finished:
            return Finished(step=d["step"], trace=Trace.from_dict(d["trace"]))
        return cls(**d)


@dataclass
class StepStarted(Event):
    kind: ClassVar[str] = "step_started"
    protocol: str = ""
    image_pixels: int = 0  # pixels of all images in this step's context
    visual_tokens: int = 0
    text_tokens: int = 0  # estimated, 4 characters per token


@dataclass
class ModelOutput(Event):
    """Streamed model text: many `delta` events, then one with done=True carrying the full text."""

    kind: ClassVar[str] = "model_output"
    delta: str = ""
    done: bool = False
    text: str = ""
    reasoning: str = ""  # a reasoning delta, or on the done event all of it (servers' reasoning_content)


@dataclass
class ToolCall(Event):
    kind: ClassVar[str] = "tool_call"
    name: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    think: str = ""


@dataclass
class SearchResults(Event):
    kind: ClassVar[str] = "search_results"
    node_id: str = ""
    query: str = ""
    by_image: str = ""  # information id of the image region searched with (cropped search), if any
    results: list[dict[str, Any]] = field(default_factory=list)  # info_id, uid, citation, modality, score


@dataclass
class Memorized(Event):
    kind: ClassVar[str] = "memorized"
    node_id: str = ""
    summary: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)  # info_id, citation, priority, useful


@dataclass
class Cropped(Event):
    kind: ClassVar[str] = "cropped"
    node_id: str = ""
    info_id: str = ""  # the new picture
    source_info_id: str = ""
    bbox_seen: list[float] = field(default_factory=list)  # as the model gave it
    bbox_raw: list[int] = field(default_factory=list)  # padded, clamped, in the unit's raw pixels
    citation: str = ""


@dataclass
class Scaled(Event):
    kind: ClassVar[str] = "scaled"
    node_id: str = ""
    info_id: str = ""
    source_info_id: str = ""
    factor: float = 1.0
    pixels: int = 0  # the new view's pixel budget
    citation: str = ""


@dataclass
class AnswerEvent(Event):
    kind: ClassVar[str] = "answer"
    text: str = ""
    node_id: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    support: dict[str, Any] | None = None  # the sentence and unit the answer was read from, or why none


@dataclass
class ErrorEvent(Event):
    """A recoverable problem (malformed call, tool failure) that became an observation to the model."""

    kind: ClassVar[str] = "error"
    message: str = ""
    raw: str = ""


@dataclass
class LimitReached(Event):
    kind: ClassVar[str] = "limit_reached"
    limit: int = 0
    message: str = ""


@dataclass
class StepRecord:
    """Everything about one model call: what it saw, what it said, what happened, what it cost."""

    step: int
    messages: list[dict[str, Any]]  # images replaced by {"type": "image", "ref", "width", "height"}
    output: str = ""
    reasoning: str = ""  # what the server returned as reasoning apart from the reply; never re-sent
    action: dict[str, Any] | None = None  # {"name", "args"} when the output parsed
    observation: str = ""  # corrective message or tool result summary given back to the model
    node_id: str = ""  # the graph node this step created or closed
    image_pixels: int = 0
    visual_tokens: int = 0
    text_tokens: int = 0
    model_s: float = 0.0
    retrieval_s: float = 0.0
    agent_s: float = 0.0
    gold_hit: bool | None = None  # filled by eval/rl when gold evidence is known

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StepRecord":
        return cls(**d)


@dataclass
class Trace:
    question: str
    protocol: str
    backend: str
    status: str = "running"  # answered | limit | error
    answer: str | None = None
    citations: list[dict[str, Any]] = field(default_factory=list)
    support: dict[str, Any] | None = None  # embedded reader: answer type, sentence, citation, note
    graph: dict[str, Any] = field(default_factory=dict)  # MemoryGraph.to_dict()
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)  # info_id -> unit + crop/scale record
    steps: list[StepRecord] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # model_s, retrieval_s, agent_s, total_s
    error: str = ""

    @property
    def peak_visual_tokens(self) -> int:
        return max((s.visual_tokens for s in self.steps), default=0)

    @property
    def peak_image_pixels(self) -> int:
        return max((s.image_pixels for s in self.steps), default=0)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["steps"] = [s.to_dict() for s in self.steps]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        d = dict(d)
        d["steps"] = [StepRecord.from_dict(s) for s in d.get("steps", [])]
        return cls(**d)

    def memory_graph(self):
        from memory_graph.graph import MemoryGraph

        return MemoryGraph.from_dict(self.graph)


@dataclass
class Finished(Event):
    """The last event of every run: the complete trace."""

    kind: ClassVar[str] = "finished"
    trace: Trace | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "step": self.step, "trace": self.trace.to_dict() if self.trace else None}


EVENT_TYPES: dict[str, type[Event]] = {
    c.kind: c
    for c in (
        StepStarted,
        ModelOutput,
        ToolCall,
        SearchResults,
        Memorized,
        Cropped,
        Scaled,
        AnswerEvent,
        ErrorEvent,
        LimitReached,
        Finished,
    )
}
