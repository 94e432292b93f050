"""Ingest benchmark: index the dev corpus from scratch, end to end, with today's ingest and the code before issue 15.

    python -m eval.bench_ingest                  # all 67 dev PDFs (2,435 pages), every configuration
    python -m eval.bench_ingest --docs 8         # a quick look on the 8 smallest PDFs
    python -m eval.bench_ingest --only current   # one configuration (or several: --only current,current-fp32)
    python -m eval.bench_ingest --docs 12 --only current,current-fp32 --warm   # the precision choice against fp32

Each configuration runs in a fresh process, one after the other, into a fresh index folder and a fresh model
cache, so the figures include Python start-up, imports, model loading (and the one-time ONNX export) and the
first `Retriever` open that builds BM25 and FAISS: the time from `vimrag index` to the first answerable search.

- `baseline` is the ingest before issue 15, still runnable behind switches: no read-ahead
  (`IngestConfig(pipeline=False)`) and rapidocr's own detection and recognition loop
  (`RapidOcrEngine(pipeline="rapidocr")`), and MiniLM on torch (`VIMRAG_TEXT_BACKEND=torch`).
- `current` is the default ingest: MiniLM in the precision `auto` chooses on this CPU (retrieval/precision.py;
  bf16 autocast on torch where the CPU has native bf16 and it measures faster, else fp32 on ONNX Runtime), its
  one-time measurement and export included.
- `current-fp32` is the default ingest held to fp32 (`VIMRAG_PRECISION=fp32`): MiniLM on ONNX Runtime.
- `current-torch` is the default ingest with MiniLM on torch in fp32.

`--warm` does each configuration's once-per-machine work (the ONNX export, `auto`'s measurement) in a separate
process before the timed run, and reports its seconds apart: the figures a user sees from the second ingest on.

Printed per configuration: pages, seconds, pages/s and its ratio to the baseline, busy seconds per stage
(stages overlap when reading runs ahead), and corpus-wide hybrid page retrieval on the dev questions
(R@5, NDCG@5, as `eval.bench_retrieval` measures them) with the difference to the baseline. The machine
is shared, so read the ratio, not the absolute figures. Needs ../shared/data/mmlongbench_doc.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.bench_retrieval import DATA

CONFIGS = ("baseline", "current", "current-fp32", "current-torch")
STAGES = ("plan", "model load", "pdf text", "render", "ocr", "decode", "embed", "commit", "search index")


def run_child(name: str, corpus: Path, index: Path, cache: Path, warm: bool = False) -> dict:
    """One configuration in its own process; returns its figures. `warm`: its once-per-machine work first, in a
    process of its own, timed apart (`one-time s`)."""
    env = dict(
        os.environ,
        VIMRAG_CACHE=str(cache),
        BENCH_T0=repr(time.time()),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    env.pop("VIMRAG_TEXT_BACKEND", None)  # current: the default, its export or measurement into the fresh cache
    env.pop("VIMRAG_PRECISION", None)
    if name in ("baseline", "current-torch"):
        env["VIMRAG_TEXT_BACKEND"] = "torch"
    if name != "current":
        env["VIMRAG_PRECISION"] = "fp32"
    once = 0.0
    if warm:
        t = time.perf_counter()
        code = "from retrieval.embedders import load_embedder; load_embedder('minilm')"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
        once = time.perf_counter() - t
        env["BENCH_T0"] = repr(time.time())
    out = subprocess.run(
        [sys.executable, "-m", "eval.bench_ingest", "--child", name, "--corpus", str(corpus), "--index", str(index)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {name} run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]) | {"one-time": once}


def child(name: str, corpus: Path, index: Path) -> dict:
    t0 = float(os.environ["BENCH_T0"])
    from retrieval.ingest import Indexer, IngestConfig
    from retrieval.retriever import Retriever

    if name == "baseline":
        from retrieval.ocr_rapid import RapidOcrEngine

        indexer = Indexer(index, IngestConfig(pipeline=False), ocr=RapidOcrEngine(pipeline="rapidocr"))
    else:
        indexer = Indexer(index, IngestConfig())
    summary = indexer.index([corpus], progress=False)
    t = time.perf_counter()
    retriever = Retriever(index)
    summary.timings["search index"] = time.perf_counter() - t
    seconds = time.time() - t0  # from process start: imports and model loads included
    return {
        "name": name,
        "pages": summary.units_indexed,
        "files": summary.files_indexed,
        "failed": summary.failed,
        "seconds": seconds,
        "timings": summary.timings,
        "precision": summary.precision.split(" ")[0] or "-",
        "quality": _quality(retriever, corpus),
    }


def _quality(retriever, corpus: Path) -> dict[str, float]:
    import eval.bench_retrieval as br

    names = {p.name for p in corpus.glob("*.pdf")}
    questions = br.load_questions(Path(os.environ.get("BENCH_DATA", DATA)), names)
    modes, br.MODES = br.MODES, ("hybrid",)
    try:
        q = br.quality(retriever, questions, scoped=False)["hybrid"]
    finally:
        br.MODES = modes
    return {
        "R@5": q["R@5"],
        "NDCG@5": q["NDCG@5"],
        "questions": len(questions),
        "query ms": _latency(retriever, questions),
    }


def _latency(retriever, questions: list[dict], n: int = 60) -> float:
    """Median milliseconds of one hybrid `Retriever.search` (k=5) over the first `n` questions, after 3 warm-ups."""
    import statistics

    texts = [q["question"] for q in questions[:n]] or ["a question"]
    for t in texts[:3]:
        retriever.search(t, k=5)
    times = []
    for t in texts:
        t0 = time.perf_counter()
        retriever.search(t, k=5)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def report(runs: dict[str, dict]) -> str:
    base = runs.get("baseline") or runs.get("current-fp32")  # the ratios' reference, named in the header
    ref = "baseline" if "baseline" in runs else "current-fp32"
    lines = [
        f"| ingest | precision | pages | s end to end | one-time s | pages/s | vs {ref} | hybrid R@5 | NDCG@5 "
        "| ΔR@5 | ΔNDCG@5 | query ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in runs.items():
        rate = r["pages"] / r["seconds"]
        q = r["quality"]
        up = f"{rate / (base['pages'] / base['seconds']):.2f}x" if base else "-"
        d5 = f"{q['R@5'] - base['quality']['R@5']:+.4f}" if base else "-"
        dn = f"{q['NDCG@5'] - base['quality']['NDCG@5']:+.4f}" if base else "-"
        lines.append(
            f"| {name} | {r.get('precision', '-')} | {r['pages']} | {r['seconds']:.1f} | {r.get('one-time', 0):.1f} "
            f"| {rate:.2f} | {up} | {q['R@5']:.4f} | {q['NDCG@5']:.4f} | {d5} | {dn} | {q.get('query ms', 0):.1f} |"
        )
    lines += [
        "",
        "Busy seconds per stage (reading runs ahead of embedding in `current`, so its stages overlap):",
        "",
        "| stage | " + " | ".join(runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    stages = list(STAGES) + sorted({s for r in runs.values() for s in r["timings"]} - set(STAGES))
    for stage in stages:
        cells = [f"{r['timings'][stage]:.1f}" if stage in r["timings"] else "-" for r in runs.values()]
        if any(c != "-" for c in cells):
            lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="the MMLongBench-Doc folder (documents/ and the JSONL)")
    ap.add_argument("--docs", type=int, default=0, help="only the N smallest PDFs (0 = all)")
    ap.add_argument("--only", help=f"configurations to run, comma-separated, in this order ({', '.join(CONFIGS)})")
    ap.add_argument("--warm", action="store_true", help="do the once-per-machine work first, timed apart")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(args.corpus), Path(args.index))))
        return

    data = Path(args.data)
    if not (data / "mmlongbench_doc.jsonl").is_file():
        raise SystemExit(f"no MMLongBench-Doc data at {data}; pass --data (it lives in ../shared/data)")
    names = args.only.split(",") if args.only else list(CONFIGS)
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        raise SystemExit(f"unknown configuration {', '.join(bad)}; choose from {', '.join(CONFIGS)}")
    pdfs = sorted((data / "documents").glob("*.pdf"), key=lambda p: p.stat().st_size)[: args.docs or None]
    os.environ["BENCH_DATA"] = str(data)
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ingest_") as tmp:
        corpus = Path(tmp) / "corpus"  # copies (the indexer does not follow links out of a corpus folder)
        corpus.mkdir()
        for p in pdfs:
            shutil.copy2(p, corpus / p.name)
        for i, name in enumerate(names):  # a name given twice runs twice (alternate them: A,B,B,A)
            key = name if name not in runs else f"{name} #{names[: i + 1].count(name)}"
            print(f"{key}: indexing {len(pdfs)} PDFs from scratch ...", flush=True)
            runs[key] = run_child(name, corpus, Path(tmp) / f"idx_{i}", Path(tmp) / f"cache_{i}", args.warm)
            r = runs[key]
            print(
                f"{key}: {r['pages']} pages in {r['seconds']:.0f} s ({r['pages'] / r['seconds']:.2f} pages/s)"
                + (f"; failed: {r['failed']}" if r["failed"] else ""),
                flush=True,
            )
    print()
    print(report(runs))
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
