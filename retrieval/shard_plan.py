"""Step 1 of a data-parallel ingest (retrieval/sharded.py): rank 0's plan of which rank indexes which file, and
where the shards live (DIR/.shards/rank-r, each with its done.json).
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.errors import IndexOpenError
from retrieval.ingest import Indexer, IngestConfig, IngestSummary
from retrieval.ingest_plan import same_content, unchanged, walk
from retrieval.store import DB_NAME, Store

SHARDS = ".shards"  # under the index folder; one store per rank while a data-parallel ingest runs
DONE = "done.json"


@dataclass
class ShardPlan:
    """What every rank indexes in one run."""

    run: str  # a fresh id per run: done.json files of earlier runs do not count
    world: int
    embedder: str  # canonical spec, the same on every rank
    files: list[tuple[str, str, int]] = field(default_factory=list)  # (file, root, rank) in walk order, to index
    page_of: dict[str, tuple[str, int]] = field(default_factory=dict)  # page images without their PDF
    error: str = ""  # rank 0 could not plan: every rank stops with this
    store: str = ""  # a shared store every rank writes to (milvus://...), or "" for local shards

    def shard(self, rank: int) -> list[tuple[str, str]]:
        return [(f, root) for f, root, r in self.files if r == rank]

    def to_dict(self) -> dict:
        return {
            "run": self.run,
            "world": self.world,
            "embedder": self.embedder,
            "files": self.files,
            "page_of": self.page_of,
            "error": self.error,
            "store": self.store,
        }

    @classmethod
    def from_dict(cls, d: dict) -> ShardPlan:
        return cls(
            d["run"],
            d["world"],
            d["embedder"],
            [tuple(f) for f in d["files"]],
            {k: tuple(v) for k, v in d["page_of"].items()},
            d.get("error", ""),
            d.get("store", ""),
        )


def shard_dir(index_dir: str | Path, rank: int) -> Path:
    return Path(index_dir) / SHARDS / f"rank-{rank}"


def plan(
    index_dir: str | Path, paths: list[str | Path], config: IngestConfig, world: int
) -> tuple[ShardPlan, IngestSummary]:
    """Rank 0's plan, and the summary of what planning found (skips, unchanged files, page images)."""
    from retrieval.embedder_specs import canonical_spec

    index_dir = Path(index_dir)
    shutil.rmtree(index_dir / (SHARDS + ".done"), ignore_errors=True)  # a merge killed while cleaning up
    main = Indexer(index_dir, config)  # checks the embedder against the index, as a 1-process run does
    store = getattr(main.store, "spec", None)
    if store is not None and store.kind == "milvus-lite" and world > 1:
        main.store.close()
        raise IndexOpenError(
            f"{world} processes cannot share the embedded {store.where}: it serves one process. Serve it with "
            f"`milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530` and index into a new folder with "
            f"--store milvus://127.0.0.1:19530/{store.collection}, or index with one process"
        )
    spec = canonical_spec(config.embedder) if config.embedder else (main.store.get_meta("embedder") or "minilm")
    _check_leftover_shards(index_dir, spec)
    summary = IngestSummary()
    # The page-image plan needs every file of the corpus at once, so it is made here, not per shard.
    files = main._pages_once(walk(paths, summary), summary)
    # Rank by walk position, not by position among the files left to do: a rerun after a crash gives each
    # file the shard that already holds it, and a shard meets same-content files in walk order every time.
    todo = [
        (str(f), str(root), i % world) for i, (f, root) in enumerate(files) if not _unchanged(main.store, f, summary)
    ]
    if main.store.kind != "local":
        todo = _drop_twins(main.store, todo, summary)
        main.store.create_collections()  # the collections every rank writes to exist before any rank starts
    keep = {f for f, _, _ in todo}
    page_of = {str(p): (doc, page) for p, (doc, page) in main._page_of.items() if str(p) in keep}
    shared = str(main.store.spec) if main.store.kind != "local" else ""
    main.store.close()
    return ShardPlan(uuid.uuid4().hex, world, spec, todo, page_of, store=shared), summary


def _drop_twins(store, todo: list[tuple[str, str, int]], summary: IngestSummary) -> list[tuple[str, str, int]]:
    """Leave out files whose content another planned file (or the index) already has, as a 1-process run does.

    Needed where ranks write into one shared collection: units are keyed by content hash, so two ranks indexing
    the same content under two paths would write one set of units that both paths' records claim. Local shards
    resolve this in the merge instead."""
    from retrieval.ingest_plan import sha256_file

    seen: dict[str, str] = {}
    out = []
    for f, root, r in todo:
        try:
            size = Path(f).stat().st_size
            sha = sha256_file(f) if size else None  # empty files are reported as empty by their rank
        except OSError:
            out.append((f, root, r))  # its rank records why it cannot be read
            continue
        if not same_content(f, sha, size, seen, store, summary)[0]:
            out.append((f, root, r))
    return out


def _unchanged(store: Store, path: Path, summary: IngestSummary) -> bool:
    """Whether the main index already holds `path` as it is on disk, by a 1-process run's rule; a file that
    cannot be read is left to its shard, which records why."""
    try:
        return unchanged(store, path, path.stat(), summary)[0]
    except OSError:
        return False


def _check_leftover_shards(index_dir: Path, spec: str) -> None:
    root = index_dir / SHARDS
    for d in sorted(root.glob("rank-*")) if root.is_dir() else []:
        if not (d / DB_NAME).exists():
            continue
        s = Store(d)
        try:
            built = s.get_meta("embedder")
        finally:
            s.close()
        if built and built != spec:
            raise IndexOpenError(
                f"{root} holds an unfinished data-parallel ingest made with embedder {built!r}, not {spec!r}; "
                f"finish it with --embedder {built}, or delete {root} to start over with {spec}"
            )
