"""The comparison's report (rl/experiment.py): intervals over seeds, seed-by-seed differences, the table in
markdown and JSON, and the figures."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

# two-sided 95% quantiles of Student's t by degrees of freedom (any statistics table); 1.96 beyond
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def interval(xs: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its 95% t-interval over seeds (a single value has no width).

    >>> interval([0.1, 0.2, 0.3, 0.4, 0.5])   # sd 0.158, t(4) 2.776: 0.3 -/+ 0.196
    (0.3, 0.104, 0.496)
    """
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return (round(m, 3), round(m, 3), round(m, 3))
    half = T95.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))
    return (round(m, 3), round(m - half, 3), round(m + half, 3))


def paired(base_runs: list[dict], runs: list[dict], hops=2) -> tuple[float, float, float] | None:
    """The held-out accuracy at `hops` of `runs` minus that of `base_runs`, seed by seed, as `interval` gives it;
    None when the two do not hold the same seeds or did not measure those hops.

    >>> held = lambda *a: [{"seed": i, "held": {2: {"accuracy": x}}} for i, x in enumerate(a)]
    >>> paired(held(0.5, 0.6, 0.7), held(0.6, 0.6, 0.8))   # differences 0.1, 0, 0.1: sd 0.058, t(2) 4.303
    (0.067, -0.077, 0.21)
    """
    if [r["seed"] for r in base_runs] != [r["seed"] for r in runs] or any(hops not in r["held"] for r in runs):
        return None
    return interval([r["held"][hops]["accuracy"] - b["held"][hops]["accuracy"] for b, r in zip(base_runs, runs)])


def updates_to(curve: list[float], threshold: float, window: int = 3) -> int | None:
    """The first update at which the running mean over `window` updates reaches `threshold`.

    >>> updates_to([0.0, 0.5, 1.0, 1.0], 0.5, window=2), updates_to([0.0, 0.1], 0.5)
    (3, None)
    """
    for i in range(window - 1, len(curve)):
        if statistics.fmean(curve[i - window + 1 : i + 1]) >= threshold:
            return i + 1
    return None


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def training(rs: list[dict], key: str, first_only: bool = False) -> float | None:
    """A training metric's mean over the updates of every seed (or over each seed's first update, the RL start)."""
    per = [r.get("train", {}).get(key) or [] for r in rs]
    return _mean(v[0] for v in per if v) if first_only else _mean(x for v in per for x in v)


def can_act(method: str, clip_frac: float | None, masked: float | None) -> str:
    """ "yes", or why the method could not act in the setting, so it is reported but not ranked: every method here
    trains through PPO's clip (a clip fraction of 0 means its clamp, and GPPO's or AEPO's gradient on clipped
    tokens, never came into play), and GGPO's mask must mask some steps and not all.

    >>> can_act("grpo", 0.0, 0.0), can_act("gppo", 0.02, 0.0), can_act("ggpo", 0.02, 0.0)
    ('no: clip fraction 0', 'yes', 'no: its mask masked no step')
    """
    if not clip_frac:
        return "no: clip fraction 0"
    if method == "ggpo" and not masked:
        return "no: its mask masked no step"
    if method == "ggpo" and masked >= 1.0:
        return "no: its mask masked every step"
    return "yes"


def summarize(runs: dict[str, list[dict]], base: dict, args, out: Path, total_s: float) -> dict:
    """The tables (markdown + JSON) and the two figures."""
    rows = []
    first = next(iter(runs))  # the other methods are compared with it seed by seed (the same start and draws)
    for method, rs in runs.items():
        acc = {h: [r["held"][h]["accuracy"] for r in rs] if h in rs[0]["held"] else None for h in (1, 2, "fine")}
        held2 = [r["held"][2] for r in rs]
        masked = _mean([training(rs, "masked_success"), training(rs, "masked_failure")])
        clip = training(rs, "clip_frac")
        rows.append(
            {
                "method": method,
                "seeds": len(rs),
                "acts": can_act(method, clip, masked),
                "held_1hop": interval(acc[1]) if acc[1] else None,
                "held_2hop": interval(acc[2]),
                "gain_2hop": interval([a - base[2]["accuracy"] for a in acc[2]]),
                "vs_first": paired(runs[first], rs) if method != first else None,
                "per_seed_2hop": acc[2],
                "held_fine": interval(acc["fine"]) if acc["fine"] else None,
                "dead_ends": statistics.fmean(h["dead_ends"] for h in held2),
                "held_dead_ends_per_success": _mean(h.get("dead_ends_per_success") for h in held2),
                "tokens": statistics.fmean(h["tokens"] for h in held2),
                "steps": statistics.fmean(h["steps"] for h in held2),
                "steps_1hop": _mean(r["held"][1]["steps"] for r in rs) if acc[1] else None,
                "reach": [updates_to(r["curve"], args.threshold) for r in rs],
                "wall_s": statistics.fmean(r["wall_s"] for r in rs),
                **{k: training(rs, k) for k in TRAINED},
                "ratio_max": max((x for r in rs for x in r.get("train", {}).get("ratio_max") or [] if x), default=None),
                "start_successes_with_dead_end": training(rs, "successes_with_dead_end", first_only=True),
                **(picture_row(rs, runs[first], base) if acc["fine"] else {}),
            }
        )
    ablation = None
    if "ggpo" in runs and "gspo" in runs:  # the paper's own ablation: GGPO against GSPO without the graph's pruning
        ablation = {h: paired(runs["gspo"], runs["ggpo"], h) for h in (1, 2)}
    md = report_markdown(rows, base, args, first, runs, ablation, total_s)
    (out / "results.md").write_text(md + "\n")
    (out / "results.json").write_text(
        json.dumps({"base": base, "rows": rows, "ablation": ablation, "runs": runs, "total_s": total_s}, indent=1)
    )
    figures(runs, rows, base, out)
    print("\n" + md)
    print(f"figures: {out / 'reward_curves.png'}, {out / 'held_out.png'}")
    return {"rows": rows, "markdown": md, "ablation": ablation}


def picture_row(rs: list[dict], first_runs: list[dict], base: dict) -> dict:
    """One method's picture columns: fine-print accuracy's gain over SFT and its difference from the first method
    seed by seed, crops per fine-print episode, the share of episodes that crop on fine-print and on plain (1-hop
    text) pages, and crop precision (of the crops made, the share that land on the fine print)."""
    fine = [r["held"]["fine"] for r in rs]
    plain = [r["held"][1] for r in rs if 1 in r["held"]]
    return {
        "gain_fine": interval([h["accuracy"] - base["fine"]["accuracy"] for h in fine]),
        "vs_first_fine": paired(first_runs, rs, "fine") if rs is not first_runs else None,
        "fine_crops": _mean(h.get("crops") for h in fine),
        "fine_crop_episodes": _mean(h.get("crop_episodes") for h in fine),
        "plain_crop_episodes": _mean(h.get("crop_episodes") for h in plain),
        "crop_precision": _mean(h.get("crop_precision") for h in fine),
    }


def picture_table(rows: list[dict], base: dict, first: str) -> list[str]:
    """The pictures table (runs with --fine-print): the SFT start's row, then each method's."""
    fmt = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]" if t else "-"  # noqa: E731
    signed = lambda t: f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]" if t else "-"  # noqa: E731
    pct = lambda x: f"{x:.0%}" if x is not None else "-"  # noqa: E731
    num = lambda x: f"{x:.2f}" if x is not None else "-"  # noqa: E731
    b, plain = base["fine"], base[1]
    lines = [
        "",
        "Pictures: held-out 1-hop questions whose every code is in fine print, legible only in a crop (crop precision: "
        "of the crops made, the share whose box covers the fine print; plain pages: the held-out 1-hop text "
        "questions):",
        "",
        f"| method | held-out fine print | gain over SFT | minus {first}'s (seed by seed) | crops per fine-print "
        "episode | fine-print episodes that crop | plain episodes that crop | crop precision |",
        "|---|---|---|---|---|---|---|---|",
        f"| SFT start | {b['accuracy']:.3f} | - | - | {num(b.get('crops'))} | {pct(b.get('crop_episodes'))} | "
        f"{pct(plain.get('crop_episodes'))} | {pct(b.get('crop_precision'))} |",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {fmt(r['held_fine'])} | {signed(r['gain_fine'])} | {signed(r['vs_first_fine'])} | "
            f"{num(r['fine_crops'])} | {pct(r['fine_crop_episodes'])} | {pct(r['plain_crop_episodes'])} | "
            f"{pct(r['crop_precision'])} |"
        )
    return lines


TRAINED = (  # training metrics in the second table: means over every update of every seed
    "optimizer_steps",
    "clip_frac",
    "masked_success",
    "masked_success_dead_end",
    "masked_success_valuable",
    "masked_success_malformed",
    "masked_failure",
    "masked_failure_valuable",
    "masked_failure_answer",
    "masked_failure_malformed",
    "dead_ends_per_success",
)


def report_markdown(rows, base, args, first, runs, ablation, total_s) -> str:
    fmt = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]" if t else "not measured"  # noqa: E731
    signed = lambda t: f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]" if t else "-"  # noqa: E731
    num = lambda x, d=2: f"{x:.{d}f}" if x is not None else "-"  # noqa: E731
    fine = "fine" in base
    one = any(r["held_1hop"] for r in rows)
    lines = [
        f"SFT start: held-out 1-hop {base[1]['accuracy']:.3f}, 2-hop {base[2]['accuracy']:.3f}"
        + (f", fine print (1-hop) {base['fine']['accuracy']:.3f}" if fine else "")
        + (f"; RL-pool environments (training split) {base['train']['accuracy']:.3f}" if "train" in base else "")
        + f" (per 2-hop episode: {base[2]['steps']:.2f} agent steps, {base[2]['dead_ends']:.2f} dead-end searches, "
        f"{base[2]['tokens']:.1f} tokens)",
        "",
        "| method | can act | "
        + ("held-out 1-hop | " if one else "")
        + f"held-out 2-hop | 2-hop gain over SFT | 2-hop minus {first}'s (seed by seed) | "
        + ("held-out fine print (1-hop) | " if fine else "")
        + "steps per 2-hop episode | dead-end searches per successful 2-hop episode | wall s per run |",
        "|---|---|---|---|---|" + "---|" * (one + fine) + "---|---|---|",
    ]
    for r in rows:
        ranked = r["acts"] == "yes" or r["method"] == first
        lines.append(
            f"| {r['method']} | {r['acts']} | "
            + (f"{fmt(r['held_1hop'])} | " if one else "")
            + f"{fmt(r['held_2hop'])} | {signed(r['gain_2hop'])} | "
            + (f"{signed(r['vs_first'])} | " if ranked else "not ranked | ")
            + (f"{fmt(r['held_fine'])} | " if fine else "")
            + f"{num(r['steps'])} | {num(r['held_dead_ends_per_success'])} | {r['wall_s']:.0f} |"
        )
    lines += [
        "",
        "What each method did in training (means over every update of every seed; shares of the steps of successful "
        "and of failed rollouts that got loss weight 0, by kind):",
        "",
        "| method | optimizer steps per update | clip fraction | largest ratio | masked in successes: dead end / "
        "off-path search that showed a gold page / malformed | masked in failures: valuable retrieval / answer / "
        "malformed | dead-end searches per successful "
        "rollout | successful rollouts holding a dead end, first update |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {num(r['optimizer_steps'], 1)} | {num(r['clip_frac'], 4)} | {num(r['ratio_max'], 3)} | "
            f"{num(r['masked_success_dead_end'], 3)} / {num(r['masked_success_valuable'], 3)} / "
            f"{num(r['masked_success_malformed'], 3)} | "
            f"{num(r['masked_failure_valuable'], 3)} / {num(r['masked_failure_answer'], 3)} / "
            f"{num(r['masked_failure_malformed'], 3)} | {num(r['dead_ends_per_success'])} | "
            f"{num(r['start_successes_with_dead_end'])} |"
        )
    if fine:
        lines += picture_table(rows, base, first)
    if ablation:
        lines += [
            "",
            "The paper's ablation, GGPO minus GSPO seed by seed (the same start and draws): held-out 1-hop "
            f"{signed(ablation[1])}, 2-hop {signed(ablation[2])}.",
        ]
    n_q = args.test_envs * 3
    lines += ["", f"Held-out 2-hop questions answered right, of {n_q}, seed by seed (SFT start: "]
    lines[-1] += f"{round(base[2]['accuracy'] * n_q)}):"
    lines += ["", "| method | " + " | ".join(f"seed {r['seed']}" for r in runs[first]) + " |"]
    lines.append("|---|" + "---|" * len(runs[first]))
    for r in rows:
        lines.append(f"| {r['method']} | " + " | ".join(str(round(a * n_q)) for a in r["per_seed_2hop"]) + " |")
    lines += [
        "",
        f"Mean and 95% t-interval over {args.seeds} seeds; one "
        f"{'greedy' if args.eval_temperature == 0 else 'sampled'} episode per held-out question ({n_q} per hop "
        f"count). A method that cannot act in the setting is reported, not ranked. Total {total_s / 60:.1f} min.",
    ]
    return "\n".join(lines)


def figures(runs, rows, base, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for method, rs in runs.items():
        curves = [r["curve"] for r in rs]
        mean = [statistics.fmean(v) for v in zip(*curves)]
        ax.plot(range(1, len(mean) + 1), mean, lw=2, label=f"{method} (mean of {len(curves)})")
    ax.set_xlabel("update")
    ax.set_ylabel("mean training reward")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "reward_curves.png", dpi=130)
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r["method"] for r in rows]
    shown = (("held_1hop", "1-hop"), ("held_2hop", "2-hop"), ("held_fine", "fine print, 1-hop"))
    series = [(key, label) for key, label in shown if rows[0][key]]
    width = 0.8 / len(series)
    for k, (key, label) in enumerate(series):
        mids = [r[key][0] for r in rows]
        errs = [[r[key][0] - r[key][1] for r in rows], [r[key][2] - r[key][0] for r in rows]]
        xs = [i + width * (k - (len(series) - 1) / 2) for i in range(len(rows))]
        ax.bar(xs, mids, width, yerr=errs, capsize=4, label=f"held-out {label}")
    ax.axhline(base[2]["accuracy"], color="grey", ls="--", lw=1, label="SFT, 2-hop")
    ax.set_xticks(range(len(rows)), names)
    ax.set_ylabel("accuracy (95% interval over seeds)")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "held_out.png", dpi=130)


def _int_keys(d: dict) -> dict:
    """JSON's string keys back to the hop counts they were ("1" -> 1; "fine" and "train" stay)."""
    return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in d.items()}


def rebuild(out: Path) -> dict:
    """The tables and figures again from a finished run's results.json and config.json (after the report changes)."""
    from rl.experiment_config import ExperimentConfig

    saved = json.loads((out / "results.json").read_text())
    args = ExperimentConfig.from_dict(json.loads((out / "config.json").read_text()))
    runs = {m: [{**r, "held": _int_keys(r["held"])} for r in rs] for m, rs in saved["runs"].items()}
    return summarize(runs, _int_keys(saved["base"]), args, out, saved["total_s"])


if __name__ == "__main__":  # python -m rl.experiment_report OUT: rewrite OUT's tables and figures
    import sys

    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "results.json").is_file():
        raise SystemExit("usage: python -m rl.experiment_report OUT, the folder of a finished rl.experiment run")
    rebuild(Path(sys.argv[1]))
