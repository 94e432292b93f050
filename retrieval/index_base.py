"""What both FAISS-backed indexes build on: loading faiss, checking ids and vectors, and top-k.

`retrieval.index.VectorIndex` and `retrieval.late_interaction.MultiVectorIndex` take the same inputs (float
vectors, int64 ids) and give the same errors for bad ones; the checks live here so the two cannot drift.
faiss is imported on first use, with its OpenMP pool sized from $VIMRAG_FAISS_THREADS (default: all cores).

Searches choose their own thread count (`search_threads`), and builds take the configured one, on the thread that
runs them (`omp_threads`): OpenMP keeps that count per calling thread, so a count set once where faiss was imported
never reached the search server's request threads, the demo's or an eval's worker threads; they all ran on every
core.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from retrieval.errors import missing_dependency

THREADS_ENV = "VIMRAG_FAISS_THREADS"
_faiss_module = None


def get_faiss():
    """Import faiss once, with its OpenMP pool sized from $VIMRAG_FAISS_THREADS (default: all cores)."""
    global _faiss_module
    if _faiss_module is None:
        try:
            import faiss
        except ImportError as e:
            raise missing_dependency("faiss-cpu", purpose="vector search") from e
        faiss.omp_set_num_threads(configured_threads())
        _faiss_module = faiss
    return _faiss_module


def configured_threads() -> int:
    """$VIMRAG_FAISS_THREADS, else every core (read at each call: the search server sets it before it forks)."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    try:
        threads = int(raw) if raw else (os.cpu_count() or 1)
    except ValueError:
        raise ValueError(f"${THREADS_ENV}={raw!r} is not an integer; set it to a thread count like 2") from None
    return max(1, threads)


def search_threads(n_queries: int) -> int:
    """OpenMP threads for a FAISS search of `n_queries` query vectors: one for a single query, else the configured
    count. FAISS threads a search over its query vectors (its wiki, "Threads and asynchronous calls"), so a single
    query gains nothing from a second thread, which only waits for a core and burns it. On 6,000 MiniLM-sized
    vectors: 0.61 ms wall and 1.21 ms CPU with 2 threads against 0.58 ms and 0.59 ms with one; 2.85 ms against
    0.57 ms while one other process keeps a core busy (`python -m eval.bench_search_threads`). OpenSearch's k-NN
    plugin made the same choice (opensearch-project/k-NN PR 965)."""
    return 1 if n_queries <= 1 else configured_threads()


@contextmanager
def omp_threads(n: int) -> Iterator[None]:
    """FAISS calls inside run on `n` OpenMP threads; the calling thread's count is put back after. OpenMP keeps the
    count per thread (libgomp's nthreads-var), so concurrent searches on other threads are not affected."""
    faiss = get_faiss()
    before = faiss.omp_get_max_threads()
    if before != n:
        faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            faiss.omp_set_num_threads(before)


def as_matrix(x: Any, dim: int, what: str) -> np.ndarray:
    """A C-contiguous float32 (n, dim) copy-or-view of `x`, or a ValueError saying what is wrong."""
    arr = np.asarray(x)
    if arr.ndim == 1 and arr.shape[0] == dim:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{what} has shape {arr.shape}; expected (n, {dim}) for this {dim}-d index")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{what} has dtype {arr.dtype}; expected float32 vectors")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise ValueError(f"{what} has NaN or inf in rows {rows}; fix the embedder output before indexing")
    return arr


def as_ids(ids: Any, what: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{what} has shape {arr.shape}; expected a 1-d array of int64 ids")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what} has dtype {arr.dtype}; ids must be integers")
    arr = arr.astype(np.int64, copy=False)
    if n is not None and len(arr) != n:
        raise ValueError(f"{what} has {len(arr)} ids but there are {n} vectors; give one id per vector")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{what} contains negative ids; ids must be >= 0 because -1 marks empty result slots")
    return arr


def check_unique(ids: np.ndarray, existing_sorted: np.ndarray, what: str) -> None:
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"{what} repeats ids {uniq[counts > 1][:5].tolist()}; each id may appear once")
    clash = uniq[contains(existing_sorted, uniq)]
    if clash.size:
        raise ValueError(
            f"ids {clash[:5].tolist()} are already in the index; indexes have no update, so rebuild from the store"
        )


def contains(sorted_arr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Boolean mask: which `values` occur in `sorted_arr`."""
    if sorted_arr.size == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(sorted_arr, values).clip(max=len(sorted_arr) - 1)
    return sorted_arr[at] == values


def check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise ValueError(f"k={k!r} is invalid; ask for at least one result (k >= 1)")
    return int(k)


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row top-k of a (nq, n) score matrix: (scores, column indices), best first, -1/-inf padded."""
    nq, n = scores.shape
    out_s = np.full((nq, k), -np.inf, dtype=np.float32)
    out_i = np.full((nq, k), -1, dtype=np.int64)
    if n == 0:
        return out_s, out_i
    kk = min(k, n)
    part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk] if kk < n else np.tile(np.arange(n), (nq, 1))
    part_s = np.take_along_axis(scores, part, axis=1)  # (nq, kk)
    order = np.argsort(-part_s, axis=1, kind="stable")
    out_s[:, :kk] = np.take_along_axis(part_s, order, axis=1)
    out_i[:, :kk] = np.take_along_axis(part, order, axis=1)
    return out_s, out_i


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """`a` sorted without repeats; O(n) when it already is (the common case: ids from a SQL query)."""
    return a if a.size < 2 or bool((a[1:] > a[:-1]).all()) else np.unique(a)
