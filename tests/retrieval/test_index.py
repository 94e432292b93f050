"""Spec for retrieval/index.py: exact and approximate search, filtering, atomic saves.

Late interaction has its own spec: test_late_interaction.py.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from retrieval import index_base
from retrieval.errors import IndexOpenError
from retrieval.index import VectorIndex
from retrieval.late_interaction import MultiVectorIndex

DIM = 32


def units(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, n_clusters: int = 40, sigma: float = 0.8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(corpus (n, DIM), queries (30, DIM)) drawn from one mixture of Gaussians around unit centres."""
    rng = np.random.default_rng(seed)
    centres = units(rng.standard_normal((n_clusters, DIM)))

    def draw(m):
        return units(centres[rng.integers(0, n_clusters, m)] + rng.standard_normal((m, DIM)) * sigma / np.sqrt(DIM))

    return draw(n), draw(30)


def exact_topk(q: np.ndarray, xb: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    s = q @ xb.T  # (nq, n)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), ids[order]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


@pytest.fixture(scope="module")
def corpus():
    xb, xq = clustered(4000)
    ids = np.random.default_rng(1).permutation(10_000)[:4000].astype(np.int64) * 3 + 7  # sparse, unordered ids
    return ids, xb, xq


@pytest.fixture(scope="module")
def built(corpus):
    ids, xb, _ = corpus
    return {kind: VectorIndex(DIM, kind=kind).build(ids, xb) for kind in ("flat", "ivf", "hnsw")}


# ---------------------------------------------------------------- exact search


def test_flat_search_matches_numpy(corpus, built):
    ids, xb, xq = corpus
    scores, found = built["flat"].search(xq, 10)
    want_s, want_i = exact_topk(xq, xb, ids, 10)
    assert scores.dtype == np.float32 and found.dtype == np.int64 and found.shape == (30, 10)
    np.testing.assert_array_equal(found, want_i)
    np.testing.assert_allclose(scores, want_s, rtol=1e-5, atol=1e-5)


def test_k_beyond_ntotal_pads_with_minus_one():
    rng = np.random.default_rng(3)
    vi = VectorIndex(DIM, kind="flat").build([5, 9, 11], units(rng.standard_normal((3, DIM))))
    scores, found = vi.search(units(rng.standard_normal(DIM)), 5)  # a single (dim,) query is accepted
    assert found.shape == (1, 5)
    assert sorted(found[0, :3].tolist()) == [5, 9, 11]
    assert found[0, 3:].tolist() == [-1, -1] and np.isneginf(scores[0, 3:]).all()
    empty = VectorIndex(DIM)
    assert empty.search(units(rng.standard_normal((2, DIM))), 3)[1].tolist() == [[-1] * 3] * 2


# ---------------------------------------------------------------- approximate search


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_recall_on_clustered_data(corpus, built, kind):
    ids, xb, xq = corpus
    _, truth = exact_topk(xq, xb, ids, 10)
    _, found = built[kind].search(xq, 10)
    assert built[kind].kind == kind
    assert recall(found, truth) >= 0.9


def test_auto_switches_to_ivf_at_threshold_and_keeps_everything():
    xb, xq = clustered(600, seed=4)
    ids = np.arange(600, dtype=np.int64) + 1000
    vi = VectorIndex(DIM, kind="auto", approx_threshold=400).build(ids[:300], xb[:300])
    assert vi.kind == "flat"
    vi.add(ids[300:], xb[300:])
    assert vi.kind == "ivf" and vi.ntotal == 600
    np.testing.assert_array_equal(vi.ids(), ids)
    _, self_hits = vi.search(xb[::50], 1)  # every stored vector is its own nearest neighbour
    np.testing.assert_array_equal(self_hits[:, 0], ids[::50])
    assert VectorIndex(DIM, kind="auto", approx_threshold=400).build(ids, xb).kind == "ivf"


def test_ivf_retrains_when_it_has_grown():
    xb, _ = clustered(3000, seed=5)
    vi = VectorIndex(DIM, kind="ivf").build(np.arange(100), xb[:100])
    small = vi.n_lists
    vi.add(np.arange(100, 3000), xb[100:])
    assert vi.n_lists > small and vi.ntotal == 3000
    _, hits = vi.search(xb[2500:2510], 1)
    np.testing.assert_array_equal(hits[:, 0], np.arange(2500, 2510))


# ---------------------------------------------------------------- allowed_ids


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_tiny_allowed_set_returns_the_right_k(corpus, built, kind):
    ids, xb, xq = corpus
    allowed = ids[[3, 500, 1200, 2000, 2999, 3500, 3998]]
    scores, found = built[kind].search(xq[:5], 5, allowed_ids=allowed)
    pos = np.flatnonzero(np.isin(ids, allowed))
    want_s, want_i = exact_topk(xq[:5], xb[pos], ids[pos], 5)
    np.testing.assert_array_equal(found, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-5)
    # fewer allowed ids than k: all of them, then padding; ids absent from the index are ignored
    _, few = built[kind].search(xq[:2], 4, allowed_ids=np.array([ids[10], ids[20], 999_999_999]))
    assert sorted(few[0, :2].tolist()) == sorted([ids[10], ids[20]]) and few[:, 2:].tolist() == [[-1, -1]] * 2


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_large_allowed_set_uses_the_selector_and_stays_inside(corpus, kind):
    ids, xb, xq = corpus
    vi = VectorIndex(DIM, kind=kind, exact_filter_max=1, nprobe=4).build(ids, xb)
    allowed = np.delete(ids, np.s_[::4])  # 75%: large enough that every kind takes the FAISS-selector path
    assert not vi._prefer_exact(len(allowed))
    _, found = vi.search(xq, 10, allowed_ids=allowed)
    assert (found >= 0).all() and np.isin(found, allowed).all()
    pos = np.flatnonzero(np.isin(ids, allowed))
    _, truth = exact_topk(xq, xb[pos], ids[pos], 10)
    assert recall(found, truth) >= (1.0 if kind == "flat" else 0.85)


def test_narrow_filter_on_hnsw_still_fills_k(corpus):
    ids, xb, xq = corpus
    vi = VectorIndex(DIM, kind="hnsw", exact_filter_max=1).build(ids, xb)
    allowed = ids[:200]  # 5% of the index, above the exact cut-off: the graph walk may come back short
    _, found = vi.search(xq, 10, allowed_ids=allowed)
    assert (found >= 0).all() and np.isin(found, allowed).all()


# ---------------------------------------------------------------- persistence


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_save_load_round_trip(tmp_path, corpus, built, kind):
    ids, _, xq = corpus
    path = tmp_path / f"{kind}.faiss"
    built[kind].save(path)
    back = VectorIndex.load(path)
    assert (back.kind, back.ntotal, back.dim, back.nprobe) == (kind, len(ids), DIM, built[kind].nprobe)
    np.testing.assert_array_equal(back.ids(), ids)
    np.testing.assert_array_equal(back.search(xq, 10)[1], built[kind].search(xq, 10)[1])
    np.testing.assert_array_equal(
        back.search(xq, 3, allowed_ids=ids[:50])[1], built[kind].search(xq, 3, allowed_ids=ids[:50])[1]
    )
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_failed_save_leaves_the_old_file_intact(tmp_path, corpus, monkeypatch):
    ids, xb, xq = corpus
    path = tmp_path / "v.faiss"
    old = VectorIndex(DIM, kind="flat").build(ids[:100], xb[:100])
    old.save(path)
    before = path.read_bytes()
    faiss = index_base.get_faiss()

    def crash(index, write):  # write part of the index, then die like a full disk would
        write(b"\0" * 1000)
        raise OSError("No space left on device")

    monkeypatch.setattr(faiss, "PyCallbackIOWriter", lambda write: write)
    monkeypatch.setattr(faiss, "write_index", crash)
    with pytest.raises(OSError, match="No space"):
        VectorIndex(DIM, kind="flat").build(ids, xb).save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["v.faiss"]
    np.testing.assert_array_equal(VectorIndex.load(path).search(xq, 5)[1], old.search(xq, 5)[1])


def test_unreadable_file_says_to_rebuild(tmp_path):
    bad = tmp_path / "bad.faiss"
    bad.write_bytes(b"not an index at all")
    with pytest.raises(IndexOpenError, match="rebuild"):
        VectorIndex.load(bad)
    with pytest.raises(IndexOpenError, match="no index file"):
        VectorIndex.load(tmp_path / "missing.faiss")
    VectorIndex(DIM).save(tmp_path / "single.faiss")
    with pytest.raises(IndexOpenError, match="not a MultiVectorIndex"):
        MultiVectorIndex.load(tmp_path / "single.faiss")


# ---------------------------------------------------------------- validation


def test_inputs_are_validated_with_clear_errors():
    rng = np.random.default_rng(0)
    vi = VectorIndex(DIM)
    good = units(rng.standard_normal((4, DIM)))
    with pytest.raises(ValueError, match=r"shape \(4, 16\); expected \(n, 32\)"):
        vi.build(np.arange(4), good[:, :16])
    nan = good.copy()
    nan[2, 5] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf in rows \[2\]"):
        vi.build(np.arange(4), nan)
    with pytest.raises(ValueError, match="3 ids but there are 4 vectors"):
        vi.build(np.arange(3), good)
    with pytest.raises(ValueError, match="repeats ids"):
        vi.build([1, 2, 2, 3], good)
    with pytest.raises(ValueError, match="negative"):
        vi.build([-1, 2, 3, 4], good)
    with pytest.raises(ValueError, match="ids must be integers"):
        vi.build(np.array([1.5, 2, 3, 4]), good)
    with pytest.raises(ValueError, match="dtype"):
        vi.build(np.arange(4), np.array([["a"] * DIM] * 4))
    vi.build(np.arange(4), good.astype(np.float64))  # other float dtypes are converted
    assert vi.ntotal == 4
    with pytest.raises(ValueError, match="already in the index"):
        vi.add([3, 9], good[:2])
    with pytest.raises(ValueError, match="queries has shape"):
        vi.search(good[:, :8], 2)
    with pytest.raises(ValueError, match="k=0"):
        vi.search(good, 0)
    with pytest.raises(ValueError, match="unknown"):
        VectorIndex(DIM, kind="lsh")
    mvi = MultiVectorIndex(DIM)
    with pytest.raises(ValueError, match="no token vectors"):
        mvi.build([1, 2], [good, np.empty((0, DIM), np.float32)])
    with pytest.raises(ValueError, match="one .* matrix per document"):
        mvi.build([1], good)
    with pytest.raises(ValueError, match=r"docs\[1\] has shape"):
        mvi.build([1, 2], [good, good[:, :4]])


def test_thread_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setattr(index_base, "_faiss_module", None)
    monkeypatch.setenv(index_base.THREADS_ENV, "two")
    with pytest.raises(ValueError, match="VIMRAG_FAISS_THREADS"):
        index_base.get_faiss()
    faiss = __import__("faiss")
    before = faiss.omp_get_max_threads()
    monkeypatch.setenv(index_base.THREADS_ENV, "1")
    try:
        assert index_base.get_faiss().omp_get_max_threads() == 1
    finally:
        faiss.omp_set_num_threads(before)


class _Recording:
    """Stands in for a FAISS index: records the calling thread's OpenMP thread count at each search."""

    def __init__(self, index):
        self.index, self.counts = index, []

    def __getattr__(self, name):
        return getattr(self.index, name)

    def search(self, q, k, params=None):
        self.counts.append(index_base.get_faiss().omp_get_max_threads())
        return self.index.search(q, k, params=params)


def test_a_search_takes_its_thread_count_on_the_thread_that_runs_it(monkeypatch, corpus):
    """One query runs on one OpenMP thread, a batch on $VIMRAG_FAISS_THREADS, on whatever thread searches (OpenMP
    keeps the count per thread: set once where faiss was imported, it never reached other threads), and the
    thread's own count is back after."""

    ids, xb, xq = corpus
    idx = VectorIndex(DIM, kind="flat", exact_filter_max=1).build(ids, xb)
    idx._index = rec = _Recording(idx._index)
    wanted = (os.cpu_count() or 1) + 1  # a count no thread starts with
    monkeypatch.setenv(index_base.THREADS_ENV, str(wanted))
    after: list[object] = []

    def searcher() -> None:
        try:
            faiss = index_base.get_faiss()
            before = faiss.omp_get_max_threads()
            idx.search(xq[:1], 5)
            idx.search(xq[:3], 5)
            idx.search(xq[:3], 5, allowed_ids=ids[: len(ids) * 3 // 4])  # the filtered path searches FAISS too
            after.append(faiss.omp_get_max_threads() - before)
        except Exception as e:  # noqa: BLE001 - reported by the assert below, not lost in the thread
            after.append(e)

    t = threading.Thread(target=searcher)
    t.start()
    t.join()
    assert rec.counts == [1, wanted, wanted]
    assert after == [0]
    exact = idx.search(xq[:3], 5)
    assert np.array_equal(exact[1], exact_topk(xq[:3], xb, ids, 5)[1])  # the same hits as ever


def test_omp_threads_restores_the_count_even_on_error():
    faiss = index_base.get_faiss()
    before = faiss.omp_get_max_threads()
    with pytest.raises(RuntimeError, match="boom"), index_base.omp_threads(before + 3):
        assert faiss.omp_get_max_threads() == before + 3
        raise RuntimeError("boom")
    assert faiss.omp_get_max_threads() == before
    assert index_base.search_threads(1) == 1 and index_base.search_threads(0) == 1


def test_builds_and_adds_take_the_configured_count_on_any_thread(monkeypatch, corpus):
    faiss = index_base.get_faiss()
    seen: list[int] = []
    real_add, real_train = faiss.IndexIDMap.add_with_ids, faiss.IndexIVFFlat.train

    def add_with_ids(self, *a, **kw):
        seen.append(faiss.omp_get_max_threads())
        return real_add(self, *a, **kw)

    def train(self, *a, **kw):
        seen.append(-faiss.omp_get_max_threads())  # negative: a training call
        return real_train(self, *a, **kw)

    monkeypatch.setattr(faiss.IndexIDMap, "add_with_ids", add_with_ids)
    monkeypatch.setattr(faiss.IndexIVFFlat, "train", train)
    wanted = (os.cpu_count() or 1) + 1
    monkeypatch.setenv(index_base.THREADS_ENV, str(wanted))
    ids, xb, _ = corpus
    errors: list[Exception] = []

    def builder() -> None:
        try:
            VectorIndex(DIM, kind="ivf").build(ids[:3000], xb[:3000]).add(ids[3000:], xb[3000:])
        except Exception as e:  # noqa: BLE001 - reported by the assert below
            errors.append(e)

    t = threading.Thread(target=builder)
    t.start()
    t.join()
    assert errors == [] and seen == [-wanted, wanted, wanted]
