"""`vimrag eval`: run an agent over a benchmark and report, or compare finished runs.

vimrag eval --dataset mmlongbench-doc-smoke --protocol vimrag --backend embedded
vimrag eval --dataset jsonl:qs.jsonl --corpus docs/ --backend openai --model Qwen2.5-VL-7B --concurrency 8
vimrag eval compare runs/eval/A runs/eval/B [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from app.ask import add_prompt_file, with_prompt_file


def add_parser(sub) -> None:
    from agent.config import add_command
    from eval.runner import RunConfig

    pe, groups = add_command(
        sub, "eval", RunConfig, cmd_eval, "evaluate the agent on a benchmark (or: eval compare RUN...)"
    )
    pe.add_argument("compare", nargs="*", metavar="compare RUN", help="compare finished run folders")
    pe.add_argument(
        "--config",
        help="settings from a YAML file (RunConfig's fields; policy: and agent: nested); flags override them",
    )
    add_prompt_file(groups["agent"])


def cmd_eval(args: argparse.Namespace) -> int:
    """Run an agent over a dataset, score answers and retrieval, measure cost, and write predictions, traces,
    metrics, a report, plots and the resolved config.json to a run folder. A stopped run continues where it
    stopped. `vimrag eval compare RUN...` puts finished runs side by side."""
    out = getattr(args, "out", "")
    if args.compare:
        if args.compare[0] != "compare":
            raise ValueError(f"unexpected argument {args.compare[0]!r}; did you mean `vimrag eval compare RUN...`?")
        runs = [Path(p) for p in args.compare[1:]]
        if not runs:
            raise ValueError("give the run folders to compare: vimrag eval compare RUN [RUN...]")
        from eval.report import compare

        print(compare(runs, Path(out) if out else None))
        return 0
    from agent.config import args_to_dict
    from eval.runner import RunConfig, run_eval

    cfg = RunConfig.load(args.config, values=args_to_dict(RunConfig, args))
    if not cfg.dataset:
        raise ValueError("give --dataset (e.g. mmlongbench-doc-smoke), or `vimrag eval compare RUN...`")
    cfg = replace(cfg, agent=with_prompt_file(cfg.agent, args))
    run = run_eval(cfg, progress=not args.quiet)
    print((run / "report.md").read_text() if (run / "report.md").exists() else "")
    print(f"run folder: {run}", file=sys.stderr)
    return 0
