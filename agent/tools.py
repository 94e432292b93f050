"""Pure helpers behind the crop and scale tools: coordinate mapping and resizing on the patch grid.

Crop (after VRAG-RL): the model gives a bbox in the coordinates of the image as it saw it (after
resizing). We map it back to raw pixels, pad it by 28 px measured in the model's coordinates, clamp it to
the image, and refuse boxes that are empty or inverted. The crop is then re-encoded under the pixel limit
with a floor, so a small region is enlarged and small text becomes readable.
"""

from __future__ import annotations

import math

from agent.protocols.schema import SCALE_RANGE

PAD_SEEN = 28  # VRAG-RL pads crops by 28 px in the model's coordinates
OBS_MAX_PIXELS = 512 * 28 * 28  # VRAG-RL's per-image ceiling for observations (401,408)
OBS_MIN_PIXELS = 256 * 28 * 28  # and its floor: crops of small regions are enlarged to at least this
MIN_PIXELS = 4 * 28 * 28


class ToolError(ValueError):
    """A tool could not run with these arguments; the message goes back to the model as an observation."""


def map_bbox(
    bbox: list[float], seen_size: tuple[int, int], raw_size: tuple[int, int], pad: float = PAD_SEEN
) -> tuple[int, int, int, int]:
    """Map a box from the model's view of an image to raw pixels, padded and clamped.

    >>> map_bbox([100, 50, 200, 150], seen_size=(500, 250), raw_size=(1000, 500))
    (144, 44, 456, 356)
    >>> map_bbox([0, 0, 10, 10], seen_size=(100, 100), raw_size=(100, 100), pad=0)
    (0, 0, 10, 10)
    """
    if len(bbox) != 4:
        raise ToolError(f"bbox must be 4 numbers [x1, y1, x2, y2], got {bbox}")
    x1, y1, x2, y2 = (float(v) for v in bbox)
    sw, sh = seen_size
    rw, rh = raw_size
    if x2 <= x1 or y2 <= y1:
        raise ToolError(f"bbox {bbox} is empty or inverted: it needs x1 < x2 and y1 < y2")
    if x2 <= 0 or y2 <= 0 or x1 >= sw or y1 >= sh:
        raise ToolError(f"bbox {bbox} lies outside the image, which you saw at {sw}x{sh} pixels")
    fx, fy = rw / sw, rh / sh
    rx1 = max(0, math.floor((x1 - pad) * fx))
    ry1 = max(0, math.floor((y1 - pad) * fy))
    rx2 = min(rw, math.ceil((x2 + pad) * fx))
    ry2 = min(rh, math.ceil((y2 + pad) * fy))
    if rx2 - rx1 < 1 or ry2 - ry1 < 1:
        raise ToolError(f"bbox {bbox} is empty after clamping to the {sw}x{sh} image")
    return rx1, ry1, rx2, ry2


def compose_box(outer: list[int] | tuple[int, ...] | None, inner: tuple[int, int, int, int]) -> list[int]:
    """A box inside a crop, expressed in the full source image's pixels.

    >>> compose_box([100, 200, 500, 600], (10, 20, 30, 40))
    [110, 220, 130, 240]
    """
    if outer is None:
        return list(inner)
    ox, oy = outer[0], outer[1]
    return [inner[0] + ox, inner[1] + oy, inner[2] + ox, inner[3] + oy]


def target_size(
    width: int, height: int, max_pixels: int, min_pixels: int = MIN_PIXELS, patch: int = 28
) -> tuple[int, int]:
    """(w, h) on the patch grid within [min_pixels, max_pixels], keeping aspect (qwen-vl-utils' smart_resize).

    >>> target_size(1000, 500, max_pixels=401_408)
    (896, 448)
    """
    from qwen_vl_utils import smart_resize

    max_pixels = max(max_pixels, patch * patch)
    min_pixels = min(min_pixels, max_pixels)
    h, w = smart_resize(height, width, factor=patch, min_pixels=min_pixels, max_pixels=max_pixels)
    return w, h


def resize_for_model(image, max_pixels: int, min_pixels: int = MIN_PIXELS, patch: int = 28, cache: dict | None = None):
    """The image re-encoded for the model: on the patch grid, between min_pixels and max_pixels.

    With `cache` (kept by the caller for an episode), a repeated request returns the same resized image.
    """
    from PIL import Image

    w, h = target_size(image.width, image.height, max_pixels, min_pixels, patch)
    if (w, h) == image.size:
        return image
    key = (id(image), w, h)
    if cache is not None and key in cache:
        return cache[key][1]
    out = image.resize((w, h), Image.Resampling.BICUBIC, reducing_gap=2.0)
    if cache is not None:
        cache[key] = (image, out)  # holding `image` keeps its id from being reused
    return out


def scaled_budget(base_pixels: int, factor: float, cap: int) -> int:
    """Pixel budget of a scaled view: area grows with the square of the linear factor, up to `cap`.

    >>> scaled_budget(401_408, 2.0, 1_003_520)
    1003520
    >>> scaled_budget(401_408, 0.5, 1_003_520)
    100352
    """
    lo, hi = SCALE_RANGE
    if not lo <= factor <= hi:
        raise ToolError(f"scale factor {factor} is outside {lo}..{hi}")
    return int(min(cap, max(MIN_PIXELS, base_pixels * factor * factor)))
