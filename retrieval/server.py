"""The HTTP search server, compatible with the VRAG / VimRAG search APIs (DESIGN.md section 4.4).

    POST /search  {"queries": ["..."], "top_k": 3}
      -> {"results": [{"score": [..], "indice": [..], "data": [{"type": "image|text|video",
                                                                "file_path": "...", "content": "...", ...}]}]}
      the VimRAG demo's and VRAG's FAISS engine's shape (VRAG search_engine/search_engine_faiss_api.py:17-25)
    POST /search  {"queries": [...], "top_k": 10, "vrag_ret": true}    -> [[{"idx": 0, "image_file": "..."}]]
    GET  /search?queries=..&queries=..&top_k=10                      -> [[{"idx": 0, "image_file": "..."}]]
      VRAG's page-image engine (search_engine/search_engine_api.py:28-46, top 10 as search_engine.py:76),
      which VRAG-RL's rollout (vrag_agent/generation.py:599) and VRAG's demo (demo/vrag_agent.py:62) call
    GET  /files?path=ABS_PATH     an indexed source file or a cached page image; nothing else is served
    GET  /units/{uid}/image       a unit's picture as PNG (a rendered PDF page, an image, a keyframe)
    GET  /health                  index statistics, and the pid of the worker process that answered

One result entry per query, in order. A PDF page is `"type": "image"` with `file_path` a real JPEG, rendered
on first use into the index's page-image cache (retrieval/page_images.py: VRAG's `{stem}_{N}.jpg`, 200 dpi),
so clients that open `file_path` with PIL work; `pdf_path` and `page` say which page it is. `doc` and `page` are
the page's identity (retrieval.units.page_id), the same for a PDF page and a page image X_N.jpg. Each `data` item
also carries the unit's `uid`, `modality`, `start`/`end`, `keyframes`, `citation` and an `image_url` for
units with pixels. The list shape holds pictures only (pages and images), as VRAG's page-image index does.
Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field

from retrieval.errors import RetrievalError, missing_dependency
from retrieval.page_images import cache_root, image_file
from retrieval.units import Filters, Hit, page_id

MAX_QUERIES = 100  # VRAG-RL sends its searches in batches of 100 (vrag_agent/generation.py:595)
MAX_TOP_K = 100
VRAG_TOP_K = 10  # VRAG's page-image engine returns its top 10 (search_engine/search_engine.py:76)
PICTURES = ("page", "image")


class SearchRequest(BaseModel):
    queries: list[str] = Field(..., min_length=1, max_length=MAX_QUERIES)
    top_k: int = Field(3, ge=1, le=MAX_TOP_K)
    mode: str = "hybrid"
    filters: dict | None = None
    vrag_ret: bool = False  # answer in VRAG's list shape, [[{idx, image_file}]], as its newer server does


def _picture(index_dir: Path, unit) -> str:
    try:
        return image_file(index_dir, unit)
    except Exception as e:  # noqa: BLE001 - a PDF moved or damaged since indexing: say which and how to fix it
        raise HTTPException(
            500,
            f"cannot render {unit.citation()} to an image ({e}); re-run `vimrag index` on "
            "the corpus so the index matches the files",
        ) from e


def _item(hit: Hit, index_dir: Path) -> dict:
    u = hit.unit
    kind = {"page": "image", "image": "image", "video": "video", "text": "text"}[u.modality]
    item = {
        "type": kind,
        "file_path": _picture(index_dir, u) if u.modality == "page" else u.source,
        "content": u.text,
        "uid": u.uid,
        "modality": u.modality,
        "page": u.page,
        "start": u.start,
        "end": u.end,
        "keyframes": u.keyframes,
        "citation": u.citation(),
        "doc": page_id(u)[0],
    }
    if u.modality == "page":
        item["pdf_path"] = u.source
    if u.modality != "text":
        item["image_url"] = f"/units/{u.uid}/image"
    return item


def create_app(index_dir: str | Path, retriever=None, before_search=None):
    """A FastAPI app over one index. `retriever` may be injected (tests); else it opens `index_dir`.
    `before_search()` runs before each search request, outside the retriever's lock, so that an injected delay
    (`vimrag serve-search --tool-latency`) lets concurrent requests wait at the same time."""
    from retrieval.retriever import Retriever

    r = retriever or Retriever(index_dir)  # it serialises its own searches and reloads
    index_dir = Path(index_dir)
    cache = cache_root(index_dir).resolve()
    app = FastAPI(title="VimRAG search", version="1")

    def run(queries: list[str], k: int, filters, mode: str) -> list[list[Hit]]:
        if before_search is not None:
            before_search()
        out = []
        for q in queries:
            if not q.strip():
                raise HTTPException(422, "every query must have some words")
            try:
                out.append(r.search(q, k=k, filters=filters, mode=mode))
            except (ValueError, TypeError) as e:
                raise HTTPException(422, str(e)) from e
        return out

    def vrag_lists(queries: list[str], k: int, mode: str, filters: dict | None = None) -> list[list[dict]]:
        """VRAG's shape: per query, the best `k` pictures as {idx (rank), image_file (a JPEG path)}."""
        try:
            f = Filters.from_dict(filters)
        except (ValueError, TypeError) as e:
            raise HTTPException(422, str(e)) from e
        f.modalities = [m for m in (f.modalities or PICTURES) if m in PICTURES]
        if not f.modalities:
            raise HTTPException(422, "the list shape (GET or vrag_ret) returns pictures only: pages and images")
        return [
            [{"idx": i, "image_file": _picture(index_dir, h.unit)} for i, h in enumerate(hits)]
            for hits in run(queries, k, f, mode)
        ]

    @app.post("/search")
    def search(req: SearchRequest):
        if req.vrag_ret:
            return vrag_lists(req.queries, req.top_k, req.mode, req.filters)
        results = [
            {
                "score": [h.score for h in hits],
                "indice": [r.position(h.unit.uid) for h in hits],
                "data": [_item(h, index_dir) for h in hits],
            }
            for hits in run(req.queries, req.top_k, req.filters, req.mode)
        ]
        return {"results": results}

    @app.get("/search")
    def search_get(
        queries: list[str] = Query(
            ..., min_length=1, max_length=MAX_QUERIES, description="repeat for several queries: ?queries=a&queries=b"
        ),
        top_k: int = Query(VRAG_TOP_K, ge=1, le=MAX_TOP_K),
        mode: str = "hybrid",
    ):
        return vrag_lists(queries, top_k, mode)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "pid": os.getpid(), **r.stats()}  # pid: which worker answered

    @app.get("/files")
    def files(path: str = Query(..., description="absolute path of an indexed file or a cached page image")):
        real = Path(path).resolve()
        if cache in real.parents and real.suffix == ".jpg" and real.is_file():
            return FileResponse(str(real), media_type="image/jpeg")
        rec = r.store.file(path) or r.store.file(str(real))
        if rec is None or rec.status != "ok":
            raise HTTPException(404, "not an indexed file of this corpus")
        if not any(real == Path(root) or Path(root) in real.parents for root in r.roots()):
            raise HTTPException(403, "outside the corpus roots")
        return FileResponse(str(real))

    @app.get("/units/{uid}/image")
    def unit_image(uid: str, max_pixels: int = Query(1_000_000, ge=10_000, le=16_000_000)):
        unit = r.unit(uid)
        if unit is None:
            raise HTTPException(404, f"no unit {uid!r} in this index")
        if unit.modality == "text":
            raise HTTPException(404, f"{uid} is a text unit and has no image")
        image = unit.load_image(max_pixels=max_pixels)
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return Response(buf.getvalue(), media_type="image/png")

    app.state.retriever = r
    return app


def serve(
    index_dir: str | Path, host: str = "127.0.0.1", port: int = 8002, before_search=None, workers: int = 1
) -> None:
    """Serve the index on host:port; `workers` > 1 runs that many processes on the one socket (`prefork`)."""
    if int(workers) != workers or workers < 1:
        raise ValueError(f"workers={workers!r}: give a number of processes, 1 or more")
    app = create_app(index_dir, before_search=before_search)
    if workers == 1:
        import uvicorn

        _banner(host, port, index_dir, workers)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    else:
        prefork(app, host, port, workers, index_dir)


def _banner(host: str, port: int, index_dir, workers: int) -> None:
    print(
        f"VimRAG search API on http://{host}:{port}/search  (POST: VimRAG's shape, or VRAG's with vrag_ret; "
        f"GET: VRAG's); index {index_dir}" + (f"; {workers} worker processes" if workers > 1 else ""),
        flush=True,
    )


def prefork(app, host: str, port: int, workers: int, index_dir="") -> None:
    """Serve `app` from `workers` processes through gunicorn (uvicorn workers), with the app preloaded.

    The index (units, BM25, FAISS) and the embedding model load once, in this process, before gunicorn forks
    the workers; they never write those pages, so the workers share them (copy-on-write) instead of each
    holding a copy. No model runs before the fork, so no thread pool is copied half-alive: each worker starts
    its own on first use. What must not cross a fork is reopened in each worker: the SQLite connection (SQLite
    forbids using one across fork) or the Milvus client (gRPC channels do not survive a fork).
    """
    try:
        from gunicorn.app.base import BaseApplication
    except ImportError as e:
        raise missing_dependency("gunicorn", purpose="serve-search --workers") from e
    r = app.state.retriever
    spec = getattr(r.store, "spec", None)
    if spec is not None and spec.kind == "milvus-lite":
        raise RetrievalError(
            f"{workers} workers cannot share the embedded {spec.where}: it serves one process. Serve it with "
            "`milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530` and index into a folder with "
            "--store milvus://127.0.0.1:19530/COLLECTION, or run one worker"
        )
    # The cores are shared out: a worker's query encoder and FAISS get cores / workers threads each, so that
    # the workers' thread pools do not fight over the same cores (a FAISS search reads its count from the
    # environment on the thread that runs it, and takes one thread for a single query: index_base.search_threads).
    share = str(max(1, (os.cpu_count() or 1) // workers))
    os.environ.setdefault("VIMRAG_TEXT_THREADS", share)
    os.environ.setdefault("VIMRAG_FAISS_THREADS", share)
    r.embedder  # noqa: B018 - load the model here, before the fork, so the workers share its pages

    def post_fork(server, worker) -> None:
        r.reopen()
        try:
            import torch

            torch.set_num_threads(int(os.environ["VIMRAG_TEXT_THREADS"]))
        except ImportError:
            pass

    options = {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "uvicorn_worker.UvicornWorker",
        "preload_app": True,
        "loglevel": "warning",
        "timeout": 300,  # a worker busy this long on one request is restarted
        "graceful_timeout": 10,
        "post_fork": post_fork,
    }

    class _Gunicorn(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self):
            return app

    _banner(host, port, index_dir, workers)
    _Gunicorn().run()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now, for a server started next (a search server, a launcher's rendezvous)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
