"""Benchmark the FAISS side of retrieval: exact vs approximate search, and two-stage late interaction.

What it measures, on synthetic data so that it runs anywhere without weights:

1. Single-vector scaling (`VectorIndex`): unit vectors of dim 384 (like MiniLM) at 10k, 100k and 1M.
   The corpus is a mixture of Gaussians: `--clusters` random unit centres, each vector a centre plus
   isotropic noise of norm ~`--sigma`, then L2-normalised; queries are fresh draws from the same
   mixture, never copies of corpus vectors. Per size: build time, p50 latency of one query at a time
   for exact (flat), IVF (the shipped approximate kind and defaults) and HNSW (M=32, efConstruction
   40, efSearch 64), recall@10 of each against exact, and speed-ups. At the largest size: the nprobe /
   efSearch trade-off behind the defaults, and `allowed_ids` filtering. Target: the shipped
   approximate index >= 10x faster than exact at 1M with recall@10 >= 0.95.
2. Multi-vector (`MultiVectorIndex`): pages of `--mv-tokens` token vectors of dim 128 (ColQwen2's dim;
   real pages have ~700-1000 tokens, fewer here so 20k pages fit in memory), grouped 32 pages per PDF
   that share topics. A query is 8 noisy copies of one page's tokens plus 8 random filler tokens, so
   every query has one truly relevant page. Two-stage search is compared with brute-force MaxSim over
   all pages (one matrix product per batch of ~260k contiguous tokens, then a segmented max, the same
   code as the rerank): fraction of queries with identical top-10 sets (target >= 99%), p50 latency of
   each, speed-up at the largest size (target >= 10x). Sizes below the token-index threshold (no candidate
   stage, every search exact) also time exact search over float16 tokens (issue 15's storage) against the
   float32 tokens "auto" holds there:
       python -m eval.bench_vectors --skip-single --skip-mv-memory --mv-docs 1000 --mv-queries 30
3. Multi-vector memory (eval/bench_vectors_memory.py), at the largest multi-vector size: each layout is
   built in its own subprocess, saved, then loaded and queried in a fresh one that reports its resident
   memory (peak RSS, so one layout's allocations never count against another's). Layouts: "before" (the
   layout this index had until issue 15: float32 token matrix plus a float32 IVF-Flat copy of every token;
   reconstructed with dtype="float32", codec="flat", which lacks only the old IDMap's 16 bytes a token), the
   shipped layout (float16 tokens at this size), and float16 with token pooling (`--mv-pool-factors`).
   Agreement and recall@10 are against brute-force float32 MaxSim over the unpooled tokens. Target: peak RSS
   <= 0.55x "before" with identical top-10 for >= 99% of queries.

Latency is per single query with `--query-threads` threads for BLAS and batch searches (default 1, as
ann-benchmarks does: one query per core; on a shared 2-core box multi-threaded single-query timings
mostly measure scheduler waits). Builds use `--build-threads` (default: all cores).

Left out on purpose: real embeddings (retrieval quality on real data is measured elsewhere in eval/),
GPU timings, and HNSW parameter sweeps beyond efSearch (its build alone takes minutes at 1M).

Full run (~15-20 min on 2 cores, peak ~5 GiB RAM; use nohup):
    python -m eval.bench_vectors
Multi-vector memory only (~6-10 min):
    python -m eval.bench_vectors --skip-single --skip-mv-latency
Quick run (~2 min):
    python -m eval.bench_vectors --sizes 10000,100000 --mv-docs 500,2000 --queries 50 --mv-queries 50
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import tempfile
import time

import numpy as np

from eval.bench_vectors_data import (
    mixture,
    mv_data,
    p50_ms,
    random_units,
    recall_at,
    set_threads,
    time_queries,
    timed_build,
)
from eval.bench_vectors_memory import bench_mv_memory, mv_worker
from retrieval import index as vindex
from retrieval import late_interaction
from retrieval.index import VectorIndex
from retrieval.index_base import get_faiss
from retrieval.late_interaction import MultiVectorIndex

# ---------------------------------------------------------------- 1. single-vector scaling


def bench_scaling(args) -> None:
    rows, last = [], None
    for n in args.sizes:
        rng = np.random.default_rng(args.seed + n)
        centres = random_units(args.clusters, args.dim, rng)  # (c, dim)
        xb = mixture(n, centres, args.sigma, rng)  # (n, dim)
        xq = mixture(args.queries, centres, args.sigma, rng)  # (nq, dim)
        ids = np.arange(n, dtype=np.int64)

        flat, flat_build = timed_build(
            lambda ids=ids, xb=xb: VectorIndex(args.dim, kind="flat").build(ids, xb),
            f"flat build {n:,}",
            args.build_threads,
        )
        set_threads(args.query_threads)
        flat_t, _ = time_queries(lambda q, flat=flat: flat.search(q, 10), xq, f"flat {n:,}")
        _, truth = flat.search(xq, 10)  # (nq, 10) exact ground truth
        del flat
        gc.collect()

        row = {"n": n, "flat_build": flat_build, "flat_p50": p50_ms(flat_t)}
        for kind in ("ivf", "hnsw"):
            if kind == "hnsw" and n not in args.hnsw_sizes:
                continue
            idx, build = timed_build(
                lambda kind=kind, ids=ids, xb=xb: VectorIndex(args.dim, kind=kind).build(ids, xb),
                f"{kind} build {n:,}",
                args.build_threads,
            )
            set_threads(args.query_threads)
            t, found = time_queries(lambda q, idx=idx: idx.search(q, 10)[1][0], xq, f"{kind} {n:,}")
            row[kind] = (build, p50_ms(t), recall_at(np.array(found), truth))
            if n == args.sizes[-1]:
                sweep(args, kind, idx, xq, truth, row)
            if n == args.sizes[-1] and kind == "ivf":
                last = (xb, xq, ids, idx)
            else:
                del idx
            gc.collect()
        rows.append(row)

    print(
        f"\n### Single-vector scaling (dim {args.dim}, {args.queries} queries, {args.clusters} clusters, "
        f"sigma {args.sigma}; IVF nprobe={vindex.DEFAULT_NPROBE} of nlist~sqrt(n); HNSW M={vindex.DEFAULT_HNSW_M} "
        f"efConstruction={vindex.DEFAULT_EF_CONSTRUCTION} efSearch={vindex.DEFAULT_EF_SEARCH})\n"
    )
    print(
        "| vectors | exact p50 ms | IVF build s | IVF p50 ms | IVF speed-up | IVF recall@10 "
        "| HNSW build s | HNSW p50 ms | HNSW speed-up | HNSW recall@10 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = [f"{r['n']:,}", f"{r['flat_p50']:.2f}"]
        for kind in ("ivf", "hnsw"):
            if kind in r:
                b, p, rec = r[kind]
                cells += [f"{b:.1f}", f"{p:.3f}", f"{r['flat_p50'] / p:.1f}x", f"{rec:.3f}"]
            else:
                cells += ["-"] * 4
        print("| " + " | ".join(cells) + " |")
    last_row = rows[-1]
    if "sweep" in last_row:
        print(
            f"\nTrade-off at {last_row['n']:,} vectors (speed-up against exact p50 {last_row['flat_p50']:.1f} ms; "
            "the shipped default is marked *):\n"
        )
        print("| index | setting | p50 ms | speed-up | recall@10 |")
        print("|---|---|---:|---:|---:|")
        for kind, setting, p, rec, shipped in last_row["sweep"]:
            mark = " *" if shipped else ""
            print(f"| {kind} | {setting}{mark} | {p:.3f} | {last_row['flat_p50'] / p:.1f}x | {rec:.3f} |")
    if last is not None:
        bench_filtered(args, *last)


def sweep(args, kind: str, idx: VectorIndex, xq: np.ndarray, truth: np.ndarray, row: dict) -> None:
    """Latency and recall for the knob that trades them: nprobe for IVF, efSearch for HNSW."""
    name, values, default = (
        ("nprobe", (4, 8, 16, 32, 64), idx.nprobe) if kind == "ivf" else ("efSearch", (32, 64, 128, 256), idx.ef_search)
    )
    for v in values:
        setattr(idx, "nprobe" if kind == "ivf" else "ef_search", v)
        t, found = time_queries(lambda q: idx.search(q, 10)[1][0], xq, f"{kind} {name}={v}")
        row.setdefault("sweep", []).append(
            (kind.upper(), f"{name}={v}", p50_ms(t), recall_at(np.array(found), truth), v == default)
        )
    setattr(idx, "nprobe" if kind == "ivf" else "ef_search", default)


def bench_filtered(args, xb: np.ndarray, xq: np.ndarray, ids: np.ndarray, idx: VectorIndex) -> None:
    """allowed_ids at the largest size: latency and recall@10 against exact search over the allowed set."""
    n, nq = len(xb), min(len(xq), 50)
    rng = np.random.default_rng(args.seed)
    print(f"\n### allowed_ids filtering on the {n:,}-vector {idx.kind.upper()} index ({nq} queries, k=10)\n")
    print("| allowed ids | path | p50 ms | recall@10 vs exact over allowed | queries with 10 hits |")
    print("|---:|---|---:|---:|---:|")
    for frac in (0.0001, 0.01, 0.05, 0.5):
        allowed = np.sort(rng.choice(ids, max(10, int(frac * n)), replace=False))
        truth = allowed[np.argsort(-(xq[:nq] @ xb[allowed].T), axis=1)[:, :10]]  # (nq, 10)
        t, found = time_queries(
            lambda q, allowed=allowed: idx.search(q, 10, allowed_ids=allowed)[1][0], xq[:nq], f"filtered {frac:.2%}"
        )
        found = np.array(found)
        path = "exact over allowed" if idx._prefer_exact(len(allowed)) else f"{idx.kind.upper()} + id selector"
        leak = "" if np.isin(found[found >= 0], allowed).all() else " (ids outside the allowed set!)"
        print(
            f"| {len(allowed):,} ({frac:.2%}) | {path} | {p50_ms(t):.2f} | {recall_at(found, truth):.3f} "
            f"| {float((found >= 0).all(axis=1).mean()):.0%}{leak} |"
        )


# ---------------------------------------------------------------- 2. multi-vector


def bench_multivector(args) -> None:
    rows, sweep_rows, small_rows = [], [], []
    for n_docs in args.mv_docs:
        docs, queries, src = mv_data(args, n_docs)
        mvi, build = timed_build(
            lambda n_docs=n_docs, docs=docs: MultiVectorIndex(args.mv_dim).build(np.arange(n_docs), list(docs)),
            f"multi-vector build {n_docs:,} pages",
            args.build_threads,
        )
        if mvi.kind == "flat":  # no token index: exact search over float32 tokens, against issue 15's float16
            half = MultiVectorIndex(args.mv_dim, dtype="float16").build(np.arange(n_docs), list(docs))
            set_threads(args.query_threads)
            t16, _ = time_queries(lambda q, half=half: half.search(q, 10), queries, f"float16 exact {n_docs:,}")
            t32, _ = time_queries(lambda q, mvi=mvi: mvi.search(q, 10), queries, f"float32 exact {n_docs:,}")
            small_rows.append((n_docs, mvi.n_tokens, p50_ms(t16), p50_ms(t32)))
            del half
        del docs
        gc.collect()
        set_threads(args.query_threads)
        brute_t, brute = time_queries(lambda q, mvi=mvi: mvi.exact_search(q, 10), queries, f"brute MaxSim {n_docs:,}")
        two_t, two = time_queries(lambda q, mvi=mvi: mvi.search(q, 10), queries, f"two-stage {n_docs:,}")
        rows.append(
            (
                n_docs,
                mvi.n_tokens,
                mvi.kind,
                build,
                p50_ms(brute_t),
                p50_ms(two_t),
                same_top(brute, two),
                float(np.mean([b[0][0] == s for b, s in zip(brute, src)])),
                len(queries),
            )
        )
        if n_docs == args.mv_docs[-1]:
            for kk in (128, 256, 512):
                for nc in (128, 256):
                    t, res = time_queries(
                        lambda q, mvi=mvi, nc=nc, kk=kk: mvi.search(q, 10, n_candidates=nc, token_k=kk),
                        queries,
                        f"token_k={kk} n_candidates={nc}",
                    )
                    shipped = kk == mvi.token_k and nc == mvi.n_candidates
                    sweep_rows.append((kk, nc, p50_ms(t), same_top(brute, res), shipped))
        del mvi
        gc.collect()

    print(
        f"\n### Multi-vector late interaction ({args.mv_tokens} tokens per page, dim {args.mv_dim}, "
        f"{args.mv_query_tokens} query tokens, {args.mv_topics} topics; token_k={late_interaction.DEFAULT_TOKEN_K}, "
        f"n_candidates={late_interaction.DEFAULT_N_CANDIDATES}, "
        f"token IVF nprobe={late_interaction.DEFAULT_TOKEN_NPROBE})\n"
    )
    print(
        "| pages | token vectors | token index | build s | brute-force p50 ms | two-stage p50 ms | speed-up "
        "| identical top-10 | brute top-1 = source page |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for n_docs, n_tok, kind, build, bp, tp, same, top1, nq in rows:
        print(
            f"| {n_docs:,} | {n_tok:,} | {kind} | {build:.1f} | {bp:.1f} | {tp:.2f} | {bp / tp:.1f}x "
            f"| {same:.1%} ({nq} q) | {top1:.1%} |"
        )
    if small_rows:
        print(
            "\nBelow the token-index threshold every search is exact; tokens are held as float32 there "
            "(dtype auto), as float16 only once there is a token index:\n"
        )
        print("| pages | token vectors | float16 tokens p50 ms | float32 tokens p50 ms (shipped) | speed-up |")
        print("|---:|---:|---:|---:|---:|")
        for n_docs, n_tok, p16, p32 in small_rows:
            print(f"| {n_docs:,} | {n_tok:,} | {p16:.1f} | {p32:.1f} | {p16 / p32:.2f}x |")
    if sweep_rows:
        bp = rows[-1][4]
        print(
            f"\nTrade-off at {rows[-1][0]:,} pages (speed-up against brute force p50 {bp:.1f} ms; shipped default *):\n"
        )
        print("| token_k | n_candidates | two-stage p50 ms | speed-up | identical top-10 |")
        print("|---:|---:|---:|---:|---:|")
        for kk, nc, p, same, shipped in sweep_rows:
            print(f"| {kk}{' *' if shipped else ''} | {nc} | {p:.2f} | {bp / p:.1f}x | {same:.1%} |")


def same_top(a: list, b: list) -> float:
    """Fraction of queries whose result lists hold the same documents (as sets)."""
    return float(np.mean([{d for d, _ in x} == {d for d, _ in y} for x, y in zip(a, b)]))


# ---------------------------------------------------------------- main


def _ints(s: str) -> list[int]:
    return [int(float(x)) for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=_ints, default=[10_000, 100_000, 1_000_000], help="corpus sizes (comma list)")
    ap.add_argument("--hnsw-sizes", type=_ints, default=None, help="sizes that also build HNSW (default: all)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200, help="single-vector queries per size")
    ap.add_argument("--clusters", type=int, default=1000, help="mixture components (random unit centres)")
    ap.add_argument("--sigma", type=float, default=1.0, help="noise norm around each centre, before normalising")
    ap.add_argument("--mv-docs", type=_ints, default=[1_000, 5_000, 20_000], help="multi-vector corpus sizes (pages)")
    ap.add_argument("--mv-tokens", type=int, default=128, help="token vectors per page")
    ap.add_argument("--mv-dim", type=int, default=128)
    ap.add_argument("--mv-topics", type=int, default=2048, help="topic centres the tokens are drawn around")
    ap.add_argument("--mv-sigma", type=float, default=1.0)
    ap.add_argument("--mv-queries", type=int, default=200)
    ap.add_argument("--mv-query-tokens", type=int, default=16)
    ap.add_argument("--mv-query-noise", type=float, default=0.5)
    ap.add_argument("--mv-memory-docs", type=int, default=None, help="pages for the memory table (default: largest)")
    ap.add_argument("--mv-pool-factors", type=_ints, default=[3], help="token pooling factors to measure")
    ap.add_argument(
        "--mv-own-queries",
        type=int,
        default=50,
        help="memory table: queries also scored by brute force over each layout's stored tokens",
    )
    ap.add_argument("--mv-dir", default=tempfile.gettempdir(), help="where the memory table's index files go")
    ap.add_argument("--mv-worker", default=None, help=argparse.SUPPRESS)  # STAGE:LAYOUT, run by the memory table
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-multi", action="store_true")
    ap.add_argument("--skip-mv-latency", action="store_true", help="multi-vector: only the memory table")
    ap.add_argument("--skip-mv-memory", action="store_true", help="multi-vector: only the latency table")
    ap.add_argument("--query-threads", type=int, default=1)
    ap.add_argument("--build-threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.hnsw_sizes is None:
        args.hnsw_sizes = list(args.sizes)
    if args.mv_memory_docs is None:
        args.mv_memory_docs = args.mv_docs[-1]
    if args.mv_worker:
        print("MVRESULT " + json.dumps(mv_worker(args)))
        return

    faiss = get_faiss()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# bench_vectors: {platform.machine()}, {os.cpu_count()} cores (load {load:.1f} at start), "
        f"faiss {faiss.__version__}, numpy {np.__version__}; build threads {args.build_threads}, "
        f"query threads {args.query_threads}"
    )
    t0 = time.perf_counter()
    if not args.skip_single:
        bench_scaling(args)
    if not args.skip_multi and not args.skip_mv_latency:
        bench_multivector(args)
    if not args.skip_multi and not args.skip_mv_memory:
        bench_mv_memory(args)
    print(f"\ntotal time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
