"""report.md of one benchmark run from its metrics (eval/run_metrics.py), and the number formats the reports share."""

from __future__ import annotations

from eval.run_metrics import COST_MEAN, COST_SPREAD, STATUSES

COST_LABEL = {"model_s": "generating", "retrieval_s": "retrieval", "agent_s": "agent", "tool_s": "waiting on tools"}
PLOTS = ("accuracy_by_format.png", "accuracy_by_source.png", "steps_hist.png", "visual_tokens_per_step.png")
RISK_PLOT = "risk_coverage.png"  # only for runs whose reader weighs its answers


def pct(x: float | None) -> str:
    """A fraction as a percentage, or a dash when undefined.

    >>> pct(0.4567), pct(None)
    ('45.7%', '–')
    """
    return "–" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, digits: int = 0) -> str:
    """A number with thousands separators, or a dash when undefined.

    >>> num(12345.6), num(2.346, 2)
    ('12,346', '2.35')
    """
    return "–" if x is None else f"{x:,.{digits}f}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _group_table(name: str, groups: dict) -> str:
    return md_table([name, "n", "accuracy"], [[k, str(g["n"]), pct(g["accuracy"])] for k, g in groups.items()])


def render_markdown(m: dict, config: dict, run_name: str = "") -> str:
    """report.md from the metrics of one run."""
    title = f"# {m['dataset'] or 'dataset?'} · {m['protocol'] or 'protocol?'} · {m['backend'] or 'backend?'}"
    facts = [f"run `{run_name}`"] if run_name else []
    facts += [f"{k} {config[k]}" for k in ("started", "seed", "limit", "vimrag_version") if config.get(k) is not None]
    out = [title, "", ", ".join(facts), ""]

    head = ["questions", "answered", "limit", "error", "accuracy"]
    vals = [str(m["n"])] + [str(m["status"][s]) for s in STATUSES] + [pct(m["accuracy"])]
    if m["mmlb"]:
        head += ["F1", "precision", "recall"]
        vals += [pct(m["mmlb"][k]) for k in ("f1", "precision", "recall")]
    if m["judge"]:
        head += ["judge", "judged"]
        vals += [pct(m["judge"]["mean"]), str(m["judge"]["n_judged"])]
    c = m["cost"]
    head += ["page R@5", "mean steps", "peak vis. tokens", "vis. tokens / q", "s / q"]
    vals += [
        pct(m["retrieval"]["recall@5"]["mean"]),
        num(c["steps"]["mean"], 2),
        num(c["peak_visual_tokens"]["mean"]),
        num(c["total_visual_tokens"]["mean"]),
        num(c["wall_s"]["mean"], 1),
    ]
    out += [md_table(head, [vals]), ""]
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
        [k, pct(v["mean"]) if k.endswith("hit") else num(v["mean"], 3), str(v["n"])] for k, v in m["retrieval"].items()
    ]
    out += [
        "## Retrieval",
        "",
        "Over the questions with gold pages (n); hits are rates.",
        "",
        md_table(["metric", "mean", "n"], ret),
        "",
    ]

    spread = [
        [k.replace("_", " "), *(num(c[k][s], 2 if k in ("steps", "wall_s") else 0) for s in ("mean", "median", "p90"))]
        for k in COST_SPREAD
    ]
    out += [
        "## Cost per question",
        "",
        md_table(["", "mean", "median", "p90"], spread),
        "",
        "Time split (mean s / question): " + ", ".join(f"{COST_LABEL[k]} {num(c[k]['mean'], 2)}" for k in COST_MEAN),
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
                f"(coverage {pct(d['coverage'])}), {d['right']} right: precision {pct(d['precision'])}. With "
                f"every answer kept: {len(rc['coverage'])} answers, precision {pct(rc['precision'][-1])}.",
                "",
            ]
    plots = list(PLOTS) + ([RISK_PLOT] if rc else [])
    out += ["## Plots", ""] + [f"![{p[:-4]}](plots/{p})" for p in plots] + [""]
    return "\n".join(out)
