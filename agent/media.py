"""How pictures and video frames reach the model, following the published code's image rules exactly.

Pure functions over PIL images; the protocols call them while building a context.

- VRAG-RL (`VRAG-RL/vrag_agent/generation.py` lines 18-42, `process_image`): every inserted image, search
  result or crop, is scaled by sqrt(max / pixels) when above 512*28*28 pixels and by sqrt(min / pixels) when
  below 256*28*28, each side truncated with int(), with Pillow's default filter. The Qwen processor then
  snaps that size to its patch grid (`vrag_image`).
- VimRAG demo (`demo/vimrag_utils.py` lines 10-51, `process_image_to_base64`): an image above its pixel cap
  is scaled by sqrt(cap / pixels) (Lanczos, int sides), saved as JPEG quality 75, and if the file is over
  38,000 bytes, scaled once more by sqrt(0.95 * 38000 / bytes) and saved again (`demo_jpeg`). The bytes are
  sent as they are; the server snaps them to the patch grid. Memory images also carry the pixel budget that
  the energy allocation gave them (the demo's per-part `max_pixels`, lines 254-266); servers other than
  DashScope ignore that field, so the resize it asks for is done here, on the decoded JPEG.
- VimRAG demo video (`demo/vimrag_utils.py` lines 54-89): 1 frame per second, at most 32, at
  `linspace(0, frames - 1, n)` frame indices across the whole clip, each labelled with its time to 0.1 s
  (`sample_times`, `time_key`).

`model_view` is the size a Qwen processor feeds the model for an image of a given size (qwen-vl-utils'
smart_resize); pixel and token counts use it, so an off-grid image is counted as the model sees it.
"""

from __future__ import annotations

import io
import math
import threading
from collections import OrderedDict

from PIL import Image

VRAG_MIN_PIXELS, VRAG_MAX_PIXELS = 256 * 28 * 28, 512 * 28 * 28  # generation.py lines 143, 167
DEMO_JPEG_QUALITY = 75  # vimrag_utils.py lines 33, 45
DEMO_MAX_BYTES = 38_000  # vimrag_utils.py line 17
VIDEO_FPS, VIDEO_MAX_FRAMES = 1.0, 32  # vimrag_agent.py lines 61-62
PROCESSOR_MAX_PIXELS = 16384 * 28 * 28  # the Qwen2.5-VL processor's default max_pixels (12,845,056)


def vrag_size(
    width: int, height: int, max_pixels: int = VRAG_MAX_PIXELS, min_pixels: int = VRAG_MIN_PIXELS
) -> tuple[int, int]:
    """(w, h) after VRAG-RL's process_image: shrink above max, then grow below min, sides truncated.

    >>> vrag_size(1700, 2200)  # 3.74 MP -> sqrt(401408 / 3740000)
    (556, 720)
    >>> vrag_size(300, 200)  # a small crop is enlarged to the floor
    (548, 365)
    """
    w, h = int(width), int(height)
    if w * h > max_pixels:
        f = math.sqrt(max_pixels / (w * h))
        w, h = int(w * f), int(h * f)
    if w * h < min_pixels:
        f = math.sqrt(min_pixels / (w * h))
        w, h = int(w * f), int(h * f)
    return w, h


def model_view(width: int, height: int, patch: int = 28, max_pixels: int | None = None) -> tuple[int, int]:
    """(w, h) the model sees: the Qwen processor's smart_resize to the patch grid (rounding to the nearest
    multiple of `patch`, within [one merged patch, max_pixels], the bounds our transformers backend sets).

    >>> model_view(556, 720)  # what VRAG-RL's processor made of the image above
    (560, 728)
    >>> model_view(448, 448)  # on the grid already: unchanged
    (448, 448)
    """
    from qwen_vl_utils import smart_resize

    cap = max(max_pixels or PROCESSOR_MAX_PIXELS, patch * patch)
    w, h = max(1, int(width)), max(1, int(height))
    if max(w, h) > 200 * min(w, h):  # smart_resize refuses such strips; the servers squash them similarly
        w, h = (w, -(-w // 200)) if w > h else (-(-h // 200), h)
    hh, ww = smart_resize(h, w, factor=patch, min_pixels=patch * patch, max_pixels=cap)
    return ww, hh


def vrag_image(image: Image.Image) -> Image.Image:
    """An image as VRAG-RL inserts it (process_image): resized with Pillow's default filter, in RGB."""
    size = vrag_size(*image.size)
    out = image.resize(size) if size != image.size else image
    return out.convert("RGB") if out.mode != "RGB" else out


def _jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=DEMO_JPEG_QUALITY)
    return buf.getvalue()


class EncodedPictures:
    """Process-wide LRU of demo encodings (their JPEG bytes) by picture identity, bounded in bytes.

    The demo's encoding of a page costs two Lanczos resizes and two JPEG encodes (about 55 ms on one core for a
    1240x1754 page), and the same pages come back across the questions of an eval run, the sessions of the
    demo and the rollouts of training; a picture met before costs one JPEG decode (about 3 ms) instead. Only
    bytes are kept, never pixels, so the cache stays small (38,000 bytes a picture at most after the demo's
    rule)."""

    def __init__(self, max_bytes: int = 64_000_000) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return data

    def put(self, key: tuple, data: bytes) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = data
            self._size += len(data)
            while self._size > self.max_bytes and self._items:
                _, old = self._items.popitem(last=False)
                self._size -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0
            self.hits = self.misses = 0


ENCODED = EncodedPictures()


def demo_jpeg(image: Image.Image, max_pixels: int, key: tuple | None = None) -> tuple[Image.Image, bytes]:
    """(decoded image, JPEG bytes) as the VimRAG demo encodes a picture under `max_pixels`.

    The decoded image holds exactly the pixels the server will decode, JPEG artefacts included. With `key` (what
    the picture is: its file, page, crop and the like; nothing else may differ between two calls with one key),
    an encoding made before in this process is decoded instead of made again (`ENCODED`).
    """
    if key is not None:
        data = ENCODED.get((key, max_pixels))
        if data is not None:
            return _decoded(data), data
    decoded, data = _demo_jpeg(image, max_pixels)
    if key is not None:
        ENCODED.put((key, max_pixels), data)
    return decoded, data


def _decoded(data: bytes) -> Image.Image:
    decoded = Image.open(io.BytesIO(data))
    decoded.load()
    return decoded if decoded.mode == "RGB" else decoded.convert("RGB")


def _demo_jpeg(image: Image.Image, max_pixels: int) -> tuple[Image.Image, bytes]:
    img = image.convert("RGB") if image.mode != "RGB" else image
    w, h = img.size
    if w * h > max_pixels:
        f = math.sqrt(max_pixels / (w * h))
        img = img.resize((max(1, int(w * f)), max(1, int(h * f))), resample=Image.Resampling.LANCZOS)
    data = _jpeg(img)
    if len(data) > DEMO_MAX_BYTES:
        f = math.sqrt(DEMO_MAX_BYTES * 0.95 / len(data))
        img = img.resize((max(1, int(img.width * f)), max(1, int(img.height * f))), resample=Image.Resampling.LANCZOS)
        data = _jpeg(img)
    return _decoded(data), data


def fit_budget(image: Image.Image, max_pixels: int, patch: int) -> Image.Image:
    """The resize a server applies for a part's `max_pixels` (smart_resize onto the grid); bicubic, as the Qwen
    image processor resamples. An image already within the budget is returned unchanged."""
    if image.width * image.height <= max_pixels:
        return image
    w, h = model_view(image.width, image.height, patch, max_pixels)
    return image.resize((w, h), Image.Resampling.BICUBIC)


def sample_times(
    start: float, end: float, native_fps: float, fps: float = VIDEO_FPS, max_frames: int = VIDEO_MAX_FRAMES
) -> list[float]:
    """Seconds of the frames the VimRAG demo samples from the clip [start, end] (vimrag_utils.py lines 64-67):
    n = min(max(1, int(duration * fps)), max_frames) frame indices `linspace(0, total - 1, n)` truncated to
    integers, at time index / total * duration.

    >>> ts = sample_times(0, 60, 25.0)
    >>> len(ts), ts[0], round(ts[-1], 2)  # 32 frames spread over the whole minute
    (32, 0.0, 59.96)
    >>> sample_times(120, 125, 10.0)  # a 5 s clip at 1 fps
    [120.0, 121.2, 122.4, 123.6, 124.9]
    """
    duration = max(0.0, float(end) - float(start))
    total = max(1, int(round(duration * native_fps)))
    n = min(max(1, int(duration * fps)), max_frames)
    if n == 1:
        idx = [0]
    else:  # torch.linspace(0, total - 1, n).long(): evenly spaced, truncated toward zero
        idx = [int((total - 1) * i / (n - 1)) for i in range(n)]
    return [float(start) + i / total * duration for i in idx]


def time_key(seconds: float) -> str:
    """A timestamp as the demo labels and matches frames: one decimal (vimrag_utils.py line 80, vimrag_agent.py
    lines 217-227).

    >>> time_key(12), time_key(59.96)
    ('12.0', '60.0')
    """
    return f"{float(seconds):.1f}"
