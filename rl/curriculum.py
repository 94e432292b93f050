"""ScalingInter-RL's curriculum on the interaction horizon: few agent steps first, more later.

AgentGym-RL (Xi et al., arXiv 2509.08755) trains with a step schedule of horizons: each value of a list is the cap
on interaction turns for K updates, and the last is held to the end. Published code, WooooDyy/AgentGym-RL at
commit 82402a9: `AgentGym-RL/verl/agent_trainer/ppo/ray_trainer.py` lines 222-245 (`StepRoundsScheduler`), read
into the rollout's `max_rounds` at line 770; an episode that reaches the cap simply stops and keeps the reward it
has (`verl/workers/rollout/agent_vllm_rollout/vllm_rollout.py` line 247). Its recipe is `steps_scaling_inter=100`,
`rounds=[10, 20, 30]` (README lines 199-201). Here the horizon is `agent.max_steps`.

The published scheduler is a counter, and a resumed run re-seeds it one step off (`set_global_steps(G)` at line
696 takes the finished step count where a fresh run's counter would hold G + 1, so at a stage boundary the stage
advances twice). This schedule is a pure function of the update number, so a resumed run follows the same
horizons as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence

SCALINGINTER_RECIPE = ((10, 20, 30), 100)  # AgentGym-RL README lines 199-201: rounds, steps_scaling_inter


def horizon(update: int, horizons: Sequence[int], every: int) -> int:
    """The step cap of `update` (1-based): horizons[min((update - 1) // every, len - 1)].

    This is what the published scheduler yields on a fresh run (worked by hand from lines 226-242: steps
    1..100 -> 10, 101..200 -> 20, 201 on -> 30 with every = 100).

    >>> [horizon(u, (10, 20, 30), 100) for u in (1, 99, 100, 101, 200, 201, 5000)]
    [10, 10, 10, 20, 20, 30, 30]
    >>> [horizon(u, (8, 12, 15), 80) for u in (80, 81, 160, 161)]   # its webarena script
    [8, 12, 12, 15]
    """
    if not horizons or any(h < 1 for h in horizons):
        raise ValueError(f"horizons must be a non-empty list of step caps >= 1; got {list(horizons)}")
    if every < 1:
        raise ValueError(f"the horizon must hold for at least one update; got every={every}")
    if update < 1:
        raise ValueError(f"updates count from 1; got {update}")
    return int(horizons[min((update - 1) // every, len(horizons) - 1)])
