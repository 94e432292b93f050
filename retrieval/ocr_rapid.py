"""RapidOCR (PP-OCRv4 detection and recognition through rapidocr-onnxruntime), with our own split pipeline.

Its models ship inside the wheel, so it works offline with nothing else installed. Its stock CTC decoding
drops many spaces in English ("studyfact-checking"), because the recogniser is trained mostly on Chinese
and seldom makes "space" its top guess at word gaps. `_SpaceAwareCtcDecode` decodes the same network
output and also emits a space where the space class gets a small but real probability in the blank
frames between two characters (`space_prob`), which restores most word boundaries without touching the
characters themselves.

Speed (issue 15). Recognition dominates: every line is resized to 48 px high, so its cost grows with
the line's length, not the page's resolution. The split pipeline therefore detects lines on a reduced
copy of the page's inked area (`ink_box`: margins and blank pages cost nothing), cuts each line from the
full-resolution image, cuts line boxes at blank stretches (`split_at_gaps`: a column gutter the reduced
detection bridged), and recognises lines sorted by width in batches padded only to their widest line
(rapidocr pads every batch to at least 320 px). Its models run as `retrieval.onnx_fold` rewrites them:
the exported graphs spell out every hard-swish and scalar affine, which took half the recogniser's time.
`pipeline="rapidocr"` keeps rapidocr's own loop for comparison in `python -m eval.bench_ocr`.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from retrieval.errors import RetrievalError, missing_dependency
from retrieval.ocr_engine import ImageOcrEngine, OcrResult


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


class RapidOcrEngine(ImageOcrEngine):
    """PP-OCRv4 through rapidocr-onnxruntime; its models ship in the wheel, so no download is needed.

    `space_prob=None` keeps rapidocr's stock decoding (it drops spaces in English);
    `upside_down=True` turns rapidocr's 180-degree line classifier back on.

    `pipeline="split"` (the default) detects lines on a copy of the page's inked area reduced to
    `det_side` px, then recognises crops cut from the full-resolution image, sorted by width and padded
    only to the widest crop of their batch. `pipeline="rapidocr"` runs rapidocr's own loop on the whole
    image at its own size (the configuration before issue 15, kept for `eval.bench_ocr`). `fold=False`
    loads the split pipeline's models as shipped, not as `retrieval.onnx_fold` rewrites them.
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
        rec_batch: int = 4,
        split_gap: float | None = 0.8,
        fold: bool = True,
    ) -> None:
        # min_side=0: no upscaling. The recogniser resizes every line to 48 px high anyway, and upscaling
        # hurt: 8 px text on a 100x14 image read perfectly as is, with 4 errors in 21 chars at 4x.
        if pipeline not in self.PIPELINES:
            raise ValueError(f"unknown rapidocr pipeline {pipeline!r}; choose one of {', '.join(self.PIPELINES)}")
        super().__init__(max_side, min_side, columns, threads)
        self.space_prob = space_prob
        self.min_conf = min_conf
        self.upside_down = upside_down  # run rapidocr's 180-degree line classifier
        self.pipeline = pipeline
        self.det_side = det_side  # long side of the detector's input; None: the image's own size
        # The recogniser's line height. PP-OCRv4 was trained at 48; on 10 bench pages 40 px cut BoW F1 from
        # 0.937 to 0.864 and 32 px to 0.500, so the cost of recognition stays what it is.
        self.rec_height = rec_height
        # Lines per recogniser call. Per line, on 2 cores, 48 x 600 crops: 10.6 ms at 1, 9.0 at 4, 10.5 at 8
        # (a batch of 8 outgrows the cache).
        self.rec_batch = rec_batch
        self.split_gap = split_gap  # cut line boxes at blank stretches this many line heights wide
        self.fold = fold  # run the split pipeline's models rewritten by retrieval.onnx_fold (same numbers, faster)
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
                holder.session = _quiet_session(holder.session._model_path, self.threads, self.fold)
        return ocr

    def read(self, image) -> OcrResult:
        import numpy as np

        prepared, factor = self._prepare(image)
        bgr = np.ascontiguousarray(np.asarray(prepared)[:, :, ::-1])  # (h, w, 3) BGR, as rapidocr expects
        with self._lock:  # the ONNX sessions are shared; one reader at a time keeps memory predictable
            if self._ocr is None:
                self._ocr = self._load()
            found = self._read_split(bgr) if self.pipeline == "split" else (self._ocr(bgr)[0] or [])
        lines = []
        for quad, text, conf in found:
            xs, ys = [p[0] for p in quad], [p[1] for p in quad]
            lines.append((min(xs), min(ys), max(xs), max(ys), text, conf))
        return self._result(lines, factor, image.size)

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
    grey = darkest_channel(bgr[y1:y2, x1:x2])  # (h, w)
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


def _quiet_session(model_path: str, threads: int, fold: bool = True):
    """An ONNX Runtime CPU session whose worker threads sleep rather than spin between operators.

    `fold=True` loads the model as `retrieval.onnx_fold` rewrites it: the same outputs (within 3e-6) with
    most of the backbone's elementwise passes folded away.

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
    if fold:
        from retrieval.onnx_fold import fold as fold_model

        try:
            return ort.InferenceSession(fold_model(model_path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - another rapidocr's graph the rewrites do not fit: run it as shipped
            import warnings

            warnings.warn(
                f"OCR model {model_path} runs as shipped; its rewrite failed ({type(e).__name__}: {str(e)[:200]})",
                stacklevel=2,
            )
    return ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])


def darkest_channel(image):
    """(h, w): each pixel's smallest channel value; a 2-D image as it is.

    Element-wise minimum of the three planes: numpy's `min(axis=2)` over a 3-wide last axis took 24 ms on a
    1280 x 990 page, this takes 1 ms.

    >>> import numpy as np
    >>> darkest_channel(np.array([[[9, 3, 5], [0, 7, 2]]], np.uint8)).tolist()
    [[3, 0]]
    """
    import numpy as np

    if image.ndim == 2:
        return image
    return np.minimum(np.minimum(image[..., 0], image[..., 1]), image[..., 2])


def ink_box(bgr, pad: int = 16, threshold: int = 40) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the part of an image that differs from its background, padded by `pad` px.

    The background is the median grey level, so dark slides and coloured pages work as well as white
    paper; x1 <= x0 when nothing differs (a blank page). The detector's cost grows with its input area,
    and page margins hold no text.
    """
    import numpy as np

    grey = darkest_channel(bgr)  # (h, w): dark or coloured ink both show up
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
