r"""`vimrag synth trajectories` and `vimrag synth difficulty`: a teacher's right trajectories as SFT data, compiled
long-context QA, and a reference agent's pass rate per item.

    vimrag synth trajectories --questions runs/synth/q --out runs/synth/teacher --backend openai \\
        --base-url URL --protocol vimrag --compile acc
    vimrag sft --traces runs/synth/teacher/sft --model M --output-dir runs/sft/x        # the kept steps
    vimrag sft --traces runs/synth/teacher/acc.jsonl --model M --output-dir runs/sft/y  # the ACC examples
    vimrag synth difficulty --questions runs/synth/q --k 4 --backend openai --base-url ...

The teacher answers every question through `vimrag eval`'s runner (eval/runner.py), so it resumes after a crash
and runs `concurrency` questions at once. A trajectory is kept when eval's scorer (or the judge, when one is set)
says it is right and, for vimrag, when its memory graph has no dead-end search (GGPO's P_ans rule, rl/ggpo.py
`dead_end_searches`). The kept traces and their prediction rows are written as a folder `vimrag sft` reads.

ACC (Agent Context Compilation): each kept trajectory also becomes one tool-free example. The prompt is the
question and every observation the trajectory gathered, in order: each search's results (their text, and their
pictures for a VLM), each crop or zoom, and each error the agent was told of. The target is the trajectory's
answer. `vimrag sft` reads the examples' JSONL; pictures are re-rendered from the trace's evidence.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

ACC_INTRO = "Question: {question}\n\nA search agent gathered the observations below, in this order."
ACC_ASK = "Answer the question from these observations alone, in a few words."
OBS_CHARS = 1500  # text of one result kept in an ACC prompt


def questions_file(path: str) -> Path:
    """The questions JSONL: a `synth questions` folder's questions.jsonl, or the file itself."""
    p = Path(path)
    q = p / "questions.jsonl" if p.is_dir() else p
    if not q.is_file():
        raise FileNotFoundError(
            f"no questions at {path}; give a `vimrag synth questions` folder or its questions.jsonl"
        )
    return q


def _index_and_corpus(qdir: Path, index: str | None) -> tuple[str, str]:
    """The index the questions were made from (their config.json) and its corpus folder."""
    from retrieval.stores import open_store

    cfg = qdir / "config.json"
    idx = index or (json.loads(cfg.read_text()).get("index") if cfg.exists() else None)
    if not idx:
        raise FileNotFoundError(f"{qdir} has no config.json naming its index; pass --index")
    roots = open_store(idx).roots()
    if not roots:
        raise FileNotFoundError(f"the index {idx} lists no corpus folder")
    return idx, roots[0]


def kept_rows(run: Path, min_score: float, protocol: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The teacher's prediction rows whose trajectory is kept, and why the others were not."""
    from eval.runner import read_predictions
    from rl.ggpo import dead_end_searches

    why = {"wrong": 0, "dead_end": 0, "no_trace": 0, "error": 0}
    keep = []
    for row in read_predictions(run / "predictions.jsonl").values():
        if row.get("error"):
            why["error"] += 1
            continue
        judged = (row.get("scores") or {}).get("judge")
        score = judged if judged is not None else row.get("score", 0.0)
        if score < min_score:
            why["wrong"] += 1
            continue
        trace_path = run / "traces" / Path(row.get("trace") or "").name if row.get("trace") else None
        if trace_path is None or not trace_path.is_file():
            why["no_trace"] += 1
            continue
        if protocol == "vimrag" and dead_end_searches(json.loads(trace_path.read_text()).get("graph") or {}):
            why["dead_end"] += 1
            continue
        keep.append(row | {"_trace_path": str(trace_path)})
    return keep, why


def write_sft_folder(rows: list[dict[str, Any]], out: Path) -> Path:
    """The kept traces and their rows, laid out as a `vimrag eval` run (`vimrag sft --traces OUT` reads it)."""
    sft = out / "sft"
    if sft.exists():
        shutil.rmtree(sft)
    (sft / "traces").mkdir(parents=True)
    lines = []
    for r in rows:
        src = Path(r["_trace_path"])
        shutil.copyfile(src, sft / "traces" / src.name)
        lines.append(json.dumps({k: v for k, v in r.items() if k != "_trace_path"}, ensure_ascii=False))
    (sft / "predictions.jsonl").write_text("".join(x + "\n" for x in lines))
    return sft


# -- ACC ---------------------------------------------------------------------------------------------------
def _image_sizes(trace: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Each picture's size as the model was shown it (first sight), from the steps' messages."""
    sizes: dict[str, tuple[int, int]] = {}
    for step in trace.get("steps") or []:
        for m in step.get("messages") or []:
            content = m.get("content")
            for p in content if isinstance(content, list) else []:
                if p.get("type") == "image" and p.get("ref") and p["ref"] not in sizes:
                    sizes[p["ref"]] = (int(p["width"]), int(p["height"]))
    return sizes


def observations(trace: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Every observation of a trajectory, in order, each as content parts: a search's results (label, citation,
    picture as the model saw it, text), a crop's or zoom's new picture, an error the agent was told of."""
    evidence = trace.get("evidence") or {}
    sizes = _image_sizes(trace)

    def picture(info_id: str) -> list[dict[str, Any]]:
        if info_id in sizes:
            w, h = sizes[info_id]
            return [{"type": "image", "ref": info_id, "width": w, "height": h}]
        return []

    out: list[list[dict[str, Any]]] = []
    for ev in trace.get("events") or []:
        kind = ev.get("type")
        if kind == "search_results":
            said = f'Search "{ev.get("query", "")}" returned {len(ev.get("results") or [])} results.'
            parts = [{"type": "text", "text": said}]
            for hit in ev.get("results") or []:
                info = hit.get("info_id", "")
                parts.append({"type": "text", "text": f"{hit.get('label') or info} ({hit.get('citation', '')}):"})
                parts += picture(info)
                text = ((evidence.get(info) or {}).get("text") or "").strip()
                if text:
                    parts.append({"type": "text", "text": text[:OBS_CHARS]})
            out.append(parts)
        elif kind in ("cropped", "scaled"):
            what = "A crop" if kind == "cropped" else "A zoomed view"
            said = f"{what} of {ev.get('source_info_id', '')}: {ev.get('info_id', '')} ({ev.get('citation', '')})."
            parts = [{"type": "text", "text": said}]
            out.append(parts + picture(ev.get("info_id", "")))
        elif kind == "error":
            out.append([{"type": "text", "text": f"The agent was told: {ev.get('message', '')}"}])
    return out


def acc_example(trace: dict[str, Any], item_id: str, trace_path: str) -> dict[str, Any]:
    """One ACC example: the question and the trajectory's observations in order, answered without tools."""
    obs = observations(trace)
    content: list[dict[str, Any]] = [{"type": "text", "text": ACC_INTRO.format(question=trace["question"])}]
    for i, parts in enumerate(obs, 1):
        content.append({"type": "text", "text": f"\nObservation {i}:"})
        content += parts
    content.append({"type": "text", "text": "\n" + ACC_ASK})
    return {
        "id": item_id,
        "messages": [{"role": "user", "content": content}],
        "target": trace.get("answer") or "",
        "trace": trace_path,
        "observations": len(obs),
    }


def compile_acc(rows: list[dict[str, Any]], sft_dir: Path, out: Path) -> Path:
    path = out / "acc.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            name = Path(r["_trace_path"]).name
            trace = json.loads((sft_dir / "traces" / name).read_text())
            f.write(json.dumps(acc_example(trace, r["id"], str(sft_dir / "traces" / name)), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def synth_trajectories(
    questions: str,
    out: str,
    policy,
    agent,
    index: str | None = None,
    concurrency: int = 1,
    min_score: float = 1.0,
    compile: str = "",
    judge=None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the teacher over the questions, keep its right trajectories, write them as SFT input (and ACC)."""
    from eval.runner import JudgeConfig, RunConfig, run_eval

    qfile = questions_file(questions)
    idx, corpus = _index_and_corpus(qfile.parent, index)
    outp = Path(out)
    run_cfg = RunConfig(
        dataset=f"jsonl:{qfile}",
        corpus=corpus,
        index=idx,
        policy=policy,
        agent=agent,
        concurrency=concurrency,
        out=str(outp / "teacher"),
        judge=judge or JudgeConfig(),
        scope="auto",
    )
    run = run_eval(run_cfg, progress=progress)
    rows, why = kept_rows(run, min_score, agent.protocol)
    sft = write_sft_folder(rows, outp)
    n_questions = sum(1 for x in qfile.read_text().splitlines() if x.strip())
    summary: dict[str, Any] = {"questions": n_questions, "kept": len(rows), "dropped": why}
    summary["sft"] = str(sft)
    if compile == "acc":
        summary["acc"] = str(compile_acc(rows, sft, outp))
    elif compile:
        raise ValueError(f"unknown --compile {compile!r}; the one compiler is acc")
    (outp / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def synth_difficulty(
    questions: str, k: int, policy, agent, index: str | None = None, concurrency: int = 1, progress: bool = True
) -> dict[str, Any]:
    """A reference agent's pass rate per item over `k` samples (seeds policy.seed .. seed+k-1), saved beside the
    questions as difficulty.json and written into questions.jsonl and the card."""
    from eval.runner import RunConfig, read_predictions, run_eval
    from rl.synth.card import write_outputs

    if k < 1:
        raise ValueError(f"--k must be at least 1, got {k}")
    qfile = questions_file(questions)
    idx, corpus = _index_and_corpus(qfile.parent, index)
    passes: dict[str, list[float]] = {}
    for s in range(k):
        run_cfg = RunConfig(
            dataset=f"jsonl:{qfile}",
            corpus=corpus,
            index=idx,
            policy=replace(policy, seed=policy.seed + s),
            agent=agent,
            concurrency=concurrency,
            out=str(qfile.parent / "difficulty" / f"sample{s}"),
        )
        run = run_eval(run_cfg, progress=progress)
        for row in read_predictions(run / "predictions.jsonl").values():
            passes.setdefault(row["id"], []).append(1.0 if row.get("score", 0.0) >= 1.0 else 0.0)
    rates = {i: sum(v) / len(v) for i, v in passes.items()}
    learnable = sum(1 for r in rates.values() if 0 < r < 1)
    record = {
        "k": k,
        "protocol": agent.protocol,
        "backend": policy.backend,
        "pass_rate": rates,
        "learnable": learnable,
    }
    (qfile.parent / "difficulty.json").write_text(json.dumps(record, indent=1))
    if (qfile.parent / "journal.jsonl").exists():
        write_outputs(qfile.parent, progress)
    return {k_: v for k_, v in record.items() if k_ != "pass_rate"} | {"items": len(rates)}
