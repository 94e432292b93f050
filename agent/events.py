"""The typed event stream the agent loop yields, and the Trace it ends with.

This is the one seam between the core and its consumers: the Gradio app turns events into chat messages,
eval turns traces into predictions and cost figures, rl turns each step's `ModelOutput` (token ids, their
log-probs and the model inputs, from a backend that has them) into a training segment. Every event, its
payload items (`SearchHit`, `MemorizedItem`, `Citation`) and the trace are dataclasses with `to_dict` /
`from_dict`, so a run can be saved, replayed and diffed; `Trace.events_of` rebuilds a saved trace's events
of one type. Model inputs are stored without pixels: each image part becomes its reference and size, and the
tensors a trainer needs stay in memory (`ModelOutput.model_inputs`), never in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from memory_graph.record import LIVE, OMIT_NONE, Record

E = TypeVar("E", bound="Event")


@dataclass
class Event(Record):
    kind: ClassVar[str] = "event"
    step: int

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, **super().to_dict()}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Event":
        d = dict(d)
        cls = EVENT_TYPES[d.pop("type")]
        return cls(**cls.decode(d))


@dataclass
class NodeEvent(Event):
    """An event that created or closed a node of the memory graph (a step's record keeps its id)."""

    node_id: str = ""


@dataclass
class ViewEvent(NodeEvent):
    """A new picture derived from one already seen (a crop or a rescaled view)."""

    info_id: str = ""  # the new picture
    source_info_id: str = ""
    citation: str = ""


# --------------------------------------------------------------------------------------------- payloads
@dataclass
class SearchHit(Record):
    """One search result as the model was shown it."""

    info_id: str = ""
    label: str = ""  # what the model saw it as, when that differs from info_id
    uid: str = ""  # the retrieval unit
    citation: str = ""
    modality: str = ""
    score: float = 0.0
    source: str = ""  # the unit's file


@dataclass
class MemorizedItem(Record):
    """One result the model memorized (or judged not useful)."""

    info_id: str = ""
    label: str = ""
    citation: str = ""
    priority: int = 3
    useful: bool = True
    in_memory: bool = False  # useful and visual: it takes part in the memory's pixel budget
    key_timestamps: list[float] = field(default_factory=list)  # video items: the frames kept


@dataclass
class Citation(Record):
    """A piece of evidence an answer rests on, located in its source file."""

    info_id: str = ""
    citation: str = ""  # "report.pdf p.3", "talk.mp4 [00:12-00:58]"
    file: str = ""
    page: int | None = None
    bbox: list[float] | None = None  # the crop's box in the source's raw pixels, for a cropped view
    start: float | None = None  # seconds, for a video clip
    end: float | None = None
    modality: str = ""
    uid: str = ""


# ----------------------------------------------------------------------------------------------- events
@dataclass
class StepStarted(Event):
    kind: ClassVar[str] = "step_started"
    protocol: str = ""
    image_pixels: int = 0  # pixels of all images in this step's context
    visual_tokens: int = 0
    text_tokens: int = 0  # estimated, 4 characters per token


@dataclass
class ModelOutput(Event):
    """Streamed model text: many `delta` events, then one with done=True carrying the full text.

    From a backend that sees tokens, the done event also carries the reply's token ids and their log-probs
    at sampling time (saved with the trace), and the exact model inputs they were generated from (held in
    memory for a trainer, never saved: pixels are large and the step's messages already say what was seen).
    """

    kind: ClassVar[str] = "model_output"
    delta: str = ""
    done: bool = False
    text: str = ""
    reasoning: str = ""  # a reasoning delta, or on the done event all of it (servers' reasoning_content)
    token_ids: list[int] | None = field(default=None, metadata=OMIT_NONE)  # (N,) the reply, end-of-turn included
    logprobs: list[float] | None = field(default=None, metadata=OMIT_NONE)  # (N,) their log-probs when sampled
    entropies: list[float] | None = field(default=None, metadata=OMIT_NONE)  # (N,) the sampling entropy, nats
    model_inputs: dict[str, Any] | None = field(default=None, repr=False, compare=False, metadata=LIVE)


@dataclass
class ToolCall(Event):
    kind: ClassVar[str] = "tool_call"
    name: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    think: str = ""


@dataclass
class SearchResults(NodeEvent):
    kind: ClassVar[str] = "search_results"
    query: str = ""
    by_image: str = ""  # information id of the image region searched with (cropped search), if any
    results: list[SearchHit] = field(default_factory=list)


@dataclass
class Memorized(NodeEvent):
    kind: ClassVar[str] = "memorized"
    summary: str = ""
    items: list[MemorizedItem] = field(default_factory=list)


@dataclass
class Cropped(ViewEvent):
    kind: ClassVar[str] = "cropped"
    bbox_seen: list[float] = field(default_factory=list)  # as the model gave it
    bbox_raw: list[int] = field(default_factory=list)  # padded, clamped, in the unit's raw pixels


@dataclass
class Scaled(ViewEvent):
    kind: ClassVar[str] = "scaled"
    factor: float = 1.0
    pixels: int = 0  # the new view's pixel budget


@dataclass
class AnswerEvent(NodeEvent):
    kind: ClassVar[str] = "answer"
    text: str = ""
    citations: list[Citation] = field(default_factory=list)
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
class StepRecord(Record):
    """Everything about one model call: what it saw, what it said, what happened, what it cost."""

    step: int
    messages: list[dict[str, Any]]  # images replaced by {"type": "image", "ref", "width", "height"}
    output: str = ""
    reasoning: str = ""  # what the server returned as reasoning apart from the reply; never re-sent
    action: dict[str, Any] | None = None  # {"name", "args"} when the output parsed
    calls: list[dict[str, Any]] = field(default_factory=list)  # every call, when the reply ran several (react)
    observation: str = ""  # corrective message or tool result summary given back to the model
    node_id: str = ""  # the graph node this step created or closed
    image_pixels: int = 0
    visual_tokens: int = 0
    text_tokens: int = 0
    model_s: float = 0.0
    retrieval_s: float = 0.0
    agent_s: float = 0.0
    tool_spans: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "start", "end"} of each tool call
    gold_hit: bool | None = None  # filled by eval/rl when gold evidence is known


@dataclass
class Trace(Record):
    """A whole run in its saved form: the graph, evidence, events and citations as plain dicts (JSON as is)."""

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

    def events_of(self, cls: type[E]) -> list[E]:
        """The saved events of one type, rebuilt as typed events."""
        return [Event.from_dict(d) for d in self.events if d.get("type") == cls.kind]

    def memory_graph(self):
        from memory_graph.graph import MemoryGraph

        return MemoryGraph.from_dict(self.graph)


@dataclass
class Finished(Event):
    """The last event of every run: the complete trace."""

    kind: ClassVar[str] = "finished"
    trace: Trace | None = None


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
