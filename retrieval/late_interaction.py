"""Late interaction: ColPali/ColQwen2-style multi-vector search, in two stages.

Each document is a (n_tokens, dim) matrix. A token-level IVF index proposes candidate documents, then an
exact MaxSim rerank orders them: score(q, d) = sum_i max_j <q_i, d_j> (Khattab & Zaharia, ColBERT, SIGIR
2020, eq. 1). The plain-numpy reference score and token pooling are in `retrieval/maxsim.py`.

Memory: the token vectors are held once, in document order (float16 once the index is large enough to
have a token index, float32 below that, where exact search is all there is); scores are computed in float32
blocks. The candidate index holds only compact product-quantizer codes of the tokens (32 bytes a 128-d
token by default), never a second copy of the vectors. Not here on purpose: GPU search and PLAID-style
centroid-only scoring. The input checks (`retrieval.index_base`) and the file format
(`retrieval.index_file`) are shared with `retrieval.index`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from retrieval.errors import IndexOpenError
from retrieval.index_base import (
    as_ids,
    as_matrix,
    check_k,
    check_unique,
    configured_threads,
    contains,
    get_faiss,
    omp_threads,
    search_threads,
    sorted_unique,
    top_k,
)
from retrieval.index_file import read_container, save_container
from retrieval.maxsim import pool_tokens

# Multi-vector defaults, tuned with `python -m eval.bench_vectors` (128-d tokens, 20k pages x 128 tokens): the
# token index only proposes candidates for an exact rerank, so it probes fewer lists but returns more.
DEFAULT_MV_APPROX_THRESHOLD = 150_000  # token vectors; below it brute-force MaxSim beats two stages
DEFAULT_TOKEN_K = 512
DEFAULT_TOKEN_NPROBE = 8
DEFAULT_N_CANDIDATES = 256
KINDS = ("auto", "flat", "ivf")
DTYPES = ("auto", "float16", "float32")  # auto: float32 while every search is exact, float16 with a token index
CODECS = ("pq", "sq8", "flat")  # what the IVF lists hold: PQ codes, 8-bit scalar codes, or float32 copies
LAYOUT = 2  # saved-file layout; layout 1 (no "layout" key) kept a FAISS float32 copy next to the matrix
_IVF_RETRAIN_GROWTH = 4  # retrain the candidate index once it holds this many times what it was trained on
_IVF_TRAIN_PER_LIST = 50
_PQ_TRAIN_MIN = 64 * 256  # PQ k-means wants >= 39 points per each of its 256 centroids
_REFINE = 2  # a coded candidate index fetches this many times token_k rows, rescored exactly
_ADD_CHUNK = 1 << 16  # tokens converted to float32 at a time when filling the candidate index


class MultiVectorIndex:
    """Late-interaction search over documents that are (n_tokens, dim) matrices.

    Storage: every token vector once, in one contiguous (T, dim) matrix (it grows by doubling) in insertion
    order, and `offsets` (n_docs + 1) marking where each document's
    tokens start. At or above `approx_threshold` tokens (kind "auto"; always for kind "ivf") a token-level
    FAISS IVF index over the rows proposes candidates; with codec "pq" its lists hold `pq_bytes`-byte
    product-quantizer codes (dim / 4 by default: 8x smaller than float16 at 128-d), with codec "sq8"
    8-bit scalar codes (dim bytes), with codec "flat" a float32 copy of every token (with dtype float32,
    the layout this index had before it held tokens once). `pool_factor` > 1
    pools each document's tokens with `pool_tokens` as it is added (queries are never pooled).

    dtype "auto" (the default) holds the tokens as float32 while there is no token index, and as float16
    from the moment there is one (converted once, when `add` takes the index past the threshold). Exact
    search converts every stored token it scores, and at 1,000 pages float16 tokens made it about 2x slower
    (`python -m eval.bench_vectors`); below the threshold the float32 matrix is at most 77 MB at 128-d.

    Search, in two stages:
    1. each query token fetches its `token_k` nearest token vectors (a coded index fetches 2 x token_k
       by code and rescores them from the stored tokens). A document's approximate score
       is the sum over query tokens of the best similarity among its retrieved tokens, 0 where none
       was retrieved; the `n_candidates` best go on. (Filling the gaps with each query token's weakest
       retrieved similarity instead gives an upper bound of MaxSim, but it ranks worse: it does not
       penalise a document for the query tokens it fails to match. Measured with eval/bench_vectors.py.)
    2. exact MaxSim over those candidates, in float32 blocks of the stored tokens.
    Below the threshold (kind "flat") every document is scored exactly and no token index exists.
    """

    def __init__(
        self,
        dim: int = 128,
        kind: str = "auto",
        approx_threshold: int = DEFAULT_MV_APPROX_THRESHOLD,
        token_k: int = DEFAULT_TOKEN_K,
        n_candidates: int = DEFAULT_N_CANDIDATES,
        nprobe: int = DEFAULT_TOKEN_NPROBE,
        nlist: int | None = None,
        dtype: str = "auto",
        codec: str = "pq",
        pq_bytes: int | None = None,
        pool_factor: int = 1,
    ) -> None:
        if kind not in KINDS:
            hint = " (HNSW would hold a second copy of every token; use 'ivf')" if kind == "hnsw" else ""
            raise ValueError(f"kind={kind!r} is not a multi-vector index kind; use one of {KINDS}{hint}")
        if str(dtype) not in DTYPES and str(getattr(dtype, "__name__", "")) not in DTYPES:
            raise ValueError(f"dtype={dtype!r} is unsupported; store tokens as one of {DTYPES}")
        if codec not in CODECS:
            raise ValueError(f"codec={codec!r} is unknown; use one of {CODECS}")
        pq_bytes = pq_bytes or _pq_bytes(int(dim))
        for name, v in [
            ("dim", dim),
            ("approx_threshold", approx_threshold),
            ("token_k", token_k),
            ("n_candidates", n_candidates),
            ("nprobe", nprobe),
            ("nlist", nlist or 1),
            ("pq_bytes", pq_bytes),
            ("pool_factor", pool_factor),
        ]:
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v!r} is invalid; it must be a positive integer")
        if dim % pq_bytes:
            raise ValueError(f"pq_bytes={pq_bytes} does not divide dim={dim}; pick a divisor such as {_pq_bytes(dim)}")
        self.dim, self.requested_kind, self.approx_threshold = int(dim), kind, int(approx_threshold)
        self.token_k, self.n_candidates, self.nprobe = int(token_k), int(n_candidates), int(nprobe)
        self.nlist = None if nlist is None else int(nlist)
        self.requested_dtype = str(dtype) if str(dtype) in DTYPES else str(dtype.__name__)
        self.dtype = np.dtype("float16" if self.requested_dtype == "float16" else "float32")  # as stored now
        self.codec, self.pq_bytes = codec, int(pq_bytes)
        self.pool_factor = int(pool_factor)
        self._ivf = None  # the FAISS candidate index over token rows, or None (exact search only)
        self._trained_on = 0  # tokens present when the IVF was trained
        self._mat = np.empty((0, self.dim), dtype=self.dtype)  # (capacity, dim); rows [:n_tokens] are live
        self._doc_ids = np.empty(0, dtype=np.int64)  # (n_docs,)
        self._offsets = np.zeros(1, dtype=np.int64)  # (n_docs + 1,)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def kind(self) -> str:
        """The candidate stage in use: "ivf", or "flat" (no token index: every search is exact)."""
        return "flat" if self._ivf is None else "ivf"

    @property
    def ntotal(self) -> int:
        """Number of documents."""
        return len(self._doc_ids)

    @property
    def n_tokens(self) -> int:
        """Stored token vectors (after pooling)."""
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
        """The stored (n_tokens, dim) matrix of one document, as a float32 copy."""
        sorted_ids, order = self._doc_lookup()
        at = int(np.searchsorted(sorted_ids, doc_id))
        if at >= len(sorted_ids) or sorted_ids[at] != doc_id:
            raise KeyError(f"document {doc_id} is not in the index")
        r = order[at]
        return self._mat[self._offsets[r] : self._offsets[r + 1]].astype(np.float32)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held: live token rows, unused matrix capacity, and the candidate index's lists."""
        n, row = self.n_tokens, self.dim * self.dtype.itemsize
        ivf = 0
        if self._ivf is not None:
            code = {"flat": self.dim * 4, "sq8": self.dim, "pq": self.pq_bytes}[self.codec]
            ivf = self._ivf.ntotal * (code + 8) + self._ivf.nlist * self.dim * 4  # codes + ids, centroids
        return {
            "tokens": n * row,
            "spare": (len(self._mat) - n) * row,
            "token_index": ivf,
            "tables": self._doc_ids.nbytes + self._offsets.nbytes,
        }

    # -- writes
    def _prepare(self, doc_ids: Any, docs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        if isinstance(docs, np.ndarray) and docs.ndim == 2:
            raise ValueError("docs is a single 2-d matrix; pass a list with one (n_tokens, dim) matrix per document")
        ids = as_ids(doc_ids, "doc_ids", len(docs))
        mats = [as_matrix(d, self.dim, f"docs[{i}]") for i, d in enumerate(docs)]
        lens = np.array([len(m) for m in mats], dtype=np.int64)
        if (lens == 0).any():
            first = int(ids[np.flatnonzero(lens == 0)[0]])
            raise ValueError(f"document {first} has no token vectors; drop it or embed it again")
        if self.pool_factor > 1:
            mats = [pool_tokens(m, self.pool_factor) for m in mats]
            lens = np.array([len(m) for m in mats], dtype=np.int64)
        return ids, lens, mats

    def _append_tokens(self, start: int, mats: list[np.ndarray]) -> None:
        """Copy `mats` into the matrix at row `start` as `dtype`, growing it by doubling."""
        n = sum(len(m) for m in mats)
        if start + n > len(self._mat):
            grown = np.empty((max(start + n, 2 * len(self._mat)), self.dim), dtype=self.dtype)
            grown[:start] = self._mat[:start]
            self._mat = grown
        at = start
        for m in mats:  # one converting copy per document, done once at ingest
            self._mat[at : at + len(m)] = m
            at += len(m)

    def _wants_ivf(self, n_tokens: int) -> bool:
        return self.requested_kind == "ivf" or (self.requested_kind == "auto" and n_tokens >= self.approx_threshold)

    def _storage_dtype(self, n_tokens: int, current: np.dtype) -> np.dtype:
        """The dtype to hold n_tokens in: the one asked for, or for "auto" float16 once a token index exists."""
        if self.requested_dtype != "auto":
            return np.dtype(self.requested_dtype)
        return np.dtype("float16") if self._wants_ivf(n_tokens) else current

    def build(self, doc_ids: Any, docs: Sequence[Any]) -> "MultiVectorIndex":
        """Replace the contents: one (n_tokens, dim) float matrix per int64 doc id."""
        ids, lens, mats = self._prepare(doc_ids, docs)
        check_unique(ids, np.empty(0, np.int64), "doc_ids")
        self.dtype = self._storage_dtype(int(lens.sum()), np.dtype("float32"))
        self._mat = np.empty((0, self.dim), dtype=self.dtype)
        self._append_tokens(0, mats)
        del mats
        self._doc_ids = ids
        self._offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self._sorted, self._ivf, self._trained_on = None, None, 0
        self._sync_token_index(0)
        return self

    def add(self, doc_ids: Any, docs: Sequence[Any]) -> "MultiVectorIndex":
        """Append documents under new ids (ids already present are an error)."""
        ids, lens, mats = self._prepare(doc_ids, docs)
        check_unique(ids, self._doc_lookup()[0], "doc_ids")
        start = self.n_tokens
        target = self._storage_dtype(start + int(lens.sum()), self.dtype)
        if target != self.dtype:  # the index is about to get a token index: its tokens go float16, once
            self._mat, self.dtype = self._mat[:start].astype(target), target
        self._append_tokens(start, mats)
        del mats
        self._doc_ids = np.concatenate([self._doc_ids, ids])
        self._offsets = np.concatenate([self._offsets, start + np.cumsum(lens)]).astype(np.int64)
        self._sorted = None
        self._sync_token_index(start)
        return self

    def _sync_token_index(self, start: int) -> None:
        """Bring the candidate index up to date with token rows [start:]: train it when the corpus has
        reached the threshold or outgrown its training 4x, else add only the new rows."""
        n = self.n_tokens
        if not self._wants_ivf(n) or n == 0:
            return
        with omp_threads(configured_threads()):  # training and adding on $VIMRAG_FAISS_THREADS, on any thread
            if self._ivf is None or n > _IVF_RETRAIN_GROWTH * max(1, self._trained_on):
                self._ivf, self._trained_on, start = self._train_ivf(), n, 0
            for s in range(start, n, _ADD_CHUNK):  # FAISS wants float32: convert a chunk at a time
                self._ivf.add(self._mat[s : min(n, s + _ADD_CHUNK)].astype(np.float32))  # ids are rows s, s+1, ...

    def _train_ivf(self):
        """An empty IVF index over token rows, trained on a sample of the stored tokens."""
        faiss, n = get_faiss(), self.n_tokens
        nlist = self.nlist or 2 ** int(round(np.log2(max(1.0, np.sqrt(n)))))
        nlist = max(1, min(nlist, n // 39 if n >= 39 else 1))  # k-means wants >= 39 points per centroid
        m = min(n, max(_IVF_TRAIN_PER_LIST * nlist, _PQ_TRAIN_MIN if self.codec == "pq" else 0))
        rows = np.arange(n) if m == n else np.sort(np.random.default_rng(0).choice(n, m, replace=False))
        sample = self._mat[rows].astype(np.float32)  # (m, dim)
        quantizer = faiss.IndexFlatIP(self.dim)
        if self.codec == "flat":
            ivf = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        elif self.codec == "sq8":
            ivf = faiss.IndexIVFScalarQuantizer(
                quantizer, self.dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        else:
            nbits = int(min(8, max(1, np.log2(max(2, m // 4)))))  # tiny corpora cannot train 256 centroids
            ivf = faiss.IndexIVFPQ(quantizer, self.dim, nlist, self.pq_bytes, nbits, faiss.METRIC_INNER_PRODUCT)
            ivf.pq.cp.min_points_per_centroid = 1  # the sample is sized above; silence faiss's small-set warning
            ivf.pq.cp.niter = 10  # 4-d sub-vectors converge fast; the default 25 rounds triple the training time
        ivf.cp.min_points_per_centroid = 1
        ivf.train(sample)
        ivf.nprobe = min(self.nprobe, nlist)
        return ivf

    def _doc_lookup(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            order = np.argsort(self._doc_ids, kind="stable")
            self._sorted = (self._doc_ids[order], order)
        return self._sorted

    # -- scoring
    def _maxsim_rows(self, q: np.ndarray, rows: np.ndarray, batch_tokens: int = 1 << 16) -> np.ndarray:
        """Exact MaxSim of q against the documents at `rows`, (len(rows),) float32.

        Documents are taken in batches of about `batch_tokens` tokens, converted to float32: one matrix
        product per batch, then a segmented max (np.maximum.reduceat) per document, with no padding and
        no Python loop over documents.
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
            sim = q @ sub.astype(np.float32, copy=False).T  # (nq_tok, n_tok)
            out[b:e] = np.maximum.reduceat(sim, seg, axis=1).sum(axis=0)  # (nb,)
            b = e
        return out

    def _allowed_rows(self, allowed_ids: Any) -> np.ndarray:
        allowed = sorted_unique(as_ids(np.asarray(allowed_ids).reshape(-1), "allowed_ids"))
        sorted_ids, order = self._doc_lookup()
        return np.sort(order[np.searchsorted(sorted_ids, allowed[contains(sorted_ids, allowed)])])

    def _rank(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        s, cols = top_k(scores[None, :], k)
        return [(int(self._doc_ids[rows[c]]), float(v)) for c, v in zip(cols[0], s[0]) if c >= 0]

    def exact_search(self, q_tokens: Any, k: int, allowed_ids: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Brute-force MaxSim over every (allowed) document: the reference that `search` approximates."""
        q = as_matrix(q_tokens, self.dim, "q_tokens")
        k = check_k(k)
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
        q = as_matrix(q_tokens, self.dim, "q_tokens")  # (m, dim)
        k = check_k(k)
        n_cand = max(k, int(n_candidates or self.n_candidates))
        kk = int(token_k or self.token_k)
        if self.ntotal == 0 or len(q) == 0:
            return []
        rows = np.arange(self.ntotal) if allowed_ids is None else self._allowed_rows(allowed_ids)
        if len(rows) <= n_cand or self._ivf is None:
            # Too few documents for stage 1 to narrow, or no token index: score them all exactly.
            return self._rank(rows, self._maxsim_rows(q, rows), k)
        token_filter = None
        if allowed_ids is not None:
            doc_ok = np.zeros(self.ntotal, dtype=bool)
            doc_ok[rows] = True
            token_filter = np.repeat(doc_ok, np.diff(self._offsets))  # (T,) bool
        cand = self._candidates(q, kk, n_cand, token_filter)
        return self._rank(cand, self._maxsim_rows(q, cand), k)

    def _token_search(self, q: np.ndarray, kk: int, token_filter: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Each query token's kk nearest token rows: (sims (m, kk), rows (m, kk), -1 padded)."""
        faiss = get_faiss()
        params = faiss.SearchParametersIVF()
        params.nprobe = self._ivf.nprobe
        bits = None
        if token_filter is not None:
            bits = np.packbits(token_filter, bitorder="little")  # token ids are rows: a bitmap selects them
            params.sel = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
            # a selective filter leaves fewer hits per probed list: probe up to 4x more lists
            widen = int(min(4, np.ceil(len(token_filter) / max(1, int(token_filter.sum())))))
            params.nprobe = min(self._ivf.nlist, self._ivf.nprobe * widen)
        if self.codec == "flat":
            with omp_threads(search_threads(len(q))):
                sims, toks = self._ivf.search(q, kk, params=params)  # (m, kk), (m, kk)
            return sims, toks
        # Code similarities are off by ~0.03 (PQ): fetch _REFINE x kk rows by code, then rescore them exactly
        # from the stored tokens, so stage 1 ranks documents by true similarities of the tokens it found.
        with omp_threads(search_threads(len(q))):
            _, toks = self._ivf.search(q, _REFINE * kk, params=params)  # (m, r * kk)
        del bits
        got = self._mat[toks.clip(min=0).ravel()].astype(np.float32).reshape(*toks.shape, self.dim)  # (m, r * kk, dim)
        sims = np.where(toks >= 0, np.einsum("mkd,md->mk", got, q), -np.inf).astype(np.float32)  # (m, r * kk)
        return sims, toks

    def _candidates(self, q: np.ndarray, kk: int, n_cand: int, token_filter: np.ndarray | None) -> np.ndarray:
        """Stage 1: doc rows of the n_cand best approximate scores from per-token nearest neighbours."""
        sims, toks = self._token_search(q, kk, token_filter)  # (m, kk), (m, kk)
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
    def _meta(self) -> dict:
        return {
            "type": "MultiVectorIndex",
            "layout": LAYOUT,
            "dim": self.dim,
            "requested_kind": self.requested_kind,
            "approx_threshold": self.approx_threshold,
            "token_k": self.token_k,
            "n_candidates": self.n_candidates,
            "nprobe": self.nprobe,
            "nlist": self.nlist,
            "dtype": self.requested_dtype,
            "codec": self.codec,
            "pq_bytes": self.pq_bytes,
            "pool_factor": self.pool_factor,
            "trained_on": self._trained_on,
            "has_ivf": self._ivf is not None,
            "n_docs": self.ntotal,
            "n_tokens": self.n_tokens,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the documents, their tokens (once) and the candidate index to `path` atomically."""
        arrays = {"doc_ids": self._doc_ids, "offsets": self._offsets, "tokens": self._mat[: self.n_tokens]}
        index = self._ivf if self._ivf is not None else get_faiss().IndexFlatIP(self.dim)  # an empty placeholder
        save_container(path, self._meta(), arrays, index)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "MultiVectorIndex":
        meta, arrays, index = read_container(path, "MultiVectorIndex")
        if meta.get("layout") != LAYOUT:
            raise IndexOpenError(
                f"{path}: written by an older VimRAG (layout {meta.get('layout', 1)}, every token vector held twice); "
                "delete it and rebuild: `vimrag index` (or opening the index) rebuilds it from the SQLite store"
            )
        self = cls(
            meta["dim"],
            meta["requested_kind"],
            meta["approx_threshold"],
            meta["token_k"],
            meta["n_candidates"],
            meta["nprobe"],
            meta["nlist"],
            meta["dtype"],
            meta["codec"],
            meta["pq_bytes"],
            meta["pool_factor"],
        )
        doc_ids, offsets, tokens = arrays["doc_ids"], arrays["offsets"], arrays["tokens"]
        ok = (
            len(doc_ids) == meta["n_docs"]
            and len(offsets) == len(doc_ids) + 1
            and offsets[-1] == len(tokens)
            and tokens.shape == (meta["n_tokens"], self.dim)
            and (tokens.dtype == self.dtype or (self.requested_dtype == "auto" and tokens.dtype.name in DTYPES))
        )
        if meta["has_ivf"]:
            ok = ok and index.ntotal == len(tokens) and index.d == self.dim and hasattr(index, "nlist")
        if not ok:
            raise IndexOpenError(f"{path}: document table, tokens and token index disagree; rebuild it from the store")
        self._doc_ids, self._offsets, self._mat = doc_ids.astype(np.int64), offsets.astype(np.int64), tokens
        self.dtype = tokens.dtype
        self._ivf, self._trained_on = (index, meta["trained_on"]) if meta["has_ivf"] else (None, 0)
        return self


def _pq_bytes(dim: int) -> int:
    """Bytes of a token's PQ code: the largest divisor of dim up to dim / 4 (4-d sub-vectors at 128-d)."""
    return max([m for m in range(1, max(1, dim // 4) + 1) if dim % m == 0])
