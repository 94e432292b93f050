"""Injected tool latency, for tests and benchmarks: `--tool-latency SPEC` delays search, crop and judge calls.

    vimrag eval --dataset demo --tool-latency heavy:0.2                   # every tool: lognormal, median 0.2 s
    vimrag train ... agent.tool_latency="search=fixed:0.5,crop=jitter:0.05"

SPEC is `[TOOL=]KIND:ARGS`, several joined by commas; a bare one applies to every tool, a named one (search,
crop, judge) to that tool:
  - `fixed:S`          S seconds every call;
  - `jitter:S[/J]`     uniform in [S - J, S + J] (J defaults to S / 2);
  - `heavy:M[/SIGMA]`  lognormal with median M and log-spread SIGMA (default 1: the mean is 1.65 M and one call in
                       a hundred takes over 10 M), the heavy tail real search services show.
Draws come from one seeded generator per spec and process (`shared_latency`), so the delays vary across
episodes and their sequence is the same run after run.
"""

from __future__ import annotations

import functools
import math
import random
import threading
import time
from dataclasses import dataclass, field

TOOLS = ("search", "crop", "judge")
KINDS = ("fixed", "jitter", "heavy")


@dataclass
class Latency:
    """One tool's delay distribution."""

    kind: str
    seconds: float
    spread: float | None = None

    def draw(self, rng: random.Random) -> float:
        """One delay in seconds (never negative).

        >>> Latency("fixed", 0.5).draw(random.Random(0))
        0.5
        >>> 0.25 <= Latency("jitter", 0.5).draw(random.Random(0)) <= 0.75
        True
        """
        if self.kind == "fixed":
            return self.seconds
        if self.kind == "jitter":
            j = self.seconds / 2 if self.spread is None else self.spread
            return max(0.0, rng.uniform(self.seconds - j, self.seconds + j))
        sigma = 1.0 if self.spread is None else self.spread
        return self.seconds * math.exp(rng.gauss(0.0, sigma))


@dataclass
class ToolLatency:
    """Delays per tool, drawn from one seeded generator (thread-safe: rollout threads share it)."""

    per_tool: dict[str, Latency] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.per_tool)

    def delay(self, tool: str) -> float:
        """Sleep for `tool`'s drawn delay (0 without one); returns the seconds slept."""
        lat = self.per_tool.get(tool)
        if lat is None:
            return 0.0
        with self._lock:
            s = lat.draw(self._rng)
        time.sleep(s)
        return s


def parse_latency(spec: str, seed: int = 0) -> ToolLatency:
    """A `--tool-latency` SPEC (the module docstring) as a ToolLatency; a clear error names a bad part.

    >>> t = parse_latency("heavy:0.2, search=fixed:0.5")
    >>> t.per_tool["search"], t.per_tool["crop"]
    (Latency(kind='fixed', seconds=0.5, spread=None), Latency(kind='heavy', seconds=0.2, spread=None))
    >>> parse_latency("jitter:0.5/0.1").per_tool["judge"].spread
    0.1
    >>> parse_latency("")
    ToolLatency(per_tool={}, seed=0)
    """
    per_tool: dict[str, Latency] = {}
    named: dict[str, Latency] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        tool, _, dist = part.rpartition("=")
        tool = tool.strip()
        if tool and tool not in TOOLS:
            raise ValueError(f"--tool-latency: unknown tool {tool!r} in {part!r}; use one of {', '.join(TOOLS)}")
        kind, _, args = dist.strip().partition(":")
        try:
            nums = [float(x) for x in args.split("/")] if args else []
        except ValueError:
            nums = []
        if kind not in KINDS or not 1 <= len(nums) <= 2 or any(x < 0 or not math.isfinite(x) for x in nums):
            raise ValueError(
                f"--tool-latency: cannot read {part!r}; write KIND:SECONDS[/SPREAD] with KIND one of "
                f"{', '.join(KINDS)}, e.g. heavy:0.2 or search=fixed:0.5"
            )
        lat = Latency(kind, nums[0], nums[1] if len(nums) == 2 else None)
        if tool:
            named[tool] = lat
        else:
            per_tool.update({t: lat for t in TOOLS})
    per_tool.update(named)  # a named tool's own delay wins over the bare one, whatever the order
    return ToolLatency(per_tool, seed)


@functools.lru_cache(maxsize=8)
def shared_latency(spec: str) -> ToolLatency:
    """One ToolLatency per SPEC in this process, shared by every agent and thread: each episode draws on from
    where the last left off, so delays vary across episodes and the sequence is the same run after run."""
    return parse_latency(spec)


class DelayedJudge:
    """A judge whose every call first waits for the injected judge latency."""

    def __init__(self, judge, latency: ToolLatency) -> None:
        self._judge, self._latency = judge, latency

    def __getattr__(self, name: str):
        return getattr(self._judge, name)

    def complete(self, *args, **kwargs):
        self._latency.delay("judge")
        return self._judge.complete(*args, **kwargs)
