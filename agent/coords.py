"""Which coordinates a model grounds boxes in, and how a box it writes maps to the image it saw.

- Qwen2-VL and Qwen2.5-VL: absolute pixels of the image as resized for the model (the Qwen2.5-VL technical
  report, arXiv 2502.13923, section 2.1: "absolute coordinates based on the actual dimensions of the
  input images").
- Qwen3-VL (and its successors Qwen3.5/3.6): coordinates normalized to 0..1000 of the image's width and
  height (the Qwen3-VL model card's grounding examples).

`convention_for` picks one from a model's name or `model_type`; a user overrides it with `--coords`.

    >>> [convention_for(m) for m in ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen3_vl", "autumncc/Qwen2.5-VL-7B-VRAG")]
    ['absolute', 'relative', 'absolute']
    >>> to_seen([100, 100, 200, 300], (1024, 512), "relative")
    [102.4, 51.2, 204.8, 153.6]
"""

from __future__ import annotations

import re

CONVENTIONS = ("absolute", "relative")
SCALE = 1000  # Qwen3-VL's normalized range


def convention_for(model: str) -> str:
    """ "relative" for the Qwen3 family (Qwen3-VL, Qwen3.5, ...), "absolute" otherwise."""
    return "relative" if re.search(r"qwen[-_]?3", model or "", re.I) else "absolute"


def resolve(setting: str, model: str) -> str:
    """The convention for `setting` ("auto" | "absolute" | "relative") and a model name or type."""
    setting = (setting or "auto").strip().lower()
    if setting == "auto":
        return convention_for(model)
    if setting not in CONVENTIONS:
        raise ValueError(
            f"unknown coordinate convention {setting!r}; use auto, absolute (Qwen2.5-VL) or relative (0-1000, Qwen3-VL)"
        )
    return setting


def to_seen(bbox: list[float], seen_size: tuple[int, int], coords: str) -> list[float]:
    """The box in pixels of the image as the model saw it."""
    if coords != "relative":
        return [float(v) for v in bbox]
    w, h = seen_size
    x1, y1, x2, y2 = (float(v) for v in bbox)
    return [x1 * w / SCALE, y1 * h / SCALE, x2 * w / SCALE, y2 * h / SCALE]
