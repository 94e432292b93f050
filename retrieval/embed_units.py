"""Units into vectors: what of a unit an embedder sees.

A text embedder reads a unit's words in overlapping passages (`passages_of`), one vector each; a unit with
no words is embedded by its file name. A visual embedder sees a unit's pixels: a page or image once, a
video clip once per keyframe, and a text chunk, which has no pixels, through the same model's text tower.
A unit's vectors are all kept; search scores a unit by its best one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.embedder_base import Embedder, quiet
from retrieval.units import Unit


def embed_units(embedder: Embedder, units: list[Unit], passage_words: int, max_passages: int) -> list[list[np.ndarray]]:
    """The vectors of each unit, in order, with no per-batch progress bars (ingest draws its own)."""
    with quiet():
        if embedder.supports_images:
            return _embed_visual(embedder, units)
        return _embed_passages(embedder, units, passage_words, max_passages)


def passage_count(units: list[Unit], words: int, max_passages: int) -> int:
    """How many texts a text embedder is given for `units` (`_embed_passages`)."""
    return sum(len(passages_of(u.text or Path(u.source).stem, words, max_passages)) for u in units)


def _embed_passages(embedder: Embedder, units: list[Unit], words: int, max_passages: int) -> list[list[np.ndarray]]:
    passages, owner = [], []
    for j, u in enumerate(units):
        for p in passages_of(u.text or Path(u.source).stem, words, max_passages):
            passages.append(p)
            owner.append(j)
    vecs = _as_list(embedder.encode_texts(passages))
    out: list[list[np.ndarray]] = [[] for _ in units]
    for j, v in zip(owner, vecs):
        out[j].append(v)
    return out


def _embed_visual(embedder: Embedder, units: list[Unit]) -> list[list[np.ndarray]]:
    images, owner = [], []
    for j, u in enumerate(units):
        if u.modality == "text":
            continue
        if u.modality == "video":
            for _, frame in u.load_frames():
                images.append(frame)
                owner.append(j)
        else:
            images.append(u.load_image(max_pixels=1_000_000))
            owner.append(j)
    out: list[list[np.ndarray]] = [[] for _ in units]
    for j, v in zip(owner, _as_list(embedder.encode_images(images)) if images else []):
        out[j].append(v)
    text_units = [j for j, u in enumerate(units) if u.modality == "text"]
    if text_units:  # text chunks have no pixels: embed their words with the same model's text tower
        vecs = _as_list(embedder.encode_texts([units[j].text for j in text_units]))
        for j, v in zip(text_units, vecs):
            out[j].append(v)
    return out


def passages_of(text: str, words: int = 150, max_passages: int = 16) -> list[str]:
    """Overlapping word windows (stride 4/5 of the window) covering `text`, at most `max_passages`.

    >>> passages_of("a b c d e f", words=5)
    ['a b c d e', 'e f']
    >>> passages_of("  ")
    ['(empty)']
    """
    toks = text.split()
    if len(toks) <= words:
        return [text.strip() or "(empty)"]
    stride = max(1, words * 4 // 5)
    out = [" ".join(toks[s : s + words]) for s in range(0, max(1, len(toks) - words + stride), stride)]
    return out[:max_passages]


def _as_list(vecs) -> list[np.ndarray]:
    if isinstance(vecs, np.ndarray):
        return [v for v in vecs]  # rows of (n, dim)
    return list(vecs)
