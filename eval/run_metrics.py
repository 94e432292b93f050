"""The figures of a benchmark run from its prediction rows: accuracy overall and by group, MMLongBench-Doc's F1,
retrieval means, cost spreads and precision against coverage.

Pure functions over the rows eval/runner.py writes (eval/report.py reads them from a run folder); accuracies are
fractions in [0, 1], None when undefined. Nothing is scored again here: each row carries its score.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from eval.mmlb_rules import NOT_ANSWERABLE

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
