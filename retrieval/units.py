"""Corpus units and search hits: the records that cross the retrieval boundary.

A unit is the smallest thing the retriever returns: one PDF page, one image, one video clip (with its
keyframes and time span) or one text chunk. Every unit keeps its provenance (source file, page or time
span, content hash, modality) so that an answer can cite it. Loading pixels is lazy: a hit knows how to
render its page, open its image or decode its frames, but nothing is decoded until asked.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODALITIES = ("page", "image", "video", "text")
# VRAG's corpus convention: page N of X.pdf is rendered to X_N.jpg, 1-based (VRAG
# search_engine/corpus/pdf2images.py:10-15), and its reward matches pages by that name (VRAG-RL
# verl/workers/reward_manager/rm.py:328-329).
_PAGE_IMAGE = re.compile(r"^(?P<stem>.+)_(?P<page>[0-9]+)\.(?:jpe?g|png)$", re.IGNORECASE)


@dataclass
class Unit:
    """One retrievable piece of the corpus.

    `page` is 1-indexed for PDF pages; `start`/`end` are seconds for video clips; `chunk` numbers text
    chunks within their file. `keyframes` are the sampled timestamps (seconds) of a video clip.
    """

    uid: str
    source: str  # absolute path of the file it came from
    root: str  # the corpus root the file was found under; served files never leave it
    modality: str
    content_hash: str  # sha256 of the source file
    text: str = ""
    page: int | None = None
    start: float | None = None
    end: float | None = None
    chunk: int | None = None
    keyframes: list[float] = field(default_factory=list)
    text_source: str = ""  # "pdf-text", "ocr:<engine>", "file", or "" when no text was found
    width: int | None = None
    height: int | None = None
    doc: str = ""  # a page image's document (X.pdf for X_3.jpg, with `page` 3); empty for everything else
    # tables read from the OCR boxes of a scanned page or an image (retrieval/tables.py, Table.to_dict); a page
    # with a text layer has none here: its tables are built from its word boxes when asked (page_tables)
    tables: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ValueError(f"unknown modality {self.modality!r}; expected one of {MODALITIES}")

    @property
    def name(self) -> str:
        return Path(self.source).name

    def location(self) -> str:
        """Where in its file the unit lies: `p.5`, `01:00-02:00`, `#3`; empty for a whole image."""
        if self.modality == "page" or self.doc:
            return f"p.{self.page}"
        if self.modality == "video":
            return f"{_mmss(self.start or 0.0)}-{_mmss(self.end or 0.0)}"
        if self.modality == "text":
            return f"#{self.chunk}"
        return ""

    def citation(self) -> str:
        """A short human-readable reference: `report.pdf p.5`, `talk.mp4 01:00-02:00`, `poster.png`; a page
        image cites its page of the document (`report.pdf p.5`), whichever copy of the page was indexed."""
        loc = self.location()
        name = self.doc or self.name
        return f"{name} {loc}" if loc else name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Unit":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    # Lazy loaders: the hit tells the agent how to get pixels, and pays only when asked.
    def load_image(self, max_pixels: int | None = None, dpi: float = 144.0):
        """The unit's picture as a PIL image: the page rendered at `dpi`, the image, or the clip's first keyframe;
        shrunk to `max_pixels` when larger."""
        from retrieval import loaders

        if self.modality == "page":
            return loaders.render_pdf_page(self.source, self.page or 1, max_pixels=max_pixels, dpi=dpi)
        if self.modality == "image":
            return loaders.open_image(self.source, max_pixels=max_pixels)
        if self.modality == "video":
            frames = self.load_frames(self.keyframes[:1], max_pixels=max_pixels)
            return frames[0][1]
        raise ValueError(f"{self.citation()} is a text unit; it has no image (use .text)")

    def frame_size(self) -> tuple[int, int]:
        """(w, h) of the unit's own pixels, the frame crop boxes are given in: an image file's size, a page's at
        `loaders.PAGE_DPI` (200, VRAG's page-image resolution), a clip's decoded keyframe; read without decoding
        where the file allows."""
        from retrieval import loaders

        if self.modality == "page":
            return loaders.pdf_page_frame(self.source, self.page or 1)
        if self.modality == "image":
            return loaders.image_size(self.source)
        return self.load_image().size

    def load_frames(self, timestamps: list[float] | None = None, max_pixels: int | None = None):
        """[(timestamp, PIL image)] for a video clip, at its keyframes unless `timestamps` are given."""
        from retrieval import loaders

        if self.modality != "video":
            raise ValueError(f"{self.citation()} is a {self.modality}, not a video clip")
        return loaders.read_video_frames(self.source, timestamps or self.keyframes, max_pixels=max_pixels)


def page_image_name(name: str) -> tuple[str, int] | None:
    """(document, page) when a file name follows VRAG's page-image convention, else None. Whether such a file
    really is a page is the indexer's call (retrieval/ingest.py), made with the rest of the corpus in view.

    >>> page_image_name("aliyun4_11.jpg"), page_image_name("slide_3_1024.PNG"), page_image_name("cat.jpg")
    (('aliyun4.pdf', 11), ('slide_3.pdf', 1024), None)
    """
    m = _PAGE_IMAGE.match(name)
    if not m or int(m.group("page")) < 1:
        return None
    return f"{m.group('stem')}.pdf", int(m.group("page"))


def page_id(unit: Unit | dict[str, Any]) -> tuple[str, int | None]:
    """The one notion of page identity: (document file name, 1-based page) for a PDF page and for a page image
    indexed as a page of its PDF; (file name, None) for any other unit. Eval gold matching, retrieval metrics,
    the RL rewards, citations and the search API all compare pages by this.

    >>> page_id({"source": "/c/pdf/X.pdf", "modality": "page", "page": 3})
    ('X.pdf', 3)
    >>> page_id({"source": "/c/img/X_3.jpg", "modality": "image", "page": 3, "doc": "X.pdf"})
    ('X.pdf', 3)
    >>> page_id({"source": "/c/img/photo_2.jpg", "modality": "image"})  # not mapped when it was indexed
    ('photo_2.jpg', None)
    """
    d = (
        unit
        if isinstance(unit, dict)
        else {"source": unit.source, "modality": unit.modality, "page": unit.page, "doc": unit.doc}
    )
    if d.get("doc"):
        return d["doc"], d.get("page")
    return Path(d.get("source", "")).name, d.get("page") if d.get("modality", "page") == "page" else None


@dataclass
class Hit:
    """A search result: the unit, its fused score, and the per-method scores behind it."""

    unit: Unit
    score: float
    rank: int = 0
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit.to_dict(), "score": self.score, "rank": self.rank, "scores": dict(self.scores)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Hit":
        return cls(Unit.from_dict(d["unit"]), float(d["score"]), int(d.get("rank", 0)), dict(d.get("scores", {})))


@dataclass
class Filters:
    """Optional restrictions on a search.

    `docs` match a unit's source by file name, by path suffix or by full path. `time_span` keeps video
    clips overlapping [start, end] seconds (other modalities pass through unless `modalities` excludes
    them).
    """

    docs: list[str] | None = None
    modalities: list[str] | None = None
    time_span: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.modalities:
            bad = [m for m in self.modalities if m not in MODALITIES]
            if bad:
                raise ValueError(f"unknown modality filter {bad}; expected some of {MODALITIES}")
        if self.time_span is not None:
            a, b = self.time_span
            if a > b:
                raise ValueError(f"time_span {self.time_span} is inverted; give (start, end) with start <= end")

    def is_empty(self) -> bool:
        return not self.docs and not self.modalities and self.time_span is None

    def accepts(self, unit: Unit) -> bool:
        if self.modalities and unit.modality not in self.modalities:
            return False
        if self.docs and not any(
            _doc_matches(unit.source, d) or (unit.doc and unit.doc == Path(d).name) for d in self.docs
        ):
            return False
        if self.time_span is not None and unit.modality == "video":
            a, b = self.time_span
            if (unit.end or 0.0) < a or (unit.start or 0.0) > b:
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Filters":
        d = d or {}
        span = d.get("time_span")
        return cls(docs=d.get("docs"), modalities=d.get("modalities"), time_span=tuple(span) if span else None)


def _wanted_path(wanted: str) -> str:
    return wanted.replace("\\", "/").lstrip("./")


def _doc_matches(source: str, wanted: str) -> bool:
    src = Path(source)
    if wanted == source or wanted == src.name:
        return True
    return src.as_posix().endswith("/" + _wanted_path(wanted))


def doc_names(wanted: str) -> set[str]:
    """The names a unit's file, or its `doc`, must have for a `Filters(docs=[wanted])` to accept it: `wanted` is
    matched as a whole path, a file name or a path suffix (`_doc_matches`), or as a page image's document. An index
    can look its candidates up by these instead of testing every unit."""
    return {Path(wanted).name, _wanted_path(wanted).rsplit("/", 1)[-1]}


def _mmss(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"
