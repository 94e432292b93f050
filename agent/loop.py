"""The agent loop: a generator of typed events that ends with a `Finished` event carrying the Trace.

    agent = Agent(retriever, load_policy("embedded"), AgentConfig(protocol="vimrag"))
    for event in agent.stream("What was revenue in 2024?"):
        ...                       # StepStarted, ModelOutput, ToolCall, SearchResults, Memorized, ...
    trace = agent.ask("...")      # or just run it to the end

`Agent.stream` is a short driver over named steps: `_begin` sets up an `Episode` (config, toolbox, protocol,
episode state, trace), `_step` runs one step, again until the episode is done, the step limit is reached or an
error stops it, and `_finish` fills the trace, even when the consumer stops early. Each step: `_context` builds
the context (protocol), `_model_turn` streams the model's reply (policy), `_act` parses it (never raises: a
malformed reply becomes a corrective observation) and runs the tool (protocol + toolbox), `_record` keeps the
step. Time is split into model, retrieval and agent overhead; pixels and tokens in context are recorded per
step. A backend that sees tokens ends its reply with a `Tokens`, which the step's done `ModelOutput` carries
to rl.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Generator, Iterator

from agent.actions import Action, Rejection
from agent.backends.base import Policy, PolicyError, Reasoning, Tokens
from agent.events import (
    ErrorEvent,
    Event,
    Finished,
    LimitReached,
    ModelOutput,
    NodeEvent,
    StepRecord,
    StepStarted,
    ToolCall,
    Trace,
)
from agent.latency import shared_latency
from agent.protocols import make_protocol
from agent.protocols.base import Protocol, citations
from agent.settings import AgentConfig
from agent.state import EpisodeState
from agent.toolbox import Toolbox, count_context, strip_images

log = logging.getLogger(__name__)
RESIZE_CACHE_MAX = 64  # resized views kept per episode (a few hundred MB at most)


@dataclass
class Episode:
    """One running episode: what the loop's steps hand each other."""

    config: AgentConfig
    tools: Toolbox
    proto: Protocol
    st: EpisodeState
    trace: Trace
    t_start: float  # perf_counter at the start; tool spans and total_s count from here
    model_total: float = 0.0  # seconds spent in the model over the finished model turns

    def emit(self, ev: Event) -> Event:
        """`ev`, kept in the trace's events on its way out."""
        self.trace.events.append(ev.to_dict())
        return ev


class Agent:
    def __init__(self, retriever, policy: Policy, config: AgentConfig | None = None) -> None:
        self.retriever = retriever
        self.policy = policy
        self.config = config or AgentConfig()
        self.state: EpisodeState | None = None  # the running (or last) episode, e.g. for drawing its graph

    def ask(self, question: str, **overrides) -> Trace:
        trace = None
        for ev in self.stream(question, **overrides):
            if isinstance(ev, Finished):
                trace = ev.trace
        return trace

    def stream(self, question: str, **overrides) -> Iterator[Event]:
        """The episode's events, `Finished` last; `overrides` replace AgentConfig fields for this question."""
        ep = self._begin(question, overrides)
        try:
            while not ep.st.done:
                if not (yield from self._step(ep)):
                    break
            if ep.st.done:  # a protocol may end an episode without an answer (mem1, after a reply with no action)
                ep.trace.status = "answered" if ep.st.answer is not None else "no_answer"
        finally:
            self._finish(ep)
        yield Finished(ep.st.step, trace=ep.trace)

    def _begin(self, question: str, overrides: dict[str, Any]) -> Episode:
        """The episode's config, toolbox, protocol, state (also `self.state`) and the trace it fills."""
        if not question or not question.strip():
            raise ValueError("the question is empty; ask something about the corpus")
        cfg = AgentConfig.from_dict({**self.config.to_dict(), **overrides}) if overrides else self.config
        cfg = cfg.for_policy(self.policy)
        backend = self.policy.describe()  # resolves a served model's name, and with it its patch grid and boxes
        tools = Toolbox(
            self.retriever,
            patch=getattr(self.policy, "patch", 28),
            ocr_crops=not getattr(self.policy, "is_vlm", True),
            coords=getattr(self.policy, "coords", "absolute"),
            latency=shared_latency(cfg.tool_latency) if cfg.tool_latency else None,
        )
        proto = make_protocol(cfg.protocol, tools, native_tools=getattr(self.policy, "native_tools", False))
        st = self.state = EpisodeState(question=question.strip(), config=cfg)
        st.tool_specs = proto.tool_specs() if proto.syntax == "calls" else []  # for native tool calling
        st.generation = self.policy.generation(proto)  # the protocol's sampling defaults under the user's settings
        trace = Trace(
            question=st.question,
            protocol=cfg.protocol,
            backend=backend,
            config={"agent": cfg.to_dict(), "policy": _policy_config(self.policy), "generation": st.generation},
        )
        return Episode(cfg, tools, proto, st, trace, t_start=time.perf_counter())

    def _step(self, ep: Episode) -> Generator[Event, None, bool]:
        """One step: context, model turn, act, record. Returns False when the episode stops here."""
        st, cfg = ep.st, ep.config
        if st.step >= cfg.max_steps:
            msg = f"stopped after {cfg.max_steps} steps without an answer; raise max_steps or ask a narrower question"
            ep.trace.status = "limit"
            yield ep.emit(LimitReached(st.step, limit=cfg.max_steps, message=msg))
            return False
        st.step += 1
        t0 = time.perf_counter()
        r0 = ep.tools.retrieval_s
        started = yield from self._context(ep)
        if started is None:
            return False
        messages, rec = started
        text = yield from self._model_turn(ep, messages, rec)
        if text is None:
            return False
        yield from self._act(ep, text, rec)
        self._record(ep, rec, t0, r0)
        return True

    def _context(self, ep: Episode) -> Generator[Event, None, tuple[list[dict[str, Any]], StepRecord] | None]:
        """The step's messages and its record, announced by `StepStarted`; None when the context failed."""
        st = ep.st
        try:
            messages = ep.proto.context(st)
        except Exception as e:  # noqa: BLE001 - a tool inside context building (vanilla's search) failed
            ep.trace.status, ep.trace.error = "error", f"could not build the context: {e}"
            yield ep.emit(ErrorEvent(st.step, message=ep.trace.error))
            return None
        pixels, vtok, ttok = count_context(messages, ep.tools.patch)
        rec = StepRecord(
            step=st.step,
            messages=strip_images(messages),
            image_pixels=pixels,
            visual_tokens=vtok,
            text_tokens=ttok,
        )
        yield ep.emit(
            StepStarted(st.step, protocol=ep.config.protocol, image_pixels=pixels, visual_tokens=vtok, text_tokens=ttok)
        )
        return messages, rec

    def _model_turn(
        self, ep: Episode, messages: list[dict[str, Any]], rec: StepRecord
    ) -> Generator[Event, None, str | None]:
        """Stream the reply as `ModelOutput` deltas, then the done one; the reply's text, or None on a PolicyError."""
        st = ep.st
        t_model = time.perf_counter()
        chunks: list[str] = []
        thoughts: list[str] = []  # reasoning a server returns apart from the reply (reasoning_content)
        tokens: Tokens | None = None  # the reply's tokens, from a backend that has them
        try:
            for delta in self.policy.stream(messages, view=st):
                if isinstance(delta, Tokens):
                    tokens = delta
                elif isinstance(delta, Reasoning):
                    thoughts.append(delta)
                    yield ModelOutput(st.step, reasoning=str(delta))
                else:
                    chunks.append(delta)
                    yield ModelOutput(st.step, delta=delta)  # deltas are not stored in the trace
        except PolicyError as e:
            rec.model_s = time.perf_counter() - t_model
            ep.trace.steps.append(rec)
            ep.trace.status, ep.trace.error = "error", str(e)
            yield ep.emit(ErrorEvent(st.step, message=str(e)))
            return None
        rec.model_s = time.perf_counter() - t_model
        ep.model_total += rec.model_s
        rec.output = text = "".join(chunks)
        rec.reasoning = "".join(thoughts)
        done = ModelOutput(st.step, done=True, text=text, reasoning=rec.reasoning)
        if tokens is not None:  # what rl trains on: the exact tokens, log-probs and inputs
            done.token_ids, done.logprobs = tokens.token_ids, tokens.logprobs
            done.entropies = tokens.entropies
            done.model_inputs = tokens.model_inputs
        yield ep.emit(done)
        return text

    def _act(self, ep: Episode, text: str, rec: StepRecord) -> Iterator[Event]:
        """Parse the reply and run its calls, or tell the model what was wrong; yields what the tools did."""
        st, tools, proto = ep.st, ep.tools, ep.proto
        actions = proto.parse_calls(text, st)
        n_spans = len(tools.spans)
        if isinstance(actions, Rejection):
            events = proto.reject(st, actions.observation, text)
        else:
            events = yield from self._run_calls(ep, actions, text, rec)
        rec.tool_spans = [  # when each tool call ran, in seconds from the episode's start: overlaps show
            {"tool": name, "start": round(a - ep.t_start, 4), "end": round(b - ep.t_start, 4)}
            for name, a, b in tools.spans[n_spans:]
        ]
        for ev in events:
            if isinstance(ev, ErrorEvent):
                rec.observation = ev.message
            if isinstance(ev, NodeEvent):
                rec.node_id = ev.node_id or rec.node_id
            yield ep.emit(ev)

    def _run_calls(
        self, ep: Episode, actions: list[Action], text: str, rec: StepRecord
    ) -> Generator[Event, None, list[Event]]:
        """Announce each call with `ToolCall` and run them; the tools' events (a rejection if a tool failed)."""
        st, proto = ep.st, ep.proto
        for action in actions:
            action.think = action.think or rec.reasoning
        rec.action = {"name": actions[0].name, "args": actions[0].args}
        if len(actions) > 1:
            rec.calls = [{"name": a.name, "args": a.args} for a in actions]
        st.feedback = ""  # the protocol sets it again if the call fails
        for action in actions:
            yield ep.emit(ToolCall(st.step, name=action.name, args=action.args, think=action.think))
        try:
            return proto.execute_many(actions, st)
        except Exception as e:  # noqa: BLE001 - a broken file or tool must not end the session
            names = ", ".join(a.name for a in actions)
            log.warning("tool %s failed", names, exc_info=True)
            return proto.reject(st, f"the {names} tool failed: {e}", text)

    def _record(self, ep: Episode, rec: StepRecord, t0: float, r0: float) -> None:
        """Keep the step with its timings (`t0`, `r0`: the clock and retrieval time at its start)."""
        rec.retrieval_s = ep.tools.retrieval_s - r0
        rec.agent_s = max(0.0, time.perf_counter() - t0 - rec.model_s - rec.retrieval_s)
        ep.trace.steps.append(rec)
        cache = ep.st.resize_cache
        while len(cache) > RESIZE_CACHE_MAX:  # oldest views first; a long episode stays bounded
            cache.pop(next(iter(cache)))

    def _finish(self, ep: Episode) -> None:
        """Fill the trace from the episode: answer, graph, evidence, citations and timings."""
        st, trace, tools = ep.st, ep.trace, ep.tools
        total = time.perf_counter() - ep.t_start
        trace.answer = st.answer
        trace.graph = st.graph.to_dict()
        trace.evidence = st.evidence.to_dict()
        trace.citations = [c.to_dict() for c in citations(st)] if st.done else []
        trace.support = st.support if st.done else None
        trace.timings = {
            "model_s": round(ep.model_total, 4),
            "retrieval_s": round(tools.retrieval_s, 4),
            "agent_s": round(max(0.0, total - ep.model_total - tools.retrieval_s), 4),
            "tool_s": round(tools.tool_s, 4),  # waiting on tools (search, crop), against model_s generating
            "total_s": round(total, 4),
        }


def _policy_config(policy: Policy) -> dict[str, Any]:
    cfg = getattr(policy, "config", None)
    return cfg.to_dict() if hasattr(cfg, "to_dict") else {}


def run(question: str, retriever, policy: Policy, **config: Any) -> Trace:
    """One call: answer `question` and return the trace."""
    return Agent(retriever, policy, AgentConfig(**config)).ask(question)
