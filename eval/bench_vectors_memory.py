"""Section 3 of `python -m eval.bench_vectors`: multi-vector memory, one process per layout.

Each layout is built and saved in one fresh process, then loaded and queried in another that reports its
resident memory (peak RSS from VmHWM), so one layout's allocations never count against another's. The
workers are `python -m eval.bench_vectors --mv-worker STAGE:LAYOUT`; the corpus, the queries and the
timing helpers are eval/bench_vectors_data.py's. See that module's docstring for the layouts and targets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from eval.bench_vectors_data import mv_data, p50_ms, recall_at, set_threads, time_queries, timed_build
from retrieval.index_base import get_faiss
from retrieval.late_interaction import MultiVectorIndex


def mv_layouts(args) -> dict[str, dict]:
    """Layout name -> MultiVectorIndex options. "before" is the pre-issue-15 layout (tokens held twice, float32)."""
    out = {"before": {"dtype": "float32", "codec": "flat"}, "float16": {"dtype": "float16"}}
    out.update({f"float16 pool {pf}": {"pool_factor": pf, "dtype": "float16"} for pf in args.mv_pool_factors})
    return out


def brute_top(
    tokens: np.ndarray, offsets: np.ndarray, queries: list[np.ndarray], k: int = 10, block_tokens: int = 8192
) -> np.ndarray:
    """(nq, k) document rows of the exact MaxSim top-k of every query at once, in float32 blocks of tokens."""
    qs = np.stack(queries)  # (nq, m, dim)
    nq, m, dim = qs.shape
    qt = np.ascontiguousarray(qs.reshape(-1, dim).T)  # (dim, nq * m)
    n_docs = len(offsets) - 1
    scores = np.empty((n_docs, nq), dtype=np.float32)
    d = 0
    while d < n_docs:
        e = max(d + 1, int(np.searchsorted(offsets, offsets[d] + block_tokens, side="right")) - 1)
        sim = tokens[offsets[d] : offsets[e]].astype(np.float32, copy=False) @ qt  # (block, nq * m)
        best = np.maximum.reduceat(sim, offsets[d:e] - offsets[d], axis=0)  # (e - d, nq * m)
        scores[d:e] = best.reshape(e - d, nq, m).sum(axis=2)
        d = e
    return np.argsort(-scores, axis=0, kind="stable")[:k].T  # (nq, k)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:  # Linux: resident pages now
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    """This process's peak resident memory. Not ru_maxrss: Linux carries that over from the forked parent
    across exec, so a worker started by a big parent would report the parent's size."""
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))


def mv_worker(args) -> dict:
    """One stage of the memory benchmark in a fresh process: build LAYOUT and save it, or load it and serve."""
    stage, layout = args.mv_worker.split(":", 1)
    n_docs, path = args.mv_memory_docs, os.path.join(args.mv_dir, layout.replace(" ", "_") + ".mvi")
    if stage == "build":
        docs, queries, src = mv_data(args, n_docs)
        out = {}
        if layout == "before":  # the reference every layout is scored against: float32 MaxSim, unpooled tokens
            set_threads(args.build_threads)
            offsets = np.arange(n_docs + 1, dtype=np.int64) * args.mv_tokens
            t = time.perf_counter()
            truth = brute_top(docs.reshape(-1, args.mv_dim), offsets, queries)
            out["truth_s"] = time.perf_counter() - t
            np.savez(os.path.join(args.mv_dir, "queries.npz"), queries=np.stack(queries), truth=truth, src=src)
        mvi, out["build_s"] = timed_build(
            lambda: MultiVectorIndex(args.mv_dim, **mv_layouts(args)[layout]).build(np.arange(n_docs), list(docs)),
            f"build {layout}",
            args.build_threads,
        )
        del docs
        mvi.save(path)
        return dict(out, file_bytes=os.path.getsize(path))
    get_faiss()
    base = _rss_bytes()  # interpreter, numpy and faiss, before the index
    mvi = MultiVectorIndex.load(path)
    loaded = _rss_bytes()
    saved = np.load(os.path.join(args.mv_dir, "queries.npz"))
    queries, truth, src = list(saved["queries"]), saved["truth"], saved["src"]
    set_threads(args.query_threads)
    times, res = time_queries(lambda q: mvi.search(q, 10), queries, f"serve {layout}")
    peak = _peak_rss_bytes()  # before the reference scoring below, which allocates blocks of its own
    found = np.array([[d for d, _ in r] + [-1] * (10 - len(r)) for r in res])  # doc ids are rows here
    set_threads(args.build_threads)
    n_own = min(len(queries), args.mv_own_queries)  # brute force over what this layout stores (costly: a subset)
    own = truth[:n_own] if layout == "before" else brute_top(mvi.tokens, mvi.offsets, queries[:n_own])
    return {
        "base_rss": base,
        "loaded_rss": loaded,
        "peak_rss": peak,
        "index_bytes": sum(mvi.memory_bytes().values()),
        "n_tokens": mvi.n_tokens,
        "kind": mvi.kind,
        "p50_ms": p50_ms(times),
        "same_top10": float(np.mean([set(f) == set(t) for f, t in zip(found, truth)])),
        "recall10": recall_at(found, truth),
        "top1_src": float(np.mean(found[:, 0] == src)),
        "same_top10_own": float(np.mean([set(f) == set(t) for f, t in zip(found, own)])),
        "own_vs_truth": float(np.mean([set(o) == set(t) for o, t in zip(own, truth)])),
        "n_own": n_own,
    }


def _run_worker(args, stage: str, layout: str) -> dict:
    cmd = [sys.executable, "-m", "eval.bench_vectors", "--mv-worker", f"{stage}:{layout}", "--mv-dir", args.mv_dir]
    for name in (
        "mv_memory_docs",
        "mv_tokens",
        "mv_dim",
        "mv_topics",
        "mv_sigma",
        "mv_queries",
        "mv_query_tokens",
        "mv_query_noise",
        "mv_own_queries",
        "query_threads",
        "build_threads",
        "seed",
    ):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--mv-pool-factors", ",".join(map(str, args.mv_pool_factors))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("MVRESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"worker {stage}:{layout} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("MVRESULT ") :])


def bench_mv_memory(args) -> None:
    args.mv_dir = tempfile.mkdtemp(prefix="bench-mv-", dir=args.mv_dir)
    rows = {}
    try:
        for layout in mv_layouts(args):
            rows[layout] = _run_worker(args, "build", layout)
            rows[layout].update(_run_worker(args, "serve", layout))
            os.unlink(os.path.join(args.mv_dir, layout.replace(" ", "_") + ".mvi"))
            print(f"({layout}: {json.dumps(rows[layout])})", flush=True)
    finally:
        shutil.rmtree(args.mv_dir, ignore_errors=True)
    before = rows["before"]
    mib = 1 << 20
    print(
        f"\n### Multi-vector memory at {args.mv_memory_docs:,} pages ({args.mv_tokens} tokens of dim {args.mv_dim} "
        f"a page, {args.mv_query_tokens} query tokens, "
        f"{args.mv_queries} queries; one process per layout: load the saved index, serve every query)\n"
    )
    print(
        f"Process without an index: {before['base_rss'] / mib:,.0f} MiB. Agreement and recall@10 are against "
        f"brute-force float32 MaxSim over the unpooled tokens (computed in {before['truth_s']:.0f} s).\n"
    )
    print(
        "| layout | token vectors | candidate index | file MiB | RSS after load MiB | peak RSS MiB | peak vs before "
        "| index MiB (own count) | identical top-10 | recall@10 "
        f"| identical top-10 vs own brute force ({before['n_own']} q) | own brute = float32 brute "
        "| top-1 = source page | two-stage p50 ms | build s |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for layout, r in rows.items():
        print(
            f"| {layout} | {r['n_tokens']:,} | {r['kind']} | {r['file_bytes'] / mib:,.0f} "
            f"| {r['loaded_rss'] / mib:,.0f} "
            f"| {r['peak_rss'] / mib:,.0f} | {r['peak_rss'] / before['peak_rss']:.2f}x | {r['index_bytes'] / mib:,.0f} "
            f"| {r['same_top10']:.1%} | {r['recall10']:.4f} | {r['same_top10_own']:.1%} | {r['own_vs_truth']:.1%} "
            f"| {r['top1_src']:.1%} | {r['p50_ms']:.1f} | {r['build_s']:.0f} |"
        )
