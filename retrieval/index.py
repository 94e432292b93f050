"""FAISS indexes over unit vectors: the derived, rebuildable side of the vector store.

The durable copy of every embedding lives in the SQLite store; the structures here are caches that make
search fast and can always be rebuilt from it. All vectors are float32 and L2-normalised, so similarity
is the inner product (cosine).

- `VectorIndex`: one vector per int64 id. Exact (`IndexFlatIP`) below `approx_threshold` vectors,
  IVF-Flat at and above it; HNSW on request. IVF is the default approximate kind because it measured
  better on 2 cores (`python -m eval.bench_vectors`, 1M x 384 clustered vectors): it builds in ~20 s
  where HNSW (M=32, efConstruction 40) takes ~5 min, it needs no graph upkeep on incremental adds,
  and it reaches recall@10 1.000 at ~29x the speed of exact search where HNSW stays below 0.9 even
  at efSearch 256. Search can be restricted to allowed ids; small allowed sets are scored exactly,
  and a filtered search that comes back short of k hits is redone exactly.
- Late interaction (`MultiVectorIndex`) lives in `retrieval/late_interaction.py`. Both
  indexes share their input checks (`retrieval/index_base.py`) and their file format
  (`retrieval/index_file.py`: one file each, written atomically, so a crash while saving leaves the
  previous file intact).

Not here on purpose: deletion (rebuild from the store instead) and any knowledge of units or files.
"""

from __future__ import annotations

import os
from typing import Any

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

KINDS = ("auto", "flat", "ivf", "hnsw")

# Defaults tuned with `python -m eval.bench_vectors` (dim 384, up to 1M clustered vectors, 2 cores).
DEFAULT_APPROX_THRESHOLD = 50_000
# nprobe lists of nlist ~ sqrt(n) are scanned per query (~3% of a 1M index). On the benchmark mixture
# nprobe=4 already gives recall@10 1.000; 32 keeps >= 0.95 on harder mixtures (0.98 with 100 vectors
# per cluster at 200k) and is still ~27x faster than exact search at 1M.
DEFAULT_NPROBE = 32
DEFAULT_HNSW_M = 32
DEFAULT_EF_CONSTRUCTION = 40
DEFAULT_EF_SEARCH = 64
# Allowed sets up to this size are scored exactly (gather + one matrix product) instead of a filtered
# approximate search: ~10-20 ms at most for IVF at dim 384, and it never comes back short of k hits.
DEFAULT_EXACT_FILTER_MAX = 20_000
# Below this fraction of the corpus a filtered HNSW walk visits ~1/fraction nodes per useful hit and
# stops being cheaper than the exact scan over the allowed vectors.
_HNSW_MIN_FILTER_FRACTION = 0.02
_MAX_FILTER_WIDEN = 4  # filtered approximate search widens nprobe / efSearch by at most this factor
# IVF centroids are trained on the vectors present at (re)build; once the index has grown past this
# factor of that count it is retrained on everything (geometric growth keeps the amortised cost linear).
_IVF_RETRAIN_GROWTH = 4
_IVF_TRAIN_PER_LIST = 50  # k-means sample: this many vectors per list (faiss asks for at least 39)


# ---------------------------------------------------------------- single-vector index


class VectorIndex:
    """Inner-product search over int64 ids: exact below `approx_threshold` vectors, IVF at or above it.

    kind: "flat" (always exact), "ivf" or "hnsw" (always approximate), or "auto". An auto index picks
    by the count given to `build`; when `add` takes an auto index to `approx_threshold` or past it, it
    is rebuilt once as IVF from its own stored vectors (a k-means over a sample plus one assignment
    pass: ~20 s at 1M x 384 on 2 cores). It never switches back. An IVF index is also retrained from
    its stored vectors whenever it has grown 4x past the count its centroids were trained on, so
    lists stay balanced as a corpus is extended. `kind` reports the structure in use,
    `requested_kind` what was asked for.

    nlist (IVF lists) defaults to a power of two near sqrt(n) at each (re)training; nprobe lists are
    scanned per query. hnsw_m / ef_construction / ef_search configure kind="hnsw".
    """

    def __init__(
        self,
        dim: int,
        kind: str = "auto",
        approx_threshold: int = DEFAULT_APPROX_THRESHOLD,
        hnsw_m: int = DEFAULT_HNSW_M,
        ef_search: int = DEFAULT_EF_SEARCH,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        nprobe: int = DEFAULT_NPROBE,
        nlist: int | None = None,
        exact_filter_max: int = DEFAULT_EXACT_FILTER_MAX,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r} is unknown; use one of {KINDS}")
        if int(dim) != dim or dim < 1:
            raise ValueError(f"dim={dim!r} is invalid; give the embedder's vector size, e.g. 384")
        for name, v in [
            ("approx_threshold", approx_threshold),
            ("hnsw_m", hnsw_m),
            ("ef_search", ef_search),
            ("ef_construction", ef_construction),
            ("nprobe", nprobe),
            ("nlist", nlist or 1),
            ("exact_filter_max", exact_filter_max),
        ]:
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v!r} is invalid; it must be a positive integer")
        self.dim = int(dim)
        self.requested_kind = kind
        self.approx_threshold = int(approx_threshold)
        self.hnsw_m = int(hnsw_m)
        self.ef_search = int(ef_search)
        self.ef_construction = int(ef_construction)
        self.nprobe = int(nprobe)
        self.nlist = None if nlist is None else int(nlist)
        self.exact_filter_max = int(exact_filter_max)
        self._kind = "flat"
        self._trained_on = 0  # vectors present when the IVF centroids were trained
        self._index = self._new_index("flat", np.empty((0, self.dim), np.float32))
        self._lookup: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (ids, sorted ids, their rows)
        if kind == "hnsw":  # needs no training, so it can exist empty; an empty "ivf" waits for data
            self._kind = "hnsw"
            self._index = self._new_index("hnsw", np.empty((0, self.dim), np.float32))

    # -- state
    @property
    def kind(self) -> str:
        """The structure in use: "flat", "ivf" or "hnsw" (an empty ivf/auto index is "flat")."""
        return self._kind

    @property
    def ntotal(self) -> int:
        return int(self._index.ntotal)

    @property
    def n_lists(self) -> int:
        """IVF lists in use (0 unless kind is "ivf")."""
        return int(self._inner().nlist) if self._kind == "ivf" else 0

    def __len__(self) -> int:
        return self.ntotal

    def ids(self) -> np.ndarray:
        """All ids in insertion order, (ntotal,) int64 (a copy): compare them with the store to check sync."""
        return self._ids_lookup()[0].copy()

    def _inner(self):
        return get_faiss().downcast_index(self._index.index)

    def _new_index(self, kind: str, train: np.ndarray):
        """An empty id-mapped FAISS index of `kind`; IVF centroids are trained on (a sample of) `train`."""
        faiss = get_faiss()
        if kind == "flat":
            inner = faiss.IndexFlatIP(self.dim)
        elif kind == "hnsw":
            inner = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = self.ef_construction
            inner.hnsw.efSearch = self.ef_search
        else:
            n = len(train)
            nlist = self.nlist or 2 ** int(round(np.log2(max(1.0, np.sqrt(n)))))
            nlist = max(1, min(nlist, n // 39 if n >= 39 else 1))  # k-means wants >= 39 points per centroid
            inner = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
            m = min(n, _IVF_TRAIN_PER_LIST * nlist)
            sample = train if m == n else train[np.sort(np.random.default_rng(0).choice(n, m, replace=False))]
            inner.cp.min_points_per_centroid = 1  # the sample is sized above; silence faiss's tiny-set warning
            inner.train(sample)
            inner.nprobe = min(self.nprobe, nlist)
            # Internal ids are 0..n-1 in insertion order (the id map holds ours): an array direct map
            # lets us reconstruct vectors by row for exact filtered scoring and for retraining.
            inner.make_direct_map(True)
        return faiss.IndexIDMap(inner)  # faiss's Python wrapper keeps a reference to `inner`

    def _ids_lookup(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._lookup is None:
            ids = get_faiss().vector_to_array(self._index.id_map).astype(np.int64, copy=False)  # (n,)
            order = np.argsort(ids, kind="stable")
            self._lookup = (ids, ids[order], order)
        return self._lookup

    def _all_vectors(self) -> np.ndarray:
        """(ntotal, dim) stored vectors in insertion order: a zero-copy view for flat/hnsw (valid until
        the next write), a reconstructed copy for ivf."""
        faiss, n = get_faiss(), self.ntotal
        if n == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        inner = self._inner()
        if self._kind == "ivf":
            return inner.reconstruct_n(0, n)
        flat = inner if self._kind == "flat" else faiss.downcast_index(inner.storage)
        return faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)

    def _vectors_at(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), dim) stored vectors at insertion rows."""
        if self._kind == "ivf":
            return self._inner().reconstruct_batch(rows.astype(np.int64))
        return self._all_vectors()[rows]

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Insertion rows of those `ids` that are in the index (absent ids are dropped)."""
        _, sorted_ids, order = self._ids_lookup()
        hit = contains(sorted_ids, ids)
        return order[np.searchsorted(sorted_ids, ids[hit])]

    def _target_kind(self, n: int, current: str) -> str:
        """The kind to hold n vectors; an auto index never goes back from ivf to flat."""
        if self.requested_kind == "auto":
            return "ivf" if n >= self.approx_threshold or current == "ivf" else "flat"
        if self.requested_kind == "ivf" and n == 0:
            return "flat"  # k-means needs data: an empty ivf index waits for its first vectors
        return self.requested_kind

    def _rebuild(self, ids: np.ndarray, vecs: np.ndarray, kind: str) -> None:
        with omp_threads(configured_threads()):  # training and adding on $VIMRAG_FAISS_THREADS, on any thread
            index = self._new_index(kind, vecs)
            if len(ids):
                index.add_with_ids(vecs, ids)
        # Swap only once the new index is complete: a failure above leaves the old one in place.
        self._kind, self._index, self._lookup = kind, index, None
        self._trained_on = len(ids) if kind == "ivf" else 0

    # -- writes
    def build(self, ids: Any, vecs: Any) -> "VectorIndex":
        """Replace the contents with `vecs` (n, dim) under `ids` (n,). Auto picks the kind from n."""
        vecs = as_matrix(vecs, self.dim, "vecs")
        ids = as_ids(ids, "ids", len(vecs))
        check_unique(ids, np.empty(0, np.int64), "ids")
        self._rebuild(ids, vecs, self._target_kind(len(ids), current="flat"))
        return self

    def add(self, ids: Any, vecs: Any) -> "VectorIndex":
        """Append vectors under new ids (ids already present are an error: there is no update)."""
        vecs = as_matrix(vecs, self.dim, "vecs")
        ids = as_ids(ids, "ids", len(vecs))
        check_unique(ids, self._ids_lookup()[1], "ids")
        if not len(ids):
            return self
        total = self.ntotal + len(ids)
        target = self._target_kind(total, self._kind)
        if target != self._kind or (target == "ivf" and total > _IVF_RETRAIN_GROWTH * max(1, self._trained_on)):
            old_ids = self._ids_lookup()[0]
            all_vecs = np.concatenate([self._all_vectors(), vecs])  # (total, dim), copied before the rebuild
            self._rebuild(np.concatenate([old_ids, ids]), all_vecs, target)
        else:
            with omp_threads(configured_threads()):
                self._index.add_with_ids(vecs, ids)
            self._lookup = None
        return self

    # -- search
    def search(self, queries: Any, k: int, allowed_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by inner product: (scores (nq, k) float32, ids (nq, k) int64), padded with -inf / -1.

        `allowed_ids` restricts the results to those ids (ids not in the index are ignored). Small
        allowed sets are scored exactly; large ones go through FAISS with an id selector, and any query
        the filtered search leaves short of k hits is rescored exactly, so each row holds
        min(k, number of allowed ids present) hits.
        """
        q = as_matrix(queries, self.dim, "queries")  # (nq, dim)
        k = check_k(k)
        if allowed_ids is None:
            return self._faiss_search(q, k)
        allowed = sorted_unique(as_ids(np.asarray(allowed_ids).reshape(-1), "allowed_ids"))  # (a,)
        if len(allowed) == 0 or self.ntotal == 0:
            return top_k(np.empty((len(q), 0), np.float32), k)
        if self._prefer_exact(len(allowed)):
            return self._exact_rows(q, k, self._rows_of(allowed))
        selector, keep = _id_selector(allowed)
        scores, ids = self._faiss_search(q, k, selector=selector, n_allowed=len(allowed))
        del keep
        # Rows left short of min(k, allowed) hits (a narrow filter, or allowed ids absent from the
        # index) are rescored exactly; that also tells us how many allowed ids are really present.
        short = ids[:, min(k, len(allowed)) - 1] < 0  # (nq,)
        if short.any():
            scores[short], ids[short] = self._exact_rows(q[short], k, self._rows_of(allowed))
        return scores, ids

    def _prefer_exact(self, n_allowed: int) -> bool:
        """Score the allowed rows exactly rather than run a filtered FAISS search?"""
        if self._kind == "flat":
            # A flat scan with a selector still tests every stored row; gathering wins until half are allowed.
            return n_allowed <= max(self.exact_filter_max, self.ntotal // 2)
        if self._kind == "hnsw":
            # A graph walk keeping ~n_allowed/ntotal of what it visits degrades below a few percent.
            return n_allowed <= max(self.exact_filter_max, int(_HNSW_MIN_FILTER_FRACTION * self.ntotal))
        # IVF rebuilds each allowed vector from its list (~1-2 us a row), while a filtered probe costs about
        # what an unfiltered one does: past exact_filter_max rows the probe is the faster of the two.
        return n_allowed <= self.exact_filter_max

    def _faiss_search(self, q: np.ndarray, k: int, selector=None, n_allowed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """FAISS search with the kind's parameters; a selector widens the search by up to 4x."""
        faiss = get_faiss()
        if self.ntotal == 0:
            return top_k(np.empty((len(q), 0), np.float32), k)
        widen = 1
        if selector is not None and n_allowed:
            widen = int(min(_MAX_FILTER_WIDEN, np.ceil(self.ntotal / n_allowed)))
        if self._kind == "hnsw":
            params = faiss.SearchParametersHNSW()
            params.efSearch = max(self.ef_search, k) * widen
        elif self._kind == "ivf":
            params = faiss.SearchParametersIVF()
            params.nprobe = min(self.nprobe * widen, self.n_lists)
        else:
            params = faiss.SearchParameters()
        if selector is not None:
            params.sel = selector
        with omp_threads(search_threads(len(q))):
            scores, ids = self._index.search(q, k, params=params)  # (nq, k), (nq, k)
        scores = scores.astype(np.float32, copy=False)
        scores[ids < 0] = -np.inf
        return scores, ids.astype(np.int64, copy=False)

    def _exact_rows(self, q: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sub = self._vectors_at(rows)  # (a, dim)
        scores, cols = top_k(q @ sub.T, k)  # (nq, k), (nq, k)
        ids = np.where(cols >= 0, self._ids_lookup()[0][rows][cols.clip(min=0)], -1)
        return scores, ids

    # -- persistence
    def _meta(self) -> dict:
        return {
            "type": "VectorIndex",
            "dim": self.dim,
            "requested_kind": self.requested_kind,
            "kind": self._kind,
            "approx_threshold": self.approx_threshold,
            "hnsw_m": self.hnsw_m,
            "ef_search": self.ef_search,
            "ef_construction": self.ef_construction,
            "nprobe": self.nprobe,
            "nlist": self.nlist,
            "exact_filter_max": self.exact_filter_max,
            "trained_on": self._trained_on,
            "ntotal": self.ntotal,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to `path` atomically (temp file in the same folder, fsync, os.replace)."""
        save_container(path, self._meta(), {}, self._index)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "VectorIndex":
        meta, _, index = read_container(path, "VectorIndex")
        return cls._from_parts(meta, index, path)

    @classmethod
    def _from_parts(cls, meta: dict, index, path) -> "VectorIndex":
        faiss = get_faiss()
        self = cls(
            meta["dim"],
            meta["requested_kind"],
            meta["approx_threshold"],
            meta["hnsw_m"],
            meta["ef_search"],
            meta["ef_construction"],
            meta["nprobe"],
            meta["nlist"],
            meta["exact_filter_max"],
        )
        if not isinstance(index, faiss.IndexIDMap) or index.ntotal != meta["ntotal"] or index.d != self.dim:
            raise IndexOpenError(f"{path}: the FAISS index does not match its header; rebuild it from the store")
        self._kind, self._trained_on, self._index = meta["kind"], meta["trained_on"], index
        return self


def _id_selector(allowed_sorted: np.ndarray):
    """A FAISS id selector for sorted, unique ids, plus the buffer it points into (keep it alive)."""
    faiss = get_faiss()
    top = int(allowed_sorted[-1])
    if top < 64 * len(allowed_sorted) + (1 << 16):
        # Dense ids (SQLite rowids, token rows): a bitmap is cheaper to build and to test than a hash set.
        mask = np.zeros(top + 1, dtype=bool)
        mask[allowed_sorted] = True
        bits = np.packbits(mask, bitorder="little")
        return faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits)), bits
    return faiss.IDSelectorBatch(len(allowed_sorted), faiss.swig_ptr(allowed_sorted)), allowed_sorted
