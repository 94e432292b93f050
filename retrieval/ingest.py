"""Ingestion: turn folders of PDFs, images, videos and text into units, vectors and an index.

`Indexer.index(paths)` walks the paths, skips files it already has (same size and mtime, or same content hash),
extracts units (PDF pages with their text layer, images, ~60 s video clips with their keyframes, text chunks),
runs OCR where there is no text layer (both in retrieval/extract_units.py), embeds, and commits in batches. Each
batch is one SQLite transaction, so `kill -9` at any moment loses at most the batch in flight, and a rerun
picks up from there. Bad files are recorded with their reason and never stop the run. An index on Milvus
(`IngestConfig.store`, retrieval/milvus_store.py) goes through the same code; its batches are upserts keyed by
content hash, with the file records written last, which keeps the same guarantee.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from retrieval import loaders
from retrieval.embed_units import embed_units, passage_count
from retrieval.errors import IndexOpenError, IngestError
from retrieval.extract_units import UnitExtractor
from retrieval.ingest_plan import expected_units, same_content, sha256_file, unchanged, walk
from retrieval.precision import merge_precisions
from retrieval.store import FileRecord, PendingFile

# Test hook: seconds to sleep after each committed batch, so a test can SIGKILL an ingest mid-run. Unset in
# normal use.
DELAY_ENV = "VIMRAG_TEST_SHARD_DELAY"


@dataclass
class IngestConfig:
    """How files become units: OCR, video clips and keyframes, text chunks, passages, batches."""

    embedder: str | None = field(
        default=None,
        metadata={
            "help": "the index's own embedder, or minilm for a new index (offline) | st:PATH | clip:ID_OR_PATH | "
            "siglip:ID_OR_PATH | colqwen2:ID_OR_PATH | gve:ID_OR_PATH (Alibaba-NLP/GVE-3B, GVE-7B) | "
            "qwen3vl-emb:ID_OR_PATH (Qwen/Qwen3-VL-Embedding-2B, -8B)"
        },
    )
    precision: str | None = field(
        default=None,
        metadata={
            "help": "the text embedder's number format on a CPU: auto (measures once per machine; bf16 only on a "
            "CPU with native bf16, where it is faster) | fp32 | bf16; default $VIMRAG_PRECISION or auto",
            "choices": ("auto", "fp32", "bf16"),
        },
    )
    ocr: str = field(
        default="auto",
        metadata={"help": "OCR for images, frames and scanned pages: auto | rapidocr | tesseract | none"},
    )
    clip_seconds: float = field(default=60.0, metadata={"help": "videos are split into clips of about this length"})
    keyframe_every: float = field(default=4.0, metadata={"help": "one keyframe per this many seconds of a clip"})
    max_keyframes: int = field(default=16, metadata={"help": "at most this many keyframes per clip"})
    chunk_chars: int = field(
        default=1000, metadata={"help": "text files are split into chunks of about this many characters"}
    )
    min_text_chars: int = field(
        default=20, metadata={"help": "PDF pages with less text than this are treated as scanned and OCR'd"}
    )
    ocr_dpi: float = field(default=144.0, metadata={"help": "render resolution of scanned pages for OCR"})
    passage_words: int = field(
        default=150,
        metadata={"help": "a unit's text is embedded in passages of this many words (MiniLM reads 256 tokens)"},
    )
    max_passages: int = field(default=16, metadata={"help": "at most this many passages per unit"})
    batch_units: int = field(
        default=64, metadata={"help": "units per committed batch (the checkpoint size)", "aliases": ["batch-size"]}
    )
    pipeline: bool = field(
        default=True, metadata={"help": "read the next file (text, rendering, OCR) while this batch is embedded"}
    )
    store: str | None = field(
        default=None,
        metadata={
            "help": "where the index lives: the index's own store, or local for a new one | local (SQLite + FAISS in "
            "the index folder) | milvus-lite:PATH (embedded Milvus Lite) | milvus://HOST:PORT[/COLLECTION] (a Milvus "
            "server or cluster; token from $VIMRAG_MILVUS_TOKEN)"
        },
    )
    page_images: bool = field(
        default=True,
        metadata={
            "help": "images named X_N.jpg are page N of X.pdf (VRAG's corpus layout), left out when X.pdf is "
            "indexed too, so each page is indexed once; --no-page-images: plain images"
        },
    )


@dataclass
class IngestSummary:
    files_indexed: int = 0
    units_indexed: int = 0
    unchanged: int = 0
    pruned: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    plain_images: list[tuple[str, str]] = field(default_factory=list)  # named like page images but not pages: why
    page_images: int = 0  # images indexed as pages of their document (VRAG's X_N.jpg without X.pdf)
    seconds: float = 0.0
    total_units: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # busy seconds per stage; pipelined stages overlap
    precision: str = ""  # what this run's vectors were computed in, and why (retrieval/precision.py)

    def format(self) -> str:
        lines = [
            f"indexed {self.units_indexed} units from {self.files_indexed} files in {self.seconds:.1f}s; "
            f"{self.unchanged} files unchanged, {len(self.skipped)} skipped, {len(self.failed)} failed"
            + (f", {self.pruned} pruned" if self.pruned else "")
            + f"; index holds {self.total_units} units"
        ]
        busy = sorted(((v, k) for k, v in self.timings.items() if v >= 0.05), reverse=True)
        if busy and self.units_indexed:
            lines.append(
                f"{self.units_indexed / max(self.seconds, 1e-9):.1f} units/s; busy seconds per stage: "
                + ", ".join(f"{k} {v:.1f}" for v, k in busy)
            )
        if self.precision:
            lines.append(f"embedded in {self.precision}")
        if self.page_images:
            lines.append(
                f"{self.page_images} page images indexed as the pages of their PDFs (X_N.jpg is page N of X.pdf)"
            )
        for title, rows in (
            ("skipped", self.skipped),
            ("failed", self.failed),
            ("indexed as plain images, not pages", self.plain_images),
        ):
            if rows:
                lines.append(f"{title}:")
                shown = rows if len(rows) <= 12 or title != "indexed as plain images, not pages" else rows[:5]
                lines += [f"  {p}: {why}" for p, why in shown]
                if len(shown) < len(rows):
                    lines.append(f"  ... and {len(rows) - len(shown)} more (--json lists them all)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_READ_AHEAD = 2  # files read ahead of the one being embedded: enough to hide reading, few pages held


@dataclass
class _Job:
    """A file found new or changed, with the record it will be committed under."""

    path: Path
    root: Path
    record: FileRecord
    replaces: str | None


class _Clock:
    """Adds each stage's busy seconds to a dict: `with clock("ocr"): ...`, from any thread."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.into[stage] = self.into.get(stage, 0.0) + time.perf_counter() - t


class Indexer:
    """Indexes files into one store. The seams a data-parallel run needs (retrieval/sharded.py) are arguments:
    `store` (a shard's store, or the shared Milvus collection), `device` (the rank's GPU), and, on `index`,
    `planned` (files and page images planned over the whole corpus by rank 0)."""

    def __init__(
        self,
        index_dir: str | Path,
        config: IngestConfig | None = None,
        embedder=None,
        ocr=None,
        store=None,
        device: str | None = None,
    ) -> None:
        from retrieval.embedder_specs import canonical_spec
        from retrieval.stores import open_store

        self.config = config or IngestConfig()
        self.store = store if store is not None else open_store(index_dir, create=True, store=self.config.store)

        built_with = self.store.get_meta("embedder")
        # Compare canonical specs: "clip:./m" and "clip:/abs/m" are the same model.
        spec = canonical_spec(self.config.embedder) if self.config.embedder else (built_with or "minilm")
        if built_with and spec != built_with:
            raise IndexOpenError(
                f"{index_dir} was built with embedder {built_with!r}, not {spec!r}; "
                f"use --embedder {built_with} or index into a new folder"
            )
        self._embedder = embedder
        self._prepared = False
        self._embedder_spec = spec
        self._device = device
        self._delay = float(os.environ.get(DELAY_ENV, "0") or 0)
        self.extractor = UnitExtractor(self.config, ocr)

    # Heavy parts load on first use, so a run with nothing new costs no model load.
    @property
    def embedder(self):
        if self._embedder is None:
            from retrieval.embedders import load_embedder

            self._embedder = load_embedder(self._embedder_spec, device=self._device, precision=self.config.precision)
        return self._embedder

    def index(
        self,
        paths: list[str | Path],
        prune: bool = False,
        progress: bool = True,
        on_progress=None,
        planned: tuple[list[tuple[Path, Path]], dict[Path, tuple[str, int]]] | None = None,
    ) -> IngestSummary:
        """Index what is new or changed under `paths`; one progress bar in pages, with pages/s and an ETA.
        `on_progress(done, total)` is called with the pages committed so far (the demo tells a question asked
        meanwhile how far its upload is). `planned` = ((file, root) pairs, {page image: (doc, page)}) replaces
        walking `paths` and the page-image plan: a data-parallel rank indexes its share of rank 0's plan.

        Files are checked in order (size and mtime, then content hash) on this thread, which owns the store.
        When `IngestConfig.pipeline` is on, reading them (PDF text, rendering, OCR, video frames) runs up to
        two files ahead on a worker thread while this thread embeds and commits; both stages spend their time
        in native code that releases the GIL. Commits stay in file order, a batch at a time.
        """
        from tqdm.auto import tqdm

        t0 = time.perf_counter()
        summary = IngestSummary()
        clock = _Clock(summary.timings)
        with clock("plan"):
            if planned is None:
                files = self._pages_once(walk(paths, summary), summary)
            else:
                files, self._page_of = planned
            seen: dict[str, str] = {}  # content hash -> path, so a second copy of a file is skipped
            todo = [job for path, root in files if (job := self._check(path, root, seen, summary)) is not None]
            sizes = [expected_units(job.path, self.config.chunk_chars) for job in todo]
        bar = tqdm(
            total=sum(sizes), desc="indexing", unit="page", disable=not progress, dynamic_ncols=True, smoothing=0.1
        )
        pending: list[PendingFile] = []
        n_pending = done = 0
        total = sum(sizes)
        try:
            for job, expected, pf in self._extracted(todo, sizes, clock):
                bar.set_postfix_str(_short(job.path.name), refresh=False)
                if len(pf.units) != expected:  # a video's clip count, a text file's chunks: now known
                    bar.total += len(pf.units) - expected
                    total += len(pf.units) - expected
                pending.append(pf)
                n_pending += len(pf.units)
                if n_pending >= self.config.batch_units:
                    self._flush(pending, summary, clock, total)
                    bar.update(n_pending)
                    done += n_pending
                    pending, n_pending = [], 0
                    if on_progress is not None:  # the bar counts nothing when it is disabled: count here
                        on_progress(done, max(done, total))
            self._flush(pending, summary, clock, total)
            bar.update(n_pending)
            done += n_pending
            if on_progress is not None:
                on_progress(done, done)
        finally:
            bar.close()
        if prune:
            summary.pruned = self.prune(paths)
        with clock("commit"):
            self.store.flush()  # also what a killed earlier run left unsealed
        summary.total_units = self.store.count_units()
        summary.seconds = time.perf_counter() - t0
        return summary

    def _extracted(self, todo: list[_Job], sizes: list[int], clock: _Clock) -> Iterator[tuple[_Job, int, PendingFile]]:
        """(job, expected units, PendingFile) in `todo` order; read ahead on one worker thread when pipelined."""
        if not self.config.pipeline or len(todo) < 2:
            for job, n in zip(todo, sizes):
                yield job, n, self._read(job, clock)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vimrag-read") as pool:
            ahead = [pool.submit(self._read, job, clock) for job in todo[:_READ_AHEAD]]
            try:
                for i, (job, n) in enumerate(zip(todo, sizes)):
                    pf = ahead[i].result()
                    if i + _READ_AHEAD < len(todo):
                        ahead.append(pool.submit(self._read, todo[i + _READ_AHEAD], clock))
                    ahead[i] = None  # type: ignore[call-overload]  # let the units go once committed
                    yield job, n, pf
            finally:
                for f in ahead:
                    if f is not None:
                        f.cancel()

    def _pages_once(self, files: list[tuple[Path, Path]], summary: IngestSummary) -> list[tuple[Path, Path]]:
        """Apply VRAG's page-image convention (retrieval/page_images.py): page images of a PDF that is indexed
        are left out (and dropped from the index if an earlier run took them), and page images without their
        PDF are marked as its pages."""
        self._page_of: dict[Path, tuple[str, int]] = {}
        if not self.config.page_images:
            return files
        from retrieval.page_images import plan_page_images

        images = [f for f, _ in files if loaders.kind_of(f) == "image"]
        if not images:
            return files
        pdfs = [f for f, _ in files if loaders.kind_of(f) == "pdf"]
        pdfs += [r.path for r in self.store.files() if r.status == "ok" and loaders.kind_of(r.path) == "pdf"]
        plan = plan_page_images(images, pdfs)
        self._page_of = plan.pages
        summary.plain_images += plan.plain
        left_out: set[Path] = set()
        for pdf, imgs in plan.duplicates.items():
            left_out.update(imgs)
            dropped = self.store.remove_files([str(p) for p in imgs if self.store.file(str(p))])
            summary.skipped.append(
                (
                    f"{len(imgs)} page images of {pdf}",
                    "its pages are indexed from the PDF (text layer and rendering), so each page is "
                    "indexed once"
                    + (f"; {dropped} indexed earlier were dropped" if dropped else "")
                    + "; --no-page-images indexes them as separate images",
                )
            )
        return [(f, root) for f, root in files if f not in left_out]

    def prune(self, paths: list[str | Path]) -> int:
        """Forget files under `paths` that no longer exist on disk."""
        gone = []
        for p in paths:
            p = Path(p)
            under = str(p.resolve()) if p.is_dir() else str(p.resolve().parent)
            gone += [r.path for r in self.store.files(under=under) if not Path(r.path).exists()]
        return self.store.remove_files(gone)

    # ------------------------------------------------------------------------------------------------
    def _check(self, path: Path, root: Path, seen: dict[str, str], summary: IngestSummary) -> _Job | None:
        """A job for a file that is new or changed; None (with the reason in the summary) for one to leave."""
        key = str(path)
        try:
            st = path.stat()
        except OSError as e:
            summary.failed.append((key, f"cannot read the file ({e.strerror or e}); check it exists and is readable"))
            return None
        try:
            same, sha = unchanged(self.store, path, st, summary)
            if same:
                return None
            sha = sha or sha256_file(path)
        except OSError as e:
            summary.failed.append((key, f"cannot read the file ({e.strerror or e}); check permissions"))
            return None
        skip, moved_from = same_content(key, sha, st.st_size, seen, self.store, summary)
        if skip:
            return None
        record = FileRecord(key, str(root), sha, st.st_size, st.st_mtime, "ok")
        # The same content under a path that is gone: a move, so the old record goes in the same commit.
        return _Job(path, root, record, moved_from)

    def _read(self, job: _Job, clock: _Clock) -> PendingFile:
        """The file's units (no vectors yet); a file that cannot be read becomes a failed record, never an error."""
        record = job.record
        if record.size == 0:
            record.status, record.reason = "failed", "the file is empty (0 bytes); replace it with the real file"
            return PendingFile(record, [], [])
        try:
            units = self.extractor.extract(job.path, job.root, record.sha256 or "", clock, self._page_of)
        except IngestError as e:
            record.status, record.reason = "failed", f"{e.reason}" + (f"; {e.fix}" if e.fix else "")
            return PendingFile(record, [], [])
        except Exception as e:  # noqa: BLE001 - a bug or an exotic decoder failure must not end the run
            record.status, record.reason = "failed", f"unexpected {type(e).__name__}: {e}"
            return PendingFile(record, [], [])
        return PendingFile(record, units, [], replaces=job.replaces)

    def _record_embedder(self, summary: IngestSummary) -> None:
        """The index's embedder and the precisions its vectors were made in ("fp32", "bf16" or "bf16+fp32" after
        runs in both); vectors from before precisions were recorded are fp32. Queries in any precision search them
        (the vectors agree to cosine >= 0.999, tests/retrieval/test_precision.py)."""
        emb = self.embedder
        built = self.store.get_meta("embedder")
        if built is None:
            self.store.set_meta("embedder", emb.spec)
        now = getattr(emb, "precision", "fp32")
        before = self.store.get_meta("precision") or ("fp32" if built else "")
        merged = merge_precisions(before, now)
        if merged != before:
            self.store.set_meta("precision", merged)
        summary.precision = emb.describe() if hasattr(emb, "describe") else now

    # ------------------------------------------------------------------------------------------------
    def _flush(self, pending: list[PendingFile], summary: IngestSummary, clock: _Clock, total: int = 0) -> None:
        """Embed and commit `pending`; `total` is the run's expected units (for `Embedder.prepare`)."""
        if not pending:
            return
        from retrieval.embedder_base import quiet

        units = [u for pf in pending for u in pf.units]
        if not self._prepared and units:
            c = self.config
            # this batch's passages per unit, over the whole run: what a bf16 route must outweigh to load
            expected = passage_count(units, c.passage_words, c.max_passages) * max(total, len(units)) // len(units)
            prepare = getattr(self.embedder, "prepare", None)  # an embedder passed in need not have it
            with clock("model load"), quiet():
                if prepare is not None:
                    prepare(expected)  # loaded here, so its seconds are not counted as embedding
            self._prepared = True
        with clock("embed"):
            self._embed(pending)
        with clock("commit"):
            if any(pf.units for pf in pending):
                self._record_embedder(summary)
            self.store.commit(pending)
        for pf in pending:
            if pf.record.status != "ok":
                summary.failed.append((pf.record.path, pf.record.reason))
            else:
                summary.files_indexed += 1
                summary.units_indexed += len(pf.units)
                summary.page_images += sum(1 for u in pf.units if u.doc)
        if self._delay:
            time.sleep(self._delay)

    def _embed(self, pending: list[PendingFile]) -> None:
        units = [u for pf in pending for u in pf.units]
        c = self.config
        per_unit = embed_units(self.embedder, units, c.passage_words, c.max_passages) if units else []
        i = 0
        for pf in pending:
            pf.vectors = per_unit[i : i + len(pf.units)]
            i += len(pf.units)


def _short(name: str, n: int = 30) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"
