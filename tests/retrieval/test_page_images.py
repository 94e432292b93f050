"""VRAG's corpus convention, everywhere: a page image `{stem}_{N}.jpg` is page N of `{stem}.pdf` (1-based, as VRAG's
search_engine/corpus/pdf2images.py writes them). One notion of page identity (retrieval.units.page_id) serves
eval gold matching, the retrieval metrics, the RL rewards, citations and the search API; a page is indexed
once when both copies are present; an image that only looks like a page says why it stayed an image."""

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main
from retrieval.ingest import Indexer, IngestConfig
from retrieval.retriever import Retriever
from retrieval.units import page_id

REPO = Path(__file__).resolve().parents[2]
PDF = REPO / "assets" / "corpus" / "aurora_annual_report_2025.pdf"
STEM = PDF.stem
N_PAGES = 4


def render_like_vrag(pdf: Path, out: Path) -> list[Path]:
    """Every page to out/{stem}_{i}.jpg at 200 dpi, 1-based: what VRAG's pdf2images.py produces."""
    import pypdfium2 as pdfium

    out.mkdir(parents=True, exist_ok=True)
    doc = pdfium.PdfDocument(str(pdf))
    paths = []
    for i in range(len(doc)):
        path = out / f"{pdf.stem}_{i + 1}.jpg"
        doc[i].render(scale=200 / 72).to_pil().convert("RGB").save(path, "JPEG")
        paths.append(path)
    doc.close()
    return paths


@pytest.fixture(scope="module")
def vrag_corpus(tmp_path_factory):
    """A VRAG-style corpus folder: pdf/ with the report, img/ with its pages as images."""
    root = tmp_path_factory.mktemp("vrag_corpus")
    (root / "pdf").mkdir()
    shutil.copy(PDF, root / "pdf" / PDF.name)
    render_like_vrag(PDF, root / "img")
    return root


QUESTIONS = {
    "examples": [
        {
            "uid": 0,
            "query": "What was Aurora Robotics' total revenue in 2025?",
            "reference_answer": "48.6 million",
            "meta_info": {
                "file_name": PDF.name,
                "reference_page": [1],
                "source_type": "Text",
                "query_type": "Single-Hop",
            },
        },
        {
            "uid": 1,
            "query": "How much revenue did Europe bring Aurora in 2025? Revenue by region",
            "reference_answer": "21.4 million",
            "meta_info": {
                "file_name": PDF.name,
                "reference_page": [2],
                "source_type": ["Table"],
                "query_type": "Single-Hop",
            },
        },
    ]
}


def run_eval(corpus: Path, tmp: Path, name: str) -> tuple[list[dict], Path]:
    q = tmp / "vidoseek.json"
    q.write_text(json.dumps(QUESTIONS))
    out = tmp / name
    assert (
        main(
            [
                "eval",
                "--dataset",
                f"vidoseek:{q}",
                "--corpus",
                str(corpus),
                "--index",
                str(tmp / f"idx_{name}"),
                "--model",
                "keyword",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()], out


@pytest.mark.slow
def test_a_gold_page_counts_as_a_hit_over_page_images_and_over_the_pdf(vrag_corpus, tmp_path):
    """Acceptance 1 and 3: the same metrics' meaning over either copy, and the same RL reward for the same pages."""
    from agent.events import Trace
    from eval.datasets import load_dataset
    from rl.rewards import trajectory_reward_inputs, vrag_ndcg

    rows_img, out_img = run_eval(vrag_corpus / "img", tmp_path, "img")
    rows_pdf, _ = run_eval(vrag_corpus / "pdf", tmp_path, "pdf")
    for rows in (rows_img, rows_pdf):
        for r in rows:
            ret = r["retrieval"]
            assert ret["retrieved_hit"] and ret["recall@5"] > 0 and ret["ndcg@5"] > 0, (r["id"], ret)
    trace = json.loads((out_img / rows_img[0]["trace"]).read_text())
    units = [ev["unit"] for ev in trace["evidence"].values()]
    assert units and all(u["doc"] == PDF.name and u["source"].endswith(f"_{u['page']}.jpg") for u in units)

    # The RL reward for the same retrieved pages, as page images and as PDF pages
    item = load_dataset(f"vidoseek:{tmp_path / 'vidoseek.json'}", corpus=vrag_corpus / "img").items[0]
    as_pdf = json.loads(json.dumps(trace))
    for ev in as_pdf["evidence"].values():
        u = ev["unit"]
        u.update(source=str(vrag_corpus / "pdf" / PDF.name), modality="page", doc="")
    a = trajectory_reward_inputs(Trace.from_dict(trace), item)
    b = trajectory_reward_inputs(Trace.from_dict(as_pdf), item)
    assert a["retrieved"] == b["retrieved"] and a["inserted"] == b["inserted"]
    assert (PDF.name, 1, None) in a["retrieved"]
    assert vrag_ndcg(a["inserted"], a["gold_pages"]) == vrag_ndcg(b["inserted"], b["gold_pages"]) > 0


@pytest.mark.slow
def test_a_folder_with_pdf_and_img_holds_each_page_once(vrag_corpus, tmp_path):
    """Acceptance 2, whichever copy arrives first; --no-page-images indexes both."""
    idx = tmp_path / "idx"
    first = Indexer(idx).index([vrag_corpus / "img"], progress=False)  # the page images alone: pages of the PDF
    assert first.page_images == N_PAGES and "4 page images indexed as the pages" in first.format()
    summary = Indexer(idx).index([vrag_corpus], progress=False)  # now the PDF too: its pages replace them
    units = Retriever(idx).units
    assert sorted(page_id(u) for u in units) == [(PDF.name, p) for p in range(1, N_PAGES + 1)]
    assert all(u.modality == "page" for u in units)
    assert f"{N_PAGES} page images of" in summary.format() and "4 indexed earlier were dropped" in summary.format()
    hits = Retriever(idx).search("Aurora revenue 2025 region robots", k=10)
    ids = [page_id(h.unit) for h in hits]
    assert len(ids) == len(set(ids)) == N_PAGES

    both = Indexer(tmp_path / "both", IngestConfig(page_images=False)).index([vrag_corpus], progress=False)
    assert both.units_indexed == 2 * N_PAGES and both.page_images == 0


def test_images_that_only_look_like_pages_stay_images_and_say_why(tmp_path, capsys):
    corpus = tmp_path / "c"
    render_like_vrag(PDF, corpus)
    shutil.copy(PDF, corpus / PDF.name)
    shutil.copy(corpus / f"{STEM}_1.jpg", corpus / f"{STEM}_9.jpg")  # past the PDF's 4 pages
    (corpus / f"{STEM}_2.jpg").rename(corpus / "photo_2.jpg")  # no photo.pdf and no sibling
    for p in (corpus / f"{STEM}_{i}.jpg" for i in (1, 3, 4)):
        p.unlink()
    assert main(["index", str(corpus), "--index", str(tmp_path / "idx"), "-q", "--ocr", "none"]) == 0
    out = capsys.readouterr().out
    assert "indexed as plain images, not pages:" in out
    assert f"{STEM}_9.jpg: {PDF.name} has 4 pages, so page 9 is not one of them" in out
    assert "photo_2.jpg: no photo.pdf and no sibling page images in the corpus" in out
    units = {Path(u.source).name: u for u in Retriever(tmp_path / "idx").units}
    assert units[f"{STEM}_9.jpg"].doc == "" and page_id(units["photo_2.jpg"]) == ("photo_2.jpg", None)
    assert units[f"{STEM}_9.jpg"].citation() == f"{STEM}_9.jpg"


def test_a_page_image_cites_its_page_everywhere(vrag_corpus, tmp_path):
    from fastapi.testclient import TestClient

    from retrieval.server import create_app

    idx = tmp_path / "idx"
    Indexer(idx, IngestConfig(ocr="none")).index([vrag_corpus / "img"], progress=False)
    unit = next(u for u in Retriever(idx).units if u.page == 2)
    assert unit.citation() == f"{PDF.name} p.2" and unit.modality == "image"
    data = TestClient(create_app(idx)).post("/search", json={"queries": ["revenue"], "top_k": 4}).json()
    items = data["results"][0]["data"]
    assert {(d["doc"], d["page"]) for d in items} == {(PDF.name, p) for p in range(1, N_PAGES + 1)}
    assert all(d["file_path"].endswith(f"_{d['page']}.jpg") and d["citation"].startswith(PDF.name) for d in items)
