"""A file's units: PDF pages with their text layer (OCR where a page has too little text), an image, video clips
with the text of their keyframes, or text chunks. retrieval/ingest.py reads each new or changed file through this,
on its reading thread. The OCR engine loads on first need, so a corpus of text-layer PDFs costs no OCR model load.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from retrieval import loaders
from retrieval.errors import IngestError
from retrieval.units import Unit

if TYPE_CHECKING:
    from retrieval.ingest import IngestConfig

Clock = Callable[[str], AbstractContextManager[None]]  # `with clock("ocr"): ...` adds the seconds to a stage


class UnitExtractor:
    """Reads files into units as an `IngestConfig` says (OCR engine, scanned-page threshold and resolution, video
    clips and keyframes, text chunks)."""

    def __init__(self, config: IngestConfig, ocr=None) -> None:
        self.config = config
        self._ocr = ocr
        self._ocr_loaded = ocr is not None

    @property
    def ocr(self):
        if not self._ocr_loaded:
            from retrieval.ocr import get_ocr

            self._ocr = get_ocr(self.config.ocr)
            self._ocr_loaded = True
        return self._ocr

    def extract(
        self, path: Path, root: Path, sha: str, clock: Clock, page_of: dict[Path, tuple[str, int]]
    ) -> list[Unit]:
        """The units of the file at `path` (content hash `sha`); `page_of` names the page images that are pages of
        a document, as {image: (document, page)}."""
        kind = loaders.kind_of(path)
        base = dict(source=str(path), root=str(root), content_hash=sha)
        c = self.config
        if kind == "pdf":
            units = []
            with clock("pdf text"):
                pages = loaders.read_pdf(path)
            for pg in pages:
                text, src = pg.text, "pdf-text" if pg.text else ""
                tables: list[dict] = []
                if len(pg.text) < c.min_text_chars and self._ocr_engine(clock) is not None:
                    with clock("render"):
                        image = loaders.render_pdf_page(path, pg.page, dpi=c.ocr_dpi)
                    read, tables = self._ocr_read(image, clock, scale=72.0 / c.ocr_dpi, page=pg.page)
                    text, src = read or text, f"ocr:{self.ocr.name}"
                units.append(
                    Unit(
                        uid=f"{sha[:16]}:p{pg.page}",
                        modality="page",
                        page=pg.page,
                        text=text,
                        text_source=src,
                        width=pg.width,
                        height=pg.height,
                        tables=tables,
                        **base,
                    )
                )
            return units
        if kind == "image":
            with clock("decode"):
                image = loaders.open_image(path)
            doc, page = page_of.get(path, ("", None))
            text, tables = self._ocr_read(image, clock, page=page or 0)
            return [
                Unit(
                    uid=f"{sha[:16]}:img",
                    modality="image",
                    text=text,
                    width=image.width,
                    height=image.height,
                    text_source=f"ocr:{self.ocr.name}" if self.ocr else "",
                    doc=doc,
                    page=page,
                    tables=tables,
                    **base,
                )
            ]
        if kind == "video":
            return self._extract_video(path, base, sha, clock)
        if kind == "text":
            chunks = loaders.chunk_text(loaders.read_text(path), c.chunk_chars)
            if not chunks:
                raise IngestError(path, "the text file is empty", "nothing to index; remove the file")
            return [
                Unit(uid=f"{sha[:16]}:t{i}", modality="text", chunk=i, text=t, text_source="file", **base)
                for i, t in enumerate(chunks)
            ]
        raise IngestError(path, "unsupported file type", "see `vimrag index --help` for the types indexed")

    def _extract_video(self, path: Path, base: dict, sha: str, clock: Clock) -> list[Unit]:
        c = self.config
        with clock("decode"):
            info = loaders.video_info(path)
        units = []
        for i, (a, b) in enumerate(loaders.clip_spans(info.duration, c.clip_seconds)):
            times = loaders.keyframe_times(a, b, c.keyframe_every, c.max_keyframes)
            lines, last = [], None
            with clock("decode"):
                frames = loaders.read_video_frames(path, times)
            for t, frame in frames:
                if not _changed(frame, last):  # compared with the last frame read, so slow drifts still count
                    continue
                last = frame
                text = self._ocr_text(frame, clock)
                if text:
                    lines.append(f"[{int(t) // 60:02d}:{int(t) % 60:02d}] {text}")
            units.append(
                Unit(
                    uid=f"{sha[:16]}:c{i}",
                    modality="video",
                    start=round(a, 3),
                    end=round(b, 3),
                    keyframes=times,
                    text="\n".join(lines),
                    width=info.width,
                    height=info.height,
                    text_source=f"ocr:{self.ocr.name}" if self.ocr else "",
                    **base,
                )
            )
        return units

    def _ocr_engine(self, clock: Clock):
        if self._ocr_loaded:
            return self._ocr
        with clock("model load"):
            return self.ocr

    def _ocr_text(self, image, clock: Clock) -> str:
        if self._ocr_engine(clock) is None:
            return ""
        with clock("ocr"):
            return self.ocr.read(image).text.strip()

    def _ocr_read(self, image, clock: Clock, scale: float = 1.0, page: int = 0) -> tuple[str, list[dict]]:
        """The text OCR reads, and the tables its boxes show (boxes times `scale`: PDF points for a rendered page,
        pixels for an image), as dicts for the unit."""
        if self._ocr_engine(clock) is None:
            return "", []
        with clock("ocr"):
            result = self.ocr.read(image)
        with clock("tables"):
            from retrieval.tables import scaled, tables_from_words

            tables = [scaled(t, scale, page).to_dict() for t in tables_from_words(result.boxes)]
        return result.text.strip(), tables


def _changed(frame, last, min_fraction: float = 0.005) -> bool:
    """Whether a keyframe differs visibly from the previous one, so a slide shown for a minute is OCR'd once.

    Counts pixels of 160x90 grey thumbnails that moved by more than 32 levels: codec noise moves none, a
    changed line of text moves a few percent.
    """
    if last is None:
        return True
    a = np.asarray(frame.convert("L").resize((160, 90)), dtype=np.int16)  # (90, 160)
    b = np.asarray(last.convert("L").resize((160, 90)), dtype=np.int16)
    return float((np.abs(a - b) > 32).mean()) > min_fraction
