"""Late-interaction math on plain numpy: exact MaxSim scores, and token pooling.

score(q, d) = sum_i max_j <q_i, d_j> (Khattab & Zaharia, ColBERT, SIGIR 2020, eq. 1). `maxsim_scores` is
that exact score of one query against a batch of documents; it is the reference `MultiVectorIndex`
(retrieval/late_interaction.py) approximates and the benchmarks score against. `pool_tokens` shrinks a
page's tokens before indexing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.errors import missing_dependency


def maxsim_scores(q: Any, docs: Any, mask: np.ndarray | None = None, batch_tokens: int = 1 << 20) -> np.ndarray:
    """Exact late-interaction scores sum_i max_j <q_i, d_j> of one query against each document.

    q: (nq_tok, dim). docs: a list of (n_tok_i, dim) matrices, or a padded (n_docs, max_tok, dim) array
    with `mask` (n_docs, max_tok) marking real tokens (all real when omitted). Documents are padded into
    batches of about `batch_tokens` token slots and scored with one batched matrix product each.
    Returns (n_docs,) float32; a document with no tokens scores -inf.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    >>> maxsim_scores(q, [np.array([[0.5, 0.5], [1.0, 0.0]], np.float32)]).tolist()
    [1.5]
    """
    q = np.asarray(q, dtype=np.float32)
    if q.ndim != 2:
        raise ValueError(f"q has shape {q.shape}; expected (n_query_tokens, dim)")
    dim = q.shape[1]
    if isinstance(docs, np.ndarray) and docs.ndim == 3:
        if docs.shape[2] != dim:
            raise ValueError(f"docs have dim {docs.shape[2]} but the query has dim {dim}; embed both with one model")
        if mask is not None and mask.shape != docs.shape[:2]:
            raise ValueError(f"mask has shape {mask.shape}; expected {docs.shape[:2]} to match docs")
        return _maxsim_padded(q, docs.astype(np.float32, copy=False), mask)
    mats = []
    for i, d in enumerate(docs):  # a list input has to be checked and converted document by document
        d = np.asarray(d, dtype=np.float32)
        d = d.reshape(0, dim) if d.size == 0 else d
        if d.ndim != 2 or d.shape[1] != dim:
            raise ValueError(f"docs[{i}] has shape {d.shape}; expected (n_tokens, {dim})")
        mats.append(d)
    lens = np.array([len(d) for d in mats], dtype=np.int64)  # (n_docs,)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    flat = np.concatenate(mats) if mats else np.empty((0, dim), np.float32)  # (total_tokens, dim)
    out = np.empty(len(mats), dtype=np.float32)
    width = max(1, int(lens.max(initial=1)))
    step = max(1, batch_tokens // width)  # documents per padded batch
    for s in range(0, len(mats), step):
        e = min(len(mats), s + step)
        blens = lens[s:e]
        doc = np.repeat(np.arange(e - s), blens)  # (batch_tokens,) which document each token belongs to
        pos = np.arange(len(doc)) - np.repeat(offsets[s:e] - offsets[s], blens)  # its slot in that document
        pad = np.zeros((e - s, width, dim), dtype=np.float32)  # (b, max_tok, dim)
        pad[doc, pos] = flat[offsets[s] : offsets[e]]
        valid = np.arange(width)[None, :] < blens[:, None]  # (b, max_tok)
        out[s:e] = _maxsim_padded(q, pad, valid)
    return out


def _maxsim_padded(q: np.ndarray, docs: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    sim = np.matmul(docs, q.T)  # (n_docs, max_tok, nq_tok)
    if mask is not None:
        sim = np.where(mask[:, :, None], sim, -np.inf)
    best = sim.max(axis=1) if sim.shape[1] else np.full((len(docs), len(q)), -np.inf, np.float32)  # (n_docs, nq_tok)
    return best.sum(axis=1).astype(np.float32)  # (n_docs,)


def pool_tokens(tokens: Any, pool_factor: int) -> np.ndarray:
    """A page's (n, dim) token vectors pooled to at most ceil(n / pool_factor) unit vectors.

    Ward hierarchical clustering of the tokens, cut into that many clusters; each cluster becomes its
    mean, renormalised (token pooling as in colpali-engine's HierarchicalTokenPooler, after Clavie 2024,
    "A little pooling goes a long way": its users report 60-70% fewer vectors for under 1% loss).

    >>> t = np.array([[1, 0], [0.96, 0.28], [0, 1], [0.28, 0.96]], np.float32)
    >>> pool_tokens(t, 2).astype(float).round(2).tolist()
    [[0.99, 0.14], [0.14, 0.99]]
    """
    x = np.asarray(tokens, dtype=np.float32)  # (n, dim)
    n = len(x)
    k = -(-n // int(pool_factor))
    if pool_factor <= 1 or k >= n:
        return x
    try:
        from scipy.cluster.hierarchy import fcluster, linkage
    except ImportError as e:
        raise missing_dependency("scipy", purpose="token pooling (pool_factor > 1)") from e
    labels = fcluster(linkage(x, method="ward"), t=k, criterion="maxclust")  # (n,) cluster of each token
    order = np.argsort(labels, kind="stable")  # tokens grouped by cluster
    starts = np.flatnonzero(np.r_[True, labels[order][1:] != labels[order][:-1]])  # (c,)
    means = np.add.reduceat(x[order], starts, axis=0)  # (c, dim) cluster sums; their direction is the mean's
    return means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
