"""`vimrag eval`: run an agent over a benchmark and report, or compare finished runs.

vimrag eval --dataset mmlongbench-doc-smoke --protocol vimrag --backend embedded
vimrag eval --dataset jsonl:qs.jsonl --corpus docs/ --backend openai --model Qwen2.5-VL-7B --concurrency 8
vimrag eval compare runs/eval/A runs/eval/B [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.ask import add_agent_options, add_model_options, add_search_url, agent_overrides, model_overrides


def add_parser(sub) -> None:
    pe = sub.add_parser(
        "eval",
        help="evaluate the agent on a benchmark (or: eval compare RUN...)",
        description="Run an agent over a dataset, score answers and retrieval, measure cost, and "
        "write predictions, traces, metrics, a report and plots to a run folder. "
        "A stopped run continues where it stopped. `vimrag eval compare RUN...` "
        "puts finished runs side by side.",
    )
    pe.add_argument("compare", nargs="*", metavar="compare RUN", help="compare finished run folders")
    pe.add_argument(
        "--dataset", help="mmlongbench-doc | mmlongbench-doc-smoke | demo | jsonl:PATH | vidoseek:PATH | slidevqa:PATH"
    )
    pe.add_argument("--corpus", help="documents for jsonl:/vidoseek:/slidevqa: datasets")
    pe.add_argument("--index", help="index folder (default: the dataset's own, built on first use)")
    add_search_url(pe)
    pe.add_argument(
        "--scope",
        default="auto",
        choices=["auto", "doc", "corpus"],
        help="doc: search only the question's document (MMLongBench-Doc's setting); corpus: all",
    )
    g = pe.add_argument_group("policy backend")
    g.add_argument("--backend", default="embedded", choices=["embedded", "openai", "transformers"])
    g.add_argument("--model", default="")
    g.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    g.add_argument("--api-key", default="")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--max-new-tokens", type=int, default=1024)
    add_model_options(g)
    a = pe.add_argument_group("agent")
    add_agent_options(a)
    r = pe.add_argument_group("run")
    r.add_argument("--out", help="run folder (default runs/eval/DATASET-PROTOCOL-BACKEND)")
    r.add_argument("--limit", type=int, default=0, help="only the first N questions")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--concurrency", type=int, default=1, help="questions in flight (endpoint backends)")
    r.add_argument(
        "--page-base",
        type=int,
        default=1,
        choices=[0, 1],
        help="whether the dataset's pages count from 1 or 0 (vidoseek/slidevqa/jsonl)",
    )
    r.add_argument(
        "--allow-missing-evidence",
        action="store_true",
        help="run even when gold evidence names files or pages the corpus lacks (jsonl)",
    )
    j = pe.add_argument_group("LLM judge (optional)")
    j.add_argument("--judge-url", help="OpenAI-compatible endpoint of the judge model")
    j.add_argument("--judge-model", default="")
    j.add_argument("--judge-key", default="")
    j.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    pe.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.compare:
        if args.compare[0] != "compare":
            raise ValueError(f"unexpected argument {args.compare[0]!r}; did you mean `vimrag eval compare RUN...`?")
        runs = [Path(p) for p in args.compare[1:]]
        if not runs:
            raise ValueError("give the run folders to compare: vimrag eval compare RUN [RUN...]")
        from eval.report import compare

        print(compare(runs, Path(args.out) if args.out else None))
        return 0
    if not args.dataset:
        raise ValueError("give --dataset (e.g. mmlongbench-doc-smoke), or `vimrag eval compare RUN...`")
    from eval.runner import RunConfig, run_eval

    policy = {
        "backend": args.backend,
        "model": args.model,
        "base_url": args.base_url,
        "api_key": args.api_key,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        **model_overrides(args),
    }
    agent = agent_overrides(args)
    judge = (
        {"base_url": args.judge_url, "model": args.judge_model, "api_key": args.judge_key} if args.judge_url else None
    )
    cfg = RunConfig(
        dataset=args.dataset,
        protocol=args.protocol,
        policy=policy,
        agent=agent,
        corpus=args.corpus,
        index=args.index,
        scope=args.scope,
        limit=args.limit,
        seed=args.seed,
        concurrency=args.concurrency,
        out=args.out or "",
        judge=judge,
        page_base=args.page_base,
        allow_missing_evidence=args.allow_missing_evidence,
        search_url=args.search_url,
    )
    run = run_eval(cfg, progress=not args.quiet)
    print((run / "report.md").read_text() if (run / "report.md").exists() else "")
    print(f"run folder: {run}", file=sys.stderr)
    return 0
