"""Sync against async rollouts under injected tool latency, on the gym (rl/gym.py) with a tiny CPU model.

    python -m rl.bench_async --model runs/rl_experiment/sft    # from rl.experiment's SFT checkpoint (RESULTS.md)
    python -m rl.bench_async                                   # makes that warm start first (about 20 min)
    python -m rl.bench_async --latency search=fixed:0.5 --seeds 2 --updates 6

Modes, each from the same warm start, seeds and budget:
  - sync: today's trainer, each update samples its groups one after another with the weights it starts from;
  - async0: the rollout threads at max_staleness 0, i.e. each update's trajectories sampled at the same time,
    still with the weights it starts from (how much of the gain is concurrency alone);
  - async1, async2: the threads run one or two updates ahead of the trainer (rl/pipeline.py).
Reported per mode: updates per hour (the ratio to sync in the same run), the reward curve (mean over seeds), the
final reward (mean of the last 3 updates; mean and 95% interval over seeds), the staleness histogram of what was
trained on, the groups dropped and the trainer's idle share. Writes OUT/results.md, results.json and two PNGs.

Without `--model`, rl.experiment's warm start is made first (expert traces on 1,000 training environments, 9 SFT
epochs), so the policy earns reward and the curves mean something; the runs draw their questions from fresh
environments after those.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from agent.config import Config, setting
from rl.experiment import ExperimentConfig, make_gym, warm_start
from rl.experiment_report import interval

MODES = {"sync": ("sync", 0), "async0": ("async", 0), "async1": ("async", 1), "async2": ("async", 2)}


@dataclass
class BenchConfig(Config):
    """Settings of the benchmark; `python -m rl.bench_async --help` lists them."""

    config_name = "bench_async"

    out: str = setting("runs/bench_async", "run folder: the gym, the warm start, results.md/json and the figures")
    model: str = setting("", "a warm-started tiny model to train (default: make one, cached in OUT/sft)")
    modes: list[str] = setting(factory=lambda: list(MODES), help=f"which of {', '.join(MODES)}", nargs="+")
    latency: str = setting("search=heavy:0.2", "the injected tool latency (agent/latency.py SPEC)")
    seeds: int = setting(3, "seeds per mode")
    updates: int = setting(8, "updates per run")
    questions: int = setting(2, "questions per update")
    group: int = setting(4, "trajectories per question")
    workers: int = setting(8, "groups sampled at once in the async modes (each trajectory on a thread of its own)")
    lr: float = setting(1e-5, "learning rate")
    max_steps: int = setting(6, "agent steps per episode")
    sft_envs: int = setting(
        1000, "training environments of the warm start (rl.experiment's; the runs draw from fresh ones after them)"
    )
    sft_epochs: int = setting(9, "SFT epochs of the warm start (without --model; rl.experiment's)")
    rl_envs: int = setting(200, "fresh training environments the runs draw questions from")


def run_mode(cfg: BenchConfig, g, model: str, mode: str, seed: int, out: Path) -> dict:
    from rl.config import TrainConfig
    from rl.gym_agents import agent_config
    from rl.trainer import Trainer

    rollout_mode, staleness = MODES[mode]
    tc = TrainConfig(
        model=model,
        dataset=f"jsonl:{g.root / 'rl.jsonl'}",
        corpus=str(g.root / "corpus"),
        index=str(g.index),
        agent=agent_config(cfg.max_steps, tool_latency=cfg.latency),
        method="grpo",
        group_size=cfg.group,
        questions_per_update=cfg.questions,
        updates=cfg.updates,
        lr=cfg.lr,
        max_new_tokens=24,
        save_every=0,
        output_dir=str(out / f"{mode}_seed{seed}"),
        resume=False,
        seed=seed,
        log_with=[],
        rollout_mode=rollout_mode,
        max_staleness=staleness,
        rollout_workers=cfg.workers,
    )
    tc.validate()
    t0 = time.perf_counter()
    logs = Trainer(tc).train(progress=False)
    wall = time.perf_counter() - t0
    if rollout_mode == "async":
        hist = [sum(lg[f"staleness_{k}"] for lg in logs) for k in range(staleness + 1)]
    else:  # a synchronous update trains on what its own weights sampled
        hist = [len(logs) * cfg.questions]
    return {
        "mode": mode,
        "seed": seed,
        "wall_s": wall,
        "updates_per_hour": 3600 * len(logs) / wall,
        "curve": [lg["reward"] for lg in logs],
        "final": statistics.fmean(lg["reward"] for lg in logs[-3:]),
        "staleness": hist,
        "dropped": logs[-1].get("dropped_total", 0),
        "idle_share": statistics.fmean(lg["idle_share"] for lg in logs),
        "tokens_per_s": statistics.fmean(lg["tokens_per_s"] for lg in logs),
    }


def summarize(cfg: BenchConfig, runs: list[dict], out: Path, total_s: float) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [m for m in cfg.modes if any(r["mode"] == m for r in runs)]
    by = {m: [r for r in runs if r["mode"] == m] for m in modes}
    uph = {m: interval([r["updates_per_hour"] for r in by[m]]) for m in modes}
    base = uph.get("sync", (None,))[0]
    sync_final = interval([r["final"] for r in by["sync"]]) if "sync" in by else None
    lines = [
        f"Injected latency `{cfg.latency}`; {cfg.questions} questions x {cfg.group} trajectories per update, "
        f"{cfg.updates} updates, {cfg.seeds} seeds, {cfg.workers} rollout threads (async modes), GRPO, lr {cfg.lr}.",
        "",
        "| mode | updates per hour | x sync | final reward | within sync's interval | staleness trained on (0, 1, 2) "
        "| dropped | trainer idle share | tokens/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in modes:
        fin = interval([r["final"] for r in by[m]])
        hist = [sum(r["staleness"][k] for r in by[m] if k < len(r["staleness"])) for k in range(3)]
        within = (
            "-" if sync_final is None or m == "sync" else ("yes" if sync_final[1] <= fin[0] <= sync_final[2] else "no")
        )
        ratio = f"{uph[m][0] / base:.2f}" if base else "-"
        lines.append(
            f"| {m} | {uph[m][0]:.0f} [{uph[m][1]:.0f}, {uph[m][2]:.0f}] | {ratio} | "
            f"{fin[0]:.3f} [{fin[1]:.3f}, {fin[2]:.3f}] | {within} | {', '.join(map(str, hist))} | "
            f"{sum(r['dropped'] for r in by[m])} | {statistics.fmean(r['idle_share'] for r in by[m]):.2f} | "
            f"{statistics.fmean(r['tokens_per_s'] for r in by[m]):.1f} |"
        )
    lines += [
        "",
        "Updates per hour and final reward (mean of the last 3 updates' training reward): mean and 95% t-interval "
        "over seeds. Staleness: groups trained on, by how many updates old their weights were, summed over seeds. "
        f"Total {total_s / 60:.1f} min.",
    ]
    md = "\n".join(lines)
    (out / "results.md").write_text(md + "\n")
    (out / "results.json").write_text(json.dumps({"config": cfg.to_dict(), "runs": runs}, indent=1))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for m in modes:
        mean = [statistics.fmean(v) for v in zip(*(r["curve"] for r in by[m]))]
        ax1.plot(range(1, len(mean) + 1), mean, lw=2, label=m)
    ax1.set_xlabel("update")
    ax1.set_ylabel(f"training reward (mean of {cfg.seeds} seeds)")
    ax1.grid(alpha=0.3)
    ax1.legend()
    errs = [[uph[m][0] - uph[m][1] for m in modes], [uph[m][2] - uph[m][0] for m in modes]]
    ax2.bar(range(len(modes)), [uph[m][0] for m in modes], yerr=errs, capsize=4, color="#4c72b0")
    ax2.set_xticks(range(len(modes)), modes)
    ax2.set_ylabel("updates per hour (95% interval)")
    fig.suptitle(f"sync vs async rollouts, injected latency {cfg.latency}")
    fig.tight_layout()
    fig.savefig(out / "async_vs_sync.png", dpi=130)
    print("\n" + md)
    print(f"figure: {out / 'async_vs_sync.png'}")
    return md


def run(cfg: BenchConfig) -> str:
    from retrieval.retriever import Retriever

    unknown = [m for m in cfg.modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ex = ExperimentConfig(  # the vrag gym, the setting rl/RESULTS.md's async figures were measured in
        protocol="vrag",
        out=str(out),
        sft_envs=cfg.sft_envs,
        rl_envs=cfg.rl_envs,
        test_envs=1,
        sft_epochs=cfg.sft_epochs,
        reuse_sft=True,
    )
    g = make_gym(ex, out / "gym")
    model = cfg.model or str(warm_start(ex, g, out, Retriever(g.index)))
    runs = []
    for seed in range(cfg.seeds):
        k = seed % len(cfg.modes)  # each seed starts with another mode: no mode always runs on a cold or warm machine
        for mode in cfg.modes[k:] + cfg.modes[:k]:
            r = run_mode(cfg, g, model, mode, seed, out)
            runs.append(r)
            print(
                f"{mode} seed {seed}: {r['updates_per_hour']:.0f} updates/h, final reward {r['final']:.2f}, "
                f"staleness {r['staleness']}, idle {r['idle_share']:.2f} ({r['wall_s']:.0f} s)",
                flush=True,
            )
    return summarize(cfg, runs, out, time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    from agent.config import script_main

    return script_main(BenchConfig, run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
