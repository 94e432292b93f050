"""Spec for retrieval/late_interaction.py: exact MaxSim, two-stage search, float16 tokens held once, pooling."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from retrieval.errors import IndexOpenError
from retrieval.index import VectorIndex
from retrieval.index_file import save_container
from retrieval.late_interaction import MultiVectorIndex
from retrieval.maxsim import maxsim_scores, pool_tokens

DIM = 32


def units(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def mv_corpus(n_docs: int, seed: int = 0, tok: tuple[int, int] = (5, 40)) -> tuple[np.ndarray, list, list]:
    """(doc ids, docs [(n_tok, DIM)], queries [(6, DIM)]): 4 topics per doc; a query copies 3 tokens of one doc."""
    rng = np.random.default_rng(seed)
    topics = units(rng.standard_normal((64, DIM)))
    docs = []
    for _ in range(n_docs):
        n_tok = int(rng.integers(*tok))
        centres = topics[rng.choice(64, 4)[rng.integers(0, 4, n_tok)]]  # (n_tok, DIM)
        docs.append(units(centres + rng.standard_normal((n_tok, DIM)) * 0.15))
    queries = []
    for d in rng.choice(n_docs, 10, replace=False):
        copies = docs[d][rng.choice(len(docs[d]), 3)]
        queries.append(
            units(np.concatenate([copies + rng.standard_normal(copies.shape) * 0.02, rng.standard_normal((3, DIM))]))
        )
    return np.arange(n_docs, dtype=np.int64) * 10 + 1, docs, queries


def brute_top(q: np.ndarray, docs: list, ids: np.ndarray, k: int = 10) -> list[int]:
    return ids[np.argsort(-maxsim_scores(q, docs), kind="stable")[:k]].tolist()


# ---------------------------------------------------------------- exact MaxSim and pooling


def test_maxsim_scores_hand_computed():
    q = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    docs = [
        np.array([[1.0, 0.0], [0.6, 0.8]], np.float32),
        np.array([[0.0, 1.0]], np.float32),
        np.array([[0.6, -0.8], [-1.0, 0.0], [0.8, 0.6]], np.float32),
    ]
    # doc0: max(1, .6) + max(0, .8) = 1.8; doc1: 0 + 1 = 1; doc2: max(.6, -1, .8) + max(-.8, 0, .6) = 1.4
    np.testing.assert_allclose(maxsim_scores(q, docs), [1.8, 1.0, 1.4], atol=1e-6)
    padded = np.zeros((3, 3, 2), np.float32)
    mask = np.zeros((3, 3), bool)
    for i, d in enumerate(docs):
        padded[i, : len(d)], mask[i, : len(d)] = d, True
    np.testing.assert_allclose(maxsim_scores(q, padded, mask), [1.8, 1.0, 1.4], atol=1e-6)
    # tiny batches exercise the batching; an empty document scores -inf
    np.testing.assert_allclose(maxsim_scores(q, docs, batch_tokens=2), [1.8, 1.0, 1.4], atol=1e-6)
    assert np.isneginf(maxsim_scores(q, [np.empty((0, 2), np.float32)])[0])


def test_pool_tokens_merges_near_duplicates_into_unit_means():
    rng = np.random.default_rng(0)
    centres = units(rng.standard_normal((5, DIM)))
    page = units(np.repeat(centres, 6, axis=0) + rng.standard_normal((30, DIM)) * 0.01)  # 5 tight groups of 6
    pooled = pool_tokens(page, 6)  # (5, DIM): ceil(30 / 6) clusters, one per group
    assert pooled.shape == (5, DIM)
    np.testing.assert_allclose(np.linalg.norm(pooled, axis=1), 1.0, rtol=1e-5)
    assert np.sort((pooled @ centres.T).max(axis=0)).min() > 0.999  # every group kept, as its mean
    assert pool_tokens(page, 1) is not None and len(pool_tokens(page, 1)) == 30
    assert len(pool_tokens(page[:1], 4)) == 1 and pool_tokens(page, 4).shape == (8, DIM)


# ---------------------------------------------------------------- two-stage search


@pytest.mark.parametrize("kind,codec", [("flat", "pq"), ("ivf", "pq"), ("ivf", "flat")])
def test_float32_top_k_equals_brute_force(kind, codec):
    doc_ids, docs, queries = mv_corpus(400)
    # approx_threshold=1 forces the two-stage path; probing every list keeps stage 1 from missing
    mvi = MultiVectorIndex(
        DIM, kind=kind, approx_threshold=1, nprobe=1024, token_k=256, n_candidates=60, dtype="float32", codec=codec
    )
    mvi.build(doc_ids[:250], docs[:250]).add(doc_ids[250:], docs[250:])
    assert mvi.kind == kind and mvi.ntotal == 400 and mvi.n_tokens == sum(len(d) for d in docs)
    np.testing.assert_array_equal(mvi.doc_tokens(doc_ids[300]), docs[300])
    for q in queries:
        brute = maxsim_scores(q, docs)  # (400,)
        got = mvi.search(q, 10)
        assert [d for d, _ in got] == brute_top(q, docs, doc_ids)
        np.testing.assert_allclose([s for _, s in got], np.sort(brute)[::-1][:10], rtol=1e-5)
        assert [d for d, _ in mvi.exact_search(q, 10)] == brute_top(q, docs, doc_ids)


@pytest.mark.parametrize("kind,codec", [("flat", "pq"), ("ivf", "flat"), ("ivf", "pq")])
def test_float16_tokens_agree_with_float32_top_10(kind, codec):
    doc_ids, docs, queries = mv_corpus(600, seed=3)
    mvi = MultiVectorIndex(DIM, kind=kind, nprobe=1024, token_k=256, n_candidates=60, codec=codec, dtype="float16")
    mvi.build(doc_ids, docs)
    assert mvi.tokens.dtype == np.float16 and mvi.kind == kind
    rounded = [d.astype(np.float16).astype(np.float32) for d in docs]
    np.testing.assert_array_equal(mvi.doc_tokens(doc_ids[7]), rounded[7])
    exact = same = 0
    for q in queries:
        got = mvi.search(q, 10)
        np.testing.assert_allclose(
            [s for _, s in got], maxsim_scores(q, rounded)[(np.array([d for d, _ in got]) - 1) // 10], rtol=1e-5
        )  # every score is exact MaxSim over the stored tokens
        # the ranking float32 MaxSim gives the float16-rounded tokens, and the float32 tokens' top-10 set
        exact += [d for d, _ in got] == brute_top(q, rounded, doc_ids)
        same += set(d for d, _ in got) == set(brute_top(q, docs, doc_ids))
    # PQ codes (a 32-d toy with 4-d sub-vectors) may cost stage 1 a document; float16 itself never does here
    assert min(exact, same) >= (len(queries) if codec == "flat" or kind == "flat" else len(queries) - 1)


def test_token_pooling_shrinks_the_index_and_keeps_recall():
    """Pages whose tokens come in near-duplicate triples, as patches of one region of a real page do."""
    rng = np.random.default_rng(4)
    sources = [units(rng.standard_normal((int(rng.integers(8, 16)), DIM))) for _ in range(300)]
    docs = [units(np.repeat(src, 3, axis=0) + rng.standard_normal((3 * len(src), DIM)) * 0.02) for src in sources]
    doc_ids = np.arange(300, dtype=np.int64)
    picked = rng.choice(300, 10, replace=False)
    queries = [
        units(
            np.concatenate(
                [
                    docs[i][rng.choice(len(docs[i]), 3)] + rng.standard_normal((3, DIM)) * 0.05,
                    rng.standard_normal((3, DIM)),
                ]
            )
        )
        for i in picked
    ]
    mvi = MultiVectorIndex(DIM, kind="ivf", nprobe=1024, token_k=256, n_candidates=60, pool_factor=3).build(
        doc_ids, docs
    )
    full = sum(len(d) for d in docs)
    assert mvi.n_tokens == sum(-(-len(d) // 3) for d in docs) == full // 3  # one vector per triple
    truth = [set(brute_top(q, docs, doc_ids)) for q in queries]  # float32 MaxSim over every unpooled token
    recall = np.mean([len({d for d, _ in mvi.search(q, 10)} & t) / 10 for q, t in zip(queries, truth)])
    assert recall >= 0.85, recall
    assert [mvi.search(q, 1)[0][0] for q in queries] == picked.tolist()  # the page each query copies
    thirds = [d[rng.permutation(len(d))[: len(d) // 3]] for d in docs]  # as many tokens, kept at random
    naive = np.mean([len(set(brute_top(q, thirds, doc_ids)) & t) / 10 for q, t in zip(queries, truth)])
    assert recall > naive + 0.2, (recall, naive)  # clustering, not the smaller count, keeps the ranking


@pytest.mark.slow
def test_allowed_ids_and_round_trip(tmp_path):
    doc_ids, docs, queries = mv_corpus(300, seed=2)
    mvi = MultiVectorIndex(DIM, kind="ivf", nprobe=1024, n_candidates=20, dtype="float32").build(doc_ids, docs)
    allowed = doc_ids[100:200]
    for q in queries[:4]:
        got = [d for d, _ in mvi.search(q, 5, allowed_ids=allowed)]
        assert got == brute_top(q, docs[100:200], allowed, 5)
    two = maxsim_scores(queries[0], docs[:2])
    assert [d for d, _ in mvi.search(queries[0], 5, allowed_ids=doc_ids[:2])] == doc_ids[:2][np.argsort(-two)].tolist()
    for dtype in ("float32", "float16"):
        mvi = MultiVectorIndex(DIM, kind="ivf", nprobe=4, n_candidates=20, dtype=dtype, pool_factor=2)
        mvi.build(doc_ids, docs)
        path = tmp_path / f"mv-{dtype}.faiss"
        mvi.save(path)
        back = MultiVectorIndex.load(path)
        assert (back.ntotal, back.n_tokens, back.kind, back.pool_factor) == (300, mvi.n_tokens, "ivf", 2)
        assert back.tokens.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(back.tokens, mvi.tokens)
        for q in queries:
            assert back.search(q, 10) == mvi.search(q, 10)
            assert back.search(q, 3, allowed_ids=allowed) == mvi.search(q, 3, allowed_ids=allowed)


def test_auto_dtype_holds_float32_until_there_is_a_token_index(tmp_path):
    doc_ids, docs, queries = mv_corpus(300, seed=8)
    half = sum(len(d) for d in docs[:150])
    mvi = MultiVectorIndex(DIM, approx_threshold=half + 1, n_candidates=20)  # dtype "auto"
    mvi.build(doc_ids[:150], docs[:150])
    assert mvi.kind == "flat" and mvi.tokens.dtype == np.float32  # exact search only: no conversion per search
    np.testing.assert_array_equal(mvi.doc_tokens(doc_ids[3]), docs[3])
    assert [d for d, _ in mvi.search(queries[0], 5)] == brute_top(queries[0], docs[:150], doc_ids[:150], 5)
    mvi.add(doc_ids[150:], docs[150:])  # past the threshold: a token index, and the tokens go float16 once
    assert mvi.kind == "ivf" and mvi.tokens.dtype == np.float16 and mvi.n_tokens == sum(len(d) for d in docs)
    np.testing.assert_array_equal(mvi.doc_tokens(doc_ids[3]), docs[3].astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(mvi.doc_tokens(doc_ids[299]), docs[299].astype(np.float16).astype(np.float32))
    mvi.save(tmp_path / "mv.faiss")
    back = MultiVectorIndex.load(tmp_path / "mv.faiss")
    assert back.tokens.dtype == np.float16 and back.requested_dtype == "auto"
    assert back.search(queries[1], 5) == mvi.search(queries[1], 5)
    at_once = MultiVectorIndex(DIM, approx_threshold=half + 1).build(doc_ids, docs)  # never float32 past it
    assert at_once.kind == "ivf" and at_once.tokens.dtype == np.float16
    small = MultiVectorIndex(DIM).build(doc_ids[:5], docs[:5])
    small.save(tmp_path / "small.faiss")
    assert MultiVectorIndex.load(tmp_path / "small.faiss").tokens.dtype == np.float32


# ---------------------------------------------------------------- memory: tokens held once


def test_tokens_are_held_once_as_float16():
    doc_ids, docs, _ = mv_corpus(400, seed=5)
    mvi = MultiVectorIndex(DIM, kind="ivf").build(doc_ids, docs)
    mem = mvi.memory_bytes()
    assert mem["tokens"] == mvi.n_tokens * DIM * 2  # float16
    assert mvi._ivf.code_size == DIM // 4  # the candidate lists hold PQ codes, not vectors
    assert mem["token_index"] < 0.5 * mem["tokens"]
    assert mvi.tokens.base is mvi._mat or mvi.tokens.base is mvi._mat.base  # one array owns the token rows
    legacy = MultiVectorIndex(DIM, kind="ivf", dtype="float32", codec="flat").build(doc_ids, docs)
    assert sum(legacy.memory_bytes().values()) > 3 * sum(mem.values())


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc")
def test_resident_memory_grows_by_one_float16_copy():
    """The old layout held a float32 matrix plus a float32 FAISS copy: 4x what float16 held once takes."""
    rng = np.random.default_rng(0)
    n_docs, n_tok, dim = 1_500, 100, 128  # 150k tokens: float32 copy 77 MB, float16 38 MB
    docs = list(units(rng.standard_normal((n_docs, n_tok, dim), dtype=np.float32)))

    def rss() -> int:
        """Resident bytes once glibc has handed back its free heap: live memory, not what earlier tests or the
        build's temporaries left behind (a full-suite run once measured 88 MB of growth here)."""
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: RSS as it stands
            pass
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    # A first, small build loads faiss's kernels and starts its threads, which stay resident whatever the layout
    # (about 20 MB when this test runs alone).
    MultiVectorIndex(dim, kind="ivf").build(np.arange(300), docs[:300])
    before = rss()
    mvi = MultiVectorIndex(dim, kind="ivf").build(np.arange(n_docs), docs)
    grown = rss() - before
    one_fp32_copy = n_docs * n_tok * dim * 4
    assert grown < 0.9 * one_fp32_copy, (grown, one_fp32_copy)  # float16 (0.5) + PQ codes (~0.1); before: 2.0
    assert mvi.n_tokens == n_docs * n_tok


def test_saved_file_holds_tokens_once(tmp_path):
    doc_ids, docs, _ = mv_corpus(400, seed=6)
    mvi = MultiVectorIndex(DIM, kind="ivf").build(doc_ids, docs)
    mvi.save(tmp_path / "mv.faiss")
    assert os.path.getsize(tmp_path / "mv.faiss") < 1.5 * mvi.memory_bytes()["tokens"]


def test_a_file_in_the_old_layout_says_to_rebuild(tmp_path):
    """Layout 1 kept the tokens only inside a FAISS IDMap over a flat index; it must not load as garbage."""
    tokens = VectorIndex(DIM, kind="flat").build(np.arange(3), units(np.ones((3, DIM))))
    meta = {"type": "MultiVectorIndex", "token_index": tokens._meta(), "token_k": 512, "n_candidates": 256, "n_docs": 1}
    path = tmp_path / "old.faiss"
    save_container(path, meta, {"doc_ids": np.array([1]), "offsets": np.array([0, 3])}, tokens._index)
    with pytest.raises(IndexOpenError, match=r"older VimRAG .*rebuild"):
        MultiVectorIndex.load(path)


def test_bad_options_say_what_to_use():
    with pytest.raises(ValueError, match="second copy"):
        MultiVectorIndex(DIM, kind="hnsw")
    with pytest.raises(ValueError, match="float16"):
        MultiVectorIndex(DIM, dtype="int8")
    with pytest.raises(ValueError, match="does not divide"):
        MultiVectorIndex(DIM, pq_bytes=5)
    with pytest.raises(ValueError, match="pool_factor"):
        MultiVectorIndex(DIM, pool_factor=0)


def test_token_search_runs_one_query_token_on_one_thread_and_a_batch_on_the_configured_count(monkeypatch):
    from retrieval import index_base

    doc_ids, docs, _ = mv_corpus(300)
    mvi = MultiVectorIndex(DIM, kind="ivf", approx_threshold=1, codec="flat").build(doc_ids, docs)
    seen: list[int] = []
    real = mvi._ivf

    class Recording:
        def __getattr__(self, name):
            return getattr(real, name)

        def search(self, q, k, params=None):
            seen.append(index_base.get_faiss().omp_get_max_threads())
            return real.search(q, k, params=params)

    mvi._ivf = Recording()
    wanted = (os.cpu_count() or 1) + 1
    monkeypatch.setenv(index_base.THREADS_ENV, str(wanted))
    mvi.search(docs[7][:1], 3)
    mvi.search(docs[7][:4], 3)
    mvi._ivf = real
    assert seen == [1, wanted]
