"""Ingestion: every modality becomes units with provenance; re-runs are incremental; bad files are reported."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval.embed_units import passages_of
from retrieval.ingest import Indexer, IngestConfig
from retrieval.store import Store


@pytest.fixture(scope="module")
def built(mixed_index):
    # Re-running over the built index must find everything unchanged; the first run's figures are in the store.
    return mixed_index, Store(mixed_index)


def test_every_modality_is_indexed_with_provenance(built, mixed_corpus):
    idx, store = built
    assert [f.status for f in store.files()] == ["ok"] * 4
    _, units = store.units()
    by_mod = {}
    for u in units:
        by_mod.setdefault(u.modality, []).append(u)
        assert Path(u.source).exists() and len(u.content_hash) == 64 and u.root == str(mixed_corpus.resolve())
    assert sorted(u.page for u in by_mod["page"]) == [1, 2, 3, 4]
    assert "48.6 million" in by_mod["page"][0].text and by_mod["page"][0].text_source == "pdf-text"
    clip = by_mod["video"][0]
    assert clip.start == 0 and clip.end == pytest.approx(30.0, abs=0.5) and len(clip.keyframes) >= 3
    assert "battery" in clip.text.lower()  # OCR of the frames, with timestamps
    assert "[00:1" in clip.text
    poster = by_mod["image"][0]
    assert "logimat" in poster.text.lower() and poster.text_source.startswith("ocr:")
    assert by_mod["text"][0].chunk == 0 and "Tampere" in by_mod["text"][0].text
    assert sum(f.n_units for f in store.files()) == len(units) == 7


def test_reindex_is_incremental_and_prune_forgets_deleted(mixed_corpus, tmp_path):
    corpus = tmp_path / "c"
    shutil.copytree(mixed_corpus, corpus)
    idx = tmp_path / "idx"
    cfg = IngestConfig(ocr="none")
    first = Indexer(idx, cfg).index([corpus], progress=False)
    again = Indexer(idx, cfg).index([corpus], progress=False)
    assert again.files_indexed == 0 and again.unchanged == first.files_indexed == 4
    v0 = Store(idx).version
    (corpus / "tampere_factory_notes.md").write_text("# New\n\nThe canteen serves rye bread.\n")
    (corpus / "extra.txt").write_text("A brand new file about forklifts.")
    third = Indexer(idx, cfg).index([corpus], progress=False)
    assert third.files_indexed == 2 and third.unchanged == 3
    store = Store(idx)
    assert store.version > v0
    texts = [u.text for u in store.units()[1] if u.modality == "text"]
    assert any("rye bread" in t for t in texts) and not any("Tampere" in t for t in texts)
    (corpus / "extra.txt").unlink()
    pruned = Indexer(idx, cfg).index([corpus], prune=True, progress=False)
    assert pruned.pruned == 1
    assert not any(u.source.endswith("extra.txt") for u in Store(idx).units()[1])


def test_touching_a_file_does_not_reindex_it(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    f = corpus / "a.txt"
    f.write_text("hello there")
    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    os.utime(f, (1, 1))
    s = Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    assert s.unchanged == 1 and s.files_indexed == 0


def test_moved_file_is_reindexed_under_its_new_path(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("moving content about cranes")
    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    (corpus / "a.txt").rename(corpus / "b.txt")
    s = Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    assert s.files_indexed == 1 and s.failed == []
    sources = [Path(u.source).name for u in Store(idx).units()[1]]
    assert sources == ["b.txt"]


def test_embedder_mismatch_is_refused(tmp_path):
    (tmp_path / "a.txt").write_text("x y z")
    Indexer(tmp_path / "idx", IngestConfig(ocr="none")).index([tmp_path / "a.txt"], progress=False)
    with pytest.raises(Exception, match="built with embedder"):
        Indexer(tmp_path / "idx", IngestConfig(embedder="clip:openai/clip-vit-base-patch32"))


def test_passages_cover_long_text():
    words = [f"w{i}" for i in range(400)]
    ps = passages_of(" ".join(words), words=150)
    assert ps[0].split()[0] == "w0" and ps[-1].split()[-1] == "w399"
    assert all(len(p.split()) <= 150 for p in ps)
    assert passages_of("") == ["(empty)"]


def test_pipelined_ingest_equals_the_sequential_one(mixed_corpus, tmp_path):
    # Reading runs ahead on a worker thread; the units, their order and their vectors must not change.
    runs = {}
    for pipeline in (False, True):
        idx = tmp_path / f"p{pipeline}"
        s = Indexer(idx, IngestConfig(ocr="none", pipeline=pipeline, batch_units=2)).index(
            [mixed_corpus], progress=False
        )
        assert s.files_indexed == 4 and not s.failed
        assert {"plan", "pdf text", "embed", "commit"} <= set(s.timings) and all(v >= 0 for v in s.timings.values())
        store = Store(idx)
        runs[pipeline] = ([(u.uid, u.text) for u in store.units()[1]], _vectors(store))
    (u0, v0), (u1, v1) = runs[False], runs[True]
    assert u0 == u1 and v0.keys() == v1.keys()
    assert all(np.allclose(v0[k], v1[k], atol=1e-6) for k in v0)


@pytest.mark.slow
def test_one_progress_bar_in_pages(tmp_path, capsys):
    # Enough passages for sentence-transformers' own bar (5+ batches of 32), short ones so they embed fast, and
    # a model loaded inside the run.
    from retrieval import embedders

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "manual.txt").write_text("\n\n".join(f"Bay {i} holds pallet rack {i}." for i in range(200)))
    embedders.clear_cache()
    s = Indexer(tmp_path / "idx", IngestConfig(ocr="none", chunk_chars=40)).index([corpus], progress=True)
    assert s.units_indexed >= 5 * 32
    err = capsys.readouterr().err
    assert "indexing" in err and "page" in err
    assert "Batches" not in err and "Loading weights" not in err


def test_a_file_that_fails_mid_pipeline_is_reported_and_the_rest_indexed(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Forklifts are inspected every spring.")
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (corpus / "b.txt").write_text("The canteen serves rye bread.")
    s = Indexer(tmp_path / "idx", IngestConfig(ocr="none")).index([corpus], progress=False)
    assert s.files_indexed == 2 and [p for p, _ in s.failed] == [str(corpus / "broken.pdf")]
    assert "not a readable PDF" in s.failed[0][1]


def _vectors(store) -> dict[str, np.ndarray]:
    """Each unit's vectors, stacked in id order, by uid."""
    ids, units = store.units()
    uid_of = dict(zip(ids.tolist(), [u.uid for u in units]))
    out: dict[str, list] = {}
    for _, owners, rows in store.iter_vectors():
        for owner, row in zip(owners.tolist(), rows):
            out.setdefault(uid_of[owner], []).append(row)
    return {k: np.stack(v) for k, v in out.items()}


def test_same_content_rule(tmp_path):
    """One rule for copies (retrieval/ingest_plan.same_content): a copy whose twin exists is skipped, a twin that
    is gone makes a move, and empty files are never copies of each other."""
    from retrieval.ingest import IngestSummary
    from retrieval.ingest_plan import same_content

    class _Index:  # the store's one method the rule reads
        def path_with_hash(self, sha):
            return {"h-old": str(tmp_path / "gone.txt"), "h-kept": str(tmp_path / "kept.txt")}.get(sha)

    for name in ("kept.txt", "a.txt"):
        (tmp_path / name).write_text("x")
    a = str(tmp_path / "a.txt")
    s, seen, store = IngestSummary(), {}, _Index()
    assert same_content(a, "h1", 5, seen, store, s) == (False, None)
    assert same_content("b.txt", "h1", 5, seen, store, s) == (True, None)
    assert s.skipped == [("b.txt", f"duplicate of {a} (same content)")]
    assert same_content("c.txt", "h-old", 5, seen, store, s) == (False, str(tmp_path / "gone.txt"))
    assert same_content("d.txt", "h-kept", 5, seen, store, s)[0]
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert same_content("e.pdf", empty, 0, seen, store, s) == same_content("e.mp4", empty, 0, seen, store, s)
    assert same_content("e.mp4", empty, 0, seen, store, s) == (False, None) and len(s.skipped) == 2
