"""What an ingest run has to do: walking the paths, and telling new or changed files from ones the index holds.

`walk` lists the indexable files under the paths given (following symlinks only inside their root), and
`unchanged` is the test a file must fail to be indexed again: the same size and mtime as its record, or
else the same content hash. The one-process `Indexer` and the data-parallel plan (`retrieval/sharded.py`)
both use it, so a file counts as unchanged under the same rule in both.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval import loaders

if TYPE_CHECKING:
    from retrieval.ingest import IngestSummary
    from retrieval.store import Store


def sha256_file(path: str | Path, bufsize: int = 1 << 20) -> str:
    """The hex SHA-256 of a file's bytes, read a MiB at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def walk(paths: list[str | Path], summary: IngestSummary) -> list[tuple[Path, Path]]:
    """(file, root) pairs for every indexable file under `paths`; problems go to the summary.

    A directory is its own root; a file given directly has its folder as root. Symlinks are followed only
    while they stay inside their root.
    """
    found: list[tuple[Path, Path]] = []
    unsupported: Counter[str] = Counter()
    for p in paths:
        p = Path(p)
        if not p.exists() and not p.is_symlink():
            summary.failed.append((str(p), "no such file or directory (check the path)"))
            continue
        if p.is_file():
            root = p.parent.resolve()
            candidates = [root / p.name]
        else:
            root = p.resolve()
            candidates = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                for d in list(dirnames):
                    full = Path(dirpath) / d
                    if full.is_symlink():
                        dirnames.remove(d)  # never descend into links: inside-root targets are walked anyway
                        if not _inside(full.resolve(), root):
                            summary.skipped.append((str(full), f"symlink leaves the corpus root {root}"))
                for name in sorted(filenames):
                    candidates.append(Path(dirpath) / name)
        for f in candidates:
            if f.is_symlink() and not _inside(f.resolve(), root):
                summary.skipped.append((str(f), f"symlink leaves the corpus root {root}"))
                continue
            if loaders.kind_of(f) is None:
                unsupported[f.suffix.lower() or "(no extension)"] += 1
                continue
            found.append((f, root))
    if unsupported:
        kinds = ", ".join(f"{ext} x{n}" for ext, n in unsupported.most_common())
        summary.skipped.append((f"{sum(unsupported.values())} files", f"unsupported types ({kinds})"))
    return found


def unchanged(store: Store, path: Path, st: os.stat_result, summary: IngestSummary) -> tuple[bool, str | None]:
    """Whether `store` already holds `path` as it is on disk (`st`), and its content hash if one was computed.

    Same size and mtime as the record: unchanged, counted in the summary (a file that failed is listed again
    with its reason). Else, for a file indexed before, the content hash decides; an unchanged one gets its new
    size and mtime recorded. A file the store has never seen is not hashed here. Raises OSError when the file
    cannot be read.
    """
    key = str(path)
    old = store.file(key)
    if old is None:
        return False, None
    if old.size == st.st_size and old.mtime == st.st_mtime:
        if old.status == "ok":
            summary.unchanged += 1
        else:
            summary.failed.append((key, f"{old.reason} [unchanged since it last failed]"))
        return True, None
    sha = sha256_file(path)
    if old.sha256 == sha and old.status == "ok":
        store.touch(key, st.st_size, st.st_mtime)
        summary.unchanged += 1
        return True, sha
    return False, sha


def same_content(
    path: str, sha: str | None, size: int | None, seen: dict[str, str], store: Store, summary: IngestSummary
) -> tuple[bool, str | None]:
    """A run's rule for content it (`seen`: hash -> path) or the index already holds under another path:
    (skip this file, the path it replaces).

    Another path with this content that still exists makes this file a duplicate, skipped with the reason in the
    summary; one that is gone makes it a move, whose old record this file replaces. Empty files are never copies
    of each other (they all share one hash), and neither is a file whose hash is unknown. The one-process
    `Indexer`, the local merge and the shared-collection plan (retrieval/sharded.py) all decide by this rule.
    """
    if not sha or not size:
        return False, None
    twin = seen.get(sha) or store.path_with_hash(sha)
    if twin and twin != path and Path(twin).exists():
        summary.skipped.append((path, f"duplicate of {twin} (same content)"))
        return True, None
    seen[sha] = path
    return False, twin if twin and twin != path else None


def expected_units(path: Path, chunk_chars: int) -> int:
    """How many units a file will likely give, for the progress bar: pages of a PDF, else a size estimate."""
    kind = loaders.kind_of(path)
    if kind == "pdf":
        return loaders.pdf_page_count(path) or 1
    if kind == "text":
        try:
            return max(1, -(-path.stat().st_size // max(1, chunk_chars)))
        except OSError:
            return 1
    return 1


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
