"""Page images, both ways: a PDF page rendered once to an image file in the index's cache (for clients that
open `file_path` with PIL), and a corpus's own page images recognised as the pages they are (`plan_page_images`).

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
from dataclasses import dataclass, field
from pathlib import Path

from retrieval import loaders
from retrieval.units import Unit, page_image_name

PAGE_IMAGE_DIR = "page_images"
PAGE_IMAGE_DPI = loaders.PAGE_DPI  # pdf2image's default, used by VRAG's pdf2images.py
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
    image = loaders.render_pdf_page(unit.source, unit.page or 1, max_pixels=PAGE_IMAGE_MAX_PIXELS, dpi=PAGE_IMAGE_DPI)
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


# ------------------------------------------------------------------------ page images found in a corpus
@dataclass
class PagePlan:
    """What the indexer does with the files named like VRAG page images (`X_N.jpg`) among those it walks."""

    pages: dict[Path, tuple[str, int]] = field(default_factory=dict)  # indexed as page N of X.pdf (no PDF here)
    duplicates: dict[str, list[Path]] = field(default_factory=dict)  # X.pdf path -> its page images, not indexed
    plain: list[tuple[str, str]] = field(default_factory=list)  # (image, why it stays a plain image)


def plan_page_images(images: list[Path], pdfs: list[str | Path]) -> PagePlan:
    """Decide, for the images about to be indexed, which are pages of a PDF.

    `pdfs` are the PDFs under the indexed paths and those already in the index. A page image X_N.jpg
    - whose X.pdf is there with at least N pages is that page twice over: it is not indexed (the PDF's page
      has the text layer and renders at any resolution), so search never shows the page twice;
    - with no X.pdf but sibling pages (X_1.jpg, X_2.jpg, ...) is indexed as page N of X.pdf, as VRAG's
      corpora of page images are meant;
    - otherwise (N past the PDF's end, several PDFs named X.pdf, no PDF and no siblings) stays a plain
      image, and the plan says why.
    """
    plan = PagePlan()
    by_stem: dict[str, list[str]] = {}
    for p in pdfs:
        by_stem.setdefault(Path(p).name, []).append(str(p))
    groups: dict[str, list[tuple[Path, int]]] = {}
    for img in images:
        named = page_image_name(img.name)
        if named:
            groups.setdefault(named[0], []).append((img, named[1]))
    for doc, members in groups.items():
        owners = sorted(set(by_stem.get(doc, [])))
        n_pages = loaders.pdf_page_count(owners[0]) if len(owners) == 1 else None
        for img, n in sorted(members, key=lambda m: m[1]):
            if len(owners) > 1:
                plan.plain.append(
                    (
                        str(img),
                        f"several PDFs are named {doc} ({', '.join(owners)}); which one it is a page of is unclear",
                    )
                )
            elif n_pages is not None and n <= n_pages:
                plan.duplicates.setdefault(owners[0], []).append(img)
            elif n_pages is not None:
                plan.plain.append((str(img), f"{doc} has {n_pages} pages, so page {n} is not one of them"))
            elif len(members) > 1:
                plan.pages[img] = (doc, n)
            else:
                plan.plain.append(
                    (str(img), f"no {doc} and no sibling page images in the corpus, so it is not taken for a page")
                )
    return plan
