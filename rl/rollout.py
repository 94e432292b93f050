"""Rollouts: G trajectories per question through the real agent loop, each step a training segment.

    trajs = rollout_group(policy, retriever, item, agent_config, group_size=4, reward="vimrag")
    trajs[0].reward, trajs[0].segments[0].tool, trajs[0].segments[0].mask

Every model call of a trajectory is one Segment (rl/policy.py). After the episode each segment learns
the node its step created, the tool it called and, for searches, whether the results held gold
evidence; then GGPO's mask mu_t is set from the trajectory's reward and graph (rl/ggpo.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

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


def annotate(segments: list[Segment], trace, item) -> None:
    """Give each segment its step's node, tool, gold hit and GGPO mask."""
    valid = valid_retrievals(trace, lambda u: any(g.matches(u) for g in item.evidence)) if item.evidence else set()
    by_step = {s.step: s for s in trace.steps}
    for seg in segments:
        rec = by_step.get(seg.step)
        seg.node_id = rec.node_id if rec else ""
        seg.tool = (rec.action or {}).get("name", "") if rec else ""
        seg.gold_hit = (seg.node_id in valid) if seg.tool in SEARCH_TOOLS else None


def score(trace, item, reward: str = "vimrag", judge=None) -> float:
    """The trajectory's reward by a registered reward function (TRL-style signature)."""
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; choose one of {sorted(REWARDS)}")
    completions, kwargs = collate_reward_inputs([trajectory_reward_inputs(trace, item)])
    if judge is not None:
        kwargs["judge"] = judge
    return float(REWARDS[reward]([item.question], completions, **kwargs)[0])


def rollout_one(policy, retriever, item, agent_config, reward: str = "vimrag", judge=None) -> Trajectory:
    """One sampled trajectory, scored, annotated and masked; `policy` records its segments."""
    from agent.loop import Agent

    policy.reset()
    trace = Agent(retriever, policy, agent_config).ask(item.question)
    traj = Trajectory(item.id, trace, list(policy.segments), score(trace, item, reward, judge))
    annotate(traj.segments, trace, item)
    valid = {s.node_id for s in traj.segments if s.gold_hit}
    for seg, mu in zip(traj.segments, step_masks(trace.steps, trace.graph, traj.reward, valid)):
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
    object (segments are per policy), so the policies must not share mutable state. Groups come back in job
    order, whatever order the threads finish in.
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
