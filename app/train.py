"""`vimrag train`: GGPO / GRPO / GSPO fine-tuning from a YAML config (also under `accelerate launch`).

    vimrag train --config rl/configs/tiny_cpu.yaml [key=value ...]
    accelerate launch --config_file rl/configs/accelerate/ddp.yaml -m app.cli train --config CFG.yaml
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> None:
    pt = sub.add_parser("train", help="RL fine-tuning (GGPO, GRPO, GSPO) of a policy through the agent loop",
                        description="Train a policy with GGPO (or GRPO / GSPO) on rollouts through the real agent "
                                    "loop. Settings come from --config YAML; key=value arguments override them. "
                                    "Resumes from the newest checkpoint in output_dir.")
    pt.add_argument("--config", required=True, help="YAML training config (see rl/configs/)")
    pt.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. lr=5e-7 group_size=8 method=grpo")
    pt.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    pt.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from rl.trainer import TrainConfig, Trainer

    cfg = TrainConfig.load(args.config, args.overrides)
    trainer = Trainer(cfg)
    if trainer.acc.is_main_process:
        print("resolved config:", json.dumps(cfg.to_dict()))
    logs = trainer.train(progress=not args.quiet)
    if trainer.acc.is_main_process and logs:
        last = logs[-1]
        print(f"done: {trainer.update} updates, last reward {last['reward']:.3f}, loss {last['loss']:.4f}, "
              f"{last['tokens_per_s']:.1f} tokens/s; metrics in {cfg.output_dir}/metrics.jsonl")
    return 0
