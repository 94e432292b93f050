"""Run an agent over a dataset: one prediction row and one trace per question, resumable, then the report.

    vimrag eval --dataset mmlongbench-doc-smoke --protocol vimrag --backend embedded
    vimrag eval --dataset jsonl:qs.jsonl --corpus docs/ --backend openai --model M --concurrency 8
    vimrag eval compare runs/eval/A runs/eval/B

A run folder holds `config.json` (the resolved config), `predictions.jsonl` (one row per question, schema
in `eval/run_metrics.py`), `traces/ID.json`, and, at the end, `metrics.json`, `report.md` and `plots/`.
Rows are appended and flushed one by one; a stopped or crashed run continues where it stopped when run
again with the same settings (a half-written last line is dropped and that question runs again), so no
question is answered twice. The settings that decide the answers (dataset, corpus, scope, and the policy
and agent settings but the endpoint's key, timeout and retries) must match the folder's config.json;
anything else may change between attempts.

Retrieval metrics rank the units an episode retrieved, in the order its searches returned them (first
occurrence), against the gold evidence; `memorized_hit` asks whether the evidence the agent kept (vimrag:
memorized items; other protocols: everything in context) contains a gold page or unit.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.backends.base import PolicyConfig
from agent.config import Config, flatten, setting
from agent.protocols import get as get_protocol
from agent.settings import AgentConfig
from eval.datasets import Dataset, EvalItem, check_evidence, load_dataset
from eval.mmlb_rules import NOT_ANSWERABLE
from eval.retrieval_metrics import mrr, ndcg_at_k, recall_at_k

# Settings that change the answers (dotted prefixes): a resumed run must use the same ones.
ANSWER_KEYS = ("dataset", "corpus", "page_base", "scope", "policy", "agent")
NOT_ANSWER_KEYS = ("policy.api_key", "policy.timeout_s", "policy.retries")  # how the endpoint is reached


@dataclass
class JudgeConfig(Config):
    """An LLM judge that scores answers too (eval/judge.py); off while base_url is empty."""

    config_name = "judge"

    base_url: str = setting("", "OpenAI-compatible endpoint of the judge model", aliases=["url"])
    model: str = setting("", "the judge model's name (empty: the first one served)")
    api_key: str = setting("", "the judge endpoint's API key", secret=True, aliases=["key"])


@dataclass
class RunConfig(Config):
    """One evaluation run: the data, the policy and agent that answer, and how the run goes."""

    config_name = "run"

    dataset: str = setting(
        "", "mmlongbench-doc | mmlongbench-doc-smoke | demo | jsonl:PATH | vidoseek:PATH | slidevqa:PATH"
    )
    policy: PolicyConfig = setting(factory=PolicyConfig, help="the model that answers")
    agent: AgentConfig = setting(factory=AgentConfig, help="the agent")
    corpus: str | None = setting(None, "documents for jsonl:/vidoseek:/slidevqa: datasets")
    index: str | None = setting(None, "index folder (default: the dataset's own, built on first use)")
    scope: str = setting(
        "auto",
        "doc: search only the question's document (MMLongBench-Doc's setting); corpus: all (or "
        "--doc); auto: doc when the dataset names documents",
        choices=("auto", "doc", "corpus"),
    )
    limit: int = setting(0, "only the first N questions (0: all)")
    concurrency: int = setting(1, "questions in flight (endpoint backends)")
    out: str = setting("", "run folder (default runs/eval/DATASET-PROTOCOL-BACKEND)")
    judge: JudgeConfig = setting(factory=JudgeConfig, help="LLM judge (optional)", flag_prefix="judge-")
    page_base: int = setting(
        1, "whether the dataset's pages count from 1 or 0 (vidoseek/slidevqa/jsonl)", choices=(0, 1)
    )
    allow_missing_evidence: bool = setting(
        False, "run even when gold evidence names files or pages the corpus lacks (jsonl)"
    )
    search_url: str = setting(
        "", "search through this server (`vimrag serve-search`'s or VRAG's) instead of a local index"
    )

    def run_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        name = re.sub(r"[^\w.-]+", "_", Path(self.dataset.split(":")[-1]).stem if ":" in self.dataset else self.dataset)
        return Path("runs") / "eval" / f"{name}-{self.agent.protocol}-{self.policy.backend}"


class RunError(ValueError):
    """The run cannot start (settings differ from the folder's, missing index or data); says how to fix it."""


# -- one question -----------------------------------------------------------------------------------
def retrieved_units(trace) -> list[dict[str, Any]]:
    """Units an episode retrieved, in the order its searches returned them, without crops/zooms or repeats."""
    seen, out = set(), []
    for ev in trace.evidence.values():
        u = ev["unit"]
        if ev.get("parent") or u["uid"] in seen:
            continue
        seen.add(u["uid"])
        out.append(u)
    return out


def kept_units(trace, memorized_only: bool) -> list[dict[str, Any]]:
    kept = {it.info_id for _, it in trace.memory_graph().items() if it.useful} if trace.graph else set()
    return [ev["unit"] for i, ev in trace.evidence.items() if not memorized_only or i in kept]


def retrieval_scores(item: EvalItem, trace, protocol: str) -> dict[str, Any]:
    none = {
        "recall@1": None,
        "recall@5": None,
        "ndcg@5": None,
        "mrr": None,
        "memorized_hit": None,
        "retrieved_hit": None,
        "pointed_hit": None,
    }
    if not item.evidence or not item.evidence_ok or trace is None:
        return none
    gold = {g.key() for g in item.evidence}
    ranked = []
    for u in retrieved_units(trace):
        hit = next((g.key() for g in item.evidence if g.matches(u)), None)
        ranked.append(hit if hit is not None else ("unit", u["uid"]))
    ranked = list(dict.fromkeys(ranked))  # a gold page found twice (two clips, two chunks) counts once

    def any_gold(units) -> bool:
        return any(g.matches(u) for u in units for g in item.evidence)

    return {
        "recall@1": recall_at_k(ranked, gold, 1),
        "recall@5": recall_at_k(ranked, gold, 5),
        "ndcg@5": ndcg_at_k(ranked, gold, 5),
        "mrr": mrr(ranked, gold),
        "memorized_hit": any_gold(kept_units(trace, memorized_only=get_protocol(protocol).memorizes)),
        "retrieved_hit": any_gold(retrieved_units(trace)),
        # the pages an answer (or an abstention) points to: does one of them hold the answer?
        "pointed_hit": any_gold(pointed_units(trace)) if (trace.support or {}).get("pointers") else None,
    }


def pointed_units(trace) -> list[dict[str, Any]]:
    """The units of the pages the reader pointed to (support.pointers), by their information ids."""
    ids = [p.get("info_id") for p in (trace.support or {}).get("pointers") or []]
    return [trace.evidence[i]["unit"] for i in ids if i in (trace.evidence or {})]


CHARS_PER_TOKEN = 4  # the agent's text-token estimate (agent/toolbox.py count_context): ~4 characters a token


def cost_of(trace, wall_s: float) -> dict[str, Any]:
    """What one question cost: model calls, input text and visual tokens (every call's whole context, summed),
    output tokens, the largest context, and time. Text and output tokens are estimates (4 characters a token);
    visual tokens are exact for the patch grid."""
    steps = trace.steps if trace else []
    per_step = [s.visual_tokens for s in steps]
    text = [s.text_tokens for s in steps]
    out = [(len(s.output or "") + len(s.reasoning or "")) // CHARS_PER_TOKEN for s in steps]
    t = trace.timings if trace else {}
    return {
        "steps": len(per_step),
        "model_calls": len(per_step),
        "peak_visual_tokens": max(per_step, default=0),
        "peak_image_pixels": trace.peak_image_pixels if trace else 0,
        "total_visual_tokens": sum(per_step),
        "visual_tokens_per_step": per_step,
        "input_text_tokens": sum(text),
        "output_tokens": sum(out),
        "total_tokens": sum(per_step) + sum(text) + sum(out),
        "peak_context_tokens": max((v + x for v, x in zip(per_step, text)), default=0),
        "wall_s": round(wall_s, 3),
        "model_s": t.get("model_s", 0.0),
        "retrieval_s": t.get("retrieval_s", 0.0),
        "agent_s": t.get("agent_s", 0.0),
        "tool_s": t.get("tool_s", 0.0),
    }


def make_row(item: EvalItem, ds: Dataset, cfg: RunConfig, trace, wall_s: float, error: str = "") -> dict[str, Any]:
    from eval.answer_metrics import score_item

    row = {
        "id": item.id,
        "dataset": ds.name,
        "question": item.question,
        "gold": item.answers,
        "answer_format": item.answer_format,
        "evidence_sources": item.evidence_sources,
        "doc_type": item.doc_type,
        "question_type": item.question_type,
        "gold_pages": [[g.file, g.page] for g in item.evidence if g.page is not None],
        "pred": trace.answer if trace else None,
        "status": trace.status if trace else "error",
        "error": error or (trace.error if trace else ""),
        "protocol": cfg.agent.protocol,
        "backend": cfg.policy.backend,
        "trace": f"traces/{safe_id(item.id)}.json" if trace else None,
    }
    row.update(score_item(row))
    sup = (trace.support or {}) if trace else {}
    if sup.get("confidence") is not None:  # a reader that weighs its answers (the embedded default)
        row["confidence"] = sup["confidence"]
        given = row["pred"] if sup.get("answer") == row["pred"] and row["pred"] != NOT_ANSWERABLE else ""
        # the answer it gives at a threshold of 0: '' when a rule abstained, or the passage never names the subject
        row["candidate"] = (sup.get("candidate") if sup.get("abstained_for") == "confidence" else "") or given
        row["candidate_score"] = score_item({**row, "pred": row["candidate"]})["score"] if row["candidate"] else None
        row["pointers"] = [p.get("citation") or p.get("info_id") for p in sup.get("pointers") or []]
    row["retrieval"] = retrieval_scores(item, trace, cfg.agent.protocol)
    row["cost"] = cost_of(trace, wall_s)
    return row


def safe_id(item_id: str) -> str:
    """A file name for an item id.

    >>> safe_id("mmlongbench-0001"), safe_id("../x/y z")
    ('mmlongbench-0001', '.._x_y_z')
    """
    return re.sub(r"[^\w.-]+", "_", item_id)[:150]


# -- the run ----------------------------------------------------------------------------------------
def read_predictions(path: Path, repair: bool = False) -> dict[str, dict[str, Any]]:
    """Rows already written, by id. A half-written last line (a crash mid-write) is dropped, and with
    `repair` cut from the file, so appending continues on a clean line."""
    if not path.exists():
        return {}
    data = path.read_bytes()
    good_end = data.rfind(b"\n") + 1
    rows = {}
    for line in data[:good_end].decode("utf-8").splitlines():
        if line.strip():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a garbled line (e.g. two writers on one file) is dropped and its question reruns
            rows[r["id"]] = r
    if repair and good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return rows


def check_config(run: Path, cfg: RunConfig) -> None:
    path = run / "config.json"
    if not path.exists():
        return
    old, new = flatten(json.loads(path.read_text())), flatten(cfg.to_dict())

    def decides(k: str) -> bool:
        return k.split(".")[0] in ANSWER_KEYS and k not in NOT_ANSWER_KEYS

    diff = sorted(k for k in {*old, *new} if decides(k) and old.get(k) != new.get(k))
    if diff:
        raise RunError(
            f"{run} holds a run with different {', '.join(diff)} ("
            + "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in diff)
            + "). Use another --out folder, or delete that one to start over."
        )


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass


def ensure_index(ds: Dataset, index: str | None, progress: bool) -> Path:
    """The dataset's index: built on first use, brought up to date (new or changed files) afterwards."""
    from retrieval.ingest import Indexer

    path = Path(index) if index else ds.default_index
    for c in ds.corpus:
        if not Path(c).exists():
            raise RunError(f"the corpus {c} of {ds.name} does not exist")
    summary = Indexer(path).index([str(c) for c in ds.corpus], progress=progress)
    if summary.files_indexed and progress:
        print(summary.format())
    return path


def run_eval(cfg: RunConfig, progress: bool = True, agent_factory=None) -> Path:
    """Run (or continue) an evaluation; returns the run folder. `agent_factory(cfg_for_item)` is for tests."""
    from tqdm.auto import tqdm

    from agent.backends.base import load_policy
    from agent.loop import Agent
    from retrieval.retriever import open_retriever

    if not cfg.dataset:
        raise RunError("give a dataset (--dataset, e.g. mmlongbench-doc-smoke)")
    ds = load_dataset(cfg.dataset, corpus=cfg.corpus, page_base=cfg.page_base)
    items = ds.items[: cfg.limit] if cfg.limit else ds.items
    per_doc = cfg.scope == "doc" or (cfg.scope == "auto" and ds.per_doc)
    if cfg.dataset.split(":")[0] in ("jsonl", "demo", "vidoseek", "slidevqa"):
        problems = check_evidence(ds, items)
        if problems and not cfg.allow_missing_evidence:  # retrieval metrics would be silently zero
            more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise RunError(
                f"{len(problems)} gold evidence entries cannot match the corpus "
                f"{', '.join(str(c) for c in ds.corpus)}:\n  "
                + "\n  ".join(problems[:10])
                + more
                + "\nfix the file names or --corpus, or pass --allow-missing-evidence to run anyway "
                "(those questions then count as retrieval misses)"
            )
    run = cfg.run_dir()
    check_config(run, cfg)
    (run / "traces").mkdir(parents=True, exist_ok=True)
    pred_path = run / "predictions.jsonl"
    done = read_predictions(pred_path, repair=True)
    todo = [it for it in items if it.id not in done]
    where = cfg.search_url or str(Path(cfg.index) if cfg.index else ds.default_index)
    config = cfg.to_dict() | {  # the resolved config, and facts of the run that eval/report_markdown.py shows
        "protocol": cfg.agent.protocol,
        "backend": cfg.policy.backend,
        "seed": cfg.policy.seed,
        "index": where,
        "n_items": len(items),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "per_doc_search": per_doc,
    }
    (run / "config.json").write_text(json.dumps(config, indent=1))
    judge = None
    if cfg.judge.base_url:
        from eval.judge import Judge

        judge = Judge(**cfg.judge.to_dict(redact=False))
        judge.check()  # fail before hours of answering, not after
        if cfg.agent.tool_latency:
            from agent.latency import DelayedJudge, shared_latency

            judge = DelayedJudge(judge, shared_latency(cfg.agent.tool_latency))
    if todo:
        index = None if cfg.search_url else ensure_index(ds, cfg.index, progress)  # a server holds its own
        seed_everything(cfg.policy.seed)
        policy = None if agent_factory else load_policy(cfg.policy)
        if policy is not None:  # the sampling the protocol and the user's settings resolve to
            cfg = replace(cfg, agent=cfg.agent.for_policy(policy))  # recorded as the agent resolves it
            config["agent"] = cfg.agent.to_dict()
            config["generation"] = policy.generation(get_protocol(cfg.agent.protocol))
            (run / "config.json").write_text(json.dumps(config, indent=1))
        retriever = (
            None if agent_factory else open_retriever(index, cfg.search_url, text_only=cfg.policy.backend == "embedded")
        )
        lock = threading.Lock()
        scores = [r["score"] for r in done.values() if r["id"] in {it.id for it in items}]
        bar = tqdm(
            total=len(items),
            initial=len(items) - len(todo),
            desc=f"{cfg.agent.protocol}/{cfg.policy.backend}",
            unit="q",
            disable=not progress,
            dynamic_ncols=True,
        )

        def answer(item: EvalItem) -> dict[str, Any]:
            acfg = replace(cfg.agent, docs=[item.doc] if per_doc and item.doc else cfg.agent.docs)
            agent = agent_factory(acfg) if agent_factory else Agent(retriever, policy, acfg)
            t0 = time.perf_counter()
            trace, error = None, ""
            try:
                trace = agent.ask(item.question)
            except Exception as e:  # noqa: BLE001 - one broken question must not stop a benchmark
                error = f"{type(e).__name__}: {e}"
            wall = time.perf_counter() - t0
            if trace is not None:
                tmp = run / "traces" / f".{safe_id(item.id)}.json.tmp"
                tmp.write_text(json.dumps(trace.to_dict(), ensure_ascii=False))
                os.replace(tmp, run / "traces" / f"{safe_id(item.id)}.json")
            return make_row(item, ds, cfg, trace, wall, error)

        with open(pred_path, "a", encoding="utf-8") as f:

            def record(row: dict[str, Any]) -> None:
                with lock:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    scores.append(row["score"])
                    bar.update(1)
                    bar.set_postfix(acc=f"{sum(scores) / len(scores):.3f}", refresh=False)

            try:
                if cfg.concurrency <= 1:
                    for it in todo:
                        record(answer(it))
                else:
                    with ThreadPoolExecutor(cfg.concurrency) as pool:
                        for fut in as_completed([pool.submit(answer, it) for it in todo]):
                            record(fut.result())
            finally:
                bar.close()
                if policy is not None:
                    policy.close()
    if judge is not None:
        judge_run(run, judge, progress)
    from eval.report import write_report

    write_report(run)
    return run


def rescore_run(run: Path) -> dict[str, Any]:
    """Score a finished run's predictions again with the current scorer (eval/answer_metrics.py), keeping any
    judge verdicts, rewrite predictions.jsonl atomically and the report; the accuracy before and after and the
    rows whose score changed."""
    from eval.answer_metrics import score_item
    from eval.report import write_report

    path = Path(run) / "predictions.jsonl"
    if not path.is_file():
        raise RunError(f"{run} holds no predictions.jsonl; give a run folder written by `vimrag eval`")
    rows = list(read_predictions(path).values())
    before_total, changed = 0.0, []
    for r in rows:
        before, judged = r.get("score"), (r.get("scores") or {}).get("judge")
        before_total += float(before or 0)
        r.update(score_item(r))
        if judged is not None:
            r["scores"]["judge"] = judged
            if not r.get("answer_format"):  # as judge_run: the judge's verdict is the primary score
                r["score"], r["scored_by"] = judged, "judge"
        if before != r["score"]:
            changed.append({"id": r["id"], "pred": r.get("pred"), "gold": r.get("gold"), "before": before})
            changed[-1]["after"] = r["score"]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)
    write_report(Path(run))
    n = max(1, len(rows))
    after_total = sum(float(r["score"] or 0) for r in rows)
    return {"run": str(run), "n": len(rows), "before": before_total / n, "after": after_total / n, "changed": changed}


def judge_run(run: Path, judge, progress: bool) -> dict[str, int]:
    """Score every row with the LLM judge (rows judged before keep their verdict) and rewrite the file."""
    from eval.judge import judge_rows

    path = run / "predictions.jsonl"
    rows = list(read_predictions(path).values())
    todo = [r for r in rows if r["scores"].get("judge") is None]
    counts = judge_rows(todo, judge, progress=progress)
    for r in rows:  # without the benchmark's own scoring, the judge's verdict is the primary score
        if not r.get("answer_format") and r["scores"].get("judge") is not None:
            r["score"], r["scored_by"] = r["scores"]["judge"], "judge"
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)
    (run / "judge.json").write_text(json.dumps(counts))
    return counts
