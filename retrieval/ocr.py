"""OCR for units without a text layer: images, video frames and scanned PDF pages.

Two engines sit behind one interface, `OcrEngine.read(image) -> OcrResult`:

- `RapidOcrEngine` (retrieval/ocr_rapid.py): PP-OCRv4 through rapidocr-onnxruntime, whose models ship
  inside the wheel, so it works offline with nothing else installed. Our decoding restores the spaces its
  stock decoding drops in English, and our split pipeline reads a page several times faster.
- `TesseractEngine` (here): the `tesseract` binary (Debian `tesseract-ocr`) run as a subprocess with TSV
  output. It needs a system package; on our pages it is about 5x faster and slightly less accurate.

Both return line boxes, and one pure function (`retrieval.reading_order.layout_text`) turns boxes into
text, so the engines differ only in what they recognise; `ImageOcrEngine` (retrieval/ocr_engine.py) holds what they
share (the image preparation, and mapping boxes back to the caller's pixels).

`get_ocr("auto")` picks the engine that measured most accurate in `python -m eval.bench_ocr`: rapidocr,
else tesseract. Ask for "tesseract" to trade a little accuracy for speed. Engines are created once per
process and cached; models load on first use.
Left out on purpose: language packs other than English for tesseract, rotated-page detection, and
dehyphenation (the text stays as printed).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import threading

from retrieval.errors import RetrievalError, missing_dependency
from retrieval.ocr_engine import ImageOcrEngine, OcrBox, OcrEngine, OcrResult

__all__ = ["OcrBox", "OcrResult", "OcrEngine", "ImageOcrEngine", "TesseractEngine", "get_ocr", "available_engines"]

ENGINES = ("rapidocr", "tesseract")
CHOICES = ("auto", "none") + ENGINES
# What "auto" prefers, most accurate first. `python -m eval.bench_ocr`, 60 MMLongBench-Doc pages at 144 dpi
# against their text layers: rapidocr CER 0.282, bag-of-words F1 0.961, 0.13 pages/s; tesseract 5.3.0 CER
# 0.293, F1 0.931, 0.63 pages/s (F1 better for rapidocr on 35 pages, for tesseract on 21).
AUTO_ORDER = ("rapidocr", "tesseract")
TESSERACT_HINT = "install it with: apt-get install tesseract-ocr (or brew install tesseract), then retry"


# ---------------------------------------------------------------------------------------------------
# Tesseract


def tesseract_binary() -> str | None:
    """Path of the tesseract binary, or None when it is not installed."""
    return shutil.which("tesseract")


class TesseractEngine(ImageOcrEngine):
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
        super().__init__(max_side, min_side, columns, threads)
        self.lang, self.psm, self.timeout_s = lang, psm, timeout_s
        self.binary = binary or tesseract_binary()
        if self.binary is None:
            raise RetrievalError(f"the tesseract binary is not on PATH; {TESSERACT_HINT}")

    def read(self, image) -> OcrResult:
        prepared, factor = self._prepare(image)
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
        lines = _tsv_lines(proc.stdout.decode("utf-8", errors="replace"))
        return self._result([(*b.box, b.text, b.conf) for b in lines], factor, image.size)


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
    from retrieval.ocr_rapid import RapidOcrEngine

    return RapidOcrEngine()
