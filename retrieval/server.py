"""The HTTP search server, compatible with the VRAG / VimRAG search API (DESIGN.md section 4.4).

    POST /search  {"queries": ["..."], "top_k": 3}
      -> {"results": [{"score": [..], "indice": [..], "data": [{"type": "image|text|video",
                                                                "file_path": "...", "content": "...", ...}]}]}
    GET  /files?path=ABS_PATH     an indexed source file (nothing outside the index's corpus is served)
    GET  /units/{uid}/image       a unit's picture as PNG (a rendered PDF page, an image, a keyframe)
    GET  /health                  index statistics

One result entry per query, in order. Each `data` item carries, beyond VRAG's three keys, the unit's
`uid`, `modality`, `page`, `start`/`end`, `citation` and an `image_url` for units with pixels.
Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import io
from pathlib import Path

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field

from retrieval.units import Hit

MAX_QUERIES = 64
MAX_TOP_K = 100


class SearchRequest(BaseModel):
    queries: list[str] = Field(..., min_length=1, max_length=MAX_QUERIES)
    top_k: int = Field(3, ge=1, le=MAX_TOP_K)
    mode: str = "hybrid"
    filters: dict | None = None


def _item(hit: Hit) -> dict:
    u = hit.unit
    kind = {"page": "image", "image": "image", "video": "video", "text": "text"}[u.modality]
    item = {"type": kind, "file_path": u.source, "content": u.text, "uid": u.uid, "modality": u.modality,
            "page": u.page, "start": u.start, "end": u.end, "citation": u.citation()}
    if u.modality != "text":
        item["image_url"] = f"/units/{u.uid}/image"
    return item


def create_app(index_dir: str | Path, retriever=None):
    """A FastAPI app over one index. `retriever` may be injected (tests); else it opens `index_dir`."""
    from retrieval.retriever import Retriever

    r = retriever or Retriever(index_dir)  # it serialises its own searches and reloads
    app = FastAPI(title="VimRAG search", version="1")

    @app.post("/search")
    def search(req: SearchRequest) -> dict:
        results = []
        for q in req.queries:
            if not q.strip():
                raise HTTPException(422, "every query must have some words")
            try:
                hits = r.search(q, k=req.top_k, filters=req.filters, mode=req.mode)
            except (ValueError, TypeError) as e:
                raise HTTPException(422, str(e)) from e
            results.append({"score": [h.score for h in hits],
                            "indice": [r.position(h.unit.uid) for h in hits],
                            "data": [_item(h) for h in hits]})
        return {"results": results}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", **r.stats()}

    @app.get("/files")
    def files(path: str = Query(..., description="absolute path of an indexed file")):
        real = Path(path).resolve()
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


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8002) -> None:
    import uvicorn

    app = create_app(index_dir)
    print(f"VimRAG search API on http://{host}:{port}  (POST /search, GET /health); index {index_dir}")
    uvicorn.run(app, host=host, port=port, log_level="warning")
