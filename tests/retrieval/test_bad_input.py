"""Each kind of bad input gets a clear reason naming the file, and indexing goes on with the rest."""

import os
import shutil
from pathlib import Path

import pytest
from PIL import Image

from retrieval.ingest import Indexer, IngestConfig
from retrieval.store import Store


@pytest.fixture(scope="module")
def bad_run(mixed_corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    corpus = root / "corpus"
    corpus.mkdir()
    good_pdf = mixed_corpus / "aurora_annual_report_2025.pdf"
    shutil.copy(good_pdf, corpus / "good.pdf")
    (corpus / "corrupt.pdf").write_bytes(os.urandom(2048))
    data = good_pdf.read_bytes()
    (corpus / "truncated.pdf").write_bytes(data[: len(data) // 3])
    import pypdf

    w = pypdf.PdfWriter()
    w.add_blank_page(200, 200)
    w.encrypt("secret", algorithm="RC4-128")
    w.write(corpus / "encrypted.pdf")
    pypdf.PdfWriter().write(corpus / "empty.pdf")  # a well-formed PDF with an empty page tree
    (corpus / "not_an_image.png").write_text("I am text pretending to be a PNG")
    Image.new("1", (13000, 12000)).save(corpus / "bomb.png")  # 156 Mpx, a few KB on disk
    (corpus / "zero.mp4").write_bytes(b"")
    (corpus / "zero.pdf").write_bytes(b"")  # two empty files of different types share one content hash
    (corpus / "garbage.mp4").write_bytes(os.urandom(4096))
    (corpus / "dangling.txt").symlink_to(corpus / "missing-target.txt")
    outside = root / "outside.txt"
    outside.write_text("secret outside the corpus")
    (corpus / "escape.txt").symlink_to(outside)
    (root / "outside_dir").mkdir()
    (corpus / "escape_dir").symlink_to(root / "outside_dir")
    shutil.copy(good_pdf, corpus / "zz_duplicate.pdf")
    (corpus / "résumé_東京.md").write_text("Non-ASCII names work: the Kyoto office opened in 2024.", encoding="utf-8")
    (corpus / "ignored.xyz").write_text("unsupported")
    summary = Indexer(root / "idx", IngestConfig(ocr="none")).index([corpus], progress=False)
    return corpus, root / "idx", summary


def _reason(rows, name):
    found = [why for path, why in rows if Path(path).name == name]
    assert found, f"{name} not reported; got {rows}"
    return found[0]


@pytest.mark.parametrize(
    "name, words",
    [
        ("corrupt.pdf", "not a readable pdf"),
        ("truncated.pdf", "pdf"),
        ("encrypted.pdf", "encrypted"),
        ("empty.pdf", "zero pages"),
        ("not_an_image.png", "not an image"),
        ("bomb.png", "decompression bomb"),
        ("zero.mp4", "empty (0 bytes)"),
        ("zero.pdf", "empty (0 bytes)"),
        ("garbage.mp4", "cannot decode the video"),
        ("dangling.txt", "cannot read"),
    ],
)
def test_bad_file_fails_with_a_reason(bad_run, name, words):
    _, _, summary = bad_run
    assert words in _reason(summary.failed, name).lower()


def test_escaping_symlinks_and_duplicates_are_skipped(bad_run):
    _, _, summary = bad_run
    assert not [p for p, _ in summary.skipped if Path(p).name.startswith("zero.")]  # empty, not duplicates
    assert "leaves the corpus root" in _reason(summary.skipped, "escape.txt")
    assert "leaves the corpus root" in _reason(summary.skipped, "escape_dir")
    assert "duplicate of" in _reason(summary.skipped, "zz_duplicate.pdf")
    assert any("unsupported types (.xyz x1)" in why for _, why in summary.skipped)


def test_good_files_survive_the_bad_ones(bad_run):
    corpus, idx, summary = bad_run
    units = Store(idx).units()[1]
    names = {Path(u.source).name for u in units}
    assert names == {"good.pdf", "résumé_東京.md"}
    assert not any("secret outside" in u.text for u in units)
    assert summary.files_indexed == 2 and len(units) == 5
    text = summary.format()  # names every bad file with its reason
    assert "corrupt.pdf" in text and "encrypted" in text and "zz_duplicate.pdf" in text


def test_failed_files_are_not_retried_until_changed(bad_run):
    corpus, idx, _ = bad_run
    again = Indexer(idx, IngestConfig(ocr="none")).index([corpus], progress=False)
    assert again.files_indexed == 0
    assert "unchanged since it last failed" in _reason(again.failed, "corrupt.pdf")


def test_missing_path_is_reported(tmp_path):
    s = Indexer(tmp_path / "idx", IngestConfig(ocr="none")).index([tmp_path / "nope"], progress=False)
    assert "no such file" in s.failed[0][1]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file regardless of permissions")
def test_unreadable_file(tmp_path):
    f = tmp_path / "c" / "locked.txt"
    f.parent.mkdir()
    f.write_text("x")
    f.chmod(0)
    s = Indexer(tmp_path / "idx", IngestConfig(ocr="none")).index([f.parent], progress=False)
    assert "cannot read" in s.failed[0][1]


def test_unreadable_file_even_as_root(tmp_path, monkeypatch):
    """Root bypasses file modes, so simulate the read failure the way the OS reports it."""
    import retrieval.ingest as ingest

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "locked.txt").write_text("x")
    (tmp_path / "c" / "fine.txt").write_text("fine content")
    real = ingest.sha256_file

    def deny(path, *a, **k):
        if Path(path).name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(ingest, "sha256_file", deny)
    s = Indexer(tmp_path / "idx", IngestConfig(ocr="none")).index([tmp_path / "c"], progress=False)
    assert "cannot read the file (Permission denied)" in _reason(s.failed, "locked.txt")
    assert s.files_indexed == 1
