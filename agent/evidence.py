"""The episode's evidence: every picture, video and text the model was shown, under a stable information id.

Ids are numbered over the whole episode ("Picture 3", "Video 1", "Text 2"), so an item memorized early
keeps its name in later turns. A crop or scaled view is a new piece of evidence derived from another; it
records its box in the source-frame pixels of its unit (an image file's own pixels, a PDF page's at 200 dpi),
so citations point at the original file, and its pixels are cut from that source, never from a smaller copy.
Images are loaded lazily and cached, so re-rendering the context each turn costs no decoding.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from retrieval.loaders import PAGE_DPI, fit_pixels
from retrieval.units import Unit

log = logging.getLogger(__name__)

RAW_MAX_PIXELS = 4_000_000  # the display raster (OCR, drawings): the source, shrunk to this when larger
SOURCE_MAX_PIXELS = 40_000_000  # a source held whole (a 5334x3000 photo is 16 MP); larger ones are held shrunk
MAX_ZOOM = 6.0  # a page region is rendered at up to 6 x 200 = 1,200 dpi; past that it is enlarged
REGION_MAX_PIXELS = 16_000_000  # and never to more pixels than this
KIND_LABEL = {"image": "Picture", "video": "Video", "text": "Text"}


def model_kind(modality: str) -> str:
    """What the model sees: pages and images are pictures, clips are videos, chunks are text."""
    return {"page": "image", "image": "image", "video": "video"}.get(modality, "text")


@dataclass
class Evidence:
    info_id: str
    unit: Unit
    node_id: str  # the node whose action produced it
    score: float = 0.0
    crop_box: list[int] | None = None  # in the unit's source-frame pixels (EvidenceStore.frame_size)
    scale: float = 1.0  # linear factor of a scaled view, relative to the observation budget
    parent: str = ""  # information id it was derived from (crop/scale)
    text: str = ""  # text known for it: the unit's text, or what was read inside a crop
    seen_size: tuple[int, int] | None = None  # (w, h) as last shown to the model

    @property
    def kind(self) -> str:
        return model_kind(self.unit.modality)

    def citation(self) -> str:
        c = self.unit.citation()
        if self.crop_box:
            c += " region [" + ", ".join(str(int(v)) for v in self.crop_box) + "]"
        return c

    def to_dict(self) -> dict[str, Any]:
        return {
            "info_id": self.info_id,
            "unit": self.unit.to_dict(),
            "node_id": self.node_id,
            "score": self.score,
            "crop_box": self.crop_box,
            "scale": self.scale,
            "parent": self.parent,
            "text": self.text,
            "seen_size": list(self.seen_size) if self.seen_size else None,
            "citation": self.citation(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Evidence":
        seen = d.get("seen_size")
        return cls(
            info_id=d["info_id"],
            unit=Unit.from_dict(d["unit"]),
            node_id=d["node_id"],
            score=d.get("score", 0.0),
            crop_box=d.get("crop_box"),
            scale=d.get("scale", 1.0),
            parent=d.get("parent", ""),
            text=d.get("text", ""),
            seen_size=tuple(seen) if seen else None,
        )


@dataclass
class EvidenceStore:
    by_id: dict[str, Evidence] = field(default_factory=dict)
    raw_max_pixels: int = RAW_MAX_PIXELS
    _counts: dict[str, int] = field(default_factory=dict)
    _raw: dict[str, Any] = field(default_factory=dict)  # unit uid -> PIL image (full, uncropped)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _next_id(self, kind: str) -> str:
        self._counts[kind] = self._counts.get(kind, 0) + 1
        return f"{KIND_LABEL[kind]} {self._counts[kind]}"

    def add_unit(self, unit: Unit, node_id: str, score: float = 0.0) -> Evidence:
        """The evidence for a retrieved unit; a unit already seen keeps its id."""
        for ev in self.by_id.values():
            if ev.unit.uid == unit.uid and ev.crop_box is None and ev.scale == 1.0:
                return ev
        ev = Evidence(self._next_id(model_kind(unit.modality)), unit, node_id, score, text=unit.text)
        self.by_id[ev.info_id] = ev
        return ev

    def derive(
        self, parent: Evidence, node_id: str, crop_box: list[int] | None = None, scale: float = 1.0, text: str = ""
    ) -> Evidence:
        ev = Evidence(
            self._next_id(parent.kind),
            parent.unit,
            node_id,
            parent.score,
            crop_box=crop_box if crop_box is not None else parent.crop_box,
            scale=scale,
            parent=parent.info_id,
            text=text or parent.text,
        )
        self.by_id[ev.info_id] = ev
        return ev

    def get(self, info_id: str) -> Evidence | None:
        return self.by_id.get(info_id)

    # -- pixels ----------------------------------------------------------------------------------------
    # Two rasters per unit. The *source* is the unit at its own resolution, the frame every crop box is in: an
    # image file's own pixels, a PDF page at PAGE_DPI (200, as VRAG renders its page images). Observations and
    # crops are cut from it (or, for a small region of a page, rendered from the PDF at a higher dpi), so what
    # the model sees is never enlarged from a smaller copy than the corpus holds. The *display* raster
    # (`full_image`, the source shrunk to at most `raw_max_pixels` when larger) serves OCR, drawings and thumbnails.
    def full_image(self, unit: Unit):
        """The unit's display raster: its source when that holds at most `raw_max_pixels`, else the source
        shrunk to that (one decode or render per unit either way), cached for the episode."""

        def shrink():
            src = self.source_image(unit)
            if src.width * src.height <= self.raw_max_pixels:
                return src
            return src.resize(fit_pixels(*src.size, self.raw_max_pixels), Image.Resampling.BICUBIC)

        return self._cached(unit.uid, shrink)

    def frame_size(self, unit: Unit) -> tuple[int, int]:
        """(w, h) of the unit's source frame: the image file's own size, or the page at PAGE_DPI."""
        return self._cached(f"{unit.uid}@frame", unit.frame_size)

    def source_image(self, unit: Unit):
        """The unit at its source resolution (frame_size), or shrunk to SOURCE_MAX_PIXELS when it is larger."""
        return self._cached(f"{unit.uid}@source", lambda: _load_source(unit, self.frame_size(unit)))

    def raw_image(self, ev: Evidence, at_least: tuple[int, int] | None = None):
        """The evidence's pixels: its unit's source, or the region of its crop box.

        `at_least` (w, h) is the smallest size the caller will show the crop at. A page region smaller than
        that at 200 dpi is rendered from the PDF at the dpi that reaches it (at most MAX_ZOOM times 200 dpi), so
        a zoom is never an enlargement of a raster; an image file has no more pixels than its own."""
        if not ev.crop_box:
            return self.source_image(ev.unit)
        box = tuple(int(v) for v in ev.crop_box)
        bw, bh = box[2] - box[0], box[3] - box[1]
        zoom = 1.0
        if at_least and ev.unit.modality == "page" and Path(ev.unit.source).is_file():  # the PDF is here
            zoom = min(MAX_ZOOM, max(1.0, at_least[0] / max(1, bw), at_least[1] / max(1, bh)))
            zoom = min(zoom, max(1.0, math.sqrt(REGION_MAX_PIXELS / max(1, bw * bh))))
        if zoom > 1.0:
            zbox = (
                math.floor(box[0] * zoom),
                math.floor(box[1] * zoom),
                math.ceil(box[2] * zoom),
                math.ceil(box[3] * zoom),
            )
            return self._cached(
                f"{ev.unit.uid}#{box}@x{zoom:.4f}",
                lambda: _render_region(ev.unit, zbox, PAGE_DPI * zoom),
            )

        def cut():
            src = self.source_image(ev.unit)
            fw, fh = self.frame_size(ev.unit)
            if src.size == (fw, fh):
                return src.crop(box)
            sx, sy = src.width / fw, src.height / fh  # a giant source held smaller: the box scaled to it
            return src.crop((int(box[0] * sx), int(box[1] * sy), math.ceil(box[2] * sx), math.ceil(box[3] * sy)))

        return self._cached(f"{ev.unit.uid}#{box}", cut)

    def raw_size(self, ev: Evidence) -> tuple[int, int]:
        """(w, h) of the evidence in source-frame pixels: its crop box, or its unit's frame."""
        if ev.crop_box:
            x1, y1, x2, y2 = ev.crop_box
            return int(x2) - int(x1), int(y2) - int(y1)
        return self.frame_size(ev.unit)

    def display_box(self, ev: Evidence) -> list[int] | None:
        """The crop box in `full_image` pixels, for drawing it on the display raster."""
        if not ev.crop_box:
            return None
        (fw, fh), disp = self.frame_size(ev.unit), self.full_image(ev.unit)
        sx, sy = disp.width / fw, disp.height / fh
        x1, y1, x2, y2 = ev.crop_box
        return [round(x1 * sx), round(y1 * sy), round(x2 * sx), round(y2 * sy)]

    def _cached(self, key: str, make):
        with self._lock:
            value = self._raw.get(key)
        if value is None:
            value = make()
            with self._lock:
                self._raw[key] = value
        return value

    def frames(self, ev: Evidence, timestamps: list[float] | None = None) -> list[tuple[Any, str]]:
        """[(PIL frame, "t=mm:ss")] of a video item at its key timestamps (default: the clip's keyframes)."""
        unit = ev.unit
        times = [t for t in (timestamps or []) if unit.start is None or unit.start - 1 <= t <= (unit.end or t) + 1]
        key = f"{unit.uid}@{tuple(times or unit.keyframes)}"
        with self._lock:
            cached = self._raw.get(key)
        if cached is None:
            cached = [
                (img, f"t={_mmss(t)}")
                for t, img in unit.load_frames(times or None, max_pixels=self.raw_max_pixels // 4)
            ]
            with self._lock:
                self._raw[key] = cached
        if ev.crop_box:
            ckey = f"{key}#{tuple(ev.crop_box)}"
            with self._lock:
                crops = self._raw.get(ckey)
            if crops is None:
                crops = [(img.crop(tuple(ev.crop_box)), label) for img, label in cached]
                with self._lock:
                    self._raw[ckey] = crops
            return crops
        return cached

    def sampled_times(self, ev: Evidence) -> list[float]:
        """Seconds (in the video file) of the frames the VimRAG demo samples from this clip: 1 fps, at most 32,
        across its whole span (agent/media.py, `sample_times`)."""
        from agent.media import sample_times

        unit = ev.unit
        key = f"{unit.uid}@sampled"
        with self._lock:
            cached = self._raw.get(key)
        if cached is None:
            from retrieval.loaders import video_info

            info = video_info(unit.source)
            start = unit.start or 0.0
            end = unit.end if unit.end is not None else info.duration
            cached = sample_times(start, end, info.fps)
            with self._lock:
                self._raw[key] = cached
        return cached

    def images_for(self, info_id: str, timestamps: list[float] | None = None) -> list[tuple[Any, str]]:
        """Raw images for an information id, for the renderer: one picture, a video's frames, or none."""
        ev = self.by_id.get(info_id)
        if ev is None or ev.kind == "text":
            return []
        if ev.kind == "video":
            return self.frames(ev, timestamps)
        return [(self.raw_image(ev), ev.citation())]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: v.to_dict() for k, v in self.by_id.items()}

    @classmethod
    def from_dict(cls, d: dict[str, dict[str, Any]]) -> "EvidenceStore":
        """Rebuild from a trace's `evidence`, so its pictures can be drawn again (files must still exist)."""
        store = cls()
        for info_id, ev in d.items():
            store.by_id[info_id] = Evidence.from_dict(ev)
            kind = store.by_id[info_id].kind
            store._counts[kind] = store._counts.get(kind, 0) + 1
        return store

    def thumbnail(self, item, size: int = 256):
        """A small picture of a memorized item for drawings (None for text, or when the file is gone)."""
        ev = self.by_id.get(item.info_id)
        try:
            if ev is not None and ev.kind == "image" and not ev.crop_box:  # the display raster is enough
                imgs = [(self.full_image(ev.unit), "")]
            else:
                imgs = self.images_for(item.info_id, item.key_timestamps)
        except Exception:  # noqa: BLE001 - a drawing must not fail because a source file moved
            return None
        if not imgs:
            return None
        thumb = imgs[0][0].copy()
        thumb.thumbnail((size, size))
        return thumb


def _mmss(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"


def _load_source(unit: Unit, frame: tuple[int, int]):
    """The unit's source raster; a source over SOURCE_MAX_PIXELS (a poster page, a giant scan) is held shrunk,
    so one picture cannot take gigabytes, and its crops are enlarged from that by at most the shrink factor."""
    if frame[0] * frame[1] > SOURCE_MAX_PIXELS:
        log.warning(
            "%s is %dx%d pixels at source resolution, over the %d MP held per picture; crops of it are cut "
            "from a copy shrunk to fit",
            unit.citation(),
            *frame,
            SOURCE_MAX_PIXELS // 1_000_000,
        )
    if unit.modality in ("page", "image"):
        return unit.load_image(max_pixels=SOURCE_MAX_PIXELS, dpi=PAGE_DPI)
    return unit.load_image(max_pixels=RAW_MAX_PIXELS)


def _render_region(unit: Unit, box: tuple[int, int, int, int], dpi: float):
    from retrieval import loaders

    return loaders.render_pdf_region(unit.source, unit.page or 1, box, dpi)
