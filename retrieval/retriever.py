"""Hybrid search over an index: BM25 on extracted text plus dense vectors, fused, optionally cut by ViDoRAG's
dynamic top-k, with filters by document, modality and time span.

`Retriever(index_dir)` opens the store, builds BM25 and loads (or rebuilds) the FAISS structures, which
are keyed on the store's version so they never go stale. Dense vectors may be several per unit (text
passages, video keyframes); a unit's dense score is the best of its vectors.

Queries are text, or an image (a crop): a visual embedder searches by the pixels, a text-only embedder
by the crop's OCR text.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bm25 import Bm25Index
from retrieval.errors import IndexOpenError, RetrievalError
from retrieval.fusion import dynamic_top_k, fuse
from retrieval.stores import open_store
from retrieval.units import MODALITIES, Filters, Hit, Unit, doc_names

MODES = ("hybrid", "bm25", "dense")
DEFAULT_INDEX = os.environ.get("VIMRAG_INDEX", "vimrag-index")
DENSE_FILE = "dense.faiss"
DENSE_META = "dense.json"


@dataclass
class _State:
    """What one store version gives a search: units, BM25, the dense index and the vector-to-unit map."""

    version: int = -1
    units: list[Unit] = field(default_factory=list)
    by_uid: dict[str, int] = field(default_factory=dict)  # uid -> position in `units`
    bm25: Bm25Index | None = None
    dense: Any = None  # VectorIndex or MultiVectorIndex
    vec_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # (n_vec,) sorted vector row ids
    vec_unit: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # (n_vec,) their units' positions
    multi: bool = False
    _names: dict[str, list[int]] | None = field(default=None, repr=False)  # file name or unit.doc -> positions
    _allowed: dict[tuple, np.ndarray] = field(default_factory=dict, repr=False)  # a filter's positions, by filter

    def allowed(self, filters: Filters) -> np.ndarray:
        """(m,) sorted positions of the units `filters` accepts, exactly those of a scan of every unit, and
        remembered per filter: a scoped search (an eval's `--scope doc`, a gym episode) repeats its filter at every
        step, and a scan of 10,631 gym units cost about 0.07 s a search (rl/bench_scoped_search.py)."""
        key = (tuple(filters.docs or ()), tuple(filters.modalities or ()), filters.time_span)
        hit = self._allowed.get(key)
        if hit is None:
            maybe = range(len(self.units)) if not filters.docs else self._doc_candidates(filters.docs)
            hit = np.array([i for i in maybe if filters.accepts(self.units[i])], dtype=np.int64)
            hit.flags.writeable = False  # shared by every search with this filter
            if len(self._allowed) >= 4096:  # bounded: an eval over many documents
                self._allowed.clear()
            self._allowed[key] = hit
        return hit

    def _doc_candidates(self, docs: list[str]) -> list[int]:
        """Sorted positions that may match one of `docs`: a unit matches a wanted doc (`Filters.accepts`) only
        when its file's name is the wanted path's last part (whole path, name or path suffix) or its `doc` is."""
        if self._names is None:
            names: dict[str, list[int]] = {}
            for i, u in enumerate(self.units):
                names.setdefault(Path(u.source).name, []).append(i)
                if u.doc and u.doc != Path(u.source).name:
                    names.setdefault(u.doc, []).append(i)
            self._names = names
        keys = {k for d in docs for k in doc_names(d)}
        return sorted({i for k in keys for i in self._names.get(k, ())})


class Retriever:
    """Search over one index folder. A folder whose index lives in Milvus (its `store.json` says so) gives a
    `MilvusRetriever`, which has the same methods and runs the searches in Milvus; callers never choose."""

    def __new__(cls, index_dir: str | Path = DEFAULT_INDEX, *args, **kwargs):
        if cls is Retriever:
            from retrieval.store_spec import recorded_spec

            spec = recorded_spec(index_dir)
            if spec is not None and spec.kind != "local":
                cls = MilvusRetriever
        return super().__new__(cls)

    def __init__(
        self,
        index_dir: str | Path = DEFAULT_INDEX,
        embedder=None,
        ocr: str = "auto",
        fusion: str = "rrf",
        weights: dict[str, float] | None = None,
    ) -> None:
        self.dir = Path(index_dir)
        self.store = open_store(self.dir)
        self.spec = self.store.get_meta("embedder")
        if embedder is not None and self.spec and embedder.spec != self.spec:
            raise IndexOpenError(f"{self.dir} was built with embedder {self.spec!r}, not {embedder.spec!r}")
        self._embedder = embedder
        self._ocr_name = ocr
        self._ocr = None
        self.fusion = fusion
        self.weights = weights or {}
        # A reload builds a new `_State` (units, BM25, FAISS of one store version) and swaps it in whole; a search
        # reads the state it started with, so searches run side by side and never see half of two versions.
        # The lock only keeps two reloads from building at once, and the embedding lock keeps the query
        # encoder (its tokenizer is not safe to share between threads) to one query at a time.
        self._lock = threading.RLock()
        self._embed_lock = threading.Lock()
        self._state = _State()
        self.refresh()

    # The current state's parts, for callers that read them (benchmarks, tests).
    version = property(lambda self: self._state.version)
    units = property(lambda self: self._state.units)
    bm25 = property(lambda self: self._state.bm25)
    dense = property(lambda self: self._state.dense)
    multi = property(lambda self: self._state.multi)

    def reopen(self) -> None:
        """Open the store again: in a process forked from the one that opened it (a search-server worker), where
        an SQLite connection or a gRPC channel of the parent must not be used. The loaded index stays."""
        self.store = open_store(self.dir)

    # -------------------------------------------------------------------------------- loading
    @property
    def embedder(self):
        if self._embedder is None:
            from retrieval.embedders import load_embedder

            self._embedder = load_embedder(self.spec or "minilm")
        return self._embedder

    @property
    def ocr(self):
        if self._ocr is None:
            from retrieval.ocr import get_ocr

            self._ocr = get_ocr(self._ocr_name)
        return self._ocr

    def refresh(self) -> bool:
        """Reload derived structures if the store changed since they were built. True when it reloaded."""
        if self.store.version == self._state.version:  # the common case: one read, no lock
            return False
        with self._lock, self.store.snapshot():  # units, vectors and version all from one commit
            version = self.store.version
            if version == self._state.version:  # another thread reloaded meanwhile
                return False
            st = _State(version)
            rows, st.units = self.store.units()
            pos = {int(r): i for i, r in enumerate(rows)}  # unit row id -> position in st.units
            st.by_uid = {u.uid: i for i, u in enumerate(st.units)}
            st.bm25 = Bm25Index([u.text for u in st.units])
            self._load_dense(st, pos)
            self._state = st
            return True

    def _load_dense(self, st: _State, pos: dict[int, int]) -> None:
        from retrieval.index import VectorIndex
        from retrieval.index_file import atomic_write
        from retrieval.late_interaction import MultiVectorIndex

        # Ids and owners only: the vector blobs are read just when the FAISS file must be rebuilt.
        st.vec_ids, owners, st.multi = self.store.vector_owners()  # (n_vec,) sorted vector row ids
        st.vec_unit = np.array([pos[int(u)] for u in owners], dtype=np.int64)  # (n_vec,) unit positions
        if not len(st.vec_ids):
            return
        meta_path, index_path = self.dir / DENSE_META, self.dir / DENSE_FILE
        cls = MultiVectorIndex if st.multi else VectorIndex
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("version") == st.version and index_path.exists():
                st.dense = cls.load(index_path)
                return
        except Exception:  # noqa: BLE001 - a missing or damaged derived file is simply rebuilt below
            pass
        vids, vecs = [], []
        for ids, _, arrs in self.store.iter_vectors():
            vids.append(ids)
            vecs.extend(arrs)
        ids = np.concatenate(vids)
        if st.multi:
            st.dense = MultiVectorIndex(dim=vecs[0].shape[1])
            st.dense.build(ids, vecs)
        else:
            mat = np.stack(vecs).astype(np.float32)  # (n_vec, dim)
            st.dense = VectorIndex(dim=mat.shape[1])
            st.dense.build(ids, mat)
        st.dense.save(index_path)
        meta = {"version": st.version, "kind": getattr(st.dense, "kind", "multi"), "n_vectors": int(len(ids))}
        atomic_write(meta_path, lambda f: f.write(json.dumps(meta).encode()))

    # -------------------------------------------------------------------------------- search
    def search(
        self,
        query,
        k: int = 5,
        filters: Filters | dict | None = None,
        mode: str = "hybrid",
        dynamic: bool = False,
        n_candidates: int | None = None,
    ) -> list[Hit]:
        """The best `k` units for `query` (a string or a PIL image), best first.

        mode: "hybrid" (BM25 + dense, fused), "bm25" or "dense". dynamic: cut the list with ViDoRAG's
        Gaussian-mixture top-k (k is then the maximum).
        """
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}; use one of {MODES}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if isinstance(filters, dict):
            filters = Filters.from_dict(filters)
        self.refresh()
        return self._search(query, k, filters, mode, dynamic, n_candidates)

    def _search(
        self, query, k: int, filters: Filters | None, mode: str, dynamic: bool, n_candidates: int | None
    ) -> list[Hit]:
        st = self._state  # one version throughout, whatever a reload swaps in meanwhile
        text, image = self._query_parts(query)
        if not st.units:
            return []
        allowed = self._allowed(st, filters)
        if allowed is not None and not len(allowed):
            return []
        n_cand = n_candidates or max(50, 5 * k)
        per: dict[str, dict[int, float]] = {}
        if mode in ("hybrid", "bm25") and text:
            per["bm25"] = self._bm25(st, text, n_cand, allowed)
        if mode in ("hybrid", "dense"):
            per["dense"] = self._dense(st, text, image, n_cand, allowed)
        if len(per) == 1:
            fused = next(iter(per.values()))
        else:
            fused = fuse(per, self.fusion, self.weights)
        ranked = sorted(fused.items(), key=lambda kv: -kv[1])
        if dynamic and ranked:
            k = min(k, dynamic_top_k([s for _, s in ranked], max_k=k))
        return [
            Hit(st.units[pos], float(score), rank=i + 1, scores={m: float(s[pos]) for m, s in per.items() if pos in s})
            for i, (pos, score) in enumerate(ranked[:k])
        ]

    def _query_parts(self, query) -> tuple[str, object | None]:
        if isinstance(query, str):
            if not query.strip():
                raise ValueError("empty query; give some words or an image")
            return query, None
        if hasattr(query, "convert") and hasattr(query, "size"):  # a PIL image
            text = self.ocr.read(query).text if self.ocr is not None else ""
            if not self.embedder.supports_images and not text.strip():
                raise RetrievalError(
                    "the image query has no readable text and this index's embedder "
                    f"({self.spec}) is text-only; crop a region with text, or index with a "
                    "visual embedder (--embedder clip:... or colqwen2:...)"
                )
            return text, query.convert("RGB")
        raise TypeError(f"query must be a str or a PIL.Image, got {type(query).__name__}")

    def _allowed(self, st: _State, filters: Filters | None) -> np.ndarray | None:
        if filters is None or filters.is_empty():
            return None
        return st.allowed(filters)

    def _bm25(self, st: _State, text: str, n: int, allowed: np.ndarray | None) -> dict[int, float]:
        s = st.bm25.scores(text)  # (n_units,)
        if allowed is not None:
            masked = np.full_like(s, -np.inf)
            masked[allowed] = s[allowed]
            s = masked
        top = np.argsort(-s)[:n]
        return {int(i): float(s[i]) for i in top if s[i] > 0}

    def _embed_query(self, text: str, image):
        """The query's embedding: by its pixels where the embedder sees images, else by its text."""
        emb = self.embedder
        with self._embed_lock:
            if image is not None and emb.supports_images:
                return emb.encode_image_queries([image])
            return emb.encode_queries([text])

    def _dense(self, st: _State, text: str, image, n: int, allowed: np.ndarray | None) -> dict[int, float]:
        if st.dense is None:
            return {}
        q = self._embed_query(text, image)
        allowed_vecs = None
        if allowed is not None:
            allowed_vecs = st.vec_ids[np.isin(st.vec_unit, allowed)]
        if st.multi:
            qm = q[0]  # (n_q_tokens, dim)
            pairs = st.dense.search(qm, 4 * n, allowed_ids=allowed_vecs)
            vids = np.array([p[0] for p in pairs], dtype=np.int64)
            scores = np.array([p[1] for p in pairs], dtype=np.float32)
        else:
            qv = np.asarray(q, dtype=np.float32).reshape(1, -1)  # (1, dim)
            sc, ids = st.dense.search(qv, 4 * n, allowed_ids=allowed_vecs)
            keep = ids[0] >= 0
            vids, scores = ids[0][keep], sc[0][keep]
        units = st.vec_unit[np.searchsorted(st.vec_ids, vids)]
        best: dict[int, float] = {}
        for u, s in zip(units.tolist(), scores.tolist()):
            if u not in best or s > best[u]:
                best[u] = s  # a unit scores by its best passage / keyframe
        return dict(sorted(best.items(), key=lambda kv: -kv[1])[:n])

    def position(self, uid: str) -> int:
        """The unit's position in this index version (VRAG's `indice`), or -1."""
        return self._state.by_uid.get(uid, -1)

    def unit(self, uid: str) -> Unit | None:
        st = self._state
        i = st.by_uid.get(uid)
        return None if i is None else st.units[i]

    def stats(self) -> dict:
        st = self._state
        by_mod: dict[str, int] = {}
        for u in st.units:
            by_mod[u.modality] = by_mod.get(u.modality, 0) + 1
        return {
            "index": str(self.dir),
            "embedder": self.spec,
            "units": len(st.units),
            "by_modality": by_mod,
            "files": len({u.source for u in st.units}),
            "vectors": int(len(st.vec_ids)),
            "dense_kind": getattr(st.dense, "kind", None),
            "version": st.version,
        }

    def roots(self) -> list[str]:
        return self.store.roots()


class MilvusRetriever(Retriever):
    """A Retriever whose index lives in Milvus (retrieval/milvus_store.py): BM25, dense and late-interaction
    search, and the filters, run in Milvus; only the k units returned are read back. Nothing of the index is
    held in this process, so the index may outgrow its memory. Fusion and the dynamic cut are the local
    index's own (`fuse`, `dynamic_top_k`). A unit's `position` (VRAG's `indice`) is a stable number derived
    from its uid, not a row number: Milvus has no row order."""

    version = -1  # plain attributes here, where the local retriever reads its `_State`
    multi = False

    def refresh(self) -> bool:
        with self._lock:
            version = self.store.version
            changed, self.version = version != self.version, version
            if changed:
                self.store.sync_collections()
                self.multi = self.store.is_multi()
            return changed

    def _search(
        self, query, k: int, filters: Filters | None, mode: str, dynamic: bool, n_candidates: int | None
    ) -> list[Hit]:
        from retrieval.milvus_rows import filter_expr

        text, image = self._query_parts(query)
        flt = filter_expr(filters)
        n_cand = n_candidates or max(50, 5 * k)
        per: dict[str, dict[str, float]] = {}
        if mode in ("hybrid", "bm25") and text:
            per["bm25"] = self.store.bm25(text, n_cand, flt)
        if mode in ("hybrid", "dense"):
            q = self._embed_query(text, image)
            if self.multi:
                per["dense"] = self.store.late_interaction(np.asarray(q[0], np.float32), n_cand, flt)
            else:
                per["dense"] = self.store.dense(np.asarray(q, np.float32).reshape(-1), n_cand, flt)
        fused = next(iter(per.values())) if len(per) == 1 else fuse(per, self.fusion, self.weights)  # type: ignore[arg-type]
        ranked = sorted(fused.items(), key=lambda kv: -kv[1])
        units: dict[str, Unit] = {}
        if filters is not None and not filters.is_empty():  # the expression's LIKE is loose; `accepts` is exact
            units = self.store.units_by_uid([u for u, _ in ranked])
            ranked = [(u, s) for u, s in ranked if u in units and filters.accepts(units[u])]
        if dynamic and ranked:
            k = min(k, dynamic_top_k([s for _, s in ranked], max_k=k))
        top = ranked[:k]
        if not units:  # without a filter only the k returned are read back
            units = self.store.units_by_uid([u for u, _ in top])
        return [
            Hit(units[uid], float(score), rank=i + 1, scores={m: float(s[uid]) for m, s in per.items() if uid in s})
            for i, (uid, score) in enumerate(t for t in top if t[0] in units)
        ]

    def position(self, uid: str) -> int:
        from retrieval.milvus_rows import position

        return position(uid)

    def unit(self, uid: str) -> Unit | None:
        return self.store.units_by_uid([uid]).get(uid)

    def stats(self) -> dict:
        counts = {m: self.store.count_units(f'modality == "{m}"') for m in MODALITIES}
        by_mod = {m: n for m, n in counts.items() if n}
        return {
            "index": str(self.dir),
            "store": str(self.store.spec),
            "embedder": self.spec,
            "units": sum(by_mod.values()),
            "by_modality": by_mod,
            "files": sum(1 for r in self.store.files() if r.status == "ok" and r.n_units),
            "vectors": self.store.count_vectors(),
            "dense_kind": "milvus-multi" if self.multi else "milvus",
            "version": self.version,
        }


_RETRIEVERS: dict[str, Retriever] = {}
_RETRIEVERS_LOCK = threading.Lock()


def get_retriever(index: str | Path | None = None) -> Retriever:
    """A process-wide Retriever per index folder (models and structures load once)."""
    key = str(Path(index or DEFAULT_INDEX).resolve())
    with _RETRIEVERS_LOCK:
        if key not in _RETRIEVERS:
            _RETRIEVERS[key] = Retriever(key)
        return _RETRIEVERS[key]


def open_retriever(index: str | Path | None = None, search_url: str | None = None, text_only: bool = False):
    """The local index's Retriever, or, with `search_url`, a RemoteRetriever that sends every search there.
    `text_only`: the policy reads text, not pixels, so pictures a server returns without text are OCR'd.
    A server that is down or answers in an unknown shape raises SearchServerError here, before any question."""
    if search_url:
        from retrieval.remote import RemoteRetriever

        remote = RemoteRetriever(search_url, ocr_text=text_only)
        remote.check()
        return remote
    return Retriever(index or DEFAULT_INDEX)


def search(
    query,
    k: int = 5,
    filters: Filters | dict | None = None,
    *,
    index: str | Path | None = None,
    mode: str = "hybrid",
    dynamic: bool = False,
) -> list[Hit]:
    """Search an index (default: $VIMRAG_INDEX or ./vimrag-index) and return the best `k` hits."""
    return get_retriever(index).search(query, k=k, filters=filters, mode=mode, dynamic=dynamic)


__all__ = ["Retriever", "open_retriever", "search", "get_retriever", "Hit", "Unit", "Filters"]
