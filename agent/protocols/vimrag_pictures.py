"""How VimRAG's pictures are made ready for the model: the demo's JPEG under 38,000 bytes at the pixel cap, then
resized to a memory item's budget; small crops brought up to VRAG-RL's pixel floor; and a few threads that prepare
a response's pictures side by side. The protocol (agent/protocols/vimrag.py) decides which pictures go where.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from PIL import Image

from agent.media import VRAG_MIN_PIXELS, demo_jpeg, fit_budget, model_view, vrag_size
from agent.state import EpisodeState
from agent.toolbox import Toolbox


def picture(
    patch: int, st: EpisodeState, ev, image, cap: int, budget: int | None = None, time: float | None = None
) -> dict[str, Any]:
    """An image part as the demo sends it: JPEG under 38 KB at most `cap` pixels, then `budget` pixels."""
    jpeg = st.config.demo_jpeg
    base_key = ("vimrag", id(image), cap, jpeg, patch)  # the encoding at the cap, shared by every budget
    base = st.resize_cache.get(base_key)
    if base is None:
        if jpeg:
            img, data = demo_jpeg(image, cap, identity(st, ev, time))
        else:
            img, data = fit_budget(image.convert("RGB"), cap, patch), None
        base = st.resize_cache[base_key] = (image, img, data)  # holding `image` keeps its id from being reused
    _, img, data = base
    if budget is not None and img.width * img.height > budget:  # the server's resize for the budget, here
        key = base_key + (budget,)
        if key not in st.resize_cache:
            st.resize_cache[key] = (image, fit_budget(img, budget, patch), None)
        _, img, data = st.resize_cache[key]
    limit = budget if budget is not None else cap
    if ev.kind == "image":
        ev.seen_size = model_view(img.width, img.height, patch, limit)
    part = {"type": "image", "image": img, "ref": ev.info_id, "max_pixels": limit}
    if data is not None:
        part.update(data=data, mime="image/jpeg")
    if time is not None:
        part["time"] = time
    return part


def identity(st: EpisodeState, ev, time: float | None) -> tuple | None:
    """What a picture handed to `picture` is, for the process-wide encoding cache: its file (by content),
    page, crop, frame time, and the settings the view was made with; None when the file's content is
    unknown (a remote search server's result)."""
    u = ev.unit
    try:
        stat = os.stat(u.source)  # the file as it is now: a file rewritten in place is another picture
    except OSError:
        return None
    if not u.content_hash:
        return None
    crop = tuple(ev.crop_box) if ev.crop_box else ()
    file = (u.source, stat.st_size, stat.st_mtime_ns, u.content_hash, u.uid, u.page)
    return (file, crop, time, st.config.max_image_pixels, st.evidence.raw_max_pixels)


def result_cap(toolbox: Toolbox, st: EpisodeState, ev) -> int:
    """A result's pixel cap: the demo's 1,003,520, or a scaled view's own budget."""
    return toolbox.budget(st, ev)[0] if ev.scale != 1.0 else st.config.max_image_pixels


def raw_view(st: EpisodeState, ev):
    """The pixels to show; a small crop is brought up to VRAG-RL's floor of 256*28*28 pixels, so zooming in
    gives the model more tokens on the region (ours: the demo has no crop). A page region is rendered from
    the PDF at the size it is shown, not enlarged from the 200 dpi page."""
    if not ev.crop_box:
        return st.evidence.raw_image(ev)
    bw, bh = st.evidence.raw_size(ev)
    if bw * bh >= VRAG_MIN_PIXELS:
        return st.evidence.raw_image(ev)
    target = vrag_size(bw, bh, st.config.max_image_pixels)
    img = st.evidence.raw_image(ev, at_least=target)
    if img.size == target:
        return img
    key = ("vimrag-zoom", id(img), target)
    if key not in st.resize_cache:
        st.resize_cache[key] = (img, img.resize(target, Image.Resampling.BICUBIC))
    return st.resize_cache[key][1]


PICTURE_THREADS = 4  # pictures prepared at once; above a 2-core box's cores on purpose (see in_parallel)
_pool: ThreadPoolExecutor | None = None  # made on first use, kept for the process
_pool_lock = threading.Lock()


def _picture_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=PICTURE_THREADS, thread_name_prefix="vimrag-picture")
        return _pool


def _forget_pool() -> None:  # a forked child inherits the pool but not its threads: it makes its own
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def in_parallel(fn, items: list) -> list:
    """[fn(x) for x in items], on a few threads when there are several: resizing and JPEG-encoding pictures
    releases the GIL, so a response's pictures are prepared side by side. The threads are kept for the process
    (starting and joining them cost about 0.3 ms a call), and there are up to 4 even on a 2-core box: with 2,
    the third of a search's 3 pictures would be done alone, a core idle. `fn` must not call in_parallel."""
    if len(items) < 2:
        return [fn(x) for x in items]
    return list(_picture_pool().map(fn, items))
