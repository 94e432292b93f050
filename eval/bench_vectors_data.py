"""The synthetic vectors and timing helpers of `python -m eval.bench_vectors`, shared by its sections
(eval/bench_vectors.py) and its memory workers (eval/bench_vectors_memory.py), so neither imports the other.
"""

from __future__ import annotations

import os
import time

import numpy as np
from tqdm import tqdm

from retrieval.index_base import THREADS_ENV, get_faiss


def set_threads(n: int) -> None:
    """FAISS's OpenMP pool and numpy's BLAS pool to n threads (BLAS via threadpoolctl when installed). FAISS's
    searches read their count from the environment (retrieval/index_base.py search_threads), so it is set there
    too; a single query still runs on one thread."""
    os.environ[THREADS_ENV] = str(n)
    get_faiss().omp_set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("(threadpoolctl is not installed: numpy's BLAS keeps its own thread count)")
        return
    threadpool_limits(limits=n, user_api="blas")


def unit_rows(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def random_units(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    return unit_rows(rng.standard_normal((n, dim), dtype=np.float32))


def mixture(n: int, centres: np.ndarray, sigma: float, rng: np.random.Generator, chunk: int = 100_000) -> np.ndarray:
    """(n, dim) unit vectors: a random centre plus Gaussian noise of expected norm `sigma`, normalised."""
    dim = centres.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        x = rng.standard_normal((e - s, dim), dtype=np.float32) * np.float32(sigma / np.sqrt(dim))  # (b, dim)
        x += centres[rng.integers(0, len(centres), e - s)]
        out[s:e] = unit_rows(x)
    return out


def p50_ms(times: list[float]) -> float:
    return float(np.median(times) * 1e3)


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean |found ∩ truth| / |truth| over queries; (nq, k) id arrays, -1 slots ignored."""
    hits = [
        len(set(f[f >= 0].tolist()) & set(t[t >= 0].tolist())) / max(1, int((t >= 0).sum()))
        for f, t in zip(found, truth)
    ]
    return float(np.mean(hits))


def time_queries(fn, queries, desc: str) -> tuple[list[float], list]:
    """Call fn(query) one query at a time (after two warm-up calls); return the times and the results."""
    for q in queries[:2]:
        fn(q)
    times, results = [], []
    for q in tqdm(queries, desc=desc, leave=False):
        t = time.perf_counter()
        results.append(fn(q))
        times.append(time.perf_counter() - t)
    return times, results


def timed_build(make, desc: str, threads: int):
    set_threads(threads)
    t = time.perf_counter()
    with tqdm(total=1, desc=desc, leave=False) as bar:
        obj = make()
        bar.update()
    return obj, time.perf_counter() - t


def mv_corpus(
    n_docs: int,
    n_tok: int,
    dim: int,
    topics: np.ndarray,
    sigma: float,
    rng: np.random.Generator,
    pages_per_pdf: int = 32,
    topics_per_pdf: int = 16,
    topics_per_page: int = 8,
) -> np.ndarray:
    """(n_docs, n_tok, dim) token vectors for pages grouped into PDFs.

    Each PDF draws `topics_per_pdf` topic centres, each page `topics_per_page` of its PDF's topics, and
    each token is one of its page's topics plus noise of norm ~sigma, normalised: pages of one PDF
    resemble each other, as real pages do, and topics recur across PDFs.
    """
    out = np.empty((n_docs, n_tok, dim), dtype=np.float32)
    n_pdf = -(-n_docs // pages_per_pdf)
    pdf_topics = rng.integers(0, len(topics), (n_pdf, topics_per_pdf))  # (n_pdf, tpp)
    pick = rng.integers(0, topics_per_pdf, (n_docs, topics_per_page))
    page_topics = np.take_along_axis(pdf_topics[np.arange(n_docs) // pages_per_pdf], pick, axis=1)  # (n_docs, tpg)
    step = max(1, 200_000 // n_tok)
    for s in range(0, n_docs, step):
        e = min(n_docs, s + step)
        tok_topic = np.take_along_axis(page_topics[s:e], rng.integers(0, topics_per_page, (e - s, n_tok)), axis=1)
        x = rng.standard_normal((e - s, n_tok, dim), dtype=np.float32) * np.float32(sigma / np.sqrt(dim))
        x += topics[tok_topic]  # (b, n_tok, dim)
        x /= np.linalg.norm(x, axis=2, keepdims=True)
        out[s:e] = x
    return out


def mv_queries(
    docs: np.ndarray, n_queries: int, n_copy: int, n_filler: int, noise: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray]:
    """Queries of n_copy noisy copies of one document's tokens plus n_filler random tokens; (queries, source docs)."""
    n_docs, n_tok, dim = docs.shape
    src = rng.choice(n_docs, n_queries, replace=False)
    out = []
    for d in src:
        copies = docs[d, rng.choice(n_tok, n_copy, replace=False)]  # (n_copy, dim)
        jitter = rng.standard_normal(copies.shape, dtype=np.float32) * np.float32(noise / np.sqrt(dim))
        copies = unit_rows(copies + jitter)
        out.append(np.concatenate([copies, random_units(n_filler, dim, rng)]))  # (n_copy + n_filler, dim)
    return out, src


def mv_data(args, n_docs: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """The multi-vector corpus of one size and its queries, the same in every process: (docs, queries, sources)."""
    rng = np.random.default_rng(args.seed + 7 * n_docs)
    topics = random_units(args.mv_topics, args.mv_dim, rng)  # (n_topics, dim)
    docs = mv_corpus(n_docs, args.mv_tokens, args.mv_dim, topics, args.mv_sigma, rng)  # (n_docs, n_tok, dim)
    n_copy = args.mv_query_tokens // 2
    queries, src = mv_queries(
        docs, min(args.mv_queries, n_docs), n_copy, args.mv_query_tokens - n_copy, args.mv_query_noise, rng
    )
    return docs, queries, src
