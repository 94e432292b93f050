"""Search through a remote server: ours (`vimrag serve-search`) or any that speaks VRAG's or VimRAG's API.

    r = RemoteRetriever("http://127.0.0.1:8002/search")
    hits = r.search("revenue by region", k=3)        # the same Hit/Unit records a local index returns

Shapes understood (see retrieval/server.py for where each is published):
- `POST {"queries", "top_k"}` -> `{"results": [{"score", "indice", "data": [{"type", "file_path", "content"}]}]}`,
  the VimRAG demo's and VRAG's FAISS engine's; our server adds `uid`, `modality`, `page`, `pdf_path`, ... and
  those are kept, so a page from our server is the same page (file and number) as from the local index.
- `[[{"idx", "image_file"}]]`, VRAG's page-image engine, by `GET ?queries=..` (tried when POST is refused)
  or as the answer to a POST.

Images come back as a path (opened here when this machine can read it, e.g. the server runs beside us), an
`http(s)://` URL, or our server's `image_url`; fetched pictures are cached in memory. Text results keep their
text. The request carries `mode` and `filters` for our server; a server that ignores them is filtered here
after the fact, so a document filter still holds (with fewer than k hits, as the server chose them).

Errors name the server and the fix: down or unreachable (after `retries` retries with backoff), timed out,
refusing the request, or answering in a shape this client does not know.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from retrieval.errors import RetrievalError
from retrieval.units import Filters, Hit, Unit, page_image_name

SHAPES = ("auto", "vimrag", "vrag-get")
_KIND = {"image": "image", "video": "video", "text": "text"}


class SearchServerError(RetrievalError):
    """The remote search server is down, refused the request, or answered in an unknown shape."""


@dataclass
class RemoteUnit(Unit):
    """A unit found by a remote server; `picture` is where its pixels are: a local path or a URL. A page whose
    PDF this machine can read is rendered from it, exactly as a local index renders it."""

    picture: str = ""

    def load_image(self, max_pixels: int | None = None, dpi: float = 144.0):
        from retrieval import loaders

        if self._local():
            return super().load_image(
                max_pixels=max_pixels, dpi=dpi
            )  # a PDF readable here renders as the local index's
        if self.picture.startswith(("http://", "https://")):
            return loaders.open_image(self.picture, max_pixels=max_pixels, data=_fetch(self.picture))
        if not Path(self.picture).is_file():
            raise RetrievalError(
                f"the search server returned the picture {self.picture!r}, which this machine "
                "cannot open; run the agent where the server's files are, or serve them by URL"
            )
        return loaders.open_image(self.picture, max_pixels=max_pixels)

    def frame_size(self) -> tuple[int, int]:
        from retrieval import loaders

        if self._local():
            return super().frame_size()
        if self.picture.startswith(("http://", "https://")):
            return loaders.image_size(self.picture, data=_fetch(self.picture))
        return loaders.image_size(self.picture)

    def _local(self) -> bool:
        """Whether the pixels come from the unit's own source, as in a local index (no picture, a clip, or a page
        whose PDF this machine can read)."""
        return not self.picture or self.modality == "video" or (self.modality == "page" and Path(self.source).is_file())


_FETCHED: dict[str, bytes] = {}
_FETCH_LOCK = threading.Lock()
_FETCH_CACHE = 256  # pictures kept in memory per process


def _fetch(url: str, timeout: float = 30.0) -> bytes:
    with _FETCH_LOCK:
        if url in _FETCHED:
            return _FETCHED[url]
    import httpx

    try:
        resp = httpx.get(url, timeout=timeout, follow_redirects=True)
        resp.raise_for_status()
    except httpx.HTTPError as e:
        raise RetrievalError(f"cannot fetch the picture {url} ({e}); is the search server still up?") from e
    with _FETCH_LOCK:
        if len(_FETCHED) >= _FETCH_CACHE:
            _FETCHED.pop(next(iter(_FETCHED)))
        _FETCHED[url] = resp.content
    return resp.content


class RemoteRetriever:
    """A Retriever whose searches run on a server at `url` (the full search endpoint, e.g. .../search)."""

    def __init__(
        self,
        url: str,
        timeout: float = 60.0,
        retries: int = 2,
        shape: str = "auto",
        ocr: str = "auto",
        ocr_text: bool = False,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--search-url {url!r} must be an http(s):// URL, e.g. http://127.0.0.1:8002/search")
        if shape not in SHAPES:
            raise ValueError(f"unknown search API shape {shape!r}; expected one of {SHAPES}")
        import httpx

        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.shape = shape  # "auto" settles on the first answer
        self.spec = f"remote:{url}"
        self._client = httpx.Client(timeout=timeout, follow_redirects=True)
        self._ocr_name = ocr
        self._ocr = None
        self.ocr_text = ocr_text  # read pictures that come without text (VRAG's) with OCR, for a text-only policy
        self._read: dict[str, str] = {}
        self._positions: dict[str, int] = {}

    # The parts of the local Retriever's interface the agent, eval and trainer use.
    def refresh(self) -> bool:
        return False

    @property
    def ocr(self):
        if self._ocr is None:
            from retrieval.ocr import get_ocr

            self._ocr = get_ocr(self._ocr_name)
        return self._ocr

    def position(self, uid: str) -> int:
        return self._positions.get(uid, -1)

    def stats(self) -> dict:
        return {"index": self.url, "embedder": self.spec, "shape": self.shape}

    def check(self) -> None:
        """One small search, so a server that is down or speaks another shape fails before any question."""
        self.search("health check", k=1)

    def close(self) -> None:
        self._client.close()

    # -------------------------------------------------------------------------------- search
    def search(
        self, query, k: int = 5, filters: Filters | dict | None = None, mode: str = "hybrid", **local
    ) -> list[Hit]:
        """The server's best `k` hits for a text query. The local Retriever's ranking options (`dynamic`,
        `n_candidates`) are accepted, so callers need not know which retriever they hold, and left to the server."""
        unknown = set(local) - {"dynamic", "n_candidates"}
        if unknown:
            raise TypeError(f"search() got unexpected keyword arguments {sorted(unknown)}")
        if not isinstance(query, str):
            raise ValueError("a remote search server takes text queries only; search by words instead of a crop")
        if not query.strip():
            raise ValueError("the query is empty; give some words to search for")
        if isinstance(filters, dict):
            filters = Filters.from_dict(filters)
        body = {"queries": [query], "top_k": int(k), "mode": mode}
        if filters is not None and not filters.is_empty():
            body["filters"] = filters.to_dict()
        hits = self._parse(self._request(body, query, int(k)), query)
        if filters is not None and not filters.is_empty():
            hits = [h for h in hits if filters.accepts(h.unit)]
        hits = hits[:k]
        for rank, h in enumerate(hits, 1):
            h.rank = rank
            if self.ocr_text and not h.unit.text and h.unit.modality in ("page", "image"):
                self._read_text(h.unit)
        return hits

    def _read_text(self, unit: RemoteUnit) -> None:
        if unit.uid not in self._read:
            ocr = self.ocr
            try:
                self._read[unit.uid] = ocr.read(unit.load_image()).text if ocr is not None else ""
            except RetrievalError:  # an unreadable picture stays text-less; showing it reports the problem
                self._read[unit.uid] = ""
        unit.text = self._read[unit.uid]
        unit.text_source = f"ocr:{self._ocr_name}" if unit.text else unit.text_source

    def _request(self, body: dict, query: str, k: int) -> Any:
        if self.shape in ("auto", "vimrag"):
            resp = self._send("POST", json=body)
            if resp.status_code in (404, 405) and self.shape == "auto":  # a GET-only server (VRAG's older one)
                self.shape = "vrag-get"
            else:
                return self._json(resp)
        return self._json(self._send("GET", params={"queries": [query], "top_k": k}))

    def _send(self, method: str, **kw):
        """One request, retried `retries` times with exponential backoff (0.5 s, 1 s, ...) while the server
        cannot be reached, times out or answers 5xx; other statuses are returned for `_json` to judge."""
        import httpx
        import tenacity

        def once() -> httpx.Response:
            resp = self._client.request(method, self.url, **kw)
            if resp.status_code >= 500:
                resp.raise_for_status()  # an HTTPStatusError, retried below
            return resp

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=tenacity.wait_exponential(multiplier=0.5),
            retry=tenacity.retry_if_exception_type((httpx.TransportError, httpx.HTTPStatusError)),
            reraise=True,
        )
        try:
            return retrying(once)
        except httpx.TimeoutException as e:
            err: Exception | None = e
            why = f"did not answer within {self.timeout:g} s"
        except httpx.TransportError as e:
            err, why = e, f"cannot be reached ({e})"
        except httpx.HTTPStatusError as e:
            err, why = None, f"answered HTTP {e.response.status_code} {e.response.text[:200]}"
        raise SearchServerError(
            f"the search server at {self.url} {why}, after {self.retries + 1} tries; start one "
            f"with `vimrag serve-search --index DIR` or check --search-url"
        ) from err

    def _json(self, resp) -> Any:
        if resp.status_code >= 400:
            raise SearchServerError(
                f"the search server at {self.url} refused the request: HTTP {resp.status_code} {resp.text[:300]}"
            )
        try:
            return resp.json()
        except ValueError as e:
            raise SearchServerError(f"the search server at {self.url} did not answer JSON: {resp.text[:200]!r}") from e

    # -------------------------------------------------------------------------------- shapes
    def _parse(self, payload: Any, query: str) -> list[Hit]:
        if isinstance(payload, dict) and isinstance(payload.get("results"), list) and payload["results"]:
            res = payload["results"][0]
            if isinstance(res, dict) and isinstance(res.get("data"), list):
                if self.shape == "auto":
                    self.shape = "vimrag"
                scores = list(res.get("score") or [])
                indice = list(res.get("indice") or [])
                return [
                    self._hit(
                        d, scores[i] if i < len(scores) else 1.0 / (i + 1), indice[i] if i < len(indice) else None
                    )
                    for i, d in enumerate(res["data"])
                ]
        if isinstance(payload, dict) and payload.get("results") == []:
            return []
        if isinstance(payload, list) and (not payload or isinstance(payload[0], list)):
            rows = payload[0] if payload else []
            if all(isinstance(d, dict) and "image_file" in d for d in rows):
                return [
                    self._hit({"type": "image", "file_path": d["image_file"]}, 1.0 / (i + 1), d.get("idx"))
                    for i, d in enumerate(rows)
                ]
        raise SearchServerError(
            f"the search server at {self.url} answered in a shape this client does not know: "
            f'{str(payload)[:300]}; expected {{"results": [{{"score", "indice", "data"}}]}} (VimRAG) or '
            '[[{"idx", "image_file"}]] (VRAG)'
        )

    def _hit(self, d: dict, score: float, indice: Any) -> Hit:
        if not isinstance(d, dict) or d.get("type") not in _KIND:
            raise SearchServerError(
                f"the search server at {self.url} returned an item without a known type "
                f"(image, video or text): {str(d)[:200]}"
            )
        unit = self._unit(d)
        if isinstance(indice, int):
            self._positions[unit.uid] = indice
        return Hit(unit, float(score), scores={"remote": float(score)})

    def _unit(self, d: dict) -> RemoteUnit:
        path = str(d.get("file_path") or "")
        modality = d.get("modality") if d.get("modality") in ("page", "image", "video", "text") else _KIND[d["type"]]
        page = d.get("page")
        if modality == "page" and not (d.get("pdf_path") and isinstance(page, int)):
            modality = "image"  # a page without its document is just a picture
        source = d.get("pdf_path") if modality == "page" else path
        picture = ""
        if modality in ("page", "image"):
            picture = path if path and (Path(path).is_file() or path.startswith(("http://", "https://"))) else ""
            if not picture and d.get("image_url"):
                picture = urljoin(self.url, d["image_url"])
            picture = picture or path
        uid = (
            d.get("uid")
            or "remote:" + hashlib.sha1(f"{source}|{page}|{d.get('content', '')[:200]}".encode()).hexdigest()[:16]
        )
        keyframes = [float(t) for t in d.get("keyframes") or []]
        start, end = d.get("start"), d.get("end")
        if modality == "video" and not keyframes:
            start, end, keyframes = _video_span(path, start, end)
        doc = ""
        if modality == "image":
            if "doc" in d:  # our server names the page's document; a plain image's is its own file name
                doc = d["doc"] if d["doc"] != Path(path).name else ""
            else:  # VRAG's servers index page images named X_N.jpg: page N of X.pdf
                named = page_image_name(Path(path).name)
                if named:
                    doc, page = named
        return RemoteUnit(
            uid=str(uid),
            source=source or self.url,
            root="",
            modality=modality,
            content_hash=str(d.get("content_hash") or ""),
            text=str(d.get("content") or ""),
            page=page if modality == "page" or doc else None,
            doc=doc,
            start=start,
            end=end,
            keyframes=keyframes,
            text_source="remote",
            picture=picture,
        )


def _video_span(path: str, start, end) -> tuple[float | None, float | None, list[float]]:
    """Keyframes for a whole video (or the given span) returned without them, when the file is readable here."""
    from retrieval import loaders

    try:
        info = loaders.video_info(path)
    except Exception:  # noqa: BLE001 - not readable here: the agent reports it when it tries to show the clip
        return start, end, []
    a = float(start or 0.0)
    b = float(end if end is not None else info.duration)
    return a, b, loaders.keyframe_times(a, b)
