"""The policy update: one batch of rollouts, `ppo_epochs` passes over it in mini-batches, one optimizer step each.

This follows verl's actor update, which VRAG-RL trains with (`VRAG-RL/verl/workers/actor/dp_actor.py`
`update_policy`, lines 243-333 at VRAG commit 24f8d05):
- the batch's rows (trajectories: a row there is one whole multi-turn trajectory, so its step segments stay
  together here) are split into mini-batches once, before the epochs (lines 243-250), and every epoch walks the
  same mini-batches (line 253);
- each mini-batch is one optimizer step (lines 269 and 330); its loss is normalised within that mini-batch;
- the old log-probs are the rollout's, whatever step is taken (line 283);
- the learning-rate scheduler steps once per update, after the whole update (`fsdp_workers.py` lines 454-465),
  so `warmup_updates` counts updates whatever `ppo_epochs` and `mini_batch_size` are.

We differ in one place: verl's fork splits the rows in the order they come (`batch.split`, with
`actor.shuffle: False` in `verl/trainer/config/ppo_trainer.yaml` line 41), which groups a question's rollouts
into the same mini-batch. Here the trajectories are shuffled (seeded by the run's seed and the update) before
they are split, so a mini-batch mixes questions. With one mini-batch nothing is shuffled: the update is the
single-step one bit for bit.

Under DDP, FSDP and DeepSpeed every process takes the same number of optimizer steps: the number of mini-batches
comes from the batch size summed over processes, each process splits its own trajectories into that many parts,
and within a mini-batch every process runs the same number of forward passes (`compute_gradients` pads with
zero-weight replays).

Asynchronous rollouts (AReaL's decoupled objective, rl/loss.py): a segment sampled by an older policy version is
trained against the proximal policy, the weights the update starts from. With one optimizer step those are the
weights of the very forward pass, so pi_prox = sg(pi_theta). With several steps the weights move, so pi_prox is
recomputed once, by a no-grad forward pass before the first step, as AReaL does by default
(`prox_logp_method: recompute`, AReaL `docs/algorithms/prox_approx.md`; `areal/engine/ppo/actor.py`
`PPOActor.compute_logp`, a `torch.no_grad` forward run before `ppo_update`).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import torch

from rl.config import TrainConfig
from rl.policy import sequence_logprobs


@dataclass
class Piece:
    """One trajectory's share of an update: its step segments, each segment's advantage and loss weight."""

    segments: list
    advantages: list  # per segment: a float, or an (N,) tensor of per-token advantages
    weights: list[float]
    lesson: object = None  # MEL (rl/mel.py): a LessonTarget riding with this failed trajectory, or None


@dataclass
class UpdateStats:
    """What an update did, on this process: summed so the trainer can reduce them over processes."""

    optimizer_steps: int = 0
    per_step: list[dict[str, float]] = field(default_factory=list)  # each step's loss, clip_frac, ratio_mean/max
    clip_sum: float = 0.0  # per segment clip fraction, summed over the segments of every step
    ratio_sum: float = 0.0  # per segment mean ratio, summed likewise
    ratio_max: float = 0.0
    kl_sum: float = 0.0
    counted: int = 0  # segments those sums are over
    mel_nll: float = 0.0  # MEL: the lessons' summed token NLL over every step (rl/mel.py), and its token count
    mel_tokens: float = 0.0

    @property
    def loss(self) -> float:
        """The mean of the optimizer steps' losses (with one step: the batch loss)."""
        return sum(p["loss"] for p in self.per_step) / max(1, len(self.per_step))

    def add(self, st: dict[str, float]) -> None:
        self.clip_sum += st["clip_sum"]
        self.ratio_sum += st["ratio_sum"]
        self.kl_sum += st["kl_sum"]
        self.counted += st["counted"]
        self.ratio_max = max(self.ratio_max, st["ratio_max"])


def segment_loss(
    model,
    seg,
    advantage: float | torch.Tensor,
    weight: float,
    cfg: TrainConfig,
    scale: float,
    ref_logp: torch.Tensor | None = None,
    version: int | None = None,
    prox_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate of one segment, scaled so summing over segments gives the mini-batch loss. `advantage`
    is one number, or (N,) one per token (rl/methods.py `segment_advantages`).

    Async rollouts (`version`: the weights this update starts from): a segment sampled by an older version is
    trained with AReaL's decoupled objective (rl/loss.py), its recorded log-probs the behaviour policy's and the
    proximal policy the weights this update starts from: `prox_logp` (N,) when the update takes several steps, else
    sg(pi_theta) of this very forward pass. A segment of the current version keeps its recorded log-probs as
    pi_old, exactly the synchronous loss."""
    from rl.loss import ppo_clip_loss
    from rl.methods import clip_kwargs, clip_range, method_level

    logp = sequence_logprobs(model, seg.inputs, seg.gen_ids, cfg.temperature)[None]  # (1, N)
    old = seg.old_logp.to(logp.device)[None]  # (1, N)
    behav = None
    if cfg.rollout_mode == "async" and version is not None and seg.version != version:
        prox = logp.detach() if prox_logp is None else prox_logp.to(logp.device)[None]  # (1, N)
        behav, old = old, prox  # (1, N) each: the behaviour policy's, and the proximal policy's
    ref = ref_logp.to(logp.device)[None] if ref_logp is not None else None  # (1, N)
    if isinstance(advantage, torch.Tensor):
        adv = advantage.to(logp.device, logp.dtype).view(1, -1)  # (1, N)
    else:
        adv = torch.tensor([advantage], device=logp.device)  # (1,)
    level = method_level(cfg.method, cfg.level)
    low, high = clip_range(level, cfg.clip_eps, cfg.clip_eps_high)
    loss, stats = ppo_clip_loss(
        logp,
        old,
        torch.ones_like(logp),
        adv,
        torch.tensor([weight], device=logp.device),
        ref,
        level=level,
        clip_eps=low,
        clip_eps_high=high,
        kl_coef=cfg.kl_coef,
        length_norm=cfg.length_norm,
        logp_behav=behav,
        behav_cap=cfg.behav_cap,
        **clip_kwargs(cfg.method, cfg.clip_c),
    )
    return loss * scale, stats


def loss_scales(
    n_tokens: list[int], cfg: TrainConfig, total_tokens: int, total_segments: int, world: int
) -> list[float]:
    """Per-segment factors turning single-segment losses into the whole (all-process) mini-batch loss.

    DDP averages gradients over `world` processes, hence the factor `world`.

    >>> cfg = TrainConfig(model="m", dataset="d", method="grpo")
    >>> loss_scales([2, 6], cfg, total_tokens=16, total_segments=4, world=2)   # token_mean: n_s / N · W
    [0.25, 0.75]
    """
    from rl.methods import method_level

    if method_level(cfg.method, cfg.level) == "token" and cfg.length_norm == "token_mean":
        return [n * world / max(1, total_tokens) for n in n_tokens]
    return [world / max(1, total_segments) for _ in n_tokens]


def reduce_sums(accelerator, sums: dict[str, float]) -> dict[str, float]:
    """Each named count summed over all processes. The names say which value is which, so a method may add a
    metric without renumbering anyone's; every process must pass the same names, or a clear error says so.

    >>> class One:  # a single process: the gather is the tensor itself
    ...     device = "cpu"
    ...     def gather(self, t):
    ...         return t
    >>> reduce_sums(One(), {"tokens": 12, "reward": 1.5})
    {'reward': 1.5, 'tokens': 12.0}
    """
    names = sorted(sums)
    tag = float(zlib.crc32("\0".join(names).encode()))  # the same on every process, or the names differ
    vec = torch.tensor([tag] + [float(sums[k]) for k in names], dtype=torch.float64, device=accelerator.device)
    rows = accelerator.gather(vec).view(-1, len(names) + 1)  # (processes, 1 + K)
    if bool((rows[:, 0] != tag).any()):
        raise RuntimeError(f"processes reduced different metrics ({names} here); every process must log the same names")
    return dict(zip(names, rows[:, 1:].sum(0).tolist()))


def compute_gradients(
    accelerator,
    model,
    segments,
    advantages,
    weights,
    cfg: TrainConfig,
    ref_model=None,
    version: int | None = None,
    filler=None,
    prox: dict[int, torch.Tensor] | None = None,
    lessons: list | None = None,
) -> dict[str, float]:
    """Backward over this process's segments of one mini-batch (padded to the same count on every process, with
    zero-weight replays of `filler`, or of the first segment, when this process has fewer); `version` is the
    weights' version, which async rollouts' stale segments are corrected against (`segment_loss`), and `prox` maps
    id(segment) to its recomputed proximal log-probs. Returns the mini-batch loss and sums of the clip statistics
    over its segments ("clip_frac" and "kl": their means, as one step of the trainer has always logged). With
    `cfg.mel`, `lessons` (rl/mel.py LessonTarget) add mel_coef x their token-averaged NLL over every process
    (`mel_nll`, `mel_tokens`: its sum and count here), backpropagated before the segments so the last segment's
    backward carries it into the gradient sync."""
    world = accelerator.num_processes
    counts = torch.tensor(
        [len(segments), sum(int(s.gen_ids.numel()) for s in segments)], device=accelerator.device
    )  # (2,)
    totals = accelerator.reduce(counts.clone(), reduction="sum")  # (2,)
    most = accelerator.gather(counts[:1].clone()).max().item()
    scales = loss_scales([int(s.gen_ids.numel()) for s in segments], cfg, int(totals[1]), int(totals[0]), world)
    plan = list(zip(segments, advantages, weights, scales))
    pad = segments[0] if segments else filler
    while len(plan) < most:  # keep collectives in step: a zero-weight replay of a real segment
        plan.append((pad, 0.0, 0.0, 0.0))
    stats: dict[str, float] = {"loss": 0.0, "clip_sum": 0.0, "ratio_sum": 0.0, "ratio_max": 0.0, "kl_sum": 0.0}
    if cfg.mel:
        stats.update(mel_term(accelerator, model, lessons or [], cfg.mel_coef, world))
        stats["loss"] += stats["mel_loss"]
    n = 0
    for i, (seg, adv, w, sc) in enumerate(plan):
        if seg is None:
            continue
        ref = None
        if ref_model is not None and cfg.kl_coef > 0:
            with torch.no_grad():
                ref = sequence_logprobs(ref_model, seg.inputs, seg.gen_ids, cfg.temperature)  # (N,)
        last = i == len(plan) - 1
        ctx = accelerator.no_sync(model) if not last and world > 1 else _null()
        with ctx:
            p = (prox or {}).get(id(seg))
            loss, st = segment_loss(model, seg, adv, w, cfg, sc, ref, version, p)
            accelerator.backward(loss)
        stats["loss"] += float(loss.detach())
        if sc:
            stats["clip_sum"] += st["clip_frac"]
            stats["ratio_sum"] += st["ratio_mean"]
            stats["ratio_max"] = max(stats["ratio_max"], st["ratio_max"])
            stats["kl_sum"] += st["kl"]
            n += 1
    stats["counted"] = n
    stats["clip_frac"] = stats["clip_sum"] / max(1, n)
    stats["kl"] = stats["kl_sum"] / max(1, n)
    return stats


def mel_term(accelerator, model, lessons: list, coef: float, world: int) -> dict[str, float]:
    """Backward of `coef` x the token mean NLL of the mini-batch's lessons over all processes (a collective: every
    process calls it, with or without lessons). Each process's share is scaled by world / all tokens, since DDP
    averages gradients over processes."""
    from rl.mel import lesson_nll

    mine = sum(int(t.gen_ids.numel()) for t in lessons)
    total = int(accelerator.reduce(torch.tensor([mine], device=accelerator.device), reduction="sum").item())
    out = {"mel_nll": 0.0, "mel_tokens": float(mine), "mel_loss": 0.0}
    if not lessons or not total:
        return out
    ctx = accelerator.no_sync(model) if world > 1 else _null()
    with ctx:
        for t in lessons:
            nll = lesson_nll(model, t)
            loss = coef * nll * world / total
            accelerator.backward(loss)
            out["mel_nll"] += float(nll.detach())
            out["mel_loss"] += float(loss.detach())
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def mini_batch_count(total_trajectories: int, mini_batch_size: int | None) -> int:
    """How many mini-batches an update of `total_trajectories` (over all processes) is split into: verl's
    train batch / ppo_mini_batch_size, at least 1; None or 0 means one (the whole batch).

    >>> mini_batch_count(24, None), mini_batch_count(24, 12), mini_batch_count(24, 8), mini_batch_count(23, 8)
    (1, 2, 3, 3)
    """
    if not mini_batch_size:
        return 1
    return max(1, -(-total_trajectories // mini_batch_size))


def split_minibatches(n: int, parts: int, seed: int) -> list[list[int]]:
    """Indices 0..n-1 into `parts` mini-batches of near-equal size (the first ones one larger), shuffled by `seed`
    first when there is more than one part. A part may be empty when n < parts.

    >>> split_minibatches(5, 1, 0)
    [[0, 1, 2, 3, 4]]
    >>> sorted(i for part in split_minibatches(5, 2, 7) for i in part), [len(p) for p in split_minibatches(5, 2, 7)]
    ([0, 1, 2, 3, 4], [3, 2])
    """
    order = list(range(n))
    if parts > 1:
        random.Random(seed).shuffle(order)
    size, extra = divmod(n, parts)
    out, at = [], 0
    for k in range(parts):
        take = size + (1 if k < extra else 0)
        out.append(order[at : at + take])
        at += take
    return out


def proximal_logprobs(model, pieces: list[Piece], cfg: TrainConfig, version: int | None) -> dict[int, torch.Tensor]:
    """id(segment) -> log-probs (N,) under the weights the update starts from, for the segments an older policy
    sampled (async): the decoupled objective's pi_prox, computed once before the first optimizer step."""
    if cfg.rollout_mode != "async" or version is None:
        return {}
    out = {}
    with torch.no_grad():
        for piece in pieces:
            for seg in piece.segments:
                if seg.version != version:
                    out[id(seg)] = sequence_logprobs(model, seg.inputs, seg.gen_ids, cfg.temperature).detach()
    return out


def update_policy(
    accelerator,
    model,
    optimizer,
    pieces: list[Piece],
    cfg: TrainConfig,
    ref_model=None,
    version: int | None = None,
    seed: int = 0,
) -> UpdateStats:
    """`cfg.ppo_epochs` passes over this process's trajectories (`pieces`), split into mini-batches of
    `cfg.mini_batch_size` trajectories (over all processes), one clipped-gradient optimizer step per mini-batch.
    `seed` orders the shuffle (the trainer passes one per update). The scheduler is the caller's: it steps once
    per update (verl's rule; see the module's docstring)."""
    total = int(accelerator.reduce(torch.tensor([len(pieces)], device=accelerator.device), reduction="sum").item())
    parts = mini_batch_count(total, cfg.mini_batch_size)
    chunks = split_minibatches(len(pieces), parts, seed)
    steps = parts * cfg.ppo_epochs
    filler = next((s for p in pieces for s in p.segments), None)
    prox = proximal_logprobs(model, pieces, cfg, version) if steps > 1 else {}
    out = UpdateStats()
    for _ in range(cfg.ppo_epochs):
        for chunk in chunks:
            segs = [s for i in chunk for s in pieces[i].segments]
            advs = [a for i in chunk for a in pieces[i].advantages]
            wts = [w for i in chunk for w in pieces[i].weights]
            lessons = [pieces[i].lesson for i in chunk if pieces[i].lesson is not None]
            with accelerator.accumulate(model):
                st = compute_gradients(
                    accelerator,
                    model,
                    segs,
                    advs,
                    wts,
                    cfg,
                    ref_model,
                    version=version,
                    filler=filler,
                    prox=prox,
                    lessons=lessons,
                )
                if accelerator.sync_gradients and cfg.max_grad_norm:
                    accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
            out.optimizer_steps += 1
            out.per_step.append(
                {
                    "loss": st["loss"],
                    "clip_frac": st["clip_frac"],
                    "ratio_mean": st["ratio_sum"] / max(1, st["counted"]),
                    "ratio_max": st["ratio_max"],
                }
            )
            out.add(st)
            out.mel_nll += st.get("mel_nll", 0.0)
            out.mel_tokens += st.get("mel_tokens", 0.0)
    return out
