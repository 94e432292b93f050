"""The HTTP search server: VRAG-compatible shapes, file serving confined to the corpus, clear 4xx errors."""

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def client(mixed_index, tmp_path_factory):
    """A client of the app over a copy of the mixed index (the server writes page images into its folder)."""
    from fastapi.testclient import TestClient

    from retrieval.server import create_app

    idx = tmp_path_factory.mktemp("server") / "index"
    shutil.copytree(mixed_index, idx)
    return TestClient(create_app(idx))


def test_search_shape(client):
    r = client.post("/search", json={"queries": ["revenue by region", "battery runtime"], "top_k": 3})
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 2
    for res in results:
        assert set(res) == {"score", "indice", "data"}
        assert len(res["score"]) == len(res["indice"]) == len(res["data"]) == 3
        assert all(isinstance(i, int) and i >= 0 for i in res["indice"])
        for d in res["data"]:
            assert d["type"] in {"image", "text", "video"} and d["file_path"] and "content" in d
    assert results[0]["data"][0]["page"] == 2 and results[0]["data"][0]["type"] == "image"
    assert results[1]["data"][0]["type"] == "video"


def test_unit_image_and_files(client):
    d = client.post("/search", json={"queries": ["revenue by region"], "top_k": 1}).json()["results"][0]["data"][0]
    img = client.get(d["image_url"])
    assert img.status_code == 200 and img.headers["content-type"] == "image/png" and img.content[:4] == b"\x89PNG"
    f = client.get("/files", params={"path": d["pdf_path"]})
    assert f.status_code == 200 and f.content[:5] == b"%PDF-"
    jpg = client.get("/files", params={"path": d["file_path"]})  # the cached page image is served too
    assert jpg.status_code == 200 and jpg.headers["content-type"] == "image/jpeg" and jpg.content[:2] == b"\xff\xd8"


@pytest.mark.parametrize("path", ["/etc/passwd", "../../etc/passwd", "/work/../etc/shadow"])
def test_files_outside_the_corpus_are_refused(client, path):
    assert client.get("/files", params={"path": path}).status_code in (403, 404)


def test_bad_requests(client):
    assert client.post("/search", json={"queries": [], "top_k": 3}).status_code == 422
    assert client.post("/search", json={"queries": ["x"], "top_k": 0}).status_code == 422
    assert client.post("/search", json={"top_k": 3}).status_code == 422
    assert client.post("/search", json={"queries": ["  "]}).status_code == 422
    assert client.post("/search", json={"queries": ["x"], "mode": "fuzzy"}).status_code == 422
    assert client.get("/units/nope/image").status_code == 404


def test_list_shape_on_post_and_get(client):
    """VRAG's shape: per query, pictures only, {idx: rank, image_file: a JPEG path}; GET's default is VRAG's top 10."""
    import pypdfium2
    from PIL import Image

    posted = client.post("/search", json={"queries": ["revenue by region"], "top_k": 2, "vrag_ret": True}).json()
    got = client.get("/search", params={"queries": ["revenue by region", "battery runtime"]}).json()
    assert len(posted) == 1 and len(got) == 2 and [d["idx"] for d in posted[0]] == [0, 1]
    assert posted[0] == got[0][:2]
    assert 1 <= len(got[0]) <= 10 and all(set(d) == {"idx", "image_file"} for d in got[0])
    first = Path(got[0][0]["image_file"])
    assert first.name.endswith("_2.jpg") and first.parent.parent.name == "page_images"  # VRAG's {stem}_{N}.jpg
    pdf = client.post("/search", json={"queries": ["revenue by region"], "top_k": 1}).json()["results"][0]["data"][0]
    width_pt = pypdfium2.PdfDocument(pdf["pdf_path"])[1].get_size()[0]
    with Image.open(first) as im:
        assert im.format == "JPEG" and abs(im.width / width_pt * 72 - 200) < 1  # 200 dpi, as VRAG's pdf2images
    assert client.get("/search").status_code == 422
    assert client.get("/search", params={"queries": ["x"], "top_k": 0}).status_code == 422
    bad = client.post("/search", json={"queries": ["x"], "vrag_ret": True, "filters": {"modalities": ["video"]}})
    assert bad.status_code == 422 and "pictures only" in bad.text


def test_health(client):
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["units"] == 7 and h["by_modality"]["video"] == 1


def test_default_bind_is_loopback():
    from app.cli import build_parser

    args = build_parser().parse_args(["serve-search", "--index", "x"])
    assert args.host == "127.0.0.1"
