"""PNG plots of benchmark runs from their metrics: accuracy by group, steps, visual tokens by step and precision
against coverage for one run; accuracy against tokens and the token cost per question across runs.

matplotlib is imported lazily, on the first plot, and draws to files only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eval.report_markdown import num

# ----------------------------------------------------------------------------------------------- one run


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


def plot_accuracy_bars(groups: dict, title: str, path: Path) -> None:
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


def plot_steps_hist(rows: list[dict], title: str, path: Path) -> None:
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


def plot_risk_coverage(rc: dict, title: str, path: Path) -> None:
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


def plot_tokens_per_step(curve: dict, title: str, path: Path) -> None:
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


# ----------------------------------------------------------------------------------------------- comparison


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


def plot_tokens_vs_accuracy(names: list[str], ms: list[dict], path: Path) -> None:
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


def plot_cost_bars(names: list[str], ms: list[dict], path: Path) -> None:
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
        ax.bar_label(bars, labels=[num(t) for t in total], fontsize=9, padding=2)
        ax.set_ylabel("mean tokens per question")
        ax.yaxis.set_major_formatter(_thousands())
        ax.set_ylim(0, max(total + [1.0]) * 1.15)
        ax.tick_params(axis="x", rotation=20)
    else:
        _empty(ax, "runs")
    ax.set_title("Token cost per question by run")
    _save(fig, path)
