"""Trajectory rewards for RL, as pure functions with TRL's reward signature.

Every reward is `fn(prompts, completions, **kwargs) -> list[float]`: `completions` are the final
answers (str, or None / "" when the episode gave none; a TRL conversation [{"role", "content"}] is
read as its last message), and kwargs carry one list per column, one entry per sample:

- `gold`: acceptable answers (list[str]); `answer_format`: MMLongBench-Doc format or "";
- `retrieved`: the ranked evidence keys the episode retrieved; `gold_pages`: the gold keys (both
  as built by `trajectory_reward_inputs`, so they compare equal; lists are read as tuples);
- `format_ok`: no malformed tool call; `searched`: at least one search;
- `replies`: the model's replies of the trajectory, joined; `inserted`: the evidence keys of the results the
  searches put in context, in order (for vrag, one page per search);
- optional `question` (else the prompt text) and `judge` (one eval.judge.Judge, not a list).

Rewards reuse the eval metrics (eval/answer_metrics.py, eval/retrieval_metrics.py), so training
optimises what evaluation measures. `trajectory_reward_inputs(trace, item)` builds one sample's
columns from an agent Trace and its eval.datasets.EvalItem; `collate_reward_inputs` turns several
into the columnar (completions, kwargs) the rewards take.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from agent.protocols import tools_of_kind
from eval.answer_metrics import score_item
from eval.retrieval_metrics import ndcg_at_k

SEARCH_ACTIONS = tools_of_kind("search")  # every protocol's search tool
CORRECT_THRESHOLD = 0.5  # a continuous answer score (ANLS) >= this counts as correct
# VRAG-RL (arXiv 2505.22019): 0.7 · answer judge + 0.2 · NDCG(retrieved, gold pages) + 0.1 · format
VRAG_WEIGHTS = (0.7, 0.2, 0.1)


def _text(x: Any) -> str:
    """A completion or prompt as text: a string, or the last message's text of a conversation."""
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    if isinstance(x, dict):
        return _text(x.get("content"))
    if isinstance(x, Sequence):
        if x and all(isinstance(p, dict) and "role" in p for p in x):
            return _text(x[-1])
        return " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in x)  # content parts
    return str(x)


def _column(kwargs: dict[str, Any], name: str, n: int, reward: str) -> list[Any]:
    if name not in kwargs or kwargs[name] is None:
        raise KeyError(
            f"{reward} needs the per-sample column {name!r} in its kwargs; build the columns with "
            "rl.rewards.trajectory_reward_inputs / collate_reward_inputs"
        )
    col = list(kwargs[name])
    if len(col) != n:
        raise ValueError(
            f"{reward}: column {name!r} has {len(col)} entries for {n} completions; give one entry per sample"
        )
    return col


def _key(k: Any) -> Any:
    """A hashable evidence key: JSON turns ("a.pdf", 3, None) into ["a.pdf", 3, None]."""
    return tuple(_key(v) for v in k) if isinstance(k, (list, tuple)) else k


def answer_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Answer correctness in [0, 1]: eval.answer_metrics.score_item's score (MMLongBench-Doc's rule by
    answer format, else max(EM, numeric match, ANLS >= 0.5)), or the LLM judge's verdict when kwargs
    has `judge`; an unclear verdict (None) falls back to the rules. A JudgeError propagates: call
    judge.check() before training. An empty answer scores 0 without asking the judge.

    >>> answer_reward(["q", "q"], ["Answer: 18.3%", "12"], gold=[["18.29%"], ["13"]],
    ...               answer_format=["Float", "Int"])
    [1.0, 0.0]
    """
    n = len(completions)
    golds = _column(kwargs, "gold", n, "answer_reward")
    formats = list(kwargs.get("answer_format") or [""] * n)
    questions = list(kwargs.get("question") or [_text(p) for p in prompts])
    judge = kwargs.get("judge")
    out = []
    for i, c in enumerate(completions):
        pred = _text(c).strip()
        gold = [golds[i]] if isinstance(golds[i], str) else list(golds[i])
        if not pred:
            out.append(0.0)
            continue
        verdict = judge.score(questions[i], gold, pred) if judge is not None else None
        if verdict is None:
            verdict = score_item({"pred": pred, "gold": gold, "answer_format": formats[i] or ""})["score"]
        out.append(float(verdict))
    return out


def retrieval_reward(prompts: Sequence[Any], completions: Sequence[Any], k: int = 5, **kwargs: Any) -> list[float]:
    """NDCG@k (binary relevance) of the retrieved evidence keys against the gold ones; 0 with no gold.

    >>> retrieval_reward(["q", "q"], ["a", "b"], retrieved=[[("x",), ("g",)], [("g",)]],
    ...                  gold_pages=[[("g",)], []])
    [0.6309297535714575, 0.0]
    """
    n = len(completions)
    retrieved = _column(kwargs, "retrieved", n, "retrieval_reward")
    gold_pages = _column(kwargs, "gold_pages", n, "retrieval_reward")
    out = []
    for ranked, gold in zip(retrieved, gold_pages):
        gold_set = {_key(g) for g in gold or []}
        out.append(ndcg_at_k([_key(r) for r in ranked or []], gold_set, k) if gold_set else 0.0)
    return out


def format_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when every tool call of the trajectory parsed (format_ok), else 0.0.

    >>> format_reward(["q", "q"], ["a", "b"], format_ok=[True, False])
    [1.0, 0.0]
    """
    return [1.0 if ok else 0.0 for ok in _column(kwargs, "format_ok", len(completions), "format_reward")]


def vrag_ndcg(inserted: Sequence[Any], gold: Sequence[Any]) -> float:
    """VRAG-RL's NDCG (VRAG-RL/verl/workers/reward_manager/rm.py lines 71-105): binary relevance over the pages
    in the order they were inserted, no cut-off, and an ideal DCG that counts every gold page.

    >>> round(vrag_ndcg(["g1"], ["g1", "g2"]), 4)  # one of two gold pages found: 1 / (1 + 1/log2(3))
    0.6131
    >>> round(vrag_ndcg(["x", "g1", "y", "g2"], ["g1", "g2"]), 4)
    0.6509
    >>> vrag_ndcg([], ["g1"]), vrag_ndcg(["x"], [])
    (0.0, 0.0)
    """
    gold_keys = [_key(g) for g in gold]
    rel = [1 if _key(d) in gold_keys else 0 for d in inserted]
    dcg = sum((2**r - 1) / math.log2(i + 1) for i, r in enumerate(rel, start=1))
    ideal = [1] * len(gold_keys) + [0] * (len(rel) - len(gold_keys))
    idcg = sum((2**r - 1) / math.log2(i + 1) for i, r in enumerate(ideal, start=1))
    return dcg / idcg if idcg else 0.0


_VRAG_SEARCH = re.compile(r"<search>.*</search>", re.S)  # VRAG-RL/verl/utils/reward_score/vrag.py lines 67-73
_VRAG_ANSWER = re.compile(r"<answer>.*</answer>", re.S)


def vrag_exact_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """VRAG-RL's reward, exactly (rm.py lines 264-336 with vrag.py `compute_format_reward_only`): 0 unless the
    replies hold both a complete <search>...</search> and <answer>...</answer>; then
    0.7 · judge + 0.1 + 0.2 · `vrag_ndcg`(inserted pages, gold pages). The judge is binary, as VRAG-RL's
    LLM judge is: the kwargs' `judge` when given, else the answer rules at >= 0.5.

    >>> r = vrag_exact_reward(["q"] * 3, ["12", "12", "12"], gold=[["12"]] * 3, answer_format=["Int"] * 3,
    ...     replies=["<search>a</search> <answer>12</answer>", "<answer>12</answer>",
    ...              "<search>a</search> <answer>12</answer>"],
    ...     inserted=[["g"], ["g"], ["x"]], gold_pages=[["g"], ["g"], ["g"]])
    >>> [round(x, 6) for x in r]  # both tags and the gold page; no search tag; the wrong page
    [1.0, 0.0, 0.8]
    """
    n = len(completions)
    replies = _column(kwargs, "replies", n, "vrag_exact_reward")
    inserted = _column(kwargs, "inserted", n, "vrag_exact_reward")
    gold_pages = _column(kwargs, "gold_pages", n, "vrag_exact_reward")
    judged = [1.0 if a >= CORRECT_THRESHOLD else 0.0 for a in answer_reward(prompts, completions, **kwargs)]
    wa, wr, wf = VRAG_WEIGHTS
    out = []
    for text, j, ins, gold in zip(replies, judged, inserted, gold_pages):
        text = _text(text)
        ok = bool(_VRAG_SEARCH.search(text) and _VRAG_ANSWER.search(text))
        out.append(wa * j + wf * 1.0 + wr * vrag_ndcg(list(ins or []), list(gold or [])) if ok else 0.0)
    return out


def vrag_composite_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Our variant of VRAG-RL's reward (arXiv 2505.22019), for any protocol: 0.7 · answer + 0.2 · NDCG@5 over
    every retrieved result + 0.1 · format, where format is 1 only if no step was malformed; 0 unless the
    trajectory both searched and answered. The answer term is `answer_reward` (the judge when kwargs has
    one, else the rules, continuous). `vrag_exact_reward` is VRAG-RL's own.

    >>> r = vrag_composite_reward(["q"] * 3, ["12", "12", ""], gold=[["12"]] * 3, answer_format=["Int"] * 3,
    ...     retrieved=[[("g",)]] * 3, gold_pages=[[("g",)]] * 3, format_ok=[True, True, True],
    ...     searched=[True, False, True])
    >>> [round(x, 6) for x in r]  # searched and answered; not searched; not answered
    [1.0, 0.0, 0.0]
    """
    n = len(completions)
    searched = _column(kwargs, "searched", n, "vrag_composite_reward")
    answer = answer_reward(prompts, completions, **kwargs)
    ndcg = retrieval_reward(prompts, completions, **kwargs)
    fmt = format_reward(prompts, completions, **kwargs)
    wa, wr, wf = VRAG_WEIGHTS
    return [
        wa * a + wr * r + wf * f if s and _text(c).strip() else 0.0
        for a, r, f, s, c in zip(answer, ndcg, fmt, searched, completions)
    ]


def vimrag_binary_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """VimRAG's binary outcome reward: 1.0 when the answer is correct, else 0.0. "Correct" is
    answer_reward >= 0.5, so a continuous rule score (MMLongBench-Doc's ANLS for Str answers, already
    0 at or below 0.5) counts as correct exactly when it passes ANLS's own threshold.

    >>> vimrag_binary_reward(["q", "q"], ["Scott Bradly", "Paris"], gold=[["Scott Bradley"], ["Rome"]],
    ...                      answer_format=["Str", "Str"])
    [1.0, 0.0]
    """
    return [1.0 if a >= CORRECT_THRESHOLD else 0.0 for a in answer_reward(prompts, completions, **kwargs)]


REWARDS: dict[str, Callable[..., list[float]]] = {
    "answer": answer_reward,
    "retrieval": retrieval_reward,
    "format": format_reward,
    "vrag_exact": vrag_exact_reward,
    "vrag_ndcg5": vrag_composite_reward,
    "vimrag": vimrag_binary_reward,
}


# ---------------------------------------------------------------------------------------------------
# From a trace to the reward columns
# ---------------------------------------------------------------------------------------------------


def trajectory_reward_inputs(trace: Any, item: Any) -> dict[str, Any]:
    """One sample's reward inputs from an agent Trace (or its dict) and its eval.datasets.EvalItem.

    Returns {"completion", "question", "gold", "answer_format", "retrieved", "gold_pages",
    "format_ok", "searched"}:
    - completion: the final answer ("" when none);
    - searched: some step's action is a search (add_search_node / search), or the trace holds
      search results (the vanilla baseline searches without a step);
    - format_ok: no step's reply was rejected as a malformed call (no action parsed, a corrective
      observation given). A tool that failed on a well-formed call does not count against it;
    - retrieved: the units the episode retrieved in order (eval.runner.retrieved_units), each as the
      key of the gold evidence it matches (eval.datasets.Gold.key()) or ("unit", uid), repeats
      dropped, exactly as eval.runner.retrieval_scores ranks them;
    - gold_pages: the gold keys; empty when the item has no evidence or its evidence is known wrong.
    """
    from agent.events import SearchResults, Trace
    from eval.runner import retrieved_units

    if isinstance(trace, dict):
        trace = Trace.from_dict(trace)
    steps, searches = trace.steps, trace.events_of(SearchResults)
    evidence = list(item.evidence) if getattr(item, "evidence_ok", True) else []

    def key(u: dict) -> Any:
        hit = next((g.key() for g in evidence if g.matches(u)), None)
        return hit if hit is not None else ("unit", u["uid"])

    ranked = [key(u) for u in retrieved_units(trace)]
    hits = [hit.info_id for ev in searches for hit in ev.results]
    shown = [trace.evidence[i]["unit"] for i in hits if i in trace.evidence]
    searched = bool(searches) or any((s.action or {}).get("name") in SEARCH_ACTIONS for s in steps)
    malformed = any(s.action is None and s.observation for s in steps)
    return {
        "completion": trace.answer or "",
        "question": item.question,
        "gold": list(item.answers),
        "answer_format": item.answer_format or "",
        "retrieved": list(dict.fromkeys(ranked)),
        "gold_pages": [g.key() for g in evidence],
        "format_ok": not malformed,
        "searched": searched,
        "replies": "\n".join(s.output for s in steps),
        "inserted": list(dict.fromkeys(key(u) for u in shown)),
    }


def collate_reward_inputs(rows: Sequence[dict[str, Any]]) -> tuple[list[str], dict[str, list[Any]]]:
    """(completions, kwargs columns) from several `trajectory_reward_inputs` rows.

    >>> c, kw = collate_reward_inputs([{"completion": "a", "searched": True}, {"completion": "b", "searched": False}])
    >>> c, kw
    (['a', 'b'], {'searched': [True, False]})
    """
    completions = [r["completion"] for r in rows]
    names = [k for k in (rows[0] if rows else {}) if k != "completion"]
    return completions, {k: [r[k] for r in rows] for k in names}
