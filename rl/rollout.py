"""Rollouts: G trajectories per question through the real agent loop, each step a training segment.

    trajs = rollout_group(policy, retriever, item, agent_config, group_size=4, reward="vimrag")
    trajs[0].reward, trajs[0].segments[0].tool, trajs[0].segments[0].mask

The segments are read off the event stream the loop yields (`step_segments`): each step's done `ModelOutput`
carries the reply's token ids, their log-probs and the model inputs (the policies of rl/policy.py and
rl/served.py provide them), the `ToolCall` after it names the tool and the events that created or closed a
graph node name the node. Then searches learn whether their results held gold evidence, and GGPO's mask
mu_t is set from the trajectory's reward and graph (rl/ggpo.py).

`rollout_branching` is ARPO's and AEPO's tree-shaped group: some trajectories start from the question, others
fork an existing one after a tool call where its entropy rose (rl/branching.py). A fork replays the parent's
replies up to that step exactly (`ReplayPolicy`: same text, tokens and log-probs, so the agent, its tools and
its graph reach the same state) and samples from there on.
"""

from __future__ import annotations

import random
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from agent.backends.base import PolicyError, Tokens
from agent.events import Event, Finished, ModelOutput, NodeEvent, ToolCall
from agent.protocols import tool_kinds, tools_of_kind
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
            ent = torch.tensor(ev.entropies, dtype=torch.float32) if ev.entropies is not None else None  # (N,)
            segments.append(Segment(ev.step, ev.model_inputs, gen, logp, ev.text, entropy=ent))
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


class _Rounds:
    """The model calls of episodes run on threads, answered in rounds: a round is sampled (`sample_many`, batched
    generates of at most `batch` prompts) once every episode still going has asked, so which prompts share a batch,
    and in what order, does not depend on thread timing, and a seeded run is reproducible."""

    def __init__(self, sampler, episodes: int, batch: int = 32) -> None:
        self.sampler, self.alive, self.batch = sampler, episodes, batch
        self.asked: dict[int, dict] = {}
        self.got: dict[int, Any] = {}
        self.cond = threading.Condition()
        self.encode_lock = threading.Lock()  # one tokenizer call at a time

    def ask(self, seat: int, inputs: dict) -> tuple:
        with self.cond:
            self.asked[seat] = inputs
            self._run_if_all_asked()
            while seat not in self.got:
                self.cond.wait()
            got = self.got.pop(seat)
        if isinstance(got, BaseException):
            raise got
        return got

    def leave(self) -> None:
        """An episode has ended: the rounds stop waiting for it."""
        with self.cond:
            self.alive -= 1
            self._run_if_all_asked()

    def _run_if_all_asked(self) -> None:  # under self.cond; the others are waiting or busy with their tools
        if not self.asked or len(self.asked) < self.alive:
            return
        seats = sorted(self.asked)
        try:
            replies: list[Any] = []
            with self.sampler.evaluating():
                for k in range(0, len(seats), self.batch):  # a bounded batch: attention memory grows with it
                    replies += self.sampler.sample_many([self.asked[i] for i in seats[k : k + self.batch]])
        except Exception as e:  # noqa: BLE001 - re-raised in every episode of the round (`ask`)
            replies = [e] * len(seats)
        self.got.update(zip(seats, replies))
        self.asked.clear()
        self.cond.notify_all()


class _Seat:
    """One episode's view of a `_Rounds`: the sampler's policy, except that `stream` waits for its round."""

    def __init__(self, rounds: _Rounds, seat: int) -> None:
        self.rounds, self.seat = rounds, seat

    def __getattr__(self, name: str):
        return getattr(self.rounds.sampler, name)

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        with self.rounds.encode_lock:
            inputs = {k: v.cpu() for k, v in self.rounds.sampler.encode(messages).items()}
        yield from self.rounds.sampler.reply(inputs, self.rounds.ask(self.seat, inputs))


def run_lockstep(sampler, episodes: list[Callable[[Any], Any]], batch: int = 32) -> list[Any]:
    """Run every `episode(policy)` at once, each on its own thread with its own view of `sampler` (rl/policy.py
    `TextPolicy` or `VLPolicy`), their model calls sampled together, in batched generates of at most `batch`
    prompts per round (`_Rounds`): on a CPU, one prompt at a time leaves most of each forward pass to overhead.
    Results in `episodes` order."""
    from concurrent.futures import ThreadPoolExecutor

    rounds = _Rounds(sampler, len(episodes), batch)

    def run(seat: int):
        try:
            return episodes[seat](_Seat(rounds, seat))
        finally:
            rounds.leave()

    with ThreadPoolExecutor(max_workers=max(1, len(episodes))) as pool:
        return list(pool.map(run, range(len(episodes))))


def rollout_lockstep(
    sampler, retriever, jobs: list[tuple[Any, Any]], group_size: int, reward: str = "vimrag", judge=None
) -> list[list[Trajectory]]:
    """`group_size` trajectories for each (item, agent_config) job, all of them at once (`run_lockstep`). They are
    drawn from the same policy as `rollout_group`'s, but not token for token: a batch shares out the random
    draws in another order."""
    flat = [job for job in jobs for _ in range(group_size)]
    episodes = [partial(_rollout_with, retriever=retriever, job=job, reward=reward, judge=judge) for job in flat]
    trajs = run_lockstep(sampler, episodes)
    return [trajs[i * group_size : (i + 1) * group_size] for i in range(len(jobs))]


def _rollout_with(policy, retriever, job, reward, judge) -> Trajectory:
    return rollout_one(policy, retriever, job[0], job[1], reward, judge)


class ReplayPolicy:
    """`policy`, except that its first len(prefix) replies are the prefix's segments, replayed exactly.

    Everything else (describe, generation, patch, is_vlm) is the wrapped policy's. Where the policy can encode
    messages, each replayed step checks that the agent rebuilt the same prompt, so a fork never trains on a
    reply to a context it did not see.
    """

    def __init__(self, policy, prefix: list[Segment]) -> None:
        self._policy, self._prefix, self._i = policy, list(prefix), 0

    def __getattr__(self, name: str):
        return getattr(self._policy, name)

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        if self._i >= len(self._prefix):
            yield from self._policy.stream(messages, view)
            return
        seg = self._prefix[self._i]
        self._i += 1
        encode = getattr(self._policy, "encode", None)
        if encode is not None and not torch.equal(encode(messages)["input_ids"].cpu(), seg.inputs["input_ids"].cpu()):
            raise PolicyError(
                f"replaying step {seg.step} of a trajectory rebuilt a different prompt; a branched rollout needs a "
                "deterministic agent and retriever (same index, no sampling outside the policy)"
            )
        ent = seg.entropy.tolist() if seg.entropy is not None else None
        yield seg.text
        yield Tokens(seg.gen_ids.tolist(), seg.old_logp.tolist(), seg.inputs, ent)


def branch_points(segments: list[Segment]) -> list[int]:
    """The segment indices k where a fork may resample: each reply that follows a tool's result (the step before
    called a tool other than answering).

    >>> tools = ["search", "crop", "answer"]
    >>> branch_points([Segment(i, {}, torch.zeros(1), torch.zeros(1), tool=t) for i, t in enumerate(tools)])
    [1, 2]
    """
    kinds = tool_kinds()
    return [k for k in range(1, len(segments)) if segments[k - 1].tool and kinds.get(segments[k - 1].tool) != "answer"]


def rollout_branching(
    policy,
    retriever,
    item,
    agent_config,
    group_size: int,
    reward: str = "vimrag",
    judge=None,
    rule: str = "arpo",
    initial: int = 0,
    threshold: float = 0.5,
    weight: float = 0.2,
    vocab_size: int = 2,
    rng: random.Random | None = None,
) -> list[Trajectory]:
    """A group of `group_size` trajectories grown as a tree (ARPO `rule="arpo"`, AEPO `rule="aepo"`).

    Roots: `initial` trajectories from the question (0: half the group, ARPO's scripts' 8 of 16); under AEPO
    the first root's entropies set the count instead (`aepo_root_rollouts`: its first reply against the mean of
    its replies after tool results, where the published code spends an extra rollout on measuring them). Then
    every trajectory, in the order made, is scanned at its `branch_points`: with dH its reply's entropy there
    minus its first reply's (`reply_entropy`), a draw decides (`arpo_branches`, or `aepo_branches` with the run
    of branches taken just before on that path) whether a fork replays it up to there and samples on. Each
    point forks at most once (ARPO's scripts' beam of 2). Slots still free at the end are filled with fresh
    roots, as ARPO refills.
    """
    from rl.branching import aepo_branches, aepo_root_rollouts, arpo_branches, reply_entropy

    if rule not in ("arpo", "aepo"):
        raise ValueError(f"branching rule {rule!r} must be arpo or aepo")
    rng = rng or random.Random(0)

    def entropy_of(seg: Segment) -> float:
        if seg.entropy is None:
            raise PolicyError(
                "branched rollouts need each reply's token entropies; sample with rl/policy.py's or rl/served.py's "
                "policy, which record them"
            )
        return reply_entropy(seg.entropy.tolist(), vocab_size)

    def sample(prefix: list[Segment]) -> Trajectory:
        pol = ReplayPolicy(policy, prefix) if prefix else policy
        return rollout_one(pol, retriever, item, agent_config, reward, judge)

    trajs = [sample([])]
    roots = initial or max(1, group_size // 2)
    if rule == "aepo" and not initial:
        first = trajs[0].segments
        after = [entropy_of(first[k]) for k in branch_points(first)]
        if first and after:
            roots = aepo_root_rollouts(group_size, entropy_of(first[0]), sum(after) / len(after))
    roots = max(1, min(roots, group_size))
    while len(trajs) < roots:
        trajs.append(sample([]))
    start = {i: (1, 0) for i in range(len(trajs))}  # index -> (first segment it may fork at, branches just before)
    i = 0
    while i < len(trajs) and len(trajs) < group_size:
        segs = trajs[i].segments
        first_k, run = start[i]
        h0 = entropy_of(segs[0]) if segs else 0.0
        for k in branch_points(segs):
            if k < first_k or len(trajs) >= group_size:
                continue
            dh = entropy_of(segs[k]) - h0
            u = rng.random()
            took = (
                arpo_branches(u, dh, threshold, weight)
                if rule == "arpo"
                else aepo_branches(u, dh, run, threshold, weight)
            )
            if took:
                start[len(trajs)] = (k + 1, run + 1)
                trajs.append(sample(segs[:k]))
                run += 1
            else:
                run = 0
        i += 1
    while len(trajs) < group_size:
        trajs.append(sample([]))
    return trajs


def group_sampler(cfg, get_retriever: Callable[[], Any], vocab_size: int, update: int):
    """`(policy, item, agent_config) -> group` for a TrainConfig `cfg`: independent trajectories, or a branched
    tree (`branching`: arpo, aepo) whose draws are seeded by (seed, update, question), so they are the same
    whatever order threads run groups in, and after a resume."""
    if cfg.branching == "none":
        return lambda policy, item, acfg: rollout_group(policy, get_retriever(), item, acfg, cfg.group_size, cfg.reward)
    return lambda policy, item, acfg: rollout_branching(
        policy,
        get_retriever(),
        item,
        acfg,
        cfg.group_size,
        cfg.reward,
        rule=cfg.branching,
        initial=cfg.initial_rollouts,
        threshold=cfg.branch_threshold,
        weight=cfg.branch_entropy_weight,
        vocab_size=vocab_size,
        rng=random.Random(zlib.crc32(f"{cfg.seed}:{update}:{item.id}".encode())),
    )


def rollout_concurrent(
    policies: list,
    retriever,
    jobs: list[tuple[Any, Any]],
    group_size: int,
    reward: str = "vimrag",
    judge=None,
    group: Callable[[Any, Any, Any], list[Trajectory]] | None = None,
) -> list[list[Trajectory]]:
    """`group_size` trajectories for each (item, agent_config) job, run on len(policies) threads.

    Meant for a served policy, where the server batches concurrent requests: each thread owns one policy
    object while it runs an episode. Groups come back in job order, whatever order the threads finish in.
    With `group(policy, item, agent_config)` (a branched group, whose forks depend on its earlier
    trajectories), each thread grows one whole group instead.
    """
    from concurrent.futures import ThreadPoolExecutor

    free = list(policies)
    lock = threading.Lock()

    def run(job):
        with lock:
            policy = free.pop()
        try:
            if group is not None:
                return group(policy, job[0], job[1])
            return rollout_one(policy, retriever, job[0], job[1], reward, judge)
        finally:
            with lock:
                free.append(policy)

    if group is not None:
        with ThreadPoolExecutor(max_workers=len(policies)) as pool:
            return list(pool.map(run, jobs))
    flat = [job for job in jobs for _ in range(group_size)]
    with ThreadPoolExecutor(max_workers=len(policies)) as pool:
        trajs = list(pool.map(run, flat))
    return [trajs[i * group_size : (i + 1) * group_size] for i in range(len(jobs))]
