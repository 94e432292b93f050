"""What the OCR engines share: line boxes, results, the engine interface and `ImageOcrEngine`, the base that
prepares an image and maps the boxes back to the caller's pixels. retrieval/ocr.py picks an engine; the
engines (there, and retrieval/ocr_rapid.py) build on this module, so neither engine module imports the other's
factory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from retrieval.reading_order import layout_text


@dataclass
class OcrBox:
    """One recognised line (or line piece): its box in image pixels (x1, y1, x2, y2), text and confidence."""

    box: tuple[int, int, int, int]
    text: str
    conf: float  # 0..1

    @property
    def height(self) -> int:
        return self.box[3] - self.box[1]

    def to_dict(self) -> dict[str, Any]:
        return {"box": list(self.box), "text": self.text, "conf": self.conf}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "OcrBox":
        x1, y1, x2, y2 = (int(v) for v in d["box"])
        return cls((x1, y1, x2, y2), str(d["text"]), float(d["conf"]))


@dataclass
class OcrResult:
    """The text of an image in reading order, the boxes it came from, and the engine that read it."""

    text: str
    boxes: list[OcrBox] = field(default_factory=list)
    engine: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "boxes": [b.to_dict() for b in self.boxes], "engine": self.engine}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "OcrResult":
        return cls(str(d["text"]), [OcrBox.from_dict(b) for b in d.get("boxes", [])], str(d.get("engine", "")))


@runtime_checkable
class OcrEngine(Protocol):
    """Anything with a name that reads a PIL image into an `OcrResult`."""

    name: str

    def read(self, image) -> OcrResult: ...


class ImageOcrEngine:
    """Base of the engines: `_prepare` the image, read it, then `_result` maps the boxes back and lays them out.

    max_side / min_side: the long side the engine reads at (larger images are shrunk, smaller ones upscaled
    at most 4x); columns: read multi-column pages column by column (`retrieval.reading_order`); threads:
    CPU threads for the engine's model or binary.
    """

    name = ""

    def __init__(self, max_side: int, min_side: int, columns: bool, threads: int) -> None:
        self.max_side = max_side
        self.min_side = min_side
        self.columns = columns
        self.threads = threads

    def _prepare(self, image):
        """RGB copy of `image` resized into [min_side, max_side] on its long side, and the factor applied.

        Transparent images are flattened on white: dark text on a transparent background would otherwise
        turn black on black.
        """
        from PIL import Image

        if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
            rgba = image.convert("RGBA")
            flat = Image.new("RGB", rgba.size, (255, 255, 255))
            flat.paste(rgba, mask=rgba.getchannel("A"))
            image = flat
        elif image.mode != "RGB":
            image = image.convert("RGB")
        w, h = image.size
        long_side = max(w, h)
        factor = 1.0
        if long_side > self.max_side:
            factor = self.max_side / long_side
        elif 0 < long_side < self.min_side:
            # Small crops and thumbnails: text a few pixels high is below what the models were trained on.
            factor = min(self.min_side / long_side, 4.0)
        if factor != 1.0:
            size = (max(1, round(w * factor)), max(1, round(h * factor)))
            image = image.resize(size, Image.LANCZOS if factor < 1 else Image.BICUBIC)
        return image, factor

    def _result(self, found, factor: float, size: tuple[int, int]) -> OcrResult:
        """The OcrResult of (x1, y1, x2, y2, text, conf) lines read on the prepared image of an image of `size`."""
        w, h = size
        boxes = []
        for x1, y1, x2, y2, text, conf in found:
            if text.strip():
                x1, y1, x2, y2 = (v / factor for v in (x1, y1, x2, y2))
                box = (max(0, int(x1)), max(0, int(y1)), min(w, int(round(x2))), min(h, int(round(y2))))
                boxes.append(OcrBox(box, text.strip(), float(conf)))
        return OcrResult(layout_text(boxes, self.columns), boxes, self.name)
