"""The web demo's server-side state: where files live, the shared index, uploads, and loaded policies.

    workdir/
      index/      the persistent index (bundled corpus + uploads); survives restarts
      uploads/    files users uploaded, after their type was checked
      runs/       one folder per answered question: its config.json, gallery pictures, graph PNGs, trace.json
                  (the oldest are deleted beyond `keep_runs`)
      cache/      Gradio's file cache (GRADIO_TEMP_DIR), so everything served sits under the workdir

Loaded policies are shared by all sessions, and so is the lock that lets a local model answer one question
at a time. Only the corpus, uploads/, runs/ and cache/ are ever served (never the index); upload names are
reduced to a safe base name, so no path from a user escapes its folder.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval import loaders

BUNDLED = Path(__file__).resolve().parent.parent / "assets" / "corpus"
QUESTIONS = Path(__file__).resolve().parent.parent / "assets" / "questions.jsonl"
SCOPE_ALL, SCOPE_BUNDLED, SCOPE_UPLOADS = "everything", "bundled demo corpus", "my uploads"


class UploadError(ValueError):
    """An upload was refused (type, size, content); the message says which file and why."""


def safe_name(name: str) -> str:
    """A file's base name reduced to letters, digits, '.', '-', '_' (never a path, never hidden).

    >>> safe_name("../../etc/passwd")
    'passwd'
    >>> safe_name("Quarterly Report (final).PDF")
    'Quarterly_Report_final_.PDF'
    >>> safe_name("..")
    'upload'
    """
    base = re.split(r"[\\/]", name)[-1]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).lstrip(".")
    base = re.sub(r"_+", "_", base)
    return base[:120] or "upload"


def _magic_ok(path: Path, kind: str) -> str | None:
    """None when the file's first bytes match its kind, else what is wrong."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if not head:
        return "the file is empty"
    if kind == "pdf":
        return None if b"%PDF-" in head[:1024] else "not a PDF (no %PDF- header); is the file corrupt?"
    if kind == "image":
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path) as im:
                im.verify()
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            return f"not a readable image ({e}); is the file corrupt?"
        return None
    if kind == "video":
        ok = head[4:8] == b"ftyp" or head[:4] == b"\x1a\x45\xdf\xa3" or (head[:4] == b"RIFF" and head[8:12] == b"AVI ")
        return None if ok else "not an MP4/MOV/MKV/WebM/AVI video (unknown header); is the file corrupt?"
    if kind == "text":
        if b"\x00" in head:
            return "not a text file (it contains NUL bytes)"
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.start < len(head) - 4:  # a multi-byte character cut at the 4 KiB boundary is fine
                return "not UTF-8 text; save it as UTF-8 and upload again"
        return None
    return "unsupported type"


def check_upload(path: Path, max_bytes: int) -> str:
    """The file's kind ('pdf', 'image', 'video', 'text'), or UploadError saying what is wrong with it."""
    kind = loaders.kind_of(path)
    if kind is None:
        raise UploadError(
            f"{path.name}: unsupported type {path.suffix or '(no extension)'}; upload PDF "
            f"({', '.join(sorted(loaders.PDF_EXTS))}), images ({', '.join(sorted(loaders.IMAGE_EXTS))}), "
            f"videos ({', '.join(sorted(loaders.VIDEO_EXTS))}) or text "
            f"({', '.join(sorted(loaders.TEXT_EXTS))})"
        )
    size = path.stat().st_size
    if size > max_bytes:
        raise UploadError(
            f"{path.name}: {size / 2**20:.1f} MB is over the {max_bytes / 2**20:.0f} MB upload limit "
            "(start the app with a larger --max-upload-mb, or index it with `vimrag index`)"
        )
    problem = _magic_ok(path, kind)
    if problem:
        raise UploadError(f"{path.name}: {problem}")
    return kind


@dataclass
class Workspace:
    root: Path
    corpus: Path = BUNDLED
    max_upload_mb: int = 50
    keep_runs: int = 200
    search_url: str = ""  # search through this server instead of the local index (uploads are then refused)
    _retriever: Any = None
    _policies: dict[str, Any] = field(default_factory=dict)
    _model_locks: dict[str, threading.Lock] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _index_lock: threading.Lock = field(default_factory=threading.Lock)
    _indexing: tuple[int, int] | None = None  # (done, total) pages of the indexing job under way

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.corpus = Path(self.corpus).resolve()
        for d in (self.index_dir, self.uploads, self.runs, self.cache):
            d.mkdir(parents=True, exist_ok=True)

    # the workspace's folders, under root
    index_dir = property(lambda self: self.root / "index")
    uploads = property(lambda self: self.root / "uploads")
    runs = property(lambda self: self.root / "runs")
    cache = property(lambda self: self.root / "cache")

    def served_roots(self) -> list[str]:
        """The only folders the web server may serve files from (besides its cache): never the index."""
        return [str(self.corpus), str(self.uploads), str(self.runs)]

    # -- the index --------------------------------------------------------------------------------
    @property
    def retriever(self):
        with self._lock:
            if self._retriever is None:
                from retrieval.retriever import open_retriever

                self._retriever = open_retriever(self.index_dir, self.search_url, text_only=True)  # embedded may read
            return self._retriever

    def index(self, paths: list[Path], progress: bool = False):
        """Add files to the shared index (one indexing job at a time). Returns the IngestSummary."""
        from retrieval.ingest import Indexer

        def report(done: int, total: int) -> None:
            with self._lock:
                self._indexing = (done, total)

        with self._index_lock:
            report(0, 0)
            try:
                summary = Indexer(self.index_dir).index([str(p) for p in paths], progress=progress, on_progress=report)
            finally:
                with self._lock:
                    self._indexing = None
        if self._retriever is not None:
            self._retriever.refresh()
        return summary

    def indexing(self) -> tuple[int, int] | None:
        """(pages indexed, pages in all) of the indexing job under way, or None when none is."""
        with self._lock:
            return self._indexing

    def index_bundled(self, progress: bool = False):
        if self.search_url:
            raise ValueError(f"this demo searches the server at {self.search_url}; index files on its machine")
        if not self.corpus.is_dir():
            raise FileNotFoundError(
                f"the bundled corpus {self.corpus} is missing; regenerate it with `python -m assets.make_corpus`"
            )
        return self.index([self.corpus], progress=progress)

    def files(self) -> list[dict[str, Any]]:
        """What the index holds, one row per file, for the corpus panel."""
        from retrieval.stores import open_store

        rows = []
        for r in open_store(self.index_dir, create=True).files():
            p = Path(r.path)
            where = (
                SCOPE_BUNDLED
                if self._under(p, self.corpus)
                else SCOPE_UPLOADS
                if self._under(p, self.uploads)
                else str(p.parent)
            )
            rows.append(
                {
                    "file": p.name,
                    "corpus": where,
                    "kind": loaders.kind_of(p) or "?",
                    "units": r.n_units,
                    "status": r.status,
                    "reason": r.reason or "",
                }
            )
        return sorted(rows, key=lambda r: (r["corpus"], r["file"]))

    def docs_for(self, scope: str) -> list[str] | None:
        """Search filter for a scope: every indexed file under that corpus, or None for everything."""
        if scope in (None, "", SCOPE_ALL):
            return None
        if self.search_url:
            raise ValueError(
                f"this demo searches the server at {self.search_url}, which holds its own corpus; choose '{SCOPE_ALL}'"
            )
        from retrieval.stores import open_store

        root = self.corpus if scope == SCOPE_BUNDLED else self.uploads
        docs = [r.path for r in open_store(self.index_dir, create=True).files(under=str(root)) if r.status == "ok"]
        if not docs:
            raise ValueError(f"nothing is indexed in {scope} yet; upload files or choose another scope")
        return docs

    @staticmethod
    def _under(p: Path, root: Path) -> bool:
        return root in p.parents

    # -- uploads ----------------------------------------------------------------------------------
    def add_uploads(self, files: list[str | Path], progress: bool = False) -> tuple[Any, list[str]]:
        """Check, copy into uploads/ and index `files`. Returns (IngestSummary or None, problems).

        A refused or unindexable file is removed again, so uploads/ only holds what the index could read,
        and whatever was indexed before stays as it was.
        """
        if self.search_url:
            return None, [
                f"this demo searches the server at {self.search_url}, so uploads here would never be "
                "searched; index them on the server's machine (`vimrag index FILES --index DIR`)"
            ]
        problems: list[str] = []
        saved: list[Path] = []
        for f in files:
            src = Path(f)
            try:
                check_upload(src, self.max_upload_mb * 2**20)
            except UploadError as e:
                problems.append(str(e))
                continue
            except OSError as e:
                problems.append(f"{src.name}: cannot read the upload ({e.strerror or e})")
                continue
            dest = self._free_name(safe_name(src.name), src)
            if dest.exists():  # the same content is already here
                saved.append(dest)
                continue
            shutil.copyfile(src, dest)
            saved.append(dest)
        if not saved:
            return None, problems
        summary = self.index(saved, progress=progress)
        failed = {Path(p).resolve() for p, _ in summary.failed}
        for p in saved:
            if p.resolve() in failed:
                p.unlink(missing_ok=True)
        if failed:
            from retrieval.ingest import Indexer

            with self._index_lock:
                Indexer(self.index_dir).prune([self.uploads])
        problems += [f"{Path(p).name}: {why}" for p, why in summary.failed]
        return summary, problems

    def _free_name(self, name: str, src: Path) -> Path:
        """uploads/name, or name-2, name-3... when a different file already has that name."""
        from retrieval.ingest import sha256_file

        dest = self.uploads / name
        stem, suffix = dest.stem, dest.suffix
        n = 1
        while dest.exists() and sha256_file(dest) != sha256_file(src):
            n += 1
            dest = self.uploads / f"{stem}-{n}{suffix}"
        return dest

    # -- runs -------------------------------------------------------------------------------------
    def new_run(self, config: dict[str, Any] | None = None) -> Path:
        """A fresh folder under runs/ holding `config` (the resolved settings of the question) as config.json."""
        d = self.runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        d.mkdir(parents=True)
        if config is not None:
            (d / "config.json").write_text(json.dumps(config, indent=1, ensure_ascii=False), encoding="utf-8")
        old = sorted(p for p in self.runs.iterdir() if p.is_dir())
        for p in old[: max(0, len(old) - self.keep_runs)]:
            shutil.rmtree(p, ignore_errors=True)
        return d

    # -- policies ---------------------------------------------------------------------------------
    def policy(self, config):
        """A loaded policy for this PolicyConfig, shared by all sessions (models load once)."""
        from agent.backends.base import load_policy

        key = _key(config)
        with self._lock:
            pol = self._policies.get(key)
            if pol is None:
                pol = self._policies[key] = load_policy(config)
            return pol

    def model_lock(self, config) -> threading.Lock | None:
        """The lock an episode holds while a local model (transformers) answers: it answers one question at
        a time. None for the other backends (endpoints queue on their own; the embedded one is cheap)."""
        if config.backend != "transformers":
            return None
        with self._lock:
            return self._model_locks.setdefault(_key(config), threading.Lock())

    def close(self) -> None:
        with self._lock:
            for p in self._policies.values():
                p.close()
            self._policies.clear()


def _key(config) -> str:
    return json.dumps(config.to_dict(redact=False), sort_keys=True)


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    """The demo questions (id, question, answer[], evidence[], needs[]); none when the file is absent."""
    from eval.datasets import read_records

    return read_records(path) if path.exists() else []
