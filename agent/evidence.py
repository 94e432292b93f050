"""The episode's evidence: every picture, video and text the model was shown, under a stable information id.

Ids are numbered over the whole episode ("Picture 3", "Video 1", "Text 2"), so an item memorized early
keeps its name in later turns. A crop or scaled view is a new piece of evidence derived from another; it
records its box in the raw pixels of the source unit's image, so citations point at the original file.
Raw images are loaded lazily and cached, so re-rendering the context each turn costs no decoding.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from retrieval.units import Unit

RAW_MAX_PIXELS = 4_000_000  # pages are rendered at 144 dpi and shrunk to this; crops read from this raster
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
    crop_box: list[int] | None = None  # in raw pixels of the unit's image
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
    def full_image(self, unit: Unit):
        """The unit's raw raster (pages rendered once), cached for the episode."""
        with self._lock:
            img = self._raw.get(unit.uid)
        if img is None:
            img = unit.load_image(max_pixels=self.raw_max_pixels)
            with self._lock:
                self._raw[unit.uid] = img
        return img

    def raw_image(self, ev: Evidence):
        """The evidence's raw pixels: the unit's image, cropped to its box."""
        img = self.full_image(ev.unit)
        if not ev.crop_box:
            return img
        key = f"{ev.unit.uid}#{tuple(ev.crop_box)}"  # the same object every turn, so resized views are reused
        with self._lock:
            crop = self._raw.get(key)
        if crop is None:
            crop = img.crop(tuple(ev.crop_box))
            with self._lock:
                self._raw[key] = crop
        return crop

    def raw_size(self, ev: Evidence) -> tuple[int, int]:
        if ev.crop_box:
            x1, y1, x2, y2 = ev.crop_box
            return x2 - x1, y2 - y1
        return self.full_image(ev.unit).size

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
        try:
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
