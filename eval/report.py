"""Reports for benchmark runs: metrics, a markdown report and PNG plots from a run folder, and run comparisons.

A run folder holds `predictions.jsonl` (one scored row per question, written by eval/runner.py) and
`config.json`. This module only reads those rows: scoring happened when they were written, so a report can be
rebuilt at any time, even from a run that crashed halfway. It leaves out re-scoring and significance tests.

    python -m eval.report RUN                               # RUN/metrics.json, RUN/report.md, RUN/plots/*.png
    python -m eval.report RUN_A RUN_B --compare-out DIR     # prints one table; DIR/compare.md and two plots
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

NOT_ANSWERABLE = "Not answerable"
STATUSES = ("answered", "limit", "error")
RETRIEVAL_KEYS = ("recall@1", "recall@5", "ndcg@5", "mrr", "memorized_hit", "retrieved_hit", "pointed_hit")
COST_SPREAD = (  # mean/median/p90
    "steps",
    "model_calls",
    "peak_visual_tokens",
    "total_visual_tokens",
    "input_text_tokens",
    "output_tokens",
    "total_tokens",
    "peak_context_tokens",
    "wall_s",
)
# the time split, means only: generating, searching, the agent's own work, and waiting on tools (search and crop)
COST_MEAN = ("model_s", "retrieval_s", "agent_s", "tool_s")
COST_LABEL = {"model_s": "generating", "retrieval_s": "retrieval", "agent_s": "agent", "tool_s": "waiting on tools"}
PLOTS = ("accuracy_by_format.png", "accuracy_by_source.png", "steps_hist.png", "visual_tokens_per_step.png")
RISK_PLOT = "risk_coverage.png"  # only for runs whose reader weighs its answers


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


# ----------------------------------------------------------------------------------------------- metrics


def mmlb_f1(rows: list[dict]) -> dict:
    """MMLongBench-Doc's generalized F1, which rewards saying "Not answerable" only when it is true.

    Recall averages the scores over answerable questions, precision spreads the same sum over the questions
    the model did not decline (mayubo2333/MMLongBench-Doc, eval/eval_score.py: eval_acc_and_f1).

    >>> rows = [{"gold": ["3"], "extracted": "3", "score": 1.0}, {"gold": ["x"], "extracted": "Not answerable",
    ...         "score": 0.0}, {"gold": ["Not answerable"], "extracted": "y", "score": 0.0}]
    >>> mmlb_f1(rows)  # recall 1/2, precision 1/2
    {'precision': 0.5, 'recall': 0.5, 'f1': 0.5}
    """
    hit = sum(float(r["score"]) for r in rows if r["gold"][:1] != [NOT_ANSWERABLE])
    n_answerable = sum(r["gold"][:1] != [NOT_ANSWERABLE] for r in rows)
    n_attempted = sum(r.get("extracted") != NOT_ANSWERABLE for r in rows)
    recall = hit / n_answerable if n_answerable else 0.0
    precision = hit / n_attempted if n_attempted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _mean(values: Iterable[float]) -> float | None:
    v = list(values)
    return float(np.mean(v)) if v else None


def _groups(rows: list[dict], keys: Callable[[dict], Iterable[str]]) -> dict[str, dict]:
    """{key: {"n", "accuracy"}}, a row counting under each of its keys; rows with no key are left out."""
    scores: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for key in dict.fromkeys(keys(r)):  # a source listed twice counts once
            scores[key].append(float(r["score"]))
    return {k: {"n": len(v), "accuracy": _mean(v)} for k, v in sorted(scores.items())}


def _page_group(row: dict) -> str:
    # MMLongBench-Doc's split (eval/eval_score.py show_results): unanswerable by the gold answer, single-page by
    # exactly one evidence page, cross-page otherwise.
    if row["gold"][:1] == [NOT_ANSWERABLE]:
        return "unanswerable"
    pages = {tuple(p) for p in row.get("gold_pages") or []}
    return "single-page" if len(pages) == 1 else "cross-page"


def _spread(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "median": None, "p90": None}
    a = np.asarray(values, dtype=float)  # (n,)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "p90": float(np.percentile(a, 90))}


def tokens_by_step(rows: list[dict]) -> dict:
    """Mean visual tokens in context at step t over the episodes that reached step t, and how many did."""
    curves = [r["cost"].get("visual_tokens_per_step") or [] for r in rows if r.get("cost")]
    longest = max((len(c) for c in curves), default=0)
    mean, running = [], []
    for t in range(longest):
        at_t = [c[t] for c in curves if len(c) > t]
        mean.append(float(np.mean(at_t)))
        running.append(len(at_t))
    return {"mean": mean, "episodes": running}


def risk_coverage(rows: list[dict], default: float | None = None) -> dict | None:
    """Answered precision against coverage as the reader's confidence threshold moves, from rows that record the
    answer their reader would give at threshold 0 (`candidate`, `candidate_score`, `confidence`); None when no
    row does. `default` is the threshold the run used, marked on the plot.

    >>> rows = [{"confidence": c, "candidate": "x", "candidate_score": s} for c, s in [(0.9, 1), (0.6, 0), (0.2, 0)]]
    >>> rc = risk_coverage(rows + [{"confidence": None}], default=0.5)
    >>> rc["coverage"][:3], [round(p, 2) for p in rc["precision"][:3]]
    ([0.25, 0.5, 0.75], [1.0, 0.5, 0.33])
    >>> {k: rc["at_default"][k] for k in ("answered", "right", "precision")}
    {'answered': 2, 'right': 1, 'precision': 0.5}
    """

    def given(r: dict) -> bool:  # an answer the reader gives at some threshold
        if not r.get("candidate") or r["candidate"] == "Not answerable" or r.get("confidence") is None:
            return False
        # withheld though confident enough: for a reason no threshold changes (its passage never names the subject)
        return not (default is not None and r.get("pred") == "Not answerable" and float(r["confidence"]) >= default)

    scored = [r for r in rows if given(r)]
    if not scored:
        return None
    n = len(rows)
    order = sorted(scored, key=lambda r: -float(r["confidence"]))
    cov, prec, th, right = [], [], [], 0
    for i, r in enumerate(order, 1):
        right += float(r.get("candidate_score") or 0) >= 1.0
        cov.append(i / n)
        prec.append(right / i)
        th.append(float(r["confidence"]))
    out = {"coverage": cov, "precision": prec, "threshold": th, "at_default": None}
    if default is not None:
        kept = [r for r in order if float(r["confidence"]) >= default]
        ok = sum(float(r.get("candidate_score") or 0) >= 1.0 for r in kept)
        out["at_default"] = {
            "threshold": default,
            "answered": len(kept),
            "right": ok,
            "coverage": len(kept) / n,
            "precision": ok / len(kept) if kept else None,
        }
    return out


def compute_metrics(rows: list[dict], config: dict) -> dict:
    """Every figure of a run as a JSON-ready dict; accuracies are fractions in [0, 1], None when undefined."""
    first = rows[0] if rows else {}
    meta = {k: config.get(k) or first.get(k, "") for k in ("dataset", "protocol", "backend")}
    is_mmlb = any(r.get("answer_format") for r in rows)
    status = Counter(r.get("status", "answered") for r in rows)

    retrieval = {}
    for key in RETRIEVAL_KEYS:
        vals = [float(r["retrieval"][key]) for r in rows if (r.get("retrieval") or {}).get(key) is not None]
        retrieval[key] = {"mean": _mean(vals), "n": len(vals)}

    costs = [r.get("cost") or {} for r in rows]
    cost: dict = {k: _spread([float(c[k]) for c in costs if c.get(k) is not None]) for k in COST_SPREAD}
    cost.update({k: {"mean": _mean(float(c[k]) for c in costs if c.get(k) is not None)} for k in COST_MEAN})
    cost["visual_tokens_by_step"] = tokens_by_step(rows)

    judged = [float(r["scores"]["judge"]) for r in rows if (r.get("scores") or {}).get("judge") is not None]
    return {
        **meta,
        "n": len(rows),
        # the three schema statuses always, plus any other a newer runner writes, rather than dropping it
        "status": {s: status.get(s, 0) for s in STATUSES} | {s: k for s, k in status.items() if s not in STATUSES},
        "accuracy": _mean(float(r["score"]) for r in rows),
        "mmlb": mmlb_f1(rows) if is_mmlb else None,
        "by_format": _groups(rows, lambda r: [r["answer_format"]] if r.get("answer_format") else []),
        "by_source": _groups(rows, lambda r: r.get("evidence_sources") or []),
        "by_doc_type": _groups(rows, lambda r: [r["doc_type"]] if r.get("doc_type") else []),
        "by_question_type": _groups(rows, lambda r: [r["question_type"]] if r.get("question_type") else []),
        "by_page_group": _groups(rows, lambda r: [_page_group(r)]) if is_mmlb else {},
        "retrieval": retrieval,
        "cost": cost,
        "judge": {"mean": _mean(judged), "n_judged": len(judged)} if judged else None,
        "scored_by": dict(Counter(r["scored_by"] for r in rows if r.get("scored_by"))),
        "risk_coverage": risk_coverage(rows, (config.get("policy") or {}).get("min_confidence")),
    }


# ----------------------------------------------------------------------------------------------- formatting


def _pct(x: float | None) -> str:
    """A fraction as a percentage, or a dash when undefined.

    >>> _pct(0.4567), _pct(None)
    ('45.7%', '–')
    """
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 0) -> str:
    """A number with thousands separators, or a dash when undefined.

    >>> _num(12345.6), _num(2.346, 2)
    ('12,346', '2.35')
    """
    return "–" if x is None else f"{x:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _group_table(name: str, groups: dict) -> str:
    return _table([name, "n", "accuracy"], [[k, str(g["n"]), _pct(g["accuracy"])] for k, g in groups.items()])


def render_markdown(m: dict, config: dict, run_name: str = "") -> str:
    """report.md from the metrics of one run."""
    title = f"# {m['dataset'] or 'dataset?'} · {m['protocol'] or 'protocol?'} · {m['backend'] or 'backend?'}"
    facts = [f"run `{run_name}`"] if run_name else []
    facts += [f"{k} {config[k]}" for k in ("started", "seed", "limit", "vimrag_version") if config.get(k) is not None]
    out = [title, "", ", ".join(facts), ""]

    head = ["questions", "answered", "limit", "error", "accuracy"]
    vals = [str(m["n"])] + [str(m["status"][s]) for s in STATUSES] + [_pct(m["accuracy"])]
    if m["mmlb"]:
        head += ["F1", "precision", "recall"]
        vals += [_pct(m["mmlb"][k]) for k in ("f1", "precision", "recall")]
    if m["judge"]:
        head += ["judge", "judged"]
        vals += [_pct(m["judge"]["mean"]), str(m["judge"]["n_judged"])]
    c = m["cost"]
    head += ["page R@5", "mean steps", "peak vis. tokens", "vis. tokens / q", "s / q"]
    vals += [
        _pct(m["retrieval"]["recall@5"]["mean"]),
        _num(c["steps"]["mean"], 2),
        _num(c["peak_visual_tokens"]["mean"]),
        _num(c["total_visual_tokens"]["mean"]),
        _num(c["wall_s"]["mean"], 1),
    ]
    out += [_table(head, [vals]), ""]
    overlap = (m.get("scored_by") or {}).get("overlap", 0)
    if overlap:
        out += [
            f"{overlap} of {m['n']} rows have sentence golds and were scored by token overlap (token F1 >= 0.5), "
            "not by a judge: pass --judge-url and --judge-model to have a judge score them.",
            "",
        ]

    sections = [
        ("By answer format", "by_format", "format", ""),
        ("By evidence source", "by_source", "source", "A question with several sources counts under each."),
        ("By document type", "by_doc_type", "doc type", ""),
        ("By question type", "by_question_type", "question type", ""),
        ("By evidence pages (MMLongBench-Doc)", "by_page_group", "group", ""),
    ]
    for heading, key, col, note in sections:
        if m.get(key):  # datasets without formats, sources or doc types get no empty table (older runs: none)
            out += [f"## {heading}", "", _group_table(col, m[key]), ""] + ([note, ""] if note else [])

    ret = [
        [k, _pct(v["mean"]) if k.endswith("hit") else _num(v["mean"], 3), str(v["n"])]
        for k, v in m["retrieval"].items()
    ]
    out += [
        "## Retrieval",
        "",
        "Over the questions with gold pages (n); hits are rates.",
        "",
        _table(["metric", "mean", "n"], ret),
        "",
    ]

    spread = [
        [k.replace("_", " "), *(_num(c[k][s], 2 if k in ("steps", "wall_s") else 0) for s in ("mean", "median", "p90"))]
        for k in COST_SPREAD
    ]
    out += [
        "## Cost per question",
        "",
        _table(["", "mean", "median", "p90"], spread),
        "",
        "Time split (mean s / question): " + ", ".join(f"{COST_LABEL[k]} {_num(c[k]['mean'], 2)}" for k in COST_MEAN),
        "",
    ]
    rc = m.get("risk_coverage")
    if rc:
        d = rc["at_default"]
        out += [
            "## Answering selectively",
            "",
            "Precision of the answers given against coverage (answers given / questions) as the reader's confidence "
            "threshold moves (`min_confidence`); each point adds the next most confident answer.",
            "",
        ]
        if d:
            out += [
                f"At the run's threshold {d['threshold']:g}: {d['answered']} answers of {m['n']} questions "
                f"(coverage {_pct(d['coverage'])}), {d['right']} right: precision {_pct(d['precision'])}. With "
                f"every answer kept: {len(rc['coverage'])} answers, precision {_pct(rc['precision'][-1])}.",
                "",
            ]
    plots = list(PLOTS) + ([RISK_PLOT] if rc else [])
    out += ["## Plots", ""] + [f"![{p[:-4]}](plots/{p})" for p in plots] + [""]
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- plots


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def _thousands():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this run", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _accuracy_bars(groups: dict, title: str, path: Path) -> None:
    plt = _pyplot()
    names = list(groups)
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.45 * len(names) + 1.2)))
    if names:
        acc = [100 * (groups[k]["accuracy"] or 0.0) for k in names]
        ax.barh(names, acc, color="#4c72b0")
        for i, k in enumerate(names):
            ax.text(acc[i] + 1, i, f"{acc[i]:.1f}%  (n={groups[k]['n']})", va="center", fontsize=9)
        ax.set_xlim(0, 118)  # room for the labels right of a 100% bar
        ax.invert_yaxis()  # first group on top
        ax.set_xlabel("accuracy (%)")
    else:
        _empty(ax, "groups")
    ax.set_title(title)
    _save(fig, path)


def _steps_hist(rows: list[dict], title: str, path: Path) -> None:
    plt = _pyplot()
    steps = [int(r["cost"]["steps"]) for r in rows if (r.get("cost") or {}).get("steps") is not None]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if steps:
        edges = np.arange(min(steps), max(steps) + 2) - 0.5  # one bar per integer step count
        ax.hist(steps, bins=edges, color="#55a868", edgecolor="white")
        ax.set_xlabel("steps per question")
        ax.set_ylabel("questions")
        ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        _empty(ax, "questions")
    ax.set_title(title)
    _save(fig, path)


def _risk_coverage(rc: dict, title: str, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([100 * c for c in rc["coverage"]], [100 * p for p in rc["precision"]], color="#4c72b0")
    d = rc.get("at_default")
    if d and d["precision"] is not None:
        ax.plot([100 * d["coverage"]], [100 * d["precision"]], "o", color="#c44e52")
        ax.annotate(
            f"threshold {d['threshold']:g}",
            (100 * d["coverage"], 100 * d["precision"]),
            textcoords="offset points",
            xytext=(6, 6),
            color="#c44e52",
        )
    ax.set_xlabel("coverage: answers given / questions (%)")
    ax.set_ylabel("precision of the answers given (%)")
    ax.set_ylim(0, 105)
    ax.set_xlim(left=0)
    ax.set_title(title)
    _save(fig, path)


def _tokens_per_step(curve: dict, title: str, path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    if curve["mean"]:
        t = np.arange(1, len(curve["mean"]) + 1)  # (steps,)
        ax.plot(t, curve["mean"], marker="o", color="#c44e52")
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(_thousands())
        ax.set_xlabel("step")
        ax.set_ylabel("mean visual tokens in context", color="#c44e52")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax2 = ax.twinx()  # the mean at late steps rests on few episodes: show how many
        ax2.bar(t, curve["episodes"], alpha=0.2, color="grey")
        ax2.set_ylabel("episodes still running", color="grey")
        ax.set_zorder(ax2.get_zorder() + 1)
        ax.patch.set_visible(False)
    else:
        _empty(ax, "per-step token counts")
    ax.set_title(title)
    _save(fig, path)


def write_report(run: Path) -> dict:
    """Write RUN/metrics.json, RUN/report.md and RUN/plots/*.png; returns the metrics."""
    run = Path(run)
    rows, config = load_rows(run), load_config(run)
    m = compute_metrics(rows, config)
    (run / "metrics.json").write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")
    (run / "report.md").write_text(render_markdown(m, config, run.name), encoding="utf-8")
    tag = f"{m['dataset']} · {m['protocol']}"
    plots = run / "plots"
    _accuracy_bars(m["by_format"], f"Accuracy by answer format\n{tag}", plots / PLOTS[0])
    _accuracy_bars(m["by_source"], f"Accuracy by evidence source\n{tag}", plots / PLOTS[1])
    _steps_hist(rows, f"Steps per question\n{tag}", plots / PLOTS[2])
    _tokens_per_step(m["cost"]["visual_tokens_by_step"], f"Visual tokens in context by step\n{tag}", plots / PLOTS[3])
    if m.get("risk_coverage"):
        _risk_coverage(m["risk_coverage"], f"Precision against coverage\n{tag}", plots / RISK_PLOT)
    return m


# ----------------------------------------------------------------------------------------------- comparison


def _run_names(runs: list[Path]) -> list[str]:
    names = [r.name for r in runs]
    dup = {n for n, k in Counter(names).items() if k > 1}
    return [f"{r.parent.name}/{r.name}" if r.name in dup else r.name for r in runs]


def _protocol_colours(protocols: list[str]) -> dict[str, object]:
    plt = _pyplot()
    cmap = plt.get_cmap("tab10")
    return {p: cmap(i % 10) for i, p in enumerate(sorted(set(protocols)))}


def _tokens_per_question(m: dict) -> tuple[float | None, str]:
    """(mean tokens per question, what they count): every token in and out where the run recorded them, else (runs
    written before the cost fields) the visual tokens."""
    total = m["cost"].get("total_tokens", {}).get("mean")
    if total is not None:
        return total, "tokens per question (text, visual and output)"
    return m["cost"]["total_visual_tokens"]["mean"], "visual tokens per question"


def _tokens_vs_accuracy(names: list[str], ms: list[dict], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    counted = [_tokens_per_question(m) for m in ms]
    what = counted[0][1] if counted and len({c[1] for c in counted}) == 1 else "visual tokens per question"
    if what.startswith("visual"):  # runs that mix old and new rows are compared on what they all recorded
        counted = [(m["cost"]["total_visual_tokens"]["mean"], what) for m in ms]
    pts = [(name, c[0], m["accuracy"], m["protocol"]) for name, c, m in zip(names, counted, ms)]
    pts = [(name, x, 100 * acc, proto) for name, x, acc, proto in pts if x is not None and acc is not None]
    if pts:
        colours = _protocol_colours([p[3] for p in pts])
        for proto in sorted(colours):  # one legend entry per protocol
            mine = [p for p in pts if p[3] == proto]
            ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=60, color=colours[proto], label=proto, zorder=3)
        for x, y, together in _label_groups(pts):  # runs that nearly overlap share one label
            ax.annotate(", ".join(together), (x, y), textcoords="offset points", xytext=(6, 4), fontsize=9)
        # a log axis cannot place a run that sent no images (vanilla); symlog keeps 0 on the axis
        if min(p[1] for p in pts) > 0:
            ax.set_xscale("log")
        else:
            ax.set_xscale("symlog", linthresh=1.0)
        zero = "" if min(p[1] for p in pts) > 0 else "; symlog, 0 = none"
        ax.set_xlabel(f"mean {what} (log scale{zero})")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, max(p[2] for p in pts) * 1.15 + 2)
        ax.legend(title="protocol", fontsize=9)
        ax.grid(alpha=0.3)
        ax.margins(x=0.15)  # keeps the run labels of the extreme points inside the frame
    else:
        _empty(ax, "runs with rows")
    ax.set_title("Accuracy vs " + what.split(" (")[0])
    _save(fig, path)


def _label_groups(pts: list[tuple[str, float, float, str]]) -> list[tuple[float, float, list[str]]]:
    """(x, y, names) per group of points within 6% of each other in x and 1 point of accuracy in y, so their
    labels do not print over each other.

    >>> _label_groups([("a", 100, 27.5, "p"), ("b", 104, 27.5, "q"), ("c", 300, 27.5, "r")])
    [(100, 27.5, ['a', 'b']), (300, 27.5, ['c'])]
    """
    groups: list[tuple[float, float, list[str]]] = []
    for name, x, y, _ in sorted(pts, key=lambda p: (p[1], p[2])):
        near = next((g for g in groups if abs(g[1] - y) <= 1.0 and x <= g[0] * 1.06 + 1e-9), None)
        if near is None:
            groups.append((x, y, [name]))
        else:
            near[2].append(name)
    return groups


def _cost_bars(names: list[str], ms: list[dict], path: Path) -> None:
    """Tokens per question by run: the visual part, and the text and output on top where the run recorded them."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(names) + 2), 4))
    visual = [m["cost"]["total_visual_tokens"]["mean"] or 0.0 for m in ms]
    total = [max(v, m["cost"].get("total_tokens", {}).get("mean") or v) for v, m in zip(visual, ms)]
    if names:
        colours = _protocol_colours([m["protocol"] for m in ms])
        ax.bar(names, visual, color=[colours[m["protocol"]] for m in ms], label="visual")
        rest = [t - v for t, v in zip(total, visual)]
        if any(rest):
            bars = ax.bar(names, rest, bottom=visual, color="0.8", label="text and output")
            ax.legend(fontsize=9)
        else:
            bars = ax.containers[0]
        ax.bar_label(bars, labels=[_num(t) for t in total], fontsize=9, padding=2)
        ax.set_ylabel("mean tokens per question")
        ax.yaxis.set_major_formatter(_thousands())
        ax.set_ylim(0, max(total + [1.0]) * 1.15)
        ax.tick_params(axis="x", rotation=20)
    else:
        _empty(ax, "runs")
    ax.set_title("Token cost per question by run")
    _save(fig, path)


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
        row = [name, m["dataset"], m["protocol"], m["backend"], str(m["n"]), _pct(m["accuracy"])]
        row += [_pct(m["mmlb"]["f1"]) if m["mmlb"] else "–"] if any_mmlb else []
        row += [
            _pct(m["retrieval"]["recall@5"]["mean"]),
            _pct(m["retrieval"]["memorized_hit"]["mean"]),
            _num(c.get("peak_context_tokens", {}).get("mean")),
            _num(c.get("total_tokens", {}).get("mean")),
            _num(c["total_visual_tokens"]["mean"]),
            _num(c["steps"]["mean"], 2),
            _num(c["wall_s"]["mean"], 1),
        ]
        table.append(row)
    md = _table(head, table)
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
        _tokens_vs_accuracy(names, ms, out / "tokens_vs_accuracy.png")
        _cost_bars(names, ms, out / "cost_by_protocol.png")
    return md


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m eval.report", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each with predictions.jsonl)")
    p.add_argument("--compare-out", type=Path, default=None, help="folder for compare.md and the comparison plots")
    a = p.parse_args(argv)
    if len(a.runs) == 1 and a.compare_out is None:
        m = write_report(a.runs[0])
        extra = f", F1 {_pct(m['mmlb']['f1'])}" if m["mmlb"] else ""
        print(
            f"{a.runs[0]}: {m['n']} questions, accuracy {_pct(m['accuracy'])}{extra}; "
            f"wrote metrics.json, report.md, plots/"
        )
    else:
        print(compare(a.runs, a.compare_out))


if __name__ == "__main__":
    main()
