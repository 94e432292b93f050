"""The agent loop: a generator of typed events that ends with a `Finished` event carrying the Trace.

    agent = Agent(retriever, load_policy("embedded"), AgentConfig(protocol="vimrag"))
    for event in agent.stream("What was revenue in 2024?"):
        ...                       # StepStarted, ModelOutput, ToolCall, SearchResults, Memorized, ...
    trace = agent.ask("...")      # or just run it to the end

Each step: build the context (protocol), stream the model's reply (policy), parse it (never raises:
a malformed reply becomes a corrective observation), run the tool (protocol + toolbox). Time is split
into model, retrieval and agent overhead; pixels and tokens in context are recorded per step. A backend
that sees tokens ends its reply with a `Tokens`, which the step's done `ModelOutput` carries to rl.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator

from agent.actions import Rejection
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
from agent.protocols.base import citations
from agent.settings import AgentConfig
from agent.state import EpisodeState
from agent.toolbox import Toolbox, count_context, strip_images

log = logging.getLogger(__name__)
RESIZE_CACHE_MAX = 64  # resized views kept per episode (a few hundred MB at most)


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
        if not question or not question.strip():
            raise ValueError("the question is empty; ask something about the corpus")
        cfg = AgentConfig.from_dict({**self.config.to_dict(), **overrides}) if overrides else self.config
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
        t_start = time.perf_counter()
        model_total = 0.0

        def emit(ev: Event) -> Event:
            trace.events.append(ev.to_dict())
            return ev

        try:
            while not st.done:
                if st.step >= cfg.max_steps:
                    msg = (
                        f"stopped after {cfg.max_steps} steps without an answer; raise max_steps or ask a "
                        "narrower question"
                    )
                    trace.status = "limit"
                    yield emit(LimitReached(st.step, limit=cfg.max_steps, message=msg))
                    break
                st.step += 1
                t0 = time.perf_counter()
                r0 = tools.retrieval_s
                try:
                    messages = proto.context(st)
                except Exception as e:  # noqa: BLE001 - a tool inside context building (vanilla's search) failed
                    trace.status, trace.error = "error", f"could not build the context: {e}"
                    yield emit(ErrorEvent(st.step, message=trace.error))
                    break
                pixels, vtok, ttok = count_context(messages, tools.patch)
                rec = StepRecord(
                    step=st.step,
                    messages=strip_images(messages),
                    image_pixels=pixels,
                    visual_tokens=vtok,
                    text_tokens=ttok,
                )
                yield emit(
                    StepStarted(
                        st.step, protocol=cfg.protocol, image_pixels=pixels, visual_tokens=vtok, text_tokens=ttok
                    )
                )
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
                    trace.steps.append(rec)
                    trace.status, trace.error = "error", str(e)
                    yield emit(ErrorEvent(st.step, message=str(e)))
                    break
                rec.model_s = time.perf_counter() - t_model
                model_total += rec.model_s
                rec.output = text = "".join(chunks)
                rec.reasoning = "".join(thoughts)
                done = ModelOutput(st.step, done=True, text=text, reasoning=rec.reasoning)
                if tokens is not None:  # what rl trains on: the exact tokens, log-probs and inputs
                    done.token_ids, done.logprobs = tokens.token_ids, tokens.logprobs
                    done.entropies = tokens.entropies
                    done.model_inputs = tokens.model_inputs
                yield emit(done)
                actions = proto.parse_calls(text, st)
                n_spans = len(tools.spans)
                if isinstance(actions, Rejection):
                    events = proto.reject(st, actions.observation, text)
                else:
                    for action in actions:
                        action.think = action.think or rec.reasoning
                    rec.action = {"name": actions[0].name, "args": actions[0].args}
                    if len(actions) > 1:
                        rec.calls = [{"name": a.name, "args": a.args} for a in actions]
                    st.feedback = ""  # the protocol sets it again if the call fails
                    for action in actions:
                        yield emit(ToolCall(st.step, name=action.name, args=action.args, think=action.think))
                    try:
                        events = proto.execute_many(actions, st)
                    except Exception as e:  # noqa: BLE001 - a broken file or tool must not end the session
                        names = ", ".join(a.name for a in actions)
                        log.warning("tool %s failed", names, exc_info=True)
                        events = proto.reject(st, f"the {names} tool failed: {e}", text)
                rec.tool_spans = [  # when each tool call ran, in seconds from the episode's start: overlaps show
                    {"tool": name, "start": round(a - t_start, 4), "end": round(b - t_start, 4)}
                    for name, a, b in tools.spans[n_spans:]
                ]
                for ev in events:
                    if isinstance(ev, ErrorEvent):
                        rec.observation = ev.message
                    if isinstance(ev, NodeEvent):
                        rec.node_id = ev.node_id or rec.node_id
                    yield emit(ev)
                rec.retrieval_s = tools.retrieval_s - r0
                rec.agent_s = max(0.0, time.perf_counter() - t0 - rec.model_s - rec.retrieval_s)
                trace.steps.append(rec)
                while len(st.resize_cache) > RESIZE_CACHE_MAX:  # oldest views first; a long episode stays bounded
                    st.resize_cache.pop(next(iter(st.resize_cache)))
            if st.done:  # a protocol may end an episode without an answer (mem1, after a reply with no action)
                trace.status = "answered" if st.answer is not None else "no_answer"
        finally:
            total = time.perf_counter() - t_start
            trace.answer = st.answer
            trace.graph = st.graph.to_dict()
            trace.evidence = st.evidence.to_dict()
            trace.citations = [c.to_dict() for c in citations(st)] if st.done else []
            trace.support = st.support if st.done else None
            trace.timings = {
                "model_s": round(model_total, 4),
                "retrieval_s": round(tools.retrieval_s, 4),
                "agent_s": round(max(0.0, total - model_total - tools.retrieval_s), 4),
                "tool_s": round(tools.tool_s, 4),  # waiting on tools (search, crop), against model_s generating
                "total_s": round(total, 4),
            }
        yield Finished(st.step, trace=trace)


def _policy_config(policy: Policy) -> dict[str, Any]:
    cfg = getattr(policy, "config", None)
    return cfg.to_dict() if hasattr(cfg, "to_dict") else {}


def run(question: str, retriever, policy: Policy, **config: Any) -> Trace:
    """One call: answer `question` and return the trace."""
    return Agent(retriever, policy, AgentConfig(**config)).ask(question)
