"""Interop with the VRAG ecosystem over HTTP, both ways.

- Our `vimrag serve-search`, started as a second process, answers the published clients. Their request and
  response handling is written again here from the shapes their code uses (never copied): the VimRAG demo
  (demo/vimrag_agent.py `search` and `format_search_results`: POST, then PIL opens `file_path`), VRAG's demo
  (demo/vrag_agent.py:59-65: GET, `image_file` of the first query), VRAG-RL's rollout
  (VRAG-RL/vrag_agent/generation.py:594-602: GET in batches, a list per query) and VRAG's newer server
  (POST with `vrag_ret`).
- Our RemoteRetriever searches that server, and a minimal server that only speaks the published shapes,
  and `vimrag ask` / `vimrag eval --search-url` work through it.
"""

import json
import shutil
import time
from pathlib import Path

import pytest
import requests
from PIL import Image

from retrieval.remote import RemoteRetriever, SearchServerError
from retrieval.retriever import Retriever
from tests.search_server import search_server, serve_in_thread

REPO_CORPUS = Path(__file__).resolve().parents[2] / "assets" / "corpus"
QUERIES = ["revenue by region", "battery runtime", "Heron drone pilot customers"]


@pytest.fixture(scope="module")
def served(mixed_index, tmp_path_factory):
    """(search URL, index folder) of `vimrag serve-search` running in a second process on a copy of the index."""
    idx = tmp_path_factory.mktemp("served") / "index"
    shutil.copytree(mixed_index, idx)
    with search_server(idx) as url:
        yield url, idx


# -- the published clients against our server -----------------------------------------------------------
@pytest.mark.slow
def test_vimrag_demo_client(served):
    url, _ = served
    resp = requests.post(url, json={"queries": QUERIES[:1], "top_k": 3})
    resp.raise_for_status()
    result = resp.json()["results"][0]
    kinds = set()
    for item in result["data"]:
        kinds.add(item["type"])
        if item["type"] == "image":
            img = Image.open(item["file_path"]).convert("RGB")  # what the demo does with a picture
            assert img.width > 100 and img.height > 100
        elif item["type"] == "video":
            assert Path(item["file_path"]).is_file()
        else:
            assert isinstance(item["content"], str)
    assert "image" in kinds and result["data"][0]["modality"] == "page" and result["data"][0]["page"] == 2
    assert result["data"][0]["pdf_path"].endswith(".pdf") and len(result["score"]) == len(result["indice"]) == 3


@pytest.mark.slow
def test_vrag_demo_client(served):
    url, _ = served
    results = requests.get(url, params={"queries": QUERIES[:1]}).json()
    paths = [r["image_file"] for r in results[0]]
    assert paths and Path(paths[0]).name.endswith("_2.jpg")
    for p in paths:
        with Image.open(p) as im:
            im.load()


@pytest.mark.slow
def test_vrag_rl_rollout_batches(served):
    url, _ = served
    queries = QUERIES * 2
    results = []
    for i in range(0, len(queries), 4):  # VRAG-RL sends batches (of 100); the answers line up with the queries
        results.extend(requests.get(url, params={"queries": queries[i : i + 4]}).json())
    assert len(results) == len(queries)
    for obs in results:
        assert isinstance(obs, list) and obs and isinstance(obs[0], dict)
        for item in obs:
            with Image.open(item["image_file"]) as im:
                im.load()
    assert results[0] == results[3]


@pytest.mark.slow
def test_vrag_newer_server_post_with_vrag_ret(served):
    url, _ = served
    lists = requests.post(url, json={"queries": QUERIES[:2], "top_k": 3, "vrag_ret": True}).json()
    assert len(lists) == 2 and all(len(x) <= 3 and [d["idx"] for d in x] == list(range(len(x))) for x in lists)
    assert lists[0] == requests.get(url, params={"queries": QUERIES[:1], "top_k": 3}).json()[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../../etc/passwd",
        "{cache}/../../../../etc/passwd",
        "{cache}/../dense.json",
        "{cache}/../store.sqlite",
    ],
)
def test_server_refuses_paths_outside_the_corpus_and_cache(served, path):
    url, idx = served
    base = url.rsplit("/search", 1)[0]
    r = requests.get(base + "/files", params={"path": path.format(cache=idx / "page_images")})
    assert r.status_code in (403, 404)


# -- our RemoteRetriever against our server ------------------------------------------------------------
@pytest.mark.slow
def test_remote_search_equals_local_search(served, mixed_index):
    url, _ = served
    remote, local = RemoteRetriever(url), Retriever(mixed_index)
    for q in QUERIES:
        got, want = remote.search(q, k=5), local.search(q, k=5)
        assert [h.unit.uid for h in got] == [h.unit.uid for h in want]
        assert [(h.unit.source, h.unit.page, h.unit.modality) for h in got] == [
            (h.unit.source, h.unit.page, h.unit.modality) for h in want
        ]
        assert [h.unit.text for h in got] == [h.unit.text for h in want]
    only = remote.search(QUERIES[0], k=5, filters={"docs": ["logimat_poster.png"]})
    assert only and {h.unit.name for h in only} == {"logimat_poster.png"}
    page = remote.search(QUERIES[0], k=1)[0].unit
    assert page.load_image().size == local.search(QUERIES[0], k=1)[0].unit.load_image().size
    clip = next(h.unit for h in remote.search(QUERIES[1], k=5) if h.unit.modality == "video")
    assert clip.keyframes and clip.load_image().width > 0
    with pytest.raises(ValueError, match="text queries only"):
        remote.search(Image.new("RGB", (32, 32)), k=3)


@pytest.mark.slow
def test_ask_through_a_second_process_server(bundled_index, tmp_path, capsys):
    from app.cli import main

    idx = tmp_path / "index"
    shutil.copytree(bundled_index, idx)
    with search_server(idx) as url:
        code = main(
            [
                "ask",
                "What defect rate did the Tampere factory reach after the new calibration rig?",
                "--search-url",
                url,
                "--index",
                str(tmp_path / "no-such-index"),
                "--model",
                "keyword",
                "--trace",
                str(tmp_path / "t.json"),
            ]
        )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "answer: 0.8 percent" in out.out and "tampere_factory_notes.md" in out.out.split("answer:")[1]
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(ev["unit"]["source"].endswith("tampere_factory_notes.md") for ev in trace["evidence"].values())


@pytest.mark.slow
def test_eval_through_the_server_gives_the_local_retrieval_metrics(bundled_index, tmp_path):
    from app.cli import main

    idx = tmp_path / "index"
    shutil.copytree(bundled_index, idx)
    common = ["eval", "--dataset", "demo", "--model", "keyword", "--quiet"]
    assert main([*common, "--index", str(idx), "--out", str(tmp_path / "local")]) == 0
    with search_server(idx) as url:
        assert main([*common, "--search-url", url, "--out", str(tmp_path / "remote")]) == 0

    def rows(run):
        return {r["id"]: r for r in map(json.loads, (tmp_path / run / "predictions.jsonl").read_text().splitlines())}

    local, remote = rows("local"), rows("remote")
    assert local.keys() == remote.keys() and len(local) == 11
    for qid in local:
        assert remote[qid]["retrieval"] == local[qid]["retrieval"], qid
        assert remote[qid]["pred"] == local[qid]["pred"], qid
    assert json.loads((tmp_path / "remote" / "config.json").read_text())["index"] == url


# -- a minimal server that speaks only the published shapes ----------------------------------------------
def published_only_app(corpus: Path, get_only: bool):
    """VRAG's page-image engine (GET, [[{idx, image_file}]]; get_only) or its FAISS engine (POST, results
    with data items {type, file_path[, content]}), over the files of the generated corpus."""
    from fastapi import FastAPI, Query, Request
    from fastapi.responses import FileResponse

    app = FastAPI()
    poster, video = corpus / "logimat_poster.png", corpus / "product_update.mp4"
    note = (corpus / "tampere_factory_notes.md").read_text()

    if get_only:

        @app.get("/search")
        def get(queries: list[str] = Query(...)):
            return [[{"idx": 0, "image_file": str(poster)}] for _ in queries]
    else:

        @app.post("/search")
        async def post(request: Request):
            body = await request.json()
            data = [
                {"type": "image", "file_path": str(poster)},
                {"type": "text", "file_path": "notes.md", "content": note},
                {"type": "video", "file_path": str(video)},
                {"type": "image", "file_path": str(request.base_url) + "img/poster.png"},
            ]
            k = body.get("top_k", 3)
            return {
                "results": [
                    {"score": [0.9, 0.8, 0.7, 0.6][:k], "indice": [0, 1, 2, 3][:k], "data": data[:k]}
                    for _ in body["queries"]
                ]
            }

        @app.get("/img/poster.png")
        def img():
            return FileResponse(poster)

    return app


def test_remote_retriever_speaks_vrags_get_only_engine(mixed_corpus):
    with serve_in_thread(published_only_app(mixed_corpus, get_only=True)) as base:
        r = RemoteRetriever(base + "/search", ocr_text=True)
        hits = r.search("Heron drone pilot", k=3)
        assert r.shape == "vrag-get" and len(hits) == 1
        u = hits[0].unit
        assert u.modality == "image" and u.name == "logimat_poster.png" and u.load_image().width > 100
        assert "Heron" in u.text and u.text_source.startswith("ocr")  # read for a policy that cannot see pixels


def test_remote_retriever_speaks_vrags_faiss_engine(mixed_corpus):
    with serve_in_thread(published_only_app(mixed_corpus, get_only=False)) as base:
        r = RemoteRetriever(base + "/search")
        hits = r.search("anything", k=4)
        assert r.shape == "vimrag" and [h.unit.modality for h in hits] == ["image", "text", "video", "image"]
        assert [h.score for h in hits] == [0.9, 0.8, 0.7, 0.6] and [h.rank for h in hits] == [1, 2, 3, 4]
        assert "calibration rig" in hits[1].unit.text
        assert hits[2].unit.keyframes and hits[2].unit.load_frames()[0][1].width > 0  # keyframes made here
        by_url = hits[3].unit
        assert by_url.picture.startswith("http://") and by_url.load_image().size == hits[0].unit.load_image().size
        only = r.search("anything", k=4, filters={"modalities": ["text"]})  # a server that ignores filters
        assert [h.unit.modality for h in only] == ["text"]


# -- failures say what is wrong and what to do -------------------------------------------------------------
def test_a_server_that_is_down():
    from tests.search_server import free_port

    r = RemoteRetriever(f"http://127.0.0.1:{free_port()}/search", retries=1)
    t0 = time.perf_counter()
    with pytest.raises(SearchServerError, match="cannot be reached.*after 2 tries.*vimrag serve-search"):
        r.search("x")
    assert time.perf_counter() - t0 < 10


def test_a_server_that_answers_another_shape_or_fails_or_is_slow():
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    calls = {"flaky": 0, "broken": 0}

    @app.post("/other")
    def other():
        return {"hits": ["a", "b"]}

    @app.post("/broken")
    def broken():
        calls["broken"] += 1
        return JSONResponse({"detail": "index not loaded"}, status_code=500)

    @app.post("/flaky")
    def flaky():
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            return JSONResponse({"detail": "warming up"}, status_code=503)
        return {"results": [{"score": [1.0], "indice": [0], "data": [{"type": "text", "content": "ok"}]}]}

    @app.post("/slow")
    def slow():
        time.sleep(2)
        return {"results": []}

    @app.post("/refuses")
    def refuses():
        return JSONResponse({"detail": "queries must be a list"}, status_code=422)

    with serve_in_thread(app) as base:
        with pytest.raises(SearchServerError, match="shape this client does not know.*hits"):
            RemoteRetriever(base + "/other").search("x")
        with pytest.raises(SearchServerError, match="HTTP 500.*index not loaded.*after 2 tries"):
            RemoteRetriever(base + "/broken", retries=1).search("x")
        assert calls["broken"] == 2  # one retry, then the error
        assert RemoteRetriever(base + "/flaky", retries=1).search("x")[0].unit.text == "ok"  # retried once
        assert calls["flaky"] == 2
        with pytest.raises(SearchServerError, match="did not answer within 0.5 s"):
            RemoteRetriever(base + "/slow", timeout=0.5, retries=0).search("x")
        with pytest.raises(SearchServerError, match="refused the request: HTTP 422.*must be a list"):
            RemoteRetriever(base + "/refuses").search("x")
    with pytest.raises(ValueError, match="http"):
        RemoteRetriever("127.0.0.1:8002/search")


def test_ask_with_a_dead_server_says_so(capsys, tmp_path):
    from app.cli import main
    from tests.search_server import free_port

    code = main(
        ["ask", "What is the revenue?", "--search-url", f"http://127.0.0.1:{free_port()}/search", "--model", "keyword"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("vimrag ask: error: the search server at http://127.0.0.1:")
    assert "cannot be reached" in err and "vimrag serve-search" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_demo_workspace_searches_through_the_server(served, tmp_path):
    from app.cli import build_parser
    from app.workspace import SCOPE_ALL, SCOPE_UPLOADS, Workspace

    url, _ = served
    assert build_parser().parse_args(["demo", "--search-url", url]).search_url == url
    ws = Workspace(tmp_path / "ws", search_url=url)
    try:
        assert isinstance(ws.retriever, RemoteRetriever)
        assert ws.retriever.search(QUERIES[0], k=1, filters={"docs": ws.docs_for(SCOPE_ALL)})[0].unit.page == 2
        summary, problems = ws.add_uploads([REPO_CORPUS / "logimat_poster.png"])
        assert summary is None and "uploads here would never be searched" in problems[0]
        with pytest.raises(ValueError, match="holds its own corpus"):
            ws.docs_for(SCOPE_UPLOADS)
        with pytest.raises(ValueError, match="index files on its machine"):
            ws.index_bundled()
    finally:
        ws.close()
