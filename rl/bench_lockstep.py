"""Lockstep rollouts against one-at-a-time ones, back to back on this machine: RL updates and held-out evaluation
of rl.experiment's gym, from a warm start it made.

    python -m rl.experiment --seeds 0 --out runs/warm                # a warm start (gym, index and SFT), once
    python -m rl.bench_lockstep --run runs/warm                      # 2 updates of 4 questions x 8, twice each way
    python -m rl.bench_lockstep --run runs/warm --repeats 3 --eval-envs 10

The time per update includes the trainer's start-up (loading the model and opening the index), the same both
ways, so the ratio is a lower bound for the updates alone. Each measurement alternates the two ways, so that load
from elsewhere on the machine falls on both; the ratio of the medians is the figure. A warm start that has learned
something is the fair model to time: a random one writes every reply to the token limit and never answers, so
every episode runs to the step limit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="an rl.experiment folder holding gym/ and sft/")
    ap.add_argument("--updates", type=int, default=2, help="RL updates per measurement")
    ap.add_argument("--questions", type=int, default=4, help="questions per update")
    ap.add_argument("--group", type=int, default=8, help="trajectories per question")
    ap.add_argument("--eval-envs", type=int, default=5, help="held-out 2-hop environments (3 questions each) to time")
    ap.add_argument("--repeats", type=int, default=2, help="measurements each way")
    a = ap.parse_args(argv)
    run = Path(a.run)
    if not (run / "sft" / "sft_config.json").is_file() or not (run / "gym" / "index").is_dir():
        ap.error(
            f"{run} has no warm start (sft/ and gym/index): make one with `python -m rl.experiment --seeds 0 "
            f"--out {run}`"
        )

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from retrieval.retriever import Retriever
    from rl.experiment import ExperimentConfig, Gym, evaluate, make_gym, train_one

    if not (run / "config.json").is_file():
        ap.error(f"{run} has no config.json: give the folder of an rl.experiment run")
    # a run made before the protocol setting existed ran the vrag gym
    setup = ExperimentConfig.from_dict({"protocol": "vrag", **json.loads((run / "config.json").read_text())})
    g: Gym = make_gym(setup, run / "gym")  # the run's own environments and settings: its index is up to date
    retriever = Retriever(g.index)
    model = AutoModelForCausalLM.from_pretrained(run / "sft").eval()
    tok = AutoTokenizer.from_pretrained(run / "sft")
    held = g.held[2][: a.eval_envs]
    times: dict[str, dict[bool, list[float]]] = {"update": {False: [], True: []}, "eval": {False: [], True: []}}
    print(
        f"bench_lockstep: {torch.get_num_threads()} torch threads, {a.updates} updates of {a.questions} x "
        f"{a.group}, {3 * len(held)} held-out episodes, {a.repeats} measurements each way"
    )
    with tempfile.TemporaryDirectory(prefix="vimrag_bench_lockstep_") as tmp:
        for k in range(a.repeats):
            for lock in (False, True) if k % 2 == 0 else (True, False):
                args = ExperimentConfig(
                    **{
                        **setup.to_dict(),
                        "updates": a.updates,
                        "questions": a.questions,
                        "group": a.group,
                        "lockstep": lock,
                    }
                )
                t0 = time.perf_counter()
                logs, _ = train_one(args, g, run / "sft", Path(tmp), "grpo", 0)
                per_update = (time.perf_counter() - t0) / a.updates
                t0 = time.perf_counter()
                acc = evaluate(model, tok, retriever, held, args)["accuracy"]
                per_episode = (time.perf_counter() - t0) / max(1, 3 * len(held))
                times["update"][lock].append(per_update)
                times["eval"][lock].append(per_episode)
                print(
                    f"  {'lockstep  ' if lock else 'one by one'}: {per_update:6.1f} s per update (reward "
                    f"{statistics.fmean(lg['reward'] for lg in logs):.2f}), {per_episode:5.2f} s per held-out "
                    f"episode (accuracy {acc:.3f})",
                    flush=True,
                )
    for what, unit in (("update", "s per update"), ("eval", "s per held-out episode")):
        seq, lock = statistics.median(times[what][False]), statistics.median(times[what][True])
        print(f"{what}: one by one {seq:.2f} {unit}, lockstep {lock:.2f}: {seq / lock:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
