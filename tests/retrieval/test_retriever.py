"""Search: hybrid, BM25 and dense modes, filters, dynamic top-k, image queries, and the module-level API."""

import pytest

import retrieval
from retrieval.ingest import Indexer, IngestConfig
from retrieval.retriever import Retriever
from retrieval.units import Filters


@pytest.fixture(scope="module")
def retriever(mixed_index):
    return Retriever(mixed_index)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_finds_the_table_page(retriever, mode):
    hits = retriever.search("revenue by region Europe North America", k=3, mode=mode)
    assert hits and hits[0].unit.modality == "page" and hits[0].unit.page == 2
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))


def test_each_modality_is_reachable(retriever):
    assert retriever.search("battery runtime extended to 14 hours", k=1)[0].unit.modality == "video"
    assert retriever.search("LogiMAT booth hall 4", k=1)[0].unit.modality == "image"
    assert retriever.search("defect rate calibration rig", k=1)[0].unit.modality == "text"


def test_hybrid_hit_carries_both_scores(retriever):
    hit = retriever.search("quarterly shipments robots", k=1)[0]
    assert set(hit.scores) == {"bm25", "dense"}
    assert hit.unit.citation().endswith("p.3")


def test_filters(retriever):
    hits = retriever.search("revenue", k=10, filters=Filters(modalities=["text", "video"]))
    assert hits and {h.unit.modality for h in hits} <= {"text", "video"}
    hits = retriever.search("revenue", k=10, filters={"docs": ["aurora_annual_report_2025.pdf"]})
    assert hits and {h.unit.name for h in hits} == {"aurora_annual_report_2025.pdf"}
    assert retriever.search("battery", k=5, filters=Filters(time_span=(100, 200), modalities=["video"])) == []
    assert retriever.search("battery", k=5, filters=Filters(time_span=(10, 20), modalities=["video"]))
    with pytest.raises(ValueError, match="inverted"):
        Filters(time_span=(5, 1))
    with pytest.raises(ValueError, match="unknown modality"):
        Filters(modalities=["audio"])


def test_dynamic_top_k_cuts_the_tail(retriever):
    full = retriever.search("Falcon X2 picker", k=7)
    cut = retriever.search("Falcon X2 picker", k=7, dynamic=True)
    assert 1 <= len(cut) <= len(full)
    assert [h.unit.uid for h in cut] == [h.unit.uid for h in full[: len(cut)]]


def test_image_query_uses_ocr_text_with_a_text_embedder(retriever, mixed_corpus):
    from PIL import Image, ImageDraw

    from assets.make_corpus import font

    crop = Image.new("RGB", (700, 120), "white")
    ImageDraw.Draw(crop).text((10, 30), "Runtime extended to 14 hours", font=font(40), fill="black")
    hits = retriever.search(crop, k=1)
    assert hits[0].unit.modality == "video"


def test_hits_load_their_pixels_and_text(retriever):
    page = retriever.search("revenue by region", k=1, filters={"modalities": ["page"]})[0]
    assert page.unit.load_image(max_pixels=200_000).size[0] > 100
    clip = retriever.search("battery", k=1, filters={"modalities": ["video"]})[0]
    frames = clip.unit.load_frames()
    assert len(frames) == len(clip.unit.keyframes) and frames[0][1].size == (640, 360)
    note = retriever.search("defect rate", k=1, filters={"modalities": ["text"]})[0]
    with pytest.raises(ValueError, match="text unit"):
        note.unit.load_image()
    assert retrieval.Hit.from_dict(page.to_dict()) == page


def test_bad_queries(retriever):
    with pytest.raises(ValueError, match="empty query"):
        retriever.search("   ")
    with pytest.raises(ValueError, match="unknown search mode"):
        retriever.search("x", mode="fuzzy")
    with pytest.raises(TypeError):
        retriever.search(42)


def test_module_level_search_and_refresh(mixed_corpus, tmp_path):
    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([mixed_corpus / "tampere_factory_notes.md"], progress=False)
    hits = retrieval.search("defect rate", k=2, index=idx)
    assert hits and hits[0].unit.name == "tampere_factory_notes.md"
    extra = tmp_path / "more.txt"
    extra.write_text("Zebra crossings painted on the warehouse floor.")
    Indexer(idx, IngestConfig(ocr="none")).index([extra], progress=False)
    # The cached retriever sees the new version without reopening.
    assert retrieval.search("zebra crossings", k=1, index=idx)[0].unit.name == "more.txt"


def test_missing_index_says_how_to_build_one(tmp_path):
    with pytest.raises(retrieval.IndexOpenError, match="vimrag index"):
        Retriever(tmp_path / "none")


def test_dense_structures_are_cached_and_rebuilt(retriever):
    import json

    meta = json.loads((retriever.dir / "dense.json").read_text())
    assert meta["version"] == retriever.version and meta["n_vectors"] >= len(retriever.units)
    (retriever.dir / "dense.faiss").write_bytes(b"garbage")
    again = Retriever(retriever.dir)
    assert again.search("revenue by region", k=1)[0].unit.page == 2


def test_a_store_snapshot_holds_one_version_while_a_writer_commits(tmp_path):
    """The reads of one refresh (version, units, vectors) must come from one commit, or a search can meet a
    vector whose unit it never loaded (an IndexError / KeyError seen under load before snapshots)."""
    from retrieval.store import Store

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The first document.")
    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    reader = Store(idx)
    with reader.snapshot():
        version, (rows, _) = reader.version, reader.units()
        (corpus / "b.txt").write_text("The second document.")
        Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)  # commits on its own connection
        assert reader.version == version and len(reader.units()[0]) == len(rows) == 1
        assert set(reader.vector_owners()[1].tolist()) <= set(rows.tolist())
    assert reader.version > version and len(reader.units()[0]) == 2


def test_searches_stay_consistent_while_the_index_grows(tmp_path):
    """Threads search while another process-like writer adds files; every search sees one whole version."""
    import threading

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "base.txt").write_text("The base document mentions a lighthouse.")
    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    r = Retriever(idx)
    errors = []

    def searcher():
        for _ in range(30):
            try:
                hits = r.search("lighthouse keeper", k=3)
                assert hits and all(h.unit.text for h in hits)
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(5):
        (corpus / f"new{i}.txt").write_text(f"Lighthouse keeper log number {i}.")
        Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    for t in threads:
        t.join()
    assert errors == []
    assert r.search("lighthouse keeper log number 4", k=1)[0].unit.name == "new4.txt"
    assert len(r.units) == 6


def test_a_filters_positions_are_those_of_a_scan_of_every_unit():
    """`_State.allowed` looks a doc filter's units up by file name and remembers them per filter; it must give
    exactly the positions that `Filters.accepts` gives unit by unit, for every way a doc can be named."""
    import random

    from retrieval.retriever import _State
    from retrieval.units import Unit

    rng = random.Random(0)
    folders = ["/c", "/c/a", "/c/a/b", "/d/a", "/c/.hid"]
    files = ["x.pdf", "y.pdf", "x_3.jpg", "clip.mp4", "notes.txt", "..odd.pdf"]
    units = []
    for i in range(300):
        folder, name = rng.choice(folders), rng.choice(files)
        mod = {"mp4": "video", "txt": "text", "jpg": "image"}.get(name.rsplit(".", 1)[1], "page")
        units.append(
            Unit(
                uid=f"u{i}",
                source=f"{folder}/{name}",
                root="/c",
                modality=mod,
                content_hash=str(i),
                start=float(i % 50) if mod == "video" else None,
                end=float(i % 50 + 10) if mod == "video" else None,
                doc="x.pdf" if name == "x_3.jpg" else "",
            )
        )
    st = _State(0, units)
    wanted = ["x.pdf", "a/x.pdf", "./a/b/x.pdf", "/c/a/x.pdf", "c\\a\\y.pdf", "b/x_3.jpg", "clip.mp4"]
    wanted += ["..odd.pdf", ".hid/y.pdf", "missing.pdf", "a/", "x", "/d/a/notes.txt"]
    cases = [Filters(docs=[w]) for w in wanted] + [Filters(docs=rng.sample(wanted, 3)) for _ in range(20)]
    cases += [Filters(docs=["x.pdf"], modalities=["image"]), Filters(modalities=["video"], time_span=(5, 12))]
    cases += [Filters(docs=["clip.mp4", "a/y.pdf"], modalities=["video", "page"], time_span=(30, 31))]
    for f in cases:
        scan = [i for i, u in enumerate(units) if f.accepts(u)]
        assert st.allowed(f).tolist() == scan, f
        assert st.allowed(f).tolist() == scan  # remembered, and the same
    assert st.allowed(Filters(docs=["x.pdf"])).size and not st.allowed(Filters(docs=["missing.pdf"])).size
