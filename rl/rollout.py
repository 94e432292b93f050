"""Rollouts: G trajectories per question through the real agent loop, each step a training segment.

    trajs = rollout_group(policy, retriever, item, agent_config, group_size=4, reward="vimrag")
    trajs[0].reward, trajs[0].segments[0].tool, trajs[0].segments[0].mask

The segments are read off the event stream the loop yields (`step_segments`): each step's done `ModelOutput`
carries the reply's token ids, their log-probs and the model inputs (the policies of rl/policy.py and
rl/served.py provide them), the `ToolCall` after it names the tool and the events that created or closed a
graph node name the node. Then searches learn whether their results held gold evidence, and GGPO's mask
mu_t is set from the trajectory's reward and graph (rl/ggpo.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from agent.backends.base import PolicyError
from agent.events import Event, Finished, ModelOutput, NodeEvent, ToolCall
from agent.protocols import tools_of_kind
from rl.ggpo import step_masks, valid_retrievals
from rl.policy import Segment
from rl.rewards import REWARDS, collate_reward_inputs, trajectory_reward_inputs

SEARCH_TOOLS = tools_of_kind("search")  # every protocol's search tool, from the schemas


@dataclass
class Trajectory:
    item_id: str
    trace: Any  # agent.events.Trace
    segments: list[Segment] = field(default_factory=list)
    reward: float = 0.0
    advantage: float = 0.0

    @property
    def masks(self) -> list[float]:
        return [s.mask for s in self.segments]


def step_segments(events: Iterable[Event]) -> list[Segment]:
    """One Segment per model call, from the events of one episode, in order."""
    segments: list[Segment] = []
    for ev in events:
        if isinstance(ev, ModelOutput) and ev.done:
            if ev.token_ids is None or ev.logprobs is None or ev.model_inputs is None:
                raise PolicyError(
                    f"the reply of step {ev.step} came without its token ids, log-probs and model inputs; train "
                    "a policy that returns them (rl/policy.py VLPolicy or TextPolicy, rl/served.py ServedPolicy)"
                )
            gen = torch.tensor(ev.token_ids, dtype=torch.long)  # (N,)
            logp = torch.tensor(ev.logprobs, dtype=torch.float32)  # (N,)
            segments.append(Segment(ev.step, ev.model_inputs, gen, logp, ev.text))
        elif segments and ev.step == segments[-1].step:  # what the reply did
            if isinstance(ev, ToolCall):
                segments[-1].tool = ev.name
            elif isinstance(ev, NodeEvent) and ev.node_id:
                segments[-1].node_id = ev.node_id
    return segments


def score(trace, item, reward: str = "vimrag", judge=None) -> float:
    """The trajectory's reward by a registered reward function (TRL-style signature)."""
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; choose one of {sorted(REWARDS)}")
    completions, kwargs = collate_reward_inputs([trajectory_reward_inputs(trace, item)])
    if judge is not None:
        kwargs["judge"] = judge
    return float(REWARDS[reward]([item.question], completions, **kwargs)[0])


def rollout_one(policy, retriever, item, agent_config, reward: str = "vimrag", judge=None) -> Trajectory:
    """One sampled trajectory, scored, its segments read off the events, gold hits and masks set."""
    from agent.loop import Agent

    events = list(Agent(retriever, policy, agent_config).stream(item.question))
    trace = next(ev.trace for ev in events if isinstance(ev, Finished))
    traj = Trajectory(item.id, trace, step_segments(events), score(trace, item, reward, judge))
    gold = valid_retrievals(trace, lambda u: any(g.matches(u) for g in item.evidence)) if item.evidence else set()
    for seg in traj.segments:
        seg.gold_hit = (seg.node_id in gold) if seg.tool in SEARCH_TOOLS else None
    valid = {s.node_id for s in traj.segments if s.gold_hit}
    for seg, mu in zip(traj.segments, step_masks(traj.segments, trace.graph, traj.reward, valid)):
        seg.mask = float(mu)
    return traj


def rollout_group(
    policy, retriever, item, agent_config, group_size: int, reward: str = "vimrag", judge=None
) -> list[Trajectory]:
    """`group_size` sampled trajectories for one question, one after another."""
    return [rollout_one(policy, retriever, item, agent_config, reward, judge) for _ in range(group_size)]


def rollout_concurrent(
    policies: list, retriever, jobs: list[tuple[Any, Any]], group_size: int, reward: str = "vimrag", judge=None
) -> list[list[Trajectory]]:
    """`group_size` trajectories for each (item, agent_config) job, run on len(policies) threads.

    Meant for a served policy, where the server batches concurrent requests: each thread owns one policy
    object while it runs an episode. Groups come back in job order, whatever order the threads finish in.
    """
    from concurrent.futures import ThreadPoolExecutor

    free = list(policies)
    lock = threading.Lock()

    def run(job):
        with lock:
            policy = free.pop()
        try:
            return rollout_one(policy, retriever, job[0], job[1], reward, judge)
        finally:
            with lock:
                free.append(policy)

    flat = [job for job in jobs for _ in range(group_size)]
    with ThreadPoolExecutor(max_workers=len(policies)) as pool:
        trajs = list(pool.map(run, flat))
    return [trajs[i * group_size : (i + 1) * group_size] for i in range(len(jobs))]
