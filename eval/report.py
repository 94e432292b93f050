"""Reports for benchmark runs: metrics, a markdown report and PNG plots from a run folder, and run comparisons.

A run folder holds `predictions.jsonl` (one scored row per question, written by eval/runner.py) and
`config.json`. This module only reads those rows: scoring happened when they were written, so a report can be
rebuilt at any time, even from a run that crashed halfway. It reads the run folders and writes the files; the
figures come from eval/run_metrics.py, the markdown from eval/report_markdown.py and the plots from
eval/plots.py. It leaves out re-scoring and significance tests.

    python -m eval.report RUN                               # RUN/metrics.json, RUN/report.md, RUN/plots/*.png
    python -m eval.report RUN_A RUN_B --compare-out DIR     # prints one table; DIR/compare.md and two plots
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections import Counter
from pathlib import Path

from eval.plots import (
    plot_accuracy_bars,
    plot_cost_bars,
    plot_risk_coverage,
    plot_steps_hist,
    plot_tokens_per_step,
    plot_tokens_vs_accuracy,
)
from eval.report_markdown import PLOTS, RISK_PLOT, md_table, num, pct, render_markdown
from eval.run_metrics import compute_metrics

# ----------------------------------------------------------------------------------------------- reading


def load_rows(run: Path) -> list[dict]:
    """The prediction rows of a run. Blank lines are skipped; a truncated last line (a crash mid-write) is
    dropped with a warning, since the runner re-runs that question on resume; a bad line elsewhere is an error."""
    path = Path(run) / "predictions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no predictions file; make it with `vimrag eval --dataset ... --out {Path(run)}`"
        )
    lines = [(i, ln) for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
    rows = []
    for k, (lineno, line) in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if k == len(lines) - 1:
                warnings.warn(f"{path}:{lineno}: ignoring a truncated last line (a crashed run?): {e}", stacklevel=2)
                break
            raise ValueError(f"{path}:{lineno}: not valid JSON ({e}); fix or delete that line") from e
    return rows


def load_config(run: Path) -> dict:
    """RUN/config.json, or {} when absent (the rows still name their dataset, protocol and backend)."""
    path = Path(run) / "config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# ----------------------------------------------------------------------------------------------- one run


def write_report(run: Path) -> dict:
    """Write RUN/metrics.json, RUN/report.md and RUN/plots/*.png; returns the metrics."""
    run = Path(run)
    rows, config = load_rows(run), load_config(run)
    m = compute_metrics(rows, config)
    (run / "metrics.json").write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")
    (run / "report.md").write_text(render_markdown(m, config, run.name), encoding="utf-8")
    tag = f"{m['dataset']} · {m['protocol']}"
    plots = run / "plots"
    plot_accuracy_bars(m["by_format"], f"Accuracy by answer format\n{tag}", plots / PLOTS[0])
    plot_accuracy_bars(m["by_source"], f"Accuracy by evidence source\n{tag}", plots / PLOTS[1])
    plot_steps_hist(rows, f"Steps per question\n{tag}", plots / PLOTS[2])
    plot_tokens_per_step(
        m["cost"]["visual_tokens_by_step"], f"Visual tokens in context by step\n{tag}", plots / PLOTS[3]
    )
    if m.get("risk_coverage"):
        plot_risk_coverage(m["risk_coverage"], f"Precision against coverage\n{tag}", plots / RISK_PLOT)
    return m


# ----------------------------------------------------------------------------------------------- comparison


def _run_names(runs: list[Path]) -> list[str]:
    names = [r.name for r in runs]
    dup = {n for n, k in Counter(names).items() if k > 1}
    return [f"{r.parent.name}/{r.name}" if r.name in dup else r.name for r in runs]


def compare(runs: list[Path], out: Path | None = None) -> str:
    """One markdown table with a row per run; with `out`, also out/compare.md, out/tokens_vs_accuracy.png and
    out/cost_by_protocol.png."""
    runs = [Path(r) for r in runs]
    names = _run_names(runs)
    ms = [compute_metrics(load_rows(r), load_config(r)) for r in runs]
    any_mmlb = any(m["mmlb"] for m in ms)
    head = ["run", "dataset", "protocol", "backend", "n", "accuracy"] + (["F1"] if any_mmlb else [])
    head += ["page R@5", "memorized hit", "peak context", "tokens / q", "vis. tokens / q", "mean steps", "s / q"]
    table = []
    for name, m in zip(names, ms):
        c = m["cost"]
        row = [name, m["dataset"], m["protocol"], m["backend"], str(m["n"]), pct(m["accuracy"])]
        row += [pct(m["mmlb"]["f1"]) if m["mmlb"] else "–"] if any_mmlb else []
        row += [
            pct(m["retrieval"]["recall@5"]["mean"]),
            pct(m["retrieval"]["memorized_hit"]["mean"]),
            num(c.get("peak_context_tokens", {}).get("mean")),
            num(c.get("total_tokens", {}).get("mean")),
            num(c["total_visual_tokens"]["mean"]),
            num(c["steps"]["mean"], 2),
            num(c["wall_s"]["mean"], 1),
        ]
        table.append(row)
    md = md_table(head, table)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        note = (
            "peak context: mean over questions of the largest context (text and visual tokens) of one call; "
            "tokens / q: mean input (text and visual, every call) and output tokens per question; vis. tokens / q: "
            "the visual part. Text and output tokens are estimated at 4 characters a token."
        )
        (out / "compare.md").write_text(
            f"# Run comparison\n\n{md}\n\n{note}\n\n![tokens vs accuracy]"
            "(tokens_vs_accuracy.png)\n\n![cost](cost_by_protocol.png)\n",
            encoding="utf-8",
        )
        plot_tokens_vs_accuracy(names, ms, out / "tokens_vs_accuracy.png")
        plot_cost_bars(names, ms, out / "cost_by_protocol.png")
    return md


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m eval.report", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each with predictions.jsonl)")
    p.add_argument("--compare-out", type=Path, default=None, help="folder for compare.md and the comparison plots")
    a = p.parse_args(argv)
    if len(a.runs) == 1 and a.compare_out is None:
        m = write_report(a.runs[0])
        extra = f", F1 {pct(m['mmlb']['f1'])}" if m["mmlb"] else ""
        print(
            f"{a.runs[0]}: {m['n']} questions, accuracy {pct(m['accuracy'])}{extra}; "
            f"wrote metrics.json, report.md, plots/"
        )
    else:
        print(compare(a.runs, a.compare_out))


if __name__ == "__main__":
    main()
