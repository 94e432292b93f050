"""Asynchronous rollouts: worker threads keep sampling groups with the newest weights they have while the
trainer updates, and the trainer takes a batch as soon as enough groups are ready.

    pipe = Pipeline(sample, next_job, per_update=2, max_staleness=1, workers=4)
    pipe.publish(0, model)                  # the weights after 0 updates; workers start sampling
    groups, info = pipe.take(0)             # blocks until 2 groups are ready; staler ones are dropped and counted
    ...                                     # the optimizer step
    pipe.publish(1, model)
    pipe.close()

Versions. Version v is the weights after v updates. A group is sampled from one snapshot of the weights, and
every segment of it records that snapshot's version (`Segment.version`). The update that turns version u into
u + 1 trains on it with staleness u - v; `take` drops a group staler than `max_staleness` and counts it, so no
trajectory older than the bound is ever trained on.

Capacity. A worker starts a group only while started - dropped <= (max_staleness + version + 1) * per_update,
AReaL's rule (`areal/infra/staleness_manager.py` lines 99-113 at 4aef98d), so workers do not run further ahead
than the bound allows and drops stay rare. At max_staleness 0 every update's groups are sampled from the weights
it starts from, like a synchronous run.

Snapshots. Workers sample from copies of the model, never from the one being trained (an optimizer step in the
middle of a reply would mix two policies). A copy is refreshed with `load_state_dict` when a new version is
published and no worker still samples from it. So there is the newest copy and one per older version a worker
still samples from (usually max_staleness + 1 in all, more while a straggler runs), and local async needs that much
extra memory (the served path's copies only rebuild log-probs; rl/served.py).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Snapshot:
    version: int
    model: Any
    users: int = 0


@dataclass
class Ready:
    """A finished group and where it came from."""

    version: int
    order: int  # the order its job was handed out in
    job: Any
    group: list


@dataclass
class TakeInfo:
    """What one `take` saw: how long the trainer waited, the staleness of what it took, and what it dropped."""

    wait_s: float = 0.0
    staleness: list[int] = field(default_factory=list)
    dropped: int = 0


def has_capacity(started: int, dropped: int, version: int, per_update: int, max_staleness: int) -> bool:
    """AReaL's staleness capacity: may one more group start now?

    >>> has_capacity(started=3, dropped=0, version=0, per_update=2, max_staleness=1)  # 2 batches of 2 may run ahead
    True
    >>> has_capacity(started=4, dropped=0, version=0, per_update=2, max_staleness=1)
    False
    >>> has_capacity(started=4, dropped=1, version=0, per_update=2, max_staleness=1)  # a drop frees its slot
    True
    """
    return started - dropped < (max_staleness + version + 1) * per_update


class Pipeline:
    """`workers` threads running `sample(model, job) -> group` on the jobs `next_job()` hands out, at most
    `max_staleness` updates ahead of the trainer. A worker's exception stops the pipeline and is raised by the
    trainer's next `take`."""

    def __init__(
        self,
        sample: Callable[[Any, int, Any], list],
        next_job: Callable[[], Any],
        per_update: int,
        max_staleness: int,
        workers: int,
    ) -> None:
        if per_update < 1 or max_staleness < 0 or workers < 1:
            raise ValueError(
                f"per_update and workers must be >= 1 and max_staleness >= 0; got {per_update}, {workers}, "
                f"{max_staleness}"
            )
        self.sample, self.next_job = sample, next_job
        self.per_update, self.max_staleness = per_update, max_staleness
        self.cond = threading.Condition()
        self.snapshots: list[Snapshot] = []
        self.latest: Snapshot | None = None
        self.version = -1
        self.started = self.dropped = 0
        self.ready: list[Ready] = []
        self.error: BaseException | None = None
        self.stopping = False
        self.threads = [threading.Thread(target=self._work, name=f"rollout-{i}", daemon=True) for i in range(workers)]
        self._launched = False

    # -- the trainer's side ------------------------------------------------------------------------------
    def publish(self, version: int, model) -> None:
        """Make `model`'s current weights version `version` (copied: the trainer goes on changing its own)."""
        with self.cond:
            spare = next((s for s in self.snapshots if s.users == 0 and s is not self.latest), None)
        if spare is None:
            spare = Snapshot(version, copy.deepcopy(model).eval().requires_grad_(False))
            with self.cond:
                self.snapshots.append(spare)
        else:  # no worker samples from it, and none can pick it up: it is not the latest
            spare.model.load_state_dict(model.state_dict())
            spare.version = version
        with self.cond:
            self.latest, self.version = spare, version
            self.cond.notify_all()
        if not self._launched:
            self._launched = True
            for t in self.threads:
                t.start()

    def oldest_in_use(self) -> int:
        """The oldest version any worker still samples from (the newest published one when none does)."""
        with self.cond:
            return min([s.version for s in self.snapshots if s.users] + [self.version])

    def take(self, version: int, n: int | None = None, timeout: float | None = None) -> tuple[list[Ready], TakeInfo]:
        """The next `n` (default `per_update`) finished groups, for the update that starts from weights `version`;
        groups staler than the bound are dropped and counted. Ordered by when their jobs were handed out."""
        n = self.per_update if n is None else n
        info = TakeInfo()
        t0 = time.perf_counter()
        out: list[Ready] = []
        with self.cond:
            while len(out) < n:
                while not self.ready and self.error is None:
                    if not self.cond.wait(timeout=timeout):
                        raise TimeoutError(f"no rollout finished within {timeout} s")
                if self.error is not None:
                    raise RuntimeError(f"a rollout worker failed: {self.error}") from self.error
                r = self.ready.pop(0)
                if version - r.version > self.max_staleness:
                    self.dropped += 1
                    info.dropped += 1
                    self.cond.notify_all()  # its slot is free again
                    continue
                out.append(r)
                info.staleness.append(version - r.version)
        info.wait_s = time.perf_counter() - t0
        out.sort(key=lambda r: r.order)
        return out, info

    def close(self, timeout: float = 30.0) -> None:
        """Stop the workers; a group in flight is finished and discarded (join waits up to `timeout` s each)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        for t in self.threads:
            if t.is_alive():
                t.join(timeout)

    # -- the workers' side --------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self.cond:
                while (
                    not self.stopping
                    and self.error is None
                    and not has_capacity(self.started, self.dropped, self.version, self.per_update, self.max_staleness)
                ):
                    self.cond.wait()
                if self.stopping or self.error is not None:
                    return
                order = self.started
                self.started += 1
                try:
                    job = self.next_job()
                except BaseException as e:  # noqa: BLE001 - handed to the trainer's take()
                    self.error = e
                    self.cond.notify_all()
                    return
                snap = self.latest
                snap.users += 1
                version = snap.version
            try:
                group = self.sample(snap.model, version, job)
            except BaseException as e:  # noqa: BLE001 - handed to the trainer's take()
                with self.cond:
                    self.error = e
                    snap.users -= 1
                    self.cond.notify_all()
                return
            for traj in group:
                for seg in traj.segments:
                    seg.version = version
            with self.cond:
                snap.users -= 1
                self.ready.append(Ready(version, order, job, group))
                self.cond.notify_all()
