"""How many OpenMP threads a single-query FAISS search should use: every core (the rule before) against one
(`retrieval.index_base.search_threads`), back to back in one run, idle and with other processes busy.

    python -m eval.bench_search_threads                              # synthetic flat indexes, 6,000 and 60,000
    python -m eval.bench_search_threads --index bench_out/mmlb_idx   # also whole searches on a real index

For each setting it times `--reps` searches of one query and reports wall and CPU milliseconds per search (CPU is
this process's, so it counts the time a second thread spends waiting to join). "busy" runs that many other
processes, each spinning on a core, while it times: what a search meets on a server answering other requests,
or beside an eval's reader. The old rule is reproduced by running every search on the configured count (all
cores), as a search did when it ran on any thread but the one that imported faiss.

With `--index`, it also times `Retriever.search` (encode the query, dense and BM25 search, fuse) on that index
under both rules. Each row alternates the two rules `--rounds` times and keeps the fastest of each. Last, on an
idle box, batches of `--batches` queries on one thread against the configured count: why a batch keeps them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

import retrieval.index as index_module
from retrieval.index_base import configured_threads, search_threads


@contextmanager
def busy(n: int):
    """`n` processes spinning on a core each, for the length of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.3 if n else 0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextmanager
def rule(threads: Callable[[int], int]):
    """Searches take their thread count from `threads(n_queries)` inside the block."""
    saved = index_module.search_threads
    index_module.search_threads = threads
    try:
        yield
    finally:
        index_module.search_threads = saved


def old_rule():
    """Every search on the configured count (all cores by default), one query or many: the rule before."""
    return rule(lambda n_queries: configured_threads())


def timed(fn: Callable[[int], object], reps: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per call of fn(i), i = 0..reps-1."""
    fn(0)
    t, c = time.perf_counter(), time.process_time()
    for i in range(reps):
        fn(i)
    return 1000 * (time.perf_counter() - t) / reps, 1000 * (time.process_time() - c) / reps


def compare(fn: Callable[[int], object], reps: int, rounds: int) -> dict[str, tuple[float, float]]:
    """The fastest (wall, CPU) of each rule over `rounds` alternations."""
    got: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for _ in range(rounds):
        with old_rule():
            got["old"].append(timed(fn, reps))
        got["new"].append(timed(fn, reps))
    return {k: min(v) for k, v in got.items()}


def row(name: str, load: int, r: dict[str, tuple[float, float]]) -> str:
    (ow, oc), (nw, nc) = r["old"], r["new"]
    return f"| {name} | {load} | {ow:.2f} / {oc:.2f} | {nw:.2f} / {nc:.2f} | {ow / nw:.2f}x | {oc / nc:.2f}x |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="6000,60000", help="synthetic flat index sizes (dim 384)")
    ap.add_argument("--index", help="an index folder: also time whole searches on it")
    ap.add_argument("--busy", default="0,1,2", help="numbers of other busy processes to time under")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--batches", default="2,8,32", help="also time searches of this many queries at once, on one thread and on all"
    )
    args = ap.parse_args(argv)
    loads = [int(x) for x in args.busy.split(",")]

    rng = np.random.default_rng(0)

    def unit(n: int) -> np.ndarray:
        x = rng.standard_normal((n, 384)).astype(np.float32)  # (n, 384)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    cases: list[tuple[str, Callable[[int], object]]] = []
    flats = []
    queries = unit(64)  # (64, 384)
    for n in (int(x) for x in args.sizes.split(",") if x):
        idx = index_module.VectorIndex(384, kind="flat")
        idx.add(np.arange(n), unit(n))
        flats.append((n, idx))
        cases.append((f"flat {n:,}, one query", lambda i, idx=idx: idx.search(queries[i % 64], 10)))
    if args.index:
        from eval.bench_server import QUERIES
        from retrieval.retriever import Retriever

        r = Retriever(args.index)
        cases.append((f"Retriever.search on {args.index}", lambda i, r=r: r.search(QUERIES[i % len(QUERIES)], k=5)))

    print(f"{configured_threads()} configured FAISS threads; ms per search, fastest of {args.rounds} rounds")
    print("| search | busy processes | old: wall / CPU ms | new: wall / CPU ms | wall old/new | CPU old/new |")
    print("|---|---|---|---|---|---|")
    for name, fn in cases:
        for load in loads:
            with busy(load):
                print(row(name, load, compare(fn, args.reps, args.rounds)), flush=True)
    sizes = [int(x) for x in args.batches.split(",") if x]

    def reps(batch: int) -> int:
        return max(3, args.reps // (4 * batch))

    if sizes and configured_threads() > 1:
        print(f"\nA batch of queries, idle: ms per search on one thread against {configured_threads()} (the rule)")
        print("| index | queries | one thread | configured | speed-up |")
        print("|---|---|---|---|---|")
        for n, idx in flats:
            for b in sizes:
                got: dict[str, list[float]] = {"one": [], "rule": []}
                for _ in range(args.rounds):
                    for name, threads in (("one", lambda n_queries: 1), ("rule", search_threads)):
                        with rule(threads):
                            got[name].append(timed(lambda i, idx=idx, b=b: idx.search(queries[:b], 10), reps(b))[0])
                one, many = min(got["one"]), min(got["rule"])
                print(f"| flat {n:,} | {b} | {one:.2f} | {many:.2f} | {one / many:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
