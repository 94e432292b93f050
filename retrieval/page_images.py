"""Page images: a PDF page as an image file on disk, rendered once into a cache inside the index folder.

VRAG's and VimRAG's clients open a search result's `file_path` with PIL, so a page result must point at an
image, not at its PDF. The cache follows VRAG's corpus convention: page N of `X.pdf` is `X_N.jpg`, 1-based
(VRAG search_engine/corpus/pdf2images.py:10-15), rendered at pdf2image's default 200 dpi as that script does
(it calls `convert_from_path` without a dpi) and saved as JPEG at PIL's default quality, so a VRAG-RL
reward that scores retrieved images by `X_{page}` reads ours the same way. A page larger than
`PAGE_IMAGE_MAX_PIXELS` at 200 dpi (a poster) is rendered smaller.

    {index}/page_images/{first 12 hex of the PDF's sha256}/{stem}_{page}.jpg

The hash folder keeps two PDFs with one file name apart, and a changed PDF gets fresh images. Files are
written atomically (a temporary name, then a rename), so a reader never sees half a JPEG.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from retrieval.units import Unit

PAGE_IMAGE_DIR = "page_images"
PAGE_IMAGE_DPI = 200.0  # pdf2image's default, used by VRAG's pdf2images.py
PAGE_IMAGE_MAX_PIXELS = 12_000_000  # an A4 page at 200 dpi is 3.9 MP; larger pages are scaled to fit


def cache_root(index_dir: str | Path) -> Path:
    return Path(index_dir) / PAGE_IMAGE_DIR


def page_image_path(index_dir: str | Path, unit: Unit) -> Path:
    """Where page `unit` is (or will be) cached: VRAG's `{stem}_{page}.jpg` name in a per-PDF folder."""
    if unit.modality != "page":
        raise ValueError(f"{unit.citation()} is a {unit.modality}, not a PDF page")
    return cache_root(index_dir) / unit.content_hash[:12] / f"{Path(unit.source).stem}_{unit.page}.jpg"


def page_image(index_dir: str | Path, unit: Unit) -> Path:
    """The page's image file, rendering it into the cache the first time it is asked for."""
    path = page_image_path(index_dir, unit)
    if path.exists():
        return path
    from retrieval.loaders import render_pdf_page

    image = render_pdf_page(unit.source, unit.page or 1, max_pixels=PAGE_IMAGE_MAX_PIXELS, dpi=PAGE_IMAGE_DPI)
    # Two requests for one page may both render it; each writes its own temporary file and the rename
    # leaves one whole JPEG either way.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            image.save(f, format="JPEG")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def image_file(index_dir: str | Path, unit: Unit) -> str:
    """The path a client can open with PIL for a unit with pixels: the cached page image or the image
    itself. A video clip has no single image; its path is the video (clients decode it)."""
    if unit.modality == "page":
        return str(page_image(index_dir, unit).resolve())
    return unit.source
