"""An index on Milvus (retrieval/milvus_store.py), embedded Milvus Lite: it holds what the local store holds and
searches alike (BM25, dense, hybrid, filters, late interaction), re-indexes and prunes, and bad stores fail with
the fix before anything is written. The 2-process ingest into a Milvus Lite server is in test_milvus_server.py."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from retrieval.errors import IndexOpenError
from retrieval.ingest import Indexer, IngestConfig
from retrieval.milvus_client import open_error as _open_error
from retrieval.milvus_rows import filter_expr
from retrieval.retriever import MilvusRetriever, Retriever
from retrieval.server import free_port
from retrieval.store_spec import STORE_FILE, StoreSpec, recorded_spec
from retrieval.stores import open_store
from retrieval.units import Filters

REPO = Path(__file__).resolve().parents[2]
QUERIES = ["aurora annual report revenue", "topic 3 in the warehouse", "shelf 27 blue", "navy slides"]


def _needs_milvus():
    pytest.importorskip("pymilvus", reason="the Milvus store needs pymilvus: pip install 'vimrag[milvus]'")
    pytest.importorskip("milvus_lite", reason="embedded Milvus needs milvus-lite: pip install 'vimrag[milvus]'")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("milvus_corpus")
    for i in range(12):  # lengths and words vary, so BM25 scores do not tie (ties may break either way)
        (root / f"doc_{i:02d}.txt").write_text(
            f"Document {i} is about topic {i % 5} and item {i} "
            + ("in the warehouse. " if i % 3 == 0 else "at the depot. ") * (1 + i % 4)
            + f"It mentions shelf {i * 9} and the colour {['red', 'blue', 'green'][i % 3]}. " * (1 + i % 2)
            + "Filler words follow here. " * (i % 5)
        )
    shutil.copy(REPO / "assets" / "corpus" / "aurora_annual_report_2025.pdf", root / "aurora_annual_report_2025.pdf")
    for n, colour in ((1, "navy"), (2, "olive")):
        Image.new("RGB", (160, 120), colour).save(root / f"slides_{n}.jpg")  # page images without their PDF
    return root


def _build(tmp_path_factory, corpus: Path, store: str | None, embedder=None) -> Path:
    idx = tmp_path_factory.mktemp("idx")
    cfg = IngestConfig(ocr="none", batch_units=4, store=store)
    ix = Indexer(idx, cfg, embedder=embedder)
    ix.index([corpus], progress=False)
    ix.store.close()
    return idx


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory) -> Path:
    return _build(tmp_path_factory, corpus, None)


@pytest.fixture(scope="module")
def lite(corpus, tmp_path_factory) -> Path:
    _needs_milvus()
    return _build(tmp_path_factory, corpus, "milvus-lite")


def test_store_spec_is_parsed_or_refused_with_the_forms():
    assert StoreSpec.parse("milvus://db.example:19530").collection == "vimrag"
    assert StoreSpec.parse("milvus-lite:x/m.db").uri == str(Path("x/m.db").resolve())
    assert StoreSpec.parse("milvus-lite", index_dir="/i").uri == "/i/milvus.db"
    assert str(StoreSpec.parse("milvus://h:1/c")) == "milvus://h:1/c"
    for bad, why in (("postgres://x", "local .* milvus-lite:PATH"), ("milvus://h:1/9x", "not valid in Milvus")):
        with pytest.raises(ValueError, match=why):
            StoreSpec.parse(bad)


def test_filters_become_milvus_expressions():
    f = Filters(docs=["a/b_1.pdf"], modalities=["video", "page"], time_span=(5.0, 20.0))
    assert filter_expr(f) == (
        'modality in ["video", "page"] and (path == "a/b_1.pdf" or name == "a/b_1.pdf" or doc == "b_1.pdf" '
        'or path like "%/a/b_1.pdf") and (modality != "video" or (t_end >= 5.0 and t_start <= 20.0))'
    )
    assert filter_expr(Filters()) == "" and filter_expr(None) == ""
    assert json.loads(filter_expr(Filters(docs=['say "hi".txt'])).split("== ")[1].split(" or")[0]) == 'say "hi".txt'


def test_errors_name_the_fix():
    spec = StoreSpec.parse("milvus://10.0.0.1:19530/c")
    # Milvus Lite has no authentication, so the wrong-token path is checked on the error a Milvus server sends.
    err = _open_error(spec, Exception("<MilvusException: (code=1800, message=auth check failure, please check token)>"))
    assert "VIMRAG_MILVUS_TOKEN" in str(err) and "--milvus-token" in str(err)
    assert "milvus-lite server" in str(_open_error(spec, Exception("failed to connect to all addresses")))


def test_milvus_lite_holds_what_the_local_store_holds(local, lite):
    assert recorded_spec(lite).kind == "milvus-lite" and recorded_spec(local) is None
    a, b = open_store(local), open_store(lite)
    try:
        (_, lu), (_, mu) = a.units(), b.units()
        assert {u.uid: u.to_dict() for u in lu} == {u.uid: u.to_dict() for u in mu}
        assert {(f.path, f.sha256, f.status, f.n_units) for f in a.files()} == {
            (f.path, f.sha256, f.status, f.n_units) for f in b.files()
        }
        assert a.get_meta("embedder") == b.get_meta("embedder") and a.roots() == b.roots()
        assert b.count_vectors() == len(a.vector_owners()[0])
    finally:
        a.close(), b.close()


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_milvus_lite_searches_like_the_local_store(local, lite, mode):
    rl, rm = Retriever(local), Retriever(lite)
    assert isinstance(rm, MilvusRetriever) and type(rl) is Retriever
    for q in QUERIES:
        want = rl.search(q, k=5, mode=mode)
        got = rm.search(q, k=5, mode=mode)
        assert [h.unit.uid for h in got] == [h.unit.uid for h in want], (q, mode)
        if mode == "dense":
            assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-4)
        if want:
            assert got[0].unit.to_dict() == want[0].unit.to_dict()
    assert rm.stats()["units"] == rl.stats()["units"] and rm.stats()["by_modality"] == rl.stats()["by_modality"]
    uid = rl.search("aurora", k=1)[0].unit.uid
    assert rm.position(uid) == rm.position(uid) >= 0 and rm.unit(uid).to_dict() == rl.unit(uid).to_dict()


@pytest.mark.parametrize("exact_max", [4096, 0], ids=["exact-over-few", "milvus-index"])
def test_filters_and_dynamic_cut_match(local, lite, exact_max, monkeypatch):
    import retrieval.milvus_store

    monkeypatch.setattr(retrieval.milvus_store, "EXACT_FILTER_MAX", exact_max)
    rl, rm = Retriever(local), Retriever(lite)
    cases = [
        {"docs": ["aurora_annual_report_2025.pdf"]},
        {"docs": ["doc_03.txt", "doc_07.txt"]},
        {"modalities": ["image"]},
        {"docs": ["slides.pdf"]},  # the page images' document
        {"modalities": ["text"], "time_span": [0.0, 10.0]},
        {"docs": ["no_such.pdf"]},
    ]
    for f in cases:
        want = [h.unit.uid for h in rl.search("warehouse shelf topic report", k=6, filters=f)]
        got = [h.unit.uid for h in rm.search("warehouse shelf topic report", k=6, filters=f)]
        assert got == want, f
    assert [h.unit.uid for h in rm.search("aurora revenue", k=8, dynamic=True)] == [
        h.unit.uid for h in rl.search("aurora revenue", k=8, dynamic=True)
    ]


def test_reindex_prune_and_empty_files_on_milvus(corpus, tmp_path):
    _needs_milvus()
    root = tmp_path / "c"
    shutil.copytree(corpus, root)
    (root / "empty.pdf").write_bytes(b"")
    (root / "empty.mp4").write_bytes(b"")
    idx = tmp_path / "idx"
    cfg = IngestConfig(ocr="none", batch_units=4, store="milvus-lite")
    s1 = Indexer(idx, cfg).index([root], progress=False)
    empty = {p: why for p, why in s1.failed if Path(p).name.startswith("empty")}
    assert set(empty) == {str(root / "empty.pdf"), str(root / "empty.mp4")}
    assert all("empty (0 bytes)" in why for why in empty.values()) and not s1.skipped
    (root / "doc_05.txt").write_text("Document five now lists the zeppelin hangar.")
    (root / "doc_06.txt").unlink()
    s2 = Indexer(idx, IngestConfig(ocr="none")).index([root], prune=True, progress=False)
    assert s2.files_indexed == 1 and s2.pruned == 1
    r = Retriever(idx)
    top = r.search("zeppelin hangar", k=1)[0].unit
    assert top.source == str(root / "doc_05.txt") and "zeppelin" in top.text
    sources = {u.source for u in r.store.units()[1]}
    assert str(root / "doc_06.txt") not in sources and str(root / "doc_05.txt") in sources
    assert r.store.count_units() == s1.total_units - 1
    r.store.close()


def test_bad_stores_fail_before_anything_is_written(local, lite, tmp_path):
    port = free_port()  # nothing listens here
    idx = tmp_path / "idx"
    with pytest.raises(IndexOpenError, match="cannot reach Milvus at http://127.0.0.1:.*milvus-lite server"):
        Indexer(idx, IngestConfig(store=f"milvus://127.0.0.1:{port}/c"))
    assert not (idx / STORE_FILE).exists()
    before = open_store(lite).count_units()
    with pytest.raises(IndexOpenError, match="built with embedder 'minilm', not 'clip:.*--embedder minilm"):
        Indexer(lite, IngestConfig(embedder="clip:openai/clip-vit-base-patch32"))
    assert open_store(lite).count_units() == before
    with pytest.raises(IndexOpenError, match="is an index on local, not milvus-lite"):
        Indexer(local, IngestConfig(store="milvus-lite"))
    with pytest.raises(IndexOpenError, match="no VimRAG index"):
        open_store(tmp_path / "x", store=f"milvus-lite:{tmp_path / 'x.db'}")


def test_milvus_token_option_reaches_the_clients(monkeypatch):
    import os

    from app.cli import _milvus_token, build_parser
    from retrieval.milvus_client import TOKEN_ENV

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    for argv in (["index", "c/", "--milvus-token", "u:p"], ["serve-search", "--milvus-token", "u:p"]):
        monkeypatch.delenv(TOKEN_ENV, raising=False)
        _milvus_token(build_parser().parse_args(argv))
        assert os.environ[TOKEN_ENV] == "u:p"


class _TokenEmbedder:
    """A multi-vector text embedder: one unit vector per word, from the word's hash (deterministic, offline)."""

    spec, dim, multi_vector, supports_images = "fake-multi", 16, True, False

    def _mat(self, text: str) -> np.ndarray:
        words = text.lower().split()[:24] or ["(empty)"]
        m = np.stack([np.frombuffer(hashlib.sha256(w.encode()).digest()[:16], np.uint8) for w in words])
        m = m.astype(np.float32) - 127.5
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    def encode_texts(self, texts, batch_size=32):
        return [self._mat(t) for t in texts]

    encode_queries = encode_texts


def test_late_interaction_on_milvus_reranks_exactly(corpus, tmp_path_factory):
    _needs_milvus()
    emb = _TokenEmbedder()
    local = _build(tmp_path_factory, corpus, None, embedder=emb)
    lite = _build(tmp_path_factory, corpus, "milvus-lite", embedder=emb)
    rl, rm = Retriever(local, embedder=emb), Retriever(lite, embedder=emb)
    assert rm.multi and rm.stats()["dense_kind"] == "milvus-multi"
    for q in ("topic 3 warehouse", "shelf 27", "colour blue item"):
        # Ask for every unit: Milvus returns its shortlist (units near some query token), each scored exactly, and
        # they are the local index's best, in its order (units tied on MaxSim may come in either order).
        want, got = rl.search(q, k=50, mode="dense"), rm.search(q, k=50, mode="dense")
        exact = {h.unit.uid: h.score for h in want}
        assert 8 <= len(got) <= len(want) == 18, q
        assert all(abs(exact[h.unit.uid] - h.score) < 1e-4 for h in got), q
        assert np.allclose([h.score for h in got], [h.score for h in want[: len(got)]], atol=1e-4), q
