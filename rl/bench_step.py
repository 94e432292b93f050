"""Where a training step's time goes: rollout (sampling through the agent loop) against update
(forward + backward over the step segments), measured on CPU with a tiny random Qwen2.5-VL.

    python -m rl.bench_step                     # 4 updates, group 4, 2 questions per update
    python -m rl.bench_step --updates 2 --max-new-tokens 32

Prints each update's split and the overall shares; the update time is the baseline the rollout time is
compared with in the same run (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--questions", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="keeps the model and index between runs")
    a = ap.parse_args(argv)

    from agent.settings import AgentConfig
    from rl.tiny import build_tiny_qwen2_5_vl
    from rl.trainer import TrainConfig, Trainer

    work = Path(a.workdir or tempfile.mkdtemp(prefix="vimrag_bench_step_"))
    model = work / "tiny_vl"
    if not (model / "config.json").exists():
        build_tiny_qwen2_5_vl(model)
    cfg = TrainConfig(
        model=str(model),
        dataset="demo",
        index=str(work / "index"),
        group_size=a.group,
        questions_per_update=a.questions,
        updates=a.updates + 1,
        lr=1e-4,
        max_new_tokens=a.max_new_tokens,
        agent=AgentConfig(max_steps=a.max_steps),
        save_every=0,
        output_dir=str(work / "run"),
        resume=False,
        log_with=[],
    )
    logs = Trainer(cfg).train(progress=True)[1:]  # the first update also builds the index: left out
    print(f"{'update':>6} {'rollout s':>10} {'update s':>9} {'rollout share':>14} {'segments':>9} {'tokens/s':>9}")
    for lg in logs:
        tot = lg["rollout_s"] + lg["update_s"]
        print(
            f"{lg['update']:>6} {lg['rollout_s']:>10.2f} {lg['update_s']:>9.2f} {lg['rollout_s'] / tot:>14.0%} "
            f"{lg['segments']:>9} {lg['tokens_per_s']:>9.1f}"
        )
    roll = sum(lg["rollout_s"] for lg in logs)
    upd = sum(lg["update_s"] for lg in logs)
    median_ratio = statistics.median(lg["rollout_s"] / max(1e-9, lg["update_s"]) for lg in logs)
    print(
        f"\nrollout {roll / (roll + upd):.0%} of step time, update {upd / (roll + upd):.0%}; rollout / update = "
        f"{roll / max(1e-9, upd):.2f}x (median per update {median_ratio:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
