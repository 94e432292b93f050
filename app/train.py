"""`vimrag train`: GGPO / GRPO / GSPO fine-tuning from a YAML config (also under `accelerate launch`).

vimrag train --config rl/configs/tiny_cpu.yaml [key=value ...] [--flag value ...]
accelerate launch --config_file rl/configs/accelerate/ddp.yaml -m app.cli train --config CFG.yaml
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> None:
    from agent.config import add_command
    from rl.config import TrainConfig

    summary = "RL fine-tuning (GGPO, GRPO, GSPO) of a policy through the agent loop"
    pt, _ = add_command(sub, "train", TrainConfig, cmd_train, summary)
    pt.add_argument("--config", help="YAML training config (see rl/configs/)")
    pt.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. lr=5e-7 group_size=8 agent.max_steps=4")


def cmd_train(args: argparse.Namespace) -> int:
    """Train a policy with GGPO (or GRPO / GSPO) on rollouts through the real agent loop. Settings come from
    --config YAML; key=value arguments (agent.top_k=2 for the agent's) and the flags below override them, in that
    order. Resumes from the newest checkpoint in output_dir."""
    from agent.config import args_to_dict
    from rl.config import TrainConfig
    from rl.trainer import Trainer

    cfg = TrainConfig.load(args.config, args.overrides, args_to_dict(TrainConfig, args))
    trainer = Trainer(cfg)
    if trainer.acc.is_main_process:
        print("resolved config:", json.dumps(cfg.to_dict()))
    logs = trainer.train(progress=not args.quiet)
    if trainer.acc.is_main_process and logs:
        last = logs[-1]
        print(
            f"done: {trainer.update} updates, last reward {last['reward']:.3f}, loss {last['loss']:.4f}, "
            f"{last['tokens_per_s']:.1f} tokens/s; metrics and the resolved config.json in {cfg.output_dir}"
        )
    return 0


def add_sft_parser(sub) -> None:
    from agent.config import add_command
    from rl.config import SFTConfig

    add_command(sub, "sft", SFTConfig, cmd_sft, "SFT cold start on saved agent traces (loss on action tokens only)")


def cmd_sft(args: argparse.Namespace) -> int:
    """Fine-tune a policy on the steps of saved traces. Each parsed step is one example: the context the model
    saw as prompt, its reply as target."""
    from agent.config import from_args
    from rl.config import SFTConfig
    from rl.sft import train_sft

    res = train_sft(from_args(SFTConfig, args), progress=not args.quiet)
    print(
        f"trained on {res['examples']} steps; loss by epoch "
        + ", ".join(f"{h['loss']:.3f}" for h in res["history"])
        + f"; saved to {res['output_dir']}"
    )
    return 0
