"""The on-disk metadata and vector store: one SQLite file, the source of truth of an index.

Why SQLite: every ingest batch (its files, units and vectors) commits in one transaction, so a process
killed at any instant leaves either the whole batch or none of it, and never a half-written index. FAISS
and BM25 structures are derived from this store and rebuilt when its `version` moves on.

Tables:
  meta(key, value)          embedder spec, vector dim, version counter, ...
  files(path, ...)          one row per source file seen: hash, size, mtime, status ('ok' | 'failed'), reason
  units(id, uid, path, ...) one row per unit; `data` is the Unit as JSON
  vectors(id, unit_id, ...) one or more rows per unit (text passages, keyframes, or a multi-vector matrix)
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from retrieval.errors import IndexOpenError
from retrieval.units import Unit

SCHEMA_VERSION = 1
DB_NAME = "store.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, root TEXT NOT NULL, sha256 TEXT, size INTEGER, mtime REAL,
    status TEXT NOT NULL, reason TEXT, n_units INTEGER NOT NULL DEFAULT 0, indexed_at REAL);
CREATE INDEX IF NOT EXISTS files_sha ON files(sha256);
CREATE TABLE IF NOT EXISTS units (
    id INTEGER PRIMARY KEY AUTOINCREMENT, uid TEXT NOT NULL UNIQUE, path TEXT NOT NULL,
    modality TEXT NOT NULL, text TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS units_path ON units(path);
CREATE TABLE IF NOT EXISTS vectors (
    id INTEGER PRIMARY KEY AUTOINCREMENT, unit_id INTEGER NOT NULL, n_tokens INTEGER NOT NULL,
    vec BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS vectors_unit ON vectors(unit_id);
"""


@dataclass
class FileRecord:
    path: str
    root: str
    sha256: str | None
    size: int | None
    mtime: float | None
    status: str  # 'ok' or 'failed'
    reason: str = ""
    n_units: int = 0


@dataclass
class PendingFile:
    """A processed file waiting to be committed: its record, its units and each unit's vectors."""

    record: FileRecord
    units: list[Unit]
    vectors: list[list[np.ndarray]]  # per unit: one or more (dim,) or (n_tokens, dim) float32 arrays
    replaces: str | None = None  # a path whose file moved here (same content): removed in the same commit


class Store:
    kind = "local"

    def __init__(self, index_dir: str | Path, create: bool = False) -> None:
        self.dir = Path(index_dir)
        db = self.dir / DB_NAME
        if not db.exists():
            if not create:
                raise IndexOpenError(
                    f"no index at {self.dir} (missing {DB_NAME}); "
                    f"build one with: vimrag index PATH... --index {self.dir}"
                )
            self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(str(db), timeout=30.0, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise IndexOpenError(f"{db} is not a valid index database ({e}); delete {self.dir} and index again") from e
        found = self.get_meta("schema")
        if found is None:
            self.set_meta("schema", str(SCHEMA_VERSION))
        elif int(found) != SCHEMA_VERSION:
            raise IndexOpenError(
                f"{self.dir} has index schema {found}, this VimRAG reads {SCHEMA_VERSION}; re-index into a new folder"
            )

    def close(self) -> None:
        self.conn.close()

    # -- meta -------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    @property
    def version(self) -> int:
        """Bumped by every commit that changes units or vectors; derived indexes key on it."""
        return int(self.get_meta("version", "0"))

    def _bump(self) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES('version', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # -- files ------------------------------------------------------------------------------------
    def file(self, path: str) -> FileRecord | None:
        row = self.conn.execute(
            "SELECT path, root, sha256, size, mtime, status, reason, n_units FROM files WHERE path=?", (path,)
        ).fetchone()
        return FileRecord(*row) if row else None

    def files(self, under: str | None = None) -> list[FileRecord]:
        rows = self.conn.execute(
            "SELECT path, root, sha256, size, mtime, status, reason, n_units FROM files"
        ).fetchall()
        recs = [FileRecord(*r) for r in rows]
        if under is not None:
            prefix = under.rstrip("/") + "/"
            recs = [r for r in recs if r.path.startswith(prefix) or r.path == under]
        return recs

    def path_with_hash(self, sha256: str) -> str | None:
        row = self.conn.execute("SELECT path FROM files WHERE sha256=? AND status='ok' LIMIT 1", (sha256,)).fetchone()
        return row[0] if row else None

    def roots(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT root FROM files WHERE status='ok'")]

    def touch(self, path: str, size: int, mtime: float) -> None:
        """Record a new mtime for a file whose content hash did not change."""
        with self.conn:
            self.conn.execute("UPDATE files SET size=?, mtime=? WHERE path=?", (size, mtime, path))

    # -- writes -----------------------------------------------------------------------------------
    def commit(self, batch: Iterable[PendingFile]) -> None:
        """Replace each file's units and vectors, atomically for the whole batch."""
        now = time.time()
        with self.conn:  # one transaction: all or nothing
            changed = False
            for pf in batch:
                if pf.replaces:
                    changed |= self._delete_units(pf.replaces)
                    self.conn.execute("DELETE FROM files WHERE path=?", (pf.replaces,))
                changed |= self._delete_units(pf.record.path)
                for unit, vecs in zip(pf.units, pf.vectors):
                    cur = self.conn.execute(
                        "INSERT INTO units(uid, path, modality, text, data) VALUES(?, ?, ?, ?, ?)",
                        (unit.uid, pf.record.path, unit.modality, unit.text, json.dumps(unit.to_dict())),
                    )
                    uid = cur.lastrowid
                    self.conn.executemany(
                        "INSERT INTO vectors(unit_id, n_tokens, vec) VALUES(?, ?, ?)",
                        [(uid, 0 if v.ndim == 1 else v.shape[0], _pack(v)) for v in vecs],
                    )
                    changed = True
                r = pf.record
                self.conn.execute(
                    "INSERT OR REPLACE INTO files(path, root, sha256, size, mtime, status, reason, n_units, "
                    "indexed_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (r.path, r.root, r.sha256, r.size, r.mtime, r.status, r.reason, len(pf.units), now),
                )
            if changed:
                self._bump()

    def flush(self) -> None:
        """Nothing to do: every SQLite commit is final (Milvus seals its segments here)."""

    def remove_files(self, paths: Iterable[str]) -> int:
        n = 0
        with self.conn:
            for p in paths:
                self._delete_units(p)
                n += self.conn.execute("DELETE FROM files WHERE path=?", (p,)).rowcount
            if n:
                self._bump()
        return n

    def _delete_units(self, path: str) -> bool:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM units WHERE path=?", (path,))]
        if not ids:
            return False
        self.conn.executemany("DELETE FROM vectors WHERE unit_id=?", [(i,) for i in ids])
        self.conn.execute("DELETE FROM units WHERE path=?", (path,))
        return True

    # -- reads ------------------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one committed version of the index, whatever writers commit meanwhile.

        A WAL read transaction: without it, a commit landing between two reads (units, then vectors)
        hands the reader units of one version and vectors of the next.
        """
        if self.conn.in_transaction:  # already inside one (nested use): it holds the snapshot
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.rollback()  # read-only: nothing to keep

    def count_units(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM units").fetchone()[0]

    def units(self) -> tuple[np.ndarray, list[Unit]]:
        """(row ids (n,) int64, units) in row-id order."""
        rows = self.conn.execute("SELECT id, data FROM units ORDER BY id").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ids, [Unit.from_dict(json.loads(r[1])) for r in rows]

    def vector_owners(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """(vector ids (n,), their unit ids (n,), whether they are multi-vector), in id order, without the blobs."""
        rows = self.conn.execute("SELECT id, unit_id, n_tokens FROM vectors ORDER BY id").fetchall()
        vids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        uids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        return vids, uids, bool(rows) and rows[0][2] > 0

    def iter_vectors(self, batch: int = 50_000) -> Iterator[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]:
        """Yield (vector ids (b,), unit ids (b,), arrays) in id order, `batch` rows at a time."""
        last = -1
        while True:
            rows = self.conn.execute(
                "SELECT id, unit_id, n_tokens, vec FROM vectors WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
            ).fetchall()
            if not rows:
                return
            vids = np.array([r[0] for r in rows], dtype=np.int64)
            uids = np.array([r[1] for r in rows], dtype=np.int64)
            arrs = [_unpack(r[3], r[2]) for r in rows]
            last = int(vids[-1])
            yield vids, uids, arrs

    def pending(self, path: str) -> PendingFile | None:
        """One file as stored here (record, units in order, their vectors), ready to `commit` into another store.

        Used to merge the shard stores of a data-parallel ingest (retrieval/sharded.py) file by file.
        """
        rec = self.file(path)
        if rec is None:
            return None
        units, vectors = [], []
        for row_id, data in self.conn.execute(
            "SELECT id, data FROM units WHERE path=? ORDER BY id", (path,)
        ).fetchall():
            units.append(Unit.from_dict(json.loads(data)))
            vectors.append(
                [
                    _unpack(blob, n)
                    for n, blob in self.conn.execute(
                        "SELECT n_tokens, vec FROM vectors WHERE unit_id=? ORDER BY id", (row_id,)
                    )
                ]
            )
        return PendingFile(rec, units, vectors)

    def duplicate_uids(self) -> int:
        """Units sharing one uid (must be 0: the UNIQUE constraint guarantees it; used by tests)."""
        return self.conn.execute("SELECT COUNT(*) - COUNT(DISTINCT uid) FROM units").fetchone()[0]


def _pack(v: np.ndarray) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float32).tobytes()


def _unpack(blob: bytes, n_tokens: int) -> np.ndarray:
    arr = np.frombuffer(blob, dtype=np.float32)
    return arr if n_tokens == 0 else arr.reshape(n_tokens, -1)  # 0 marks a single (dim,) vector
