"""Reading source files: PDF pages, images, video frames and text, with clear errors for bad input.

Each reader either returns what it read or raises `IngestError(path, reason, fix)`. Nothing here knows
about the index; `retrieval.ingest` turns what these return into units.
"""

from __future__ import annotations

import contextlib
import io
import math
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from retrieval.errors import IngestError

PDF_EXTS = {".pdf"}
IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif"}
VIDEO_EXTS = {".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v"}
TEXT_EXTS = {".txt", ".md", ".markdown", ".rst"}

# Images above this many pixels are refused as possible decompression bombs (Pillow's own warning level is
# ~89 Mpx; a 300 dpi A0 poster is ~140 Mpx, so allow that much and no more).
MAX_IMAGE_PIXELS = 150_000_000
# The most pixels a rendered page or decoded image is held at before OCR or embedding.
DEFAULT_MAX_PIXELS = 4_000_000
# A PDF page's own pixels: the page rendered at pdf2image's default 200 dpi, the resolution VRAG's
# search_engine/corpus/pdf2images.py gives the page images its crops are cut from. Crop boxes on pages are in
# these pixels, whatever resolution a page is shown or searched at.
PAGE_DPI = 200.0
# pdfium is not thread-safe; all pdfium calls go through this lock.
PDFIUM_LOCK = threading.Lock()


def kind_of(path: str | Path) -> str | None:
    """'pdf', 'image', 'video', 'text' by extension, or None for files we do not index."""
    ext = Path(path).suffix.lower()
    for kind, exts in (("pdf", PDF_EXTS), ("image", IMAGE_EXTS), ("video", VIDEO_EXTS), ("text", TEXT_EXTS)):
        if ext in exts:
            return kind
    return None


def fit_pixels(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """(w, h) scaled down, keeping aspect, so that w*h <= max_pixels."""
    if not max_pixels or width * height <= max_pixels:
        return width, height
    s = math.sqrt(max_pixels / (width * height))
    return max(1, int(width * s)), max(1, int(height * s))


# ---------------------------------------------------------------------------------------------- PDF
@dataclass
class PdfPage:
    page: int  # 1-indexed
    text: str
    width: int  # points
    height: int


def read_pdf(path: str | Path) -> list[PdfPage]:
    """Every page's text layer. Raises IngestError for corrupt, encrypted, truncated or empty PDFs."""
    import pypdfium2 as pdfium

    path = Path(path)
    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as e:
            reason = str(e)
            if _pageless(path):  # pdfium refuses a well-formed file whose page tree is empty
                raise IngestError(path, "the PDF has zero pages", "nothing to index; remove the file") from e
            if "password" in reason.lower():
                raise IngestError(
                    path, "the PDF is encrypted", "decrypt it (e.g. qpdf --decrypt) and index it again"
                ) from e
            raise IngestError(path, f"not a readable PDF ({reason})", "re-download or re-export the file") from e
        except OSError as e:
            raise IngestError(
                path, f"cannot read the file ({e.strerror or e})", "check it exists and is readable"
            ) from e
        try:
            n = len(doc)
            if n == 0:
                raise IngestError(path, "the PDF has zero pages", "nothing to index; remove the file")
            pages = []
            for i in range(n):
                page = doc[i]
                try:
                    w, h = page.get_size()
                    tp = page.get_textpage()
                    try:
                        text = tp.get_text_range()
                    finally:
                        tp.close()
                finally:
                    page.close()
                pages.append(PdfPage(i + 1, _clean_text(text), int(w), int(h)))
            return pages
        except pdfium.PdfiumError as e:
            raise IngestError(path, f"the PDF is damaged ({e})", "re-download or repair it (e.g. qpdf)") from e
        finally:
            doc.close()


def pdf_page_count(path: str | Path) -> int | None:
    """The PDF's page count, or None when pdfium cannot open it (reading it later reports why)."""
    import pypdfium2 as pdfium

    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(str(path))
        except Exception:  # noqa: BLE001 - read_pdf turns each failure into a clear IngestError
            return None
        try:
            return len(doc)
        finally:
            doc.close()


def _pageless(path: Path) -> bool:
    """A PDF whose page tree says /Count 0 and that has no /Type /Page object (checked on the raw bytes,
    since pdfium reports an empty page tree as a generic load failure)."""
    import re

    try:
        head = path.read_bytes()[: 8 << 20]
    except OSError:
        return False
    return (
        head.startswith(b"%PDF")
        and re.search(rb"/Count\s+0\b", head) is not None
        and re.search(rb"/Type\s*/Page(?!s)\b", head) is None
    )


@contextlib.contextmanager
def _pdf_page(path: str | Path, page: int):
    """The 1-indexed pdfium page of `path`, open (and the pdfium lock held) inside the block."""
    import pypdfium2 as pdfium

    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as e:
            raise IngestError(path, f"not a readable PDF ({e})", "re-download or re-export the file") from e
        try:
            if not 1 <= page <= len(doc):
                raise IngestError(path, f"page {page} is out of range 1..{len(doc)}", "cite an existing page")
            p = doc[page - 1]
            try:
                yield p
            finally:
                p.close()
        finally:
            doc.close()


def render_pdf_page(
    path: str | Path, page: int, max_pixels: int | None = DEFAULT_MAX_PIXELS, dpi: float = 144.0
) -> Image.Image:
    """Render one 1-indexed page to an RGB image at `dpi`, shrunk to fit `max_pixels`."""
    with _pdf_page(path, page) as p:
        w, h = p.get_size()
        scale = dpi / 72.0
        if max_pixels:
            scale = min(scale, math.sqrt(max_pixels / max(1.0, w * h)))
        return p.render(scale=scale).to_pil().convert("RGB")


def pdf_page_frame(path: str | Path, page: int, dpi: float = PAGE_DPI) -> tuple[int, int]:
    """(w, h) in pixels of a 1-indexed page rendered at `dpi`, as pdfium sizes its bitmap, without rendering it."""
    with _pdf_page(path, page) as p:
        w, h = p.get_size()
    scale = dpi / 72.0
    return math.ceil(w * scale), math.ceil(h * scale)


def render_pdf_region(path: str | Path, page: int, box: tuple[int, int, int, int], dpi: float) -> Image.Image:
    """The pixels of `box` (x1, y1, x2, y2, in pixels of the page rendered at `dpi`) rendered from the PDF at that
    dpi, exactly (x2 - x1) x (y2 - y1): only the region is rasterised, so a high dpi costs the region's pixels,
    not the page's."""
    x1, y1, x2, y2 = (int(v) for v in box)
    scale = dpi / 72.0
    with _pdf_page(path, page) as p:
        w, h = p.get_size()
        full_w, full_h = math.ceil(w * scale), math.ceil(h * scale)
        x1, y1, x2, y2 = max(0, x1), max(0, y1), min(full_w, x2), min(full_h, y2)
        if x2 <= x1 or y2 <= y1:
            raise ValueError(f"box {list(box)} lies outside page {page} ({full_w}x{full_h} at {dpi:g} dpi)")
        # pdfium takes the margins to cut in points and rounds each up to whole pixels: a hair under the exact
        # value rounds to exactly the pixel edge asked for
        cut = [max(0.0, (px - 1e-6) / scale) for px in (x1, full_h - y2, full_w - x2, y1)]
        return p.render(scale=scale, crop=tuple(cut)).to_pil().convert("RGB")


# ------------------------------------------------------------------------------------------- images
def open_image(path: str | Path, max_pixels: int | None = DEFAULT_MAX_PIXELS, data: bytes | None = None) -> Image.Image:
    """Decode an image to RGB, refusing non-images and decompression bombs, shrunk to `max_pixels`.
    With `data`, the image is those bytes (fetched from a URL) and `path` only names it in errors."""
    path = Path(path) if data is None else path
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path if data is None else io.BytesIO(data)) as im:
                w, h = im.size
                if w * h > MAX_IMAGE_PIXELS:
                    raise IngestError(
                        path,
                        f"image is {w}x{h} = {w * h / 1e6:.0f} Mpx, over the "
                        f"{MAX_IMAGE_PIXELS / 1e6:.0f} Mpx safety limit (possible decompression bomb)",
                        "downscale it before indexing",
                    )
                im.draft("RGB", fit_pixels(w, h, max_pixels))  # JPEG: decode at reduced size, cheaply
                im.load()
                rgb = _to_rgb(im)
    except IngestError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise IngestError(
            path, f"image exceeds the decompression-bomb limit ({e})", "downscale it before indexing"
        ) from e
    except Image.UnidentifiedImageError as e:
        raise IngestError(
            path,
            "not an image (the extension says image, the content does not)",
            "rename it to its real type or remove it",
        ) from e
    except OSError as e:
        raise IngestError(path, f"cannot decode the image ({e})", "re-export the file; it may be truncated") from e
    tw, th = fit_pixels(*rgb.size, max_pixels)
    if (tw, th) != rgb.size:
        rgb = rgb.resize((tw, th), Image.Resampling.BICUBIC)
    return rgb


def image_size(path: str | Path, data: bytes | None = None) -> tuple[int, int]:
    """(w, h) of an image file (or of `data`, fetched bytes) from its header alone, nothing decoded."""
    try:
        with Image.open(path if data is None else io.BytesIO(data)) as im:
            return im.size
    except (Image.UnidentifiedImageError, OSError) as e:
        raise IngestError(path, f"cannot read the image's size ({e})", "re-export the file; it may be truncated") from e


def _to_rgb(im: Image.Image) -> Image.Image:
    if im.mode in ("RGBA", "LA", "P"):
        im = im.convert("RGBA")
        bg = Image.new("RGB", im.size, (255, 255, 255))
        bg.paste(im, mask=im.getchannel("A"))
        return bg
    return im.convert("RGB")


# -------------------------------------------------------------------------------------------- video
@dataclass
class VideoInfo:
    n_frames: int
    fps: float
    duration: float  # seconds
    width: int
    height: int


def _video_reader(path: str | Path):
    try:
        import decord
    except ImportError as e:  # pragma: no cover - decord is a core dependency
        from retrieval.errors import missing_dependency

        raise missing_dependency("decord", purpose="reading videos") from e
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise IngestError(path, f"cannot read the file ({e.strerror or e})", "check it exists and is readable") from e
    if size == 0:
        raise IngestError(path, "the video file is empty (0 bytes)", "re-export or remove it")
    try:
        vr = decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1)
    except Exception as e:  # decord raises its own DECORDError, or RuntimeError, for undecodable input
        raise IngestError(
            path,
            f"cannot decode the video ({str(e).splitlines()[0][:200]})",
            "re-encode it (e.g. ffmpeg -i in -c:v libx264 out.mp4)",
        ) from e
    if len(vr) == 0:
        raise IngestError(path, "the video has no frames", "re-encode or remove it")
    return vr


def video_info(path: str | Path) -> VideoInfo:
    vr = _video_reader(path)
    n = len(vr)
    fps = float(vr.get_avg_fps() or 0.0) or 25.0
    h, w = vr[0].shape[:2]
    return VideoInfo(n, fps, n / fps, int(w), int(h))


def read_video_frames(
    path: str | Path, timestamps: list[float], max_pixels: int | None = DEFAULT_MAX_PIXELS
) -> list[tuple[float, Image.Image]]:
    """[(t, RGB frame)] at the given times in seconds (clamped to the video), shrunk to `max_pixels`."""
    vr = _video_reader(path)
    n = len(vr)
    fps = float(vr.get_avg_fps() or 0.0) or 25.0
    idx = [min(n - 1, max(0, int(round(t * fps)))) for t in timestamps]
    if not idx:
        return []
    try:
        arr = vr.get_batch(idx).asnumpy()  # (n_frames, h, w, 3) uint8
    except Exception as e:
        raise IngestError(path, f"cannot decode frames {idx[:4]}... ({e})", "re-encode the video") from e
    out = []
    for t, frame in zip(timestamps, arr):
        im = Image.fromarray(frame)
        size = fit_pixels(*im.size, max_pixels)
        if size != im.size:
            im = im.resize(size, Image.Resampling.BICUBIC)
        out.append((float(t), im))
    return out


def clip_spans(duration: float, clip_seconds: float = 60.0) -> list[tuple[float, float]]:
    """Split [0, duration] into near-equal clips of about `clip_seconds` (a 130 s video -> 3 clips of 43 s)."""
    if duration <= 0:
        return []
    n = max(1, round(duration / clip_seconds))
    step = duration / n
    return [(i * step, duration if i == n - 1 else (i + 1) * step) for i in range(n)]


def keyframe_times(start: float, end: float, every: float = 4.0, max_frames: int = 16) -> list[float]:
    """Evenly spaced sample times inside [start, end), at most one per `every` seconds and `max_frames` in all."""
    span = max(0.0, end - start)
    n = max(1, min(max_frames, int(math.ceil(span / every))))
    step = span / n
    return [round(start + (i + 0.5) * step, 3) for i in range(n)]


# --------------------------------------------------------------------------------------------- text
def read_text(path: str | Path) -> str:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise IngestError(path, f"cannot read the file ({e.strerror or e})", "check permissions") from e
    if b"\x00" in raw[:4096]:
        raise IngestError(path, "looks binary, not text", "rename it to its real type or remove it")
    for enc in ("utf-8", "utf-16") if raw[:2] not in (b"\xff\xfe", b"\xfe\xff") else ("utf-16",):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")


def chunk_text(text: str, max_chars: int = 1000) -> list[str]:
    """Split text into chunks of at most ~max_chars, at paragraph, then sentence, then word boundaries."""
    text = text.replace("\r\n", "\n")
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    pieces: list[str] = []
    for p in paras:
        if len(p) <= max_chars:
            pieces.append(p)
            continue
        buf = ""
        for word in p.replace("\n", " ").split(" "):
            if len(buf) + len(word) + 1 > max_chars and buf:
                pieces.append(buf)
                buf = ""
            buf = f"{buf} {word}" if buf else word
        if buf:
            pieces.append(buf)
    chunks: list[str] = []
    cur = ""
    for piece in pieces:
        if cur and len(cur) + len(piece) + 2 > max_chars:
            chunks.append(cur)
            cur = ""
        cur = f"{cur}\n\n{piece}" if cur else piece
    if cur:
        chunks.append(cur)
    return chunks


def _clean_text(text: str) -> str:
    # pdfium returns \r\n line ends and stray NULs on some producers.
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").strip()
