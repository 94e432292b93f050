"""The tools the protocols share: search (by words or by an image region), crop, scale, and showing evidence.

Search goes through anything with the Retriever's `search(query, k, filters=, mode=)` method, so a
benchmark can substitute scripted results. Each tool records its own time, so a trace can split a step
into model, retrieval and agent time.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any

from agent.coords import to_seen
from agent.evidence import Evidence
from agent.state import EpisodeState
from agent.tools import (
    OBS_MIN_PIXELS,
    ToolError,
    compose_box,
    map_bbox,
    resize_for_model,
    scaled_budget,
    target_size,
)
from memory_graph.render import visual_tokens
from retrieval.errors import RetrievalError

TEXT_EXCERPT = 1200  # characters of a text result shown to the model
READ_KEEP = 4096  # pictures whose OCR text `read_view` keeps per process (an RL run meets the same views again)
_READ: OrderedDict[tuple, str] = OrderedDict()
_READ_LOCK = threading.Lock()


class Toolbox:
    def __init__(
        self, retriever, patch: int = 28, ocr_crops: bool = False, coords: str = "absolute", latency=None
    ) -> None:
        self.retriever = retriever
        self.patch = patch
        self.ocr_crops = ocr_crops  # read the text inside crops (for a policy that cannot see pixels)
        self.coords = coords  # how the model writes boxes: "absolute" pixels or "relative" 0..1000 (agent/coords.py)
        self.latency = latency  # agent/latency.py ToolLatency: injected delays (tests, benchmarks), or None
        self.retrieval_s = 0.0
        self.tool_s = 0.0  # time inside search and crop calls, injected delays included
        self.spans: list[tuple[str, float, float]] = []  # (tool, start, end) of each call, perf_counter seconds
        self._prefetched: dict[str, list[tuple[Any, Exception | None]]] = {}  # query -> results of `prefetch`

    def _delay(self, tool: str) -> None:
        if self.latency:
            self.latency.delay(tool)

    # -- search ----------------------------------------------------------------------------------------
    def search(
        self,
        st: EpisodeState,
        node_id: str,
        query: str = "",
        image_id: str = "",
        bbox: list[float] | None = None,
        k: int | None = None,
    ) -> list[Evidence]:
        cfg = st.config
        if self.retriever is None:
            raise ToolError("no index is loaded, so search cannot run; build one with `vimrag index DIR`")
        q: Any = query
        if image_id:
            src = self.image_evidence(st, image_id)
            img = st.evidence.raw_image(src)
            if bbox:
                x1, y1, x2, y2 = map_bbox(*self.seen_box(st, src, bbox), img.size)
                img = img.crop((x1, y1, x2, y2))
            q = img
        filters = {"docs": cfg.docs} if cfg.docs else None
        t0 = time.perf_counter()
        ready = self._prefetched.get(query) if query and not image_id and k is None else None
        prefetched = bool(ready)
        try:
            if ready:  # run already, at the same time as the reply's other searches (`prefetch`)
                hits, error = ready.pop(0)
            else:
                hits, error = self._search(q, k or cfg.top_k, filters, cfg.search_mode)
            if error is not None:
                raise ToolError(f"search failed: {error}") from error
            if query and query not in st.searched:
                st.searched.append(query)
            found = [st.evidence.add_unit(h.unit, node_id, h.score) for h in hits]
            for ev in found:  # fetching the results' pixels is part of retrieval, not of the agent's overhead
                if ev.kind == "image":
                    try:
                        st.evidence.source_image(ev.unit)  # what observations and crops are cut from
                    except Exception:  # noqa: BLE001 - `show` reports an unreadable file to the model
                        pass
        finally:
            if not prefetched:  # a prefetched search's time was counted when it ran
                self.retrieval_s += time.perf_counter() - t0
                self.tool_s += time.perf_counter() - t0
        return found

    def forget_prefetched(self) -> None:
        """Drop what `prefetch` ran and no call took (a call that failed before its search)."""
        self._prefetched = {}

    def _search(self, q: Any, k: int, filters: dict | None, mode: str) -> tuple[Any, Exception | None]:
        """(hits, None) or (None, the error) of one retriever call, its span recorded; injected latency first."""
        t0 = time.perf_counter()
        try:
            self._delay("search")
            return self.retriever.search(q, k=k, filters=filters, mode=mode), None
        except (ValueError, TypeError, RetrievalError) as e:  # a bad query, or a search server gone away
            return None, e
        finally:
            self.spans.append(("search", t0, time.perf_counter()))

    def prefetch(self, st: EpisodeState, queries: list[str]) -> None:
        """Run these text searches at once, on one thread each, so that their latency overlaps; `search` then
        takes their results in the order the calls are executed, so what the model sees is the same as one after
        another. The wall time counts once."""
        from concurrent.futures import ThreadPoolExecutor

        if self.retriever is None or len(queries) < 2:
            return
        cfg = st.config
        filters = {"docs": cfg.docs} if cfg.docs else None
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="search") as pool:
            results = list(pool.map(lambda q: self._search(q, cfg.top_k, filters, cfg.search_mode), queries))
        self._prefetched = {}
        for q, r in zip(queries, results):
            self._prefetched.setdefault(q, []).append(r)
        self.retrieval_s += time.perf_counter() - t0
        self.tool_s += time.perf_counter() - t0

    # -- crop and scale -----------------------------------------------------------------------------------
    def image_evidence(self, st: EpisodeState, info_id: str) -> Evidence:
        ev = st.evidence.get(info_id)
        if ev is None:
            known = ", ".join(st.evidence.by_id) or "none yet"
            raise ToolError(f"unknown information id {info_id!r}; the ids you have seen are: {known}")
        if ev.kind != "image":
            raise ToolError(f"{info_id} is a {ev.kind} item; crop and scale work on pictures only")
        return ev

    def _seen(self, st: EpisodeState, ev: Evidence) -> tuple[int, int]:
        """Size the model last saw the evidence at; before it was shown, its default observation size."""
        if ev.seen_size:
            return ev.seen_size
        w, h = st.evidence.raw_size(ev)
        return target_size(w, h, st.config.obs_pixels, patch=self.patch)

    def seen_box(self, st: EpisodeState, ev: Evidence, bbox: list[float]) -> tuple[list[float], tuple[int, int]]:
        """(the box in pixels of the view the model saw, that view's size), whatever convention it wrote in."""
        seen = self._seen(st, ev)
        return to_seen(bbox, seen, self.coords), seen

    def crop(
        self, st: EpisodeState, info_id: str, bbox: list[float], node_id: str, mapper=None
    ) -> tuple[Evidence, list[int]]:
        """A crop of `info_id` as new evidence, and its box in the raw pixels of the source unit.

        `mapper(box_seen, seen_size, raw_size)` maps the box (default: agent.tools.map_bbox, padded 28 px)."""
        t0 = time.perf_counter()
        try:
            self._delay("crop")
            return self._crop(st, info_id, bbox, node_id, mapper)
        finally:
            self.tool_s += time.perf_counter() - t0
            self.spans.append(("crop", t0, time.perf_counter()))

    def _crop(
        self, st: EpisodeState, info_id: str, bbox: list[float], node_id: str, mapper
    ) -> tuple[Evidence, list[int]]:
        src = self.image_evidence(st, info_id)
        raw = st.evidence.raw_size(src)
        box_seen, seen = self.seen_box(st, src, bbox)
        box = (mapper or map_bbox)(box_seen, seen, raw)
        full_box = compose_box(src.crop_box, box)
        ev = st.evidence.derive(src, node_id, crop_box=full_box, scale=1.0)
        if self.ocr_crops:
            ev.text = self._read(st, ev) or src.text
        return ev, full_box

    def scale(self, st: EpisodeState, info_id: str, factor: float, node_id: str) -> Evidence:
        src = self.image_evidence(st, info_id)
        scaled_budget(st.config.obs_pixels, factor, st.config.max_image_pixels)  # validates the range
        return st.evidence.derive(src, node_id, scale=float(factor))

    def _read(self, st: EpisodeState, ev: Evidence) -> str:
        ocr = getattr(self.retriever, "ocr", None)
        if ocr is None:
            return ""
        cap, floor = st.config.max_image_pixels, OBS_MIN_PIXELS
        want = target_size(*st.evidence.raw_size(ev), cap, floor, self.patch)
        img = resize_for_model(st.evidence.raw_image(ev, at_least=want), cap, floor, self.patch)
        t0 = time.perf_counter()
        try:
            return ocr.read(img).text
        finally:
            self.retrieval_s += time.perf_counter() - t0

    def read_view(self, st: EpisodeState, image) -> list[dict[str, Any]]:
        """With `read_pictures` set, a text part holding what its OCR engine reads in `image`, the picture exactly
        as it is shown (so print too small at that size stays unread until a crop enlarges it); else nothing.
        Readings are kept per process by the picture's pixels."""
        name = st.config.read_pictures
        if not name:
            return []
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        key = (name, rgb.size, hashlib.blake2b(rgb.tobytes(), digest_size=16).digest())
        with _READ_LOCK:
            text = _READ.get(key)
        if text is None:
            from retrieval.ocr import get_ocr

            t0 = time.perf_counter()
            try:
                text = " ".join(get_ocr(name).read(rgb).text.split())
            except (RetrievalError, ImportError, OSError) as e:  # a missing engine: say so, keep the episode
                return [{"type": "text", "text": f"\n(its text could not be read: {e})"}]
            finally:
                self.tool_s += time.perf_counter() - t0
            with _READ_LOCK:
                _READ[key] = text
                while len(_READ) > READ_KEEP:
                    _READ.popitem(last=False)
        return [{"type": "text", "text": f"\n{text}" if text else "\n(no text can be read in it)"}]

    # -- showing evidence -----------------------------------------------------------------------------
    def budget(self, st: EpisodeState, ev: Evidence, share: int | None = None) -> tuple[int, int]:
        """(max, min) pixels for showing `ev` as a fresh observation."""
        cfg = st.config
        top = share if share is not None else cfg.obs_pixels
        if ev.scale != 1.0:
            top = scaled_budget(top, ev.scale, cfg.max_image_pixels)
        low = min(OBS_MIN_PIXELS, top) if ev.crop_box else 0  # crops are enlarged: that is the zoom
        return top, low

    def show(
        self, st: EpisodeState, ids: list[str], share: int | None = None, header: str = ""
    ) -> list[dict[str, Any]]:
        """Content parts presenting evidence to the model: a label, then its image(s) or text excerpt."""
        parts: list[dict[str, Any]] = [{"type": "text", "text": header}] if header else []
        for info_id in ids:
            ev = st.evidence.get(info_id)
            if ev is None:
                continue
            label = f"{ev.info_id} ({ev.citation()})"
            if ev.kind == "text":
                parts.append({"type": "text", "text": f"{label}:\n{ev.text[:TEXT_EXCERPT]}"})
                continue
            try:
                parts += self._show_pixels(st, ev, label, share)
            except Exception as e:  # noqa: BLE001 - a file that vanished or broke must not end the episode
                parts.append(
                    {
                        "type": "text",
                        "text": f"{label}: its pixels could not be loaded ({e}); text: {ev.text[:TEXT_EXCERPT]}",
                    }
                )
        return parts

    def _show_pixels(self, st: EpisodeState, ev: Evidence, label: str, share: int | None) -> list[dict[str, Any]]:
        top, low = self.budget(st, ev, share)
        if ev.kind == "video":
            # the whole clip, sampled as every protocol samples it (agent/media.py `sample_times`: 1 fps, at most
            # 32 frames, across its span), each frame at the per-frame cap a vimrag tool response uses
            times = st.evidence.sampled_times(ev)
            parts: list[dict[str, Any]] = [{"type": "text", "text": f"{label}, {len(times)} frames:"}]
            for (img, flabel), t in zip(st.evidence.frames(ev, times), times):
                view = resize_for_model(img, st.config.max_frame_pixels, 0, self.patch, st.resize_cache)
                image = {"type": "image", "image": view, "ref": ev.info_id, "time": t}
                parts += [{"type": "text", "text": flabel}, image]
            return parts
        want = target_size(*st.evidence.raw_size(ev), top, low, self.patch) if ev.crop_box else None
        view = resize_for_model(st.evidence.raw_image(ev, at_least=want), top, low, self.patch, st.resize_cache)
        ev.seen_size = view.size
        return [
            {"type": "text", "text": label + ":"},
            {"type": "image", "image": view, "ref": ev.info_id},
            *self.read_view(st, view),
        ]


def count_context(messages: list[dict[str, Any]], patch: int = 28) -> tuple[int, int, int]:
    """(image pixels, estimated visual tokens, estimated text tokens) of a message list.

    Pixels are counted as the model sees them: an image off the patch grid is snapped as the processor will."""
    from agent.media import model_view

    pixels = vtok = chars = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
            continue
        for p in content or []:
            if p.get("type") == "image":
                w, h = model_view(*p["image"].size, patch, p.get("max_pixels"))
                pixels += w * h
                vtok += visual_tokens(w, h, patch)
            elif p.get("type") == "text":
                chars += len(p.get("text", ""))
    return pixels, vtok, chars // 4  # ~4 characters per token for English text


def strip_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as stored in traces: each image part becomes its reference and size."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = [_image_record(p) if p.get("type") == "image" else dict(p) for p in content]
        out.append({**m, "content": content})
    return out


def _image_record(part: dict[str, Any]) -> dict[str, Any]:
    """An image part as traces keep it: what it shows and its size, never its pixels."""
    rec = {"type": "image", "ref": part.get("ref", ""), "width": part["image"].width, "height": part["image"].height}
    for key in ("time", "mime"):
        if part.get(key) is not None:
            rec[key] = part[key]
    return rec
