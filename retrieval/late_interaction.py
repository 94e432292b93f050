"""Late interaction: ColPali/ColQwen2-style multi-vector search, in two stages.

Each document is a (n_tokens, dim) matrix. A token-level `VectorIndex` proposes candidate documents, then
an exact MaxSim rerank orders them: score(q, d) = sum_i max_j <q_i, d_j> (Khattab & Zaharia, ColBERT,
SIGIR 2020, eq. 1). `maxsim_scores` is that exact score against a batch of documents, in plain numpy.
The file format and the input checks are shared with `retrieval.index`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from retrieval.errors import IndexOpenError
from retrieval.index import (VectorIndex, _as_ids, _as_matrix, atomic_write, _check_k, _check_unique,
                             _contains, _faiss, _read_container, _sorted_unique, _top_k, _write_container)

# Multi-vector defaults, tuned with the same benchmark (128-d tokens, 20k pages x 128 tokens): the
# token index only proposes candidates for an exact rerank, so it probes fewer lists but returns more.
DEFAULT_MV_APPROX_THRESHOLD = 150_000  # token vectors; below it brute-force MaxSim beats two stages
DEFAULT_TOKEN_K = 512
DEFAULT_TOKEN_NPROBE = 8
DEFAULT_N_CANDIDATES = 256


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


class MultiVectorIndex:
    """Late-interaction search over documents that are (n_tokens, dim) matrices.

    Storage: all token vectors in one contiguous (T, dim) float32 matrix in insertion order (it grows
    by doubling), `offsets` (n_docs + 1) marking where each document's tokens start, and a token-level
    `VectorIndex` whose ids are token rows. The token index keeps its own copy of the vectors, so
    memory is about 2 x T x dim x 4 bytes; the saved file holds them once.

    Search, in two stages:
    1. each query token fetches its `token_k` nearest token vectors. A document's approximate score
       is the sum over query tokens of the best similarity among its retrieved tokens, 0 where none
       was retrieved; the `n_candidates` best go on. (Filling the gaps with each query token's weakest
       retrieved similarity instead gives an upper bound of MaxSim, but it ranks worse: it does not
       penalise a document for the query tokens it fails to match. Measured with eval/bench_vectors.py.)
    2. exact MaxSim over those candidates: one matrix product over their gathered tokens.
    """

    def __init__(
        self,
        dim: int = 128,
        kind: str = "auto",
        approx_threshold: int = DEFAULT_MV_APPROX_THRESHOLD,
        token_k: int = DEFAULT_TOKEN_K,
        n_candidates: int = DEFAULT_N_CANDIDATES,
        **token_index_options: Any,
    ) -> None:
        """`kind`, `approx_threshold` and `token_index_options` (nprobe, nlist, hnsw_m, ...) configure the
        token-level `VectorIndex`; its threshold counts token vectors, not documents."""
        for name, v in [("token_k", token_k), ("n_candidates", n_candidates)]:
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v!r} is invalid; it must be a positive integer")
        token_index_options.setdefault("nprobe", DEFAULT_TOKEN_NPROBE)
        self._tokens = VectorIndex(dim, kind, approx_threshold, **token_index_options)
        self.token_k = int(token_k)
        self.n_candidates = int(n_candidates)
        self._mat = np.empty((0, dim), dtype=np.float32)  # (capacity, dim); rows [:n_tokens] are live
        self._doc_ids = np.empty(0, dtype=np.int64)  # (n_docs,)
        self._offsets = np.zeros(1, dtype=np.int64)  # (n_docs + 1,)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def dim(self) -> int:
        return self._tokens.dim

    @property
    def kind(self) -> str:
        """The structure of the token-level candidate index: "flat", "ivf" or "hnsw"."""
        return self._tokens.kind

    @property
    def ntotal(self) -> int:
        """Number of documents."""
        return len(self._doc_ids)

    @property
    def n_tokens(self) -> int:
        return int(self._offsets[-1])

    @property
    def tokens(self) -> np.ndarray:
        """(n_tokens, dim) read-only view of every stored token vector, documents back to back."""
        view = self._mat[: self.n_tokens]
        view.flags.writeable = False
        return view

    @property
    def offsets(self) -> np.ndarray:
        return self._offsets.copy()

    def doc_ids(self) -> np.ndarray:
        return self._doc_ids.copy()

    def doc_tokens(self, doc_id: int) -> np.ndarray:
        """The stored (n_tokens, dim) matrix of one document (a copy)."""
        sorted_ids, order = self._doc_lookup()
        at = int(np.searchsorted(sorted_ids, doc_id))
        if at >= len(sorted_ids) or sorted_ids[at] != doc_id:
            raise KeyError(f"document {doc_id} is not in the index")
        r = order[at]
        return self._mat[self._offsets[r] : self._offsets[r + 1]].copy()

    # -- writes
    def _prepare(self, doc_ids: Any, docs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        if isinstance(docs, np.ndarray) and docs.ndim == 2:
            raise ValueError("docs is a single 2-d matrix; pass a list with one (n_tokens, dim) matrix per document")
        ids = _as_ids(doc_ids, "doc_ids", len(docs))
        mats = [_as_matrix(d, self.dim, f"docs[{i}]") for i, d in enumerate(docs)]
        lens = np.array([len(m) for m in mats], dtype=np.int64)
        if (lens == 0).any():
            first = int(ids[np.flatnonzero(lens == 0)[0]])
            raise ValueError(f"document {first} has no token vectors; drop it or embed it again")
        return ids, lens, mats

    def _append_tokens(self, start: int, mats: list[np.ndarray]) -> np.ndarray:
        """Copy `mats` into the matrix at row `start` (growing it by doubling); returns their (n, dim) view."""
        n = sum(len(m) for m in mats)
        if start + n > len(self._mat):
            grown = np.empty((max(start + n, 2 * len(self._mat)), self.dim), dtype=np.float32)
            grown[:start] = self._mat[:start]
            self._mat = grown
        at = start
        for m in mats:  # one memcpy per document, done once at ingest
            self._mat[at : at + len(m)] = m
            at += len(m)
        return self._mat[start : start + n]

    def build(self, doc_ids: Any, docs: Sequence[Any]) -> "MultiVectorIndex":
        """Replace the contents: one (n_tokens, dim) float32 matrix per int64 doc id."""
        ids, lens, mats = self._prepare(doc_ids, docs)
        _check_unique(ids, np.empty(0, np.int64), "doc_ids")
        self._mat = np.empty((0, self.dim), dtype=np.float32)
        new = self._append_tokens(0, mats)
        self._tokens.build(np.arange(len(new), dtype=np.int64), new)
        self._doc_ids = ids
        self._offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self._sorted = None
        return self

    def add(self, doc_ids: Any, docs: Sequence[Any]) -> "MultiVectorIndex":
        """Append documents under new ids (ids already present are an error)."""
        ids, lens, mats = self._prepare(doc_ids, docs)
        _check_unique(ids, self._doc_lookup()[0], "doc_ids")
        start = self.n_tokens
        new = self._append_tokens(start, mats)
        self._tokens.add(np.arange(start, start + len(new), dtype=np.int64), new)
        self._doc_ids = np.concatenate([self._doc_ids, ids])
        self._offsets = np.concatenate([self._offsets, start + np.cumsum(lens)]).astype(np.int64)
        self._sorted = None
        return self

    def _doc_lookup(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            order = np.argsort(self._doc_ids, kind="stable")
            self._sorted = (self._doc_ids[order], order)
        return self._sorted

    # -- scoring
    def _maxsim_rows(self, q: np.ndarray, rows: np.ndarray, batch_tokens: int = 1 << 18) -> np.ndarray:
        """Exact MaxSim of q against the documents at `rows`, (len(rows),) float32.

        Documents are taken in batches of about `batch_tokens` tokens: one matrix product per batch,
        then a segmented max (np.maximum.reduceat) per document, with no padding and no Python loop
        over documents.
        """
        starts, ends = self._offsets[rows], self._offsets[rows + 1]
        lens = ends - starts
        cum = np.cumsum(lens)
        out = np.empty(len(rows), dtype=np.float32)
        b = 0
        while b < len(rows):
            e = max(b + 1, int(np.searchsorted(cum, (cum[b - 1] if b else 0) + batch_tokens, side="right")))
            blens = lens[b:e]
            seg = np.concatenate([[0], np.cumsum(blens)[:-1]])  # (nb,) segment starts
            if (starts[b + 1 : e] == ends[b : e - 1]).all():
                sub = self._mat[starts[b] : ends[e - 1]]  # contiguous documents: a view, no copy
            else:
                idx = np.repeat(starts[b:e] - seg, blens) + np.arange(int(blens.sum()))
                sub = self._mat[idx]  # (n_tok, dim) gathered
            sim = q @ sub.T  # (nq_tok, n_tok)
            out[b:e] = np.maximum.reduceat(sim, seg, axis=1).sum(axis=0)  # (nb,)
            b = e
        return out

    def _allowed_rows(self, allowed_ids: Any) -> np.ndarray:
        allowed = _sorted_unique(_as_ids(np.asarray(allowed_ids).reshape(-1), "allowed_ids"))
        sorted_ids, order = self._doc_lookup()
        return np.sort(order[np.searchsorted(sorted_ids, allowed[_contains(sorted_ids, allowed)])])

    def _rank(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        s, cols = _top_k(scores[None, :], k)
        return [(int(self._doc_ids[rows[c]]), float(v)) for c, v in zip(cols[0], s[0]) if c >= 0]

    def exact_search(self, q_tokens: Any, k: int, allowed_ids: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Brute-force MaxSim over every (allowed) document: the reference that `search` approximates."""
        q = _as_matrix(q_tokens, self.dim, "q_tokens")
        k = _check_k(k)
        rows = np.arange(self.ntotal) if allowed_ids is None else self._allowed_rows(allowed_ids)
        return self._rank(rows, self._maxsim_rows(q, rows), k)

    def search(
        self,
        q_tokens: Any,
        k: int,
        n_candidates: int | None = None,
        allowed_ids: np.ndarray | None = None,
        token_k: int | None = None,
    ) -> list[tuple[int, float]]:
        """Top-k documents for a (nq_tok, dim) query as [(doc_id, MaxSim score)], best first."""
        q = _as_matrix(q_tokens, self.dim, "q_tokens")  # (m, dim)
        k = _check_k(k)
        n_cand = max(k, int(n_candidates or self.n_candidates))
        kk = int(token_k or self.token_k)
        if self.ntotal == 0 or len(q) == 0:
            return []
        rows = np.arange(self.ntotal) if allowed_ids is None else self._allowed_rows(allowed_ids)
        if len(rows) <= n_cand or self._tokens.kind == "flat":
            # Too few documents for stage 1 to narrow, or an exact token index whose scan would cost
            # as much as scoring every document: score them all exactly.
            return self._rank(rows, self._maxsim_rows(q, rows), k)
        token_filter = None
        if allowed_ids is not None:
            doc_ok = np.zeros(self.ntotal, dtype=bool)
            doc_ok[rows] = True
            token_filter = np.repeat(doc_ok, np.diff(self._offsets))  # (T,) bool
        cand = self._candidates(q, kk, n_cand, token_filter)
        return self._rank(cand, self._maxsim_rows(q, cand), k)

    def _candidates(self, q: np.ndarray, kk: int, n_cand: int, token_filter: np.ndarray | None) -> np.ndarray:
        """Stage 1: doc rows of the n_cand best approximate scores from per-token nearest neighbours."""
        if token_filter is None:
            sims, toks = self._tokens.search(q, kk)  # (m, kk), (m, kk)
        else:
            bits = np.packbits(token_filter, bitorder="little")  # token ids are rows: a bitmap selects them
            sel = _faiss().IDSelectorBitmap(len(bits), _faiss().swig_ptr(bits))
            sims, toks = self._tokens._faiss_search(q, kk, selector=sel, n_allowed=int(token_filter.sum()))
            del bits
        valid = toks >= 0  # (m, kk)
        r, c = np.nonzero(valid)
        doc_rows = np.searchsorted(self._offsets, toks[r, c], side="right") - 1  # (h,)
        uniq, inv = np.unique(doc_rows, return_inverse=True)  # (u,)
        best = np.zeros((len(uniq), len(q)), dtype=np.float32)  # (u, m) best retrieved sim per query token
        np.maximum.at(best, (inv, r), sims[r, c].clip(min=0))
        total = best.sum(axis=1)  # (u,)
        if len(uniq) <= n_cand:
            return uniq
        return np.sort(uniq[np.argpartition(-total, n_cand - 1)[:n_cand]])

    # -- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the documents and the token index to `path` atomically (token vectors stored once)."""
        meta = {"type": "MultiVectorIndex", "token_index": self._tokens._meta(), "token_k": self.token_k,
                "n_candidates": self.n_candidates, "n_docs": self.ntotal}
        arrays = {"doc_ids": self._doc_ids, "offsets": self._offsets}
        atomic_write(path, lambda f: _write_container(f, meta, arrays, self._tokens._index))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "MultiVectorIndex":
        meta, arrays, index = _read_container(path, "MultiVectorIndex")
        tokens = VectorIndex._from_parts(meta["token_index"], index, path)
        doc_ids, offsets = arrays["doc_ids"].astype(np.int64), arrays["offsets"].astype(np.int64)
        if len(doc_ids) != meta["n_docs"] or len(offsets) != len(doc_ids) + 1 or offsets[-1] != tokens.ntotal:
            raise IndexOpenError(f"{path}: document table and token index disagree; rebuild it from the store")
        self = cls(tokens.dim, token_k=meta["token_k"], n_candidates=meta["n_candidates"])
        self._tokens, self._doc_ids, self._offsets = tokens, doc_ids, offsets
        mat = tokens._all_vectors()  # token ids are rows, so insertion order is document order
        self._mat = mat.copy() if tokens.kind != "ivf" else mat  # flat/hnsw give a view into FAISS
        return self
