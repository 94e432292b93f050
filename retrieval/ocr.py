"""OCR for units without a text layer: images, video frames and scanned PDF pages.

Two engines sit behind one interface, `OcrEngine.read(image) -> OcrResult`:

- `RapidOcrEngine`: rapidocr-onnxruntime (PP-OCRv4 detection and recognition). Its models ship inside
  the wheel, so it works offline with nothing else installed. Its stock CTC decoding drops many spaces in
  English ("studyfact-checking"), because the recogniser is trained mostly on Chinese and seldom makes
  "space" its top guess at word gaps. We decode the same network output ourselves and also emit a space
  where the space class gets a small but real probability in the blank frames between two characters
  (`space_prob`), which restores most word boundaries without touching the characters themselves.
- `TesseractEngine`: the `tesseract` binary (Debian `tesseract-ocr`) run as a subprocess with TSV output.
  It needs a system package; on our pages it is about 5x faster and slightly less accurate.

Both return line boxes, and one pure function (`reading_order`) turns boxes into text, so the engines
differ only in what they recognise. Reading order: whitespace gaps cut the page into blocks (recursive
XY-cut: wide horizontal gaps first, then vertical gutters, which separates the columns of a two-column
paper); inside a block, boxes that overlap vertically form a line, lines go top to bottom, boxes in a line
left to right joined by spaces, lines joined by newlines.

Speed (issue 15). Recognition dominates: every line is resized to 48 px high, so its cost grows with
the line's length, not the page's resolution. `RapidOcrEngine` therefore detects lines on a reduced copy
of the page's inked area (margins and blank pages cost nothing), cuts each line from the full-resolution
image, cuts line boxes at blank stretches (a column gutter the reduced detection bridged), and
recognises lines sorted by width in batches padded only to their widest line (rapidocr pads every
batch to at least 320 px). `pipeline="rapidocr"` keeps rapidocr's own loop for comparison.

`get_ocr("auto")` picks the engine that measured most accurate in `python -m eval.bench_ocr`: rapidocr,
else tesseract. Ask for "tesseract" to trade a little accuracy for speed. Engines are created once per
process and cached; models load on first use.
Left out on purpose: language packs other than English for tesseract, rotated-page detection, and
dehyphenation (the text stays as printed).
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Protocol, runtime_checkable

from retrieval.errors import RetrievalError, missing_dependency

ENGINES = ("rapidocr", "tesseract")
CHOICES = ("auto", "none") + ENGINES
# What "auto" prefers, most accurate first. `python -m eval.bench_ocr`, 60 MMLongBench-Doc pages at 144 dpi
# against their text layers: rapidocr CER 0.282, bag-of-words F1 0.961, 0.13 pages/s; tesseract 5.3.0 CER
# 0.293, F1 0.931, 0.63 pages/s (F1 better for rapidocr on 35 pages, for tesseract on 21).
AUTO_ORDER = ("rapidocr", "tesseract")
TESSERACT_HINT = "install it with: apt-get install tesseract-ocr (or brew install tesseract), then retry"


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


# ---------------------------------------------------------------------------------------------------
# Reading order: a pure function of the boxes, shared by every engine.


def reading_order(boxes: list[OcrBox], columns: bool = True) -> list[list[OcrBox]]:
    """Group boxes into lines in reading order.

    With `columns`, whitespace first cuts the page into blocks (XY-cut), so a two-column page is read
    column by column; without it, boxes at the same height are one line across the whole page.
    """
    boxes = [b for b in boxes if b.text.strip()]
    if not boxes:
        return []
    # Gaps are measured in line heights, so the same thresholds hold at any resolution.
    h = max(1.0, median(b.height for b in boxes))
    blocks = _xy_cut(boxes, h) if columns else [boxes]
    return [line for block in blocks for line in _lines(block)]


def layout_text(boxes: list[OcrBox], columns: bool = True) -> str:
    """The text of the boxes in reading order: boxes on a line joined by spaces, lines by newlines."""
    return "\n".join(" ".join(b.text.strip() for b in line) for line in reading_order(boxes, columns))


def _lines(boxes: list[OcrBox]) -> list[list[OcrBox]]:
    """Boxes that overlap vertically by half the smaller height form a line; lines top to bottom."""
    lines: list[tuple[list[OcrBox], list[float]]] = []  # (boxes, [y1, y2] span of the line)
    for b in sorted(boxes, key=lambda b: (b.box[1] + b.box[3]) / 2):
        for members, span in lines:
            overlap = min(span[1], b.box[3]) - max(span[0], b.box[1])
            if overlap >= 0.5 * max(1, min(b.height, span[1] - span[0])):
                members.append(b)
                span[0], span[1] = min(span[0], b.box[1]), max(span[1], b.box[3])
                break
        else:
            lines.append(([b], [b.box[1], b.box[3]]))
    lines.sort(key=lambda m: sum((b.box[1] + b.box[3]) / 2 for b in m[0]) / len(m[0]))
    return [sorted(members, key=lambda b: b.box[0]) for members, _ in lines]


def _gaps(intervals: list[tuple[int, int]], min_gap: float) -> list[float]:
    """Cut positions in the empty stretches (at least `min_gap` wide) between 1-D intervals."""
    cuts, end = [], None
    for a, b in sorted(intervals):
        if end is not None and a - end >= min_gap:
            cuts.append((a + end) / 2)
        end = b if end is None else max(end, b)
    return cuts


def _split(boxes: list[OcrBox], cuts: list[float], axis: int) -> list[list[OcrBox]]:
    parts: list[list[OcrBox]] = [[] for _ in range(len(cuts) + 1)]
    for b in boxes:
        centre = (b.box[axis] + b.box[axis + 2]) / 2
        parts[sum(centre > c for c in cuts)].append(b)
    return [p for p in parts if p]


def _xy_cut(boxes: list[OcrBox], h: float, hgap: float = 0.8, vgap: float = 0.8) -> list[list[OcrBox]]:
    """Recursive XY-cut: split at wide horizontal gaps, else at vertical gutters, else it is one block.

    Horizontal cuts come first so a full-width title is split off before the columns under it;
    inter-line gaps (about 0.2 line heights) are far below `hgap`, paragraph breaks are not. A gutter
    crossed by a few boxes (a centred page number, a full-width equation) still separates columns:
    the crossing boxes become blocks of their own, at their height.
    """
    if len(boxes) < 2:
        return [boxes]
    cuts = _gaps([(b.box[1], b.box[3]) for b in boxes], hgap * h)
    if cuts:
        return [blk for part in _split(boxes, cuts, 1) for blk in _xy_cut(part, h, hgap, vgap)]
    cuts = _gaps([(b.box[0], b.box[2]) for b in boxes], vgap * h)
    parts = _split(boxes, cuts, 0)
    if cuts and all(_is_text_column(p, h) for p in parts):
        return [blk for part in parts for blk in _xy_cut(part, h, hgap, vgap)]
    spanners = _gutter_spanners(boxes, vgap * h, h)
    if not spanners:
        return [boxes]
    spanners.sort(key=lambda b: b.box[1])
    rest = [b for b in boxes if all(b is not s for s in spanners)]
    cuts = [(s.box[1] + s.box[3]) / 2 for s in spanners]
    segments: list[list[OcrBox]] = [[] for _ in range(len(cuts) + 1)]
    for b in rest:
        segments[sum((b.box[1] + b.box[3]) / 2 > c for c in cuts)].append(b)
    blocks: list[list[OcrBox]] = []
    for i, seg in enumerate(segments):
        blocks += _xy_cut(seg, h, hgap, vgap) if seg else []
        if i < len(spanners):
            blocks.append([spanners[i]])
    return blocks


def _gutter_spanners(boxes: list[OcrBox], min_gap: float, h: float) -> list[OcrBox]:
    """The few boxes (at most a tenth) that cross an otherwise empty vertical gutter; [] when none does."""
    import numpy as np

    n = len(boxes)
    if n < 6:
        return []
    x0 = min(b.box[0] for b in boxes)
    width = max(b.box[2] for b in boxes) - x0
    cover = np.zeros(width + 1, dtype=np.int32)  # (width + 1,) boxes covering each pixel column
    for b in boxes:
        cover[b.box[0] - x0 : b.box[2] - x0] += 1
    limit = max(1, n // 10)
    low = np.concatenate([[0], (cover <= limit).astype(np.int8), [0]])  # (width + 3,)
    edges = np.flatnonzero(np.diff(low))  # alternating run starts and ends
    runs = sorted(zip(edges[::2], edges[1::2]), key=lambda r: r[0] - r[1])  # widest first
    for a, z in runs:
        if z - a < min_gap or a == 0 or z >= width:
            continue  # too narrow, or a margin rather than a gutter
        lo, hi = x0 + a, x0 + z
        left = sum(b.box[2] <= lo for b in boxes)
        right = sum(b.box[0] >= hi for b in boxes)
        crossing = [b for b in boxes if b.box[0] < hi and b.box[2] > lo]
        if left >= 3 and right >= 3 and len(crossing) <= limit:
            sides = ([b for b in boxes if b.box[2] <= lo], [b for b in boxes if b.box[0] >= hi])
            if all(_is_text_column(side, h) for side in sides):
                return crossing
    return []


def _is_text_column(boxes: list[OcrBox], h: float, min_width: float = 6.0) -> bool:
    """Whether boxes look like lines of prose (median width >= 6 line heights, about a dozen characters).

    Table cells and form fields are narrower, so a table is read row by row, as its text layer is.
    """
    return median(b.box[2] - b.box[0] for b in boxes) >= min_width * h


# ---------------------------------------------------------------------------------------------------
# Image preparation shared by the engines.


def _prepare(image, max_side: int, min_side: int):
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
    if long_side > max_side:
        factor = max_side / long_side
    elif 0 < long_side < min_side:
        # Small crops and thumbnails: text a few pixels high is below what the models were trained on.
        factor = min(min_side / long_side, 4.0)
    if factor != 1.0:
        size = (max(1, round(w * factor)), max(1, round(h * factor)))
        image = image.resize(size, Image.LANCZOS if factor < 1 else Image.BICUBIC)
    return image, factor


def _unscale(box: tuple[float, float, float, float], factor: float, size: tuple[int, int]) -> tuple[int, int, int, int]:
    w, h = size
    x1, y1, x2, y2 = (v / factor for v in box)
    return (max(0, int(x1)), max(0, int(y1)), min(w, int(round(x2))), min(h, int(round(y2))))


# ---------------------------------------------------------------------------------------------------
# RapidOCR


class _SpaceAwareCtcDecode:
    """Greedy CTC decoding of PP-OCR recogniser output that also restores dropped spaces.

    Stock decoding keeps the argmax of each frame. In English text the argmax at a word gap is often
    "blank" rather than "space", so words run together. Here a space is also emitted between two
    characters when any blank frame between them gives the space class at least `space_prob`.
    The threshold was chosen on 12 rendered pages (0.02: CER 0.316 -> 0.293, median 0.161 -> 0.117).
    """

    def __init__(self, character: list[str], space_prob: float) -> None:
        self.character = character
        self.space_id = len(character) - 1  # rapidocr appends " " as the last class and blank as class 0
        self.space_prob = space_prob

    def __call__(self, preds, return_word_box: bool = False, **kwargs) -> list[tuple[str, float]]:
        ids = preds.argmax(axis=2)  # (batch, frames)
        probs = preds.max(axis=2)  # (batch, frames)
        out = []
        for b in range(preds.shape[0]):
            chars: list[str] = []
            confs: list[float] = []
            prev, last_t = 0, -1  # previous frame's class, frame of the last emitted character
            for t, c in enumerate(ids[b]):
                c = int(c)
                if c != 0 and c != prev:
                    gap = preds[b, last_t + 1 : t, self.space_id]  # (gap frames,)
                    if (
                        chars
                        and c != self.space_id
                        and chars[-1] != " "
                        and gap.size
                        and float(gap.max()) >= self.space_prob
                    ):
                        chars.append(" ")
                    chars.append(self.character[c])
                    confs.append(float(probs[b, t]))
                if c != 0:
                    last_t = t
                prev = c
            out.append(("".join(chars), sum(confs) / len(confs) if confs else 0.0))
        return out


class RapidOcrEngine:
    """PP-OCRv4 through rapidocr-onnxruntime; its models ship in the wheel, so no download is needed.

    `space_prob=None` keeps rapidocr's stock decoding (it drops spaces in English);
    `upside_down=True` turns rapidocr's 180-degree line classifier back on.

    `pipeline="split"` (the default) detects lines on a copy of the page's inked area reduced to
    `det_side` px, then recognises crops cut from the full-resolution image, sorted by width and padded
    only to the widest crop of their batch. `pipeline="rapidocr"` runs rapidocr's own loop on the whole
    image at its own size (the configuration before issue 15, kept for `eval.bench_ocr`).
    """

    name = "rapidocr"
    PIPELINES = ("split", "rapidocr")

    def __init__(
        self,
        space_prob: float | None = 0.02,
        max_side: int = 2000,
        min_side: int = 0,
        columns: bool = True,
        threads: int = -1,
        min_conf: float = 0.5,
        upside_down: bool = False,
        pipeline: str = "split",
        det_side: int | None = 1280,
        rec_height: int = 48,
        rec_batch: int = 8,
        split_gap: float | None = 0.8,
    ) -> None:
        # min_side=0: no upscaling. The recogniser resizes every line to 48 px high anyway, and upscaling
        # hurt: 8 px text on a 100x14 image read perfectly as is, with 4 errors in 21 chars at 4x.
        if pipeline not in self.PIPELINES:
            raise ValueError(f"unknown rapidocr pipeline {pipeline!r}; choose one of {', '.join(self.PIPELINES)}")
        self.space_prob = space_prob
        self.max_side = max_side
        self.min_side = min_side
        self.columns = columns
        self.threads = threads
        self.min_conf = min_conf
        self.upside_down = upside_down  # run rapidocr's 180-degree line classifier
        self.pipeline = pipeline
        self.det_side = det_side  # long side of the detector's input; None: the image's own size
        # The recogniser's line height. PP-OCRv4 was trained at 48; on 10 bench pages 40 px cut BoW F1 from
        # 0.937 to 0.864 and 32 px to 0.500, so the cost of recognition stays what it is.
        self.rec_height = rec_height
        self.rec_batch = rec_batch
        self.split_gap = split_gap  # cut line boxes at blank stretches this many line heights wide
        self._ocr = None
        self._lock = threading.Lock()

    def _load(self):
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as e:
            raise missing_dependency("rapidocr-onnxruntime==1.4.4", None, "OCR of images and scanned pages") from e
        # det_limit_type="max": detect at the image's own size (capped at 2000 px). The stock "min" mode
        # scales the short side up to 736 px, so a 900x120 banner was detected at 5520x736 (17 s).
        # use_cls: the 180-degree line classifier flipped justified lines with wide word gaps and turned
        # them into garbage ("s in" for a 90-character line); upside-down lines are rare in our inputs.
        # det_use_dilation: the detector's 2x2 dilation is meant for maps at the page's own size; on a
        # reduced copy it closed the gutter of a two-column page, and one box spanning both columns
        # scrambled the reading order (page CER 0.09 -> 0.74 at 1280 px; 0.09 without dilation).
        split = self.pipeline == "split"
        ocr = RapidOCR(
            intra_op_num_threads=self.threads,
            text_score=self.min_conf,
            det_limit_type="max",
            use_cls=self.upside_down,
            det_use_dilation=not split,
        )
        if self.space_prob is not None:
            rec = getattr(ocr, "text_rec", None)
            stock = getattr(rec, "postprocess_op", None)
            character = getattr(stock, "character", None)
            if not character or character[-1] != " ":
                raise RetrievalError(
                    "this rapidocr-onnxruntime version has no recogniser decoder to restore spaces with; "
                    "install rapidocr-onnxruntime==1.4.4 or create RapidOcrEngine(space_prob=None)"
                )
            rec.postprocess_op = _SpaceAwareCtcDecode(character, self.space_prob)
        if split:
            for holder in (ocr.text_det.infer, ocr.text_rec.session, ocr.text_cls.infer):
                holder.session = _quiet_session(holder.session._model_path, self.threads)
        return ocr

    def read(self, image) -> OcrResult:
        import numpy as np

        prepared, factor = _prepare(image, self.max_side, self.min_side)
        bgr = np.ascontiguousarray(np.asarray(prepared)[:, :, ::-1])  # (h, w, 3) BGR, as rapidocr expects
        with self._lock:  # the ONNX sessions are shared; one reader at a time keeps memory predictable
            if self._ocr is None:
                self._ocr = self._load()
            found = self._read_split(bgr) if self.pipeline == "split" else (self._ocr(bgr)[0] or [])
        boxes = []
        for quad, text, conf in found:
            xs = [p[0] for p in quad]
            ys = [p[1] for p in quad]
            if text.strip():
                box = _unscale((min(xs), min(ys), max(xs), max(ys)), factor, image.size)
                boxes.append(OcrBox(box, text.strip(), float(conf)))
        return OcrResult(layout_text(boxes, self.columns), boxes, self.name)

    def _read_split(self, bgr) -> list[tuple[Any, str, float]]:
        """(quad, text, conf) for each line: detection on a reduced copy, recognition at full resolution."""
        import cv2
        import numpy as np

        o = self._ocr
        h, w = bgr.shape[:2]
        f = min(1.0, self.det_side / max(h, w)) if self.det_side else 1.0
        small = (
            cv2.resize(bgr, (max(1, round(w * f)), max(1, round(h * f))), interpolation=cv2.INTER_AREA)
            if f < 1
            else bgr
        )
        fx, fy = small.shape[1] / w, small.shape[0] / h
        x0, y0, x1, y1 = ink_box(small)
        if x1 <= x0:
            return []  # a blank page: nothing to detect
        region = small[y0:y1, x0:x1]
        rh, rw = region.shape[:2]
        img, ratio_h, ratio_w = o.preprocess(region)  # rapidocr's own size limits and letterbox for strips
        img, record = o.maybe_add_letterbox(img, {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}})
        quads, _ = o.auto_text_det(img)
        if quads is None:
            return []
        quads = o._get_origin_points(quads, record, rh, rw)  # (n, 4, 2) in region pixels
        quads = (quads + np.array([x0, y0], np.float32)) / np.array([fx, fy], np.float32)  # full-image pixels
        quads = [np.ascontiguousarray(q, dtype=np.float32) for q in quads]
        if self.split_gap:
            quads = [piece for q in quads for piece in split_at_gaps(bgr, q, self.split_gap)]
        crops = o.get_crop_img_list(bgr, quads)
        if self.upside_down:
            crops, _, _ = o.text_cls(crops)
        return [(q, text, conf) for q, (text, conf) in zip(quads, self._recognise(crops)) if conf >= self.min_conf]

    def _recognise(self, crops: list) -> list[tuple[str, float]]:
        """Text and confidence per crop, in batches of similar width padded only to their widest crop.

        rapidocr pads every batch to at least 320 px (6.7 line heights), so a page of short table cells
        paid for mostly padding.
        """
        import cv2
        import numpy as np

        rec = self._ocr.text_rec
        hgt = self.rec_height
        widths = [max(8, math.ceil(hgt * c.shape[1] / max(1, c.shape[0]))) for c in crops]
        order = sorted(range(len(crops)), key=widths.__getitem__)
        out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        for start in range(0, len(order), self.rec_batch):
            idx = order[start : start + self.rec_batch]
            batch = np.zeros((len(idx), 3, hgt, widths[idx[-1]]), np.float32)  # (b, 3, H, W); 0 is grey
            for j, i in enumerate(idx):
                line = cv2.resize(crops[i], (widths[i], hgt)).astype(np.float32)  # (H, w, 3)
                batch[j, :, :, : widths[i]] = line.transpose(2, 0, 1) / 127.5 - 1.0
            preds = rec.session(batch)[0]  # (b, frames, classes)
            for i, res in zip(idx, rec.postprocess_op(preds)):
                out[i] = (res[0], float(res[1]))
        return out


def split_at_gaps(bgr, quad, gap: float, threshold: int = 40) -> list:
    """An upright line box cut at blank stretches at least `gap` line heights wide, blank ends dropped.

    A detector working on a reduced page sometimes joins a line of the left column to the line beside
    it in the right one (an arXiv gutter is about one line height), which scrambles the reading order;
    blank stretches are also recognition time spent on nothing. 0.8 line heights is the gap the reading
    order already treats as a column gutter; word spaces are about 0.3. Slanted boxes are returned as
    they are.
    """
    import numpy as np

    xs, ys = quad[:, 0], quad[:, 1]
    x1, x2, y1, y2 = int(xs.min()), int(np.ceil(xs.max())), int(ys.min()), int(np.ceil(ys.max()))
    h = y2 - y1
    slant = max(2.0, 0.01 * (x2 - x1))  # two lines joined at slightly different heights tilt the box
    if h < 4 or x2 - x1 < 2 * h or np.ptp(ys[[0, 1]]) > slant or np.ptp(xs[[0, 3]]) > slant:
        return [quad]
    grey = bgr[y1:y2, x1:x2].min(axis=2)  # (h, w)
    ink = (np.abs(grey.astype(np.int16) - int(np.median(grey))) > threshold).any(axis=0)  # (w,)
    cols = np.flatnonzero(ink)
    if cols.size == 0:
        return [quad]
    pieces, start, last = [], cols[0], cols[0]
    for c in cols[1:]:
        if c - last > gap * h:
            pieces.append((start, last))
            start = c
        last = c
    pieces.append((start, last))
    if len(pieces) == 1:
        return [quad]
    pad = h // 4  # the detector's boxes leave about this much margin around the ink
    out = []
    for a, b in pieces:
        left, right = max(x1, x1 + a - pad), min(x2, x1 + b + 1 + pad)
        out.append(np.array([[left, y1], [right, y1], [right, y2], [left, y2]], np.float32))
    return out


def _quiet_session(model_path: str, threads: int):
    """An ONNX Runtime CPU session whose worker threads sleep rather than spin between operators.

    Spinning threads take cores from everything else on a busy machine (ingestion encodes text in the
    same process); on this shared 2-core box a batch of 8 lines took 3.6 s with spinning threads and
    2.9 s without. The memory arena is on: rapidocr turns it off and then reallocates every batch.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads > 0:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])


def ink_box(bgr, pad: int = 16, threshold: int = 40) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the part of an image that differs from its background, padded by `pad` px.

    The background is the median grey level, so dark slides and coloured pages work as well as white
    paper; x1 <= x0 when nothing differs (a blank page). The detector's cost grows with its input area,
    and page margins hold no text.
    """
    import numpy as np

    grey = bgr.min(axis=2) if bgr.ndim == 3 else bgr  # (h, w): dark or coloured ink both show up
    bg = np.median(grey[::4, ::4])
    ink = np.abs(grey.astype(np.int16) - int(bg)) > threshold  # (h, w)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if rows.size == 0:
        return 0, 0, 0, 0
    h, w = grey.shape
    return (
        max(0, int(cols[0]) - pad),
        max(0, int(rows[0]) - pad),
        min(w, int(cols[-1]) + 1 + pad),
        min(h, int(rows[-1]) + 1 + pad),
    )


# ---------------------------------------------------------------------------------------------------
# Tesseract


def tesseract_binary() -> str | None:
    """Path of the tesseract binary, or None when it is not installed."""
    return shutil.which("tesseract")


class TesseractEngine:
    """The tesseract binary run per image (TSV output); word boxes are grouped into line boxes."""

    name = "tesseract"

    def __init__(
        self,
        lang: str = "eng",
        psm: int = 3,
        max_side: int = 4000,
        min_side: int = 1000,
        columns: bool = True,
        threads: int = 1,
        timeout_s: float = 120.0,
        binary: str | None = None,
    ) -> None:
        # psm 3: automatic page segmentation. Tesseract wants text around 20-30 px high, so small
        # images are upscaled to a 1000 px long side (at most 4x): 8 px text on a 100x14 image read
        # as nothing at native size and with 3 errors in 21 characters upscaled. threads=1: tesseract's OpenMP
        # threads spin when the cores are busy; on this 2-core machine under load a page took 15 s
        # with its default threads and 4 s with one.
        self.lang = lang
        self.threads = threads
        self.psm = psm
        self.max_side = max_side
        self.min_side = min_side
        self.columns = columns
        self.timeout_s = timeout_s
        self.binary = binary or tesseract_binary()
        if self.binary is None:
            raise RetrievalError(f"the tesseract binary is not on PATH; {TESSERACT_HINT}")

    def read(self, image) -> OcrResult:
        prepared, factor = _prepare(image, self.max_side, self.min_side)
        png = io.BytesIO()
        prepared.save(png, format="PNG")
        cmd = [self.binary, "stdin", "stdout", "-l", self.lang, "--psm", str(self.psm), "tsv"]
        try:
            env = {**os.environ, "OMP_THREAD_LIMIT": str(self.threads)}
            proc = subprocess.run(cmd, input=png.getvalue(), capture_output=True, timeout=self.timeout_s, env=env)
        except subprocess.TimeoutExpired as e:
            raise RetrievalError(
                f"tesseract took over {self.timeout_s:.0f} s on a {image.size} image; "
                "pass a smaller image or raise TesseractEngine(timeout_s=...)"
            ) from e
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            raise RetrievalError(
                f"tesseract failed (exit {proc.returncode}): {err[-500:]}; "
                f"check that the '{self.lang}' language data is installed "
                f"(apt-get install tesseract-ocr-{self.lang})"
            )
        boxes = [
            OcrBox(_unscale(b.box, factor, image.size), b.text, b.conf)
            for b in _tsv_lines(proc.stdout.decode("utf-8", errors="replace"))
        ]
        return OcrResult(layout_text(boxes, self.columns), boxes, self.name)


def _tsv_lines(tsv: str) -> list[OcrBox]:
    """Tesseract TSV word rows grouped by (block, paragraph, line) into line boxes, in tesseract's order."""
    groups: dict[tuple[int, int, int, int], list[dict[str, str]]] = {}
    # Words may contain quotes; tesseract does not quote fields, so csv must not interpret them.
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5" or not (row.get("text") or "").strip():
            continue
        key = tuple(int(row[k]) for k in ("page_num", "block_num", "par_num", "line_num"))
        groups.setdefault(key, []).append(row)
    lines = []
    for words in groups.values():
        x1 = min(int(w["left"]) for w in words)
        y1 = min(int(w["top"]) for w in words)
        x2 = max(int(w["left"]) + int(w["width"]) for w in words)
        y2 = max(int(w["top"]) + int(w["height"]) for w in words)
        conf = sum(max(0.0, float(w["conf"])) for w in words) / len(words) / 100.0
        lines.append(OcrBox((x1, y1, x2, y2), " ".join(w["text"].strip() for w in words), conf))
    return lines


# ---------------------------------------------------------------------------------------------------
# Choosing an engine


_CACHE: dict[str, OcrEngine] = {}
_CACHE_LOCK = threading.Lock()


def available_engines() -> list[str]:
    """The engines that can run here, in the order "auto" prefers them."""
    import importlib.util

    have = {
        "rapidocr": importlib.util.find_spec("rapidocr_onnxruntime") is not None,
        "tesseract": tesseract_binary() is not None,
    }
    return [name for name in AUTO_ORDER if have[name]]


def get_ocr(name: str = "auto") -> OcrEngine | None:
    """The OCR engine called `name`, created once per process; "none" gives None.

    "auto" is the best available engine by measured accuracy (see AUTO_ORDER). Asking for an engine
    that is not installed raises an error with the install command.
    """
    key = (name or "auto").strip().lower()
    if key not in CHOICES:
        raise ValueError(f"unknown OCR engine {name!r}; choose one of {', '.join(CHOICES)}")
    if key == "none":
        return None
    if key == "auto":
        found = available_engines()
        if not found:
            raise missing_dependency(
                "rapidocr-onnxruntime==1.4.4", None, "OCR (apt-get install tesseract-ocr also works)"
            )
        key = found[0]
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _create(key)
        return _CACHE[key]


def _create(key: str) -> OcrEngine:
    if key == "tesseract":
        return TesseractEngine()  # raises with the apt-get hint when the binary is missing
    import importlib.util

    if importlib.util.find_spec("rapidocr_onnxruntime") is None:
        raise missing_dependency("rapidocr-onnxruntime==1.4.4", None, "OCR of images and scanned pages")
    return RapidOcrEngine()
