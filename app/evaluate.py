"""`vimrag eval`: run an agent over a benchmark and report, or compare finished runs.

vimrag eval --dataset mmlongbench-doc-smoke --protocol vimrag --backend embedded
vimrag eval --dataset jsonl:qs.jsonl --corpus docs/ --backend openai --model Qwen2.5-VL-7B --concurrency 8
vimrag eval compare runs/eval/A runs/eval/B [--out DIR]
vimrag eval rescore runs/eval/A [runs/eval/B ...]      score finished runs again with the current scorer
vimrag eval --dataset mmlongbench-doc-smoke --protocol all --backend embedded    every protocol, one comparison
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
        sub, "eval", RunConfig, cmd_eval, "evaluate the agent on a benchmark (or: eval compare|rescore RUN...)"
    )
    pe.add_argument(
        "compare",
        nargs="*",
        metavar="compare|rescore RUN",
        help="compare finished run folders, or score them again with the current scorer",
    )
    for action in pe._actions:  # eval runs several protocols in one command: `--protocol vimrag,mem1` or `all`
        if "--protocol" in action.option_strings:
            action.choices = None
            action.help = (action.help or "") + "; eval takes several, comma-separated, or all, and compares them"
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
        verb = args.compare[0]
        if verb not in ("compare", "rescore"):
            raise ValueError(
                f"unexpected argument {verb!r}; did you mean `vimrag eval compare RUN...` or "
                "`vimrag eval rescore RUN...`?"
            )
        runs = [Path(p) for p in args.compare[1:]]
        if not runs:
            raise ValueError(f"give the run folders: vimrag eval {verb} RUN [RUN...]")
        if verb == "rescore":
            from eval.runner import rescore_run

            for run in runs:
                r = rescore_run(run)
                print(
                    f"{run}: {r['n']} rows, accuracy {r['before']:.1%} -> {r['after']:.1%}, {len(r['changed'])} changed"
                )
                for c in r["changed"]:
                    print(f"  {c['id']}: {c['before']} -> {c['after']}  pred {c['pred']!r}  gold {c['gold']!r}")
            return 0
        from eval.report import compare

        print(compare(runs, Path(out) if out else None))
        return 0
    from agent.config import args_to_dict
    from eval.runner import RunConfig, run_eval

    protocols = _protocols(getattr(args, "agent.protocol", None))
    if len(protocols) > 1:
        return _eval_several(args, protocols)
    if protocols:
        setattr(args, "agent.protocol", protocols[0])
    cfg = RunConfig.load(args.config, values=args_to_dict(RunConfig, args))
    if not cfg.dataset:
        raise ValueError("give --dataset (e.g. mmlongbench-doc-smoke), or `vimrag eval compare RUN...`")
    cfg = replace(cfg, agent=with_prompt_file(cfg.agent, args))
    run = run_eval(cfg, progress=not args.quiet)
    print((run / "report.md").read_text() if (run / "report.md").exists() else "")
    print(f"run folder: {run}", file=sys.stderr)
    return 0


def _protocols(value: str | None) -> list[str]:
    """The protocols `--protocol` names: one, several comma-separated, or `all`; unknown names are an error."""
    from agent.protocols import names

    if not value:
        return []
    wanted = list(names()) if value.strip() == "all" else [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in names()]
    if unknown:
        raise ValueError(f"unknown protocol(s) {', '.join(unknown)}; choose from {', '.join(names())}, or all")
    return list(dict.fromkeys(wanted))


def _eval_several(args: argparse.Namespace, protocols: list[str]) -> int:
    """One run per protocol over the same dataset, index and backend, then one comparison report of them all:
    accuracy beside turns, tokens and time (`vimrag eval compare`). Each run folder continues when run again."""
    from agent.config import args_to_dict
    from eval.report import compare
    from eval.runner import RunConfig, run_eval

    out = getattr(args, "out", "") or ""
    runs = []
    for proto in protocols:
        setattr(args, "agent.protocol", proto)
        values = args_to_dict(RunConfig, args)
        cfg = RunConfig.load(args.config, values=values)
        if out:
            cfg = replace(cfg, out=str(Path(out) / proto))
        cfg = replace(cfg, agent=with_prompt_file(cfg.agent, args))
        print(f"== {proto}", file=sys.stderr)
        runs.append(run_eval(cfg, progress=not args.quiet))
    # default run folders are DATASET-PROTOCOL-BACKEND; the comparison sits beside them as DATASET-compare-BACKEND
    where = Path(out) / "compare" if out else runs[0].parent / runs[0].name.replace(f"-{protocols[0]}-", "-compare-", 1)
    print(compare(runs, where))
    print(f"comparison: {where / 'compare.md'}", file=sys.stderr)
    return 0
