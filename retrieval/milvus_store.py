"""An index on Milvus (pymilvus): embedded Milvus Lite, a Milvus Lite server, or a Milvus standalone or cluster.

    vimrag index corpus/ --index idx --store milvus-lite:idx/milvus.db      # embedded, one process
    milvus-lite server --data-dir D --host 127.0.0.1 --port 19530           # a server several processes share
    vimrag index corpus/ --index idx --store milvus://127.0.0.1:19530/mycorpus --num-processes 2

The index folder keeps `store.json`, which says where the index lives (never the token: readers take it from
$VIMRAG_MILVUS_TOKEN), and the page-image cache; every command that opens the folder (`ask`, `eval`, `demo`,
`serve-search`, `train`, `synth`) then reads Milvus, with nothing else to change.

`MilvusStore` has the methods of the SQLite `Store` that ingest and search use, so `Indexer` writes through
the same code path. It keeps four collections, named after COLLECTION:
  C_meta     key -> value (embedder spec, vector dim, version)
  C_files    one row per source file: hash, size, mtime, status, reason (as the SQLite `files` table)
  C_units    one row per unit, keyed by its uid (content hash + position): the Unit as JSON, its text, the
             fields filters read (path, name, doc, modality, t_start, t_end), and `terms`, the unit's text as
             VimRAG's BM25 tokenizer analyses it (retrieval/bm25.py: stop words out, Snowball stems), from
             which Milvus's own BM25 function builds the sparse vector it searches. The analysis happens
             here, so a Milvus Lite (which has no stemmer) and a Milvus cluster rank words alike.
  C_vectors  one row per vector, keyed `uid#i` (or `uid#i.j` for token j of a multi-vector unit), with the
             filter fields copied, so a filtered dense search needs no join.

Writes are upserts keyed by content hash, so a rerun after a crash rewrites rows instead of adding copies.
Milvus has no multi-collection transaction; a batch is written units first, vectors next and the file
records last, so a process killed mid-batch leaves files without a record, which the rerun indexes again:
a killed worker loses at most its uncommitted batch, and the rerun leaves the same rows as a clean run.

Searches run in Milvus: BM25 on `terms`, dense search on `vec` grouped by unit (a unit scores by its best
vector), and the filters as Milvus expressions. The two lists are fused here with the local index's own
fusion (retrieval/fusion.py), so hybrid ranking means the same on both stores. A multi-vector (late
interaction) index is shortlisted by a token search in Milvus and reranked exactly by MaxSim
(retrieval/maxsim.py). Milvus 2.6's native embedding lists are not used: Milvus Lite does not have them.

Here: `MilvusStore`, its writes, reads and searches. Elsewhere: the spec and `store.json` (retrieval/store_spec.py),
the connection and its errors (milvus_client.py), the collections' schemas (milvus_schema.py), and the row format
and filter expressions (milvus_rows.py).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from retrieval.errors import IndexOpenError
from retrieval.milvus_client import connect, open_error
from retrieval.milvus_rows import (
    file_row,
    filter_fields,
    lit,
    position,
    record_of_row,
    term,
    token_no,
    unit_of_row,
    unit_row,
    vector_rows,
)
from retrieval.milvus_schema import create_collection
from retrieval.store import FileRecord, PendingFile
from retrieval.store_spec import STORE_FILE, StoreSpec
from retrieval.units import Unit

_PAGE = 1000  # rows per query-iterator page
# Filtered dense searches over at most this many vectors are scored exactly here (they are read back: 4,096 x 384
# floats are 6 MB); larger ones go to Milvus's index with the filter.
EXACT_FILTER_MAX = 4096
_NOT_FOUND = ("not found", "not exist", "can't find", "cannot find")


class MilvusStore:
    """The `Store` interface on four Milvus collections (see the module docstring)."""

    kind = "milvus"

    def __init__(self, index_dir: str | Path, spec: StoreSpec, create: bool = False, token: str | None = None) -> None:
        self.dir = Path(index_dir)
        self.spec = spec
        self.client = connect(spec, token)
        c = spec.collection
        self.names = {"meta": f"{c}_meta", "files": f"{c}_files", "units": f"{c}_units", "vectors": f"{c}_vectors"}
        try:
            have = set(self.client.list_collections())
        except Exception as e:  # noqa: BLE001 - the first call is where a server that is down or refuses us shows
            raise open_error(spec, e) from e
        if self.names["meta"] not in have:
            if not create:
                raise IndexOpenError(
                    f"{spec} holds no VimRAG index (no collection {self.names['meta']}); build one with: "
                    f"vimrag index PATH... --index {self.dir} --store {spec}"
                )
        self._have = have
        for name in self.names.values():  # a reopened collection starts released; searches need it loaded
            if name in have:
                self.client.load_collection(name)
        self._dim: int | None = None  # the vector size once checked against the index's
        self._tokenize = None

    @property
    def tokenize(self):
        """VimRAG's BM25 tokenizer (retrieval/bm25.py), made once: the units' terms and every query go through it."""
        if self._tokenize is None:
            from retrieval.bm25 import Tokenizer

            self._tokenize = Tokenizer()
        return self._tokenize

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing a connection that is already gone is not an error
            pass

    # -- schema -------------------------------------------------------------------------------------
    def _create(self, name: str, dim: int | None = None) -> None:
        """Create one of the four collections (the vectors one needs the embedder's dim)."""
        full = self.names[name]
        if full in self._have:
            return
        create_collection(self.client, full, name, dim)
        self._have.add(full)

    def create_collections(self, dim: int | None = None) -> None:
        """Create the collections that do not exist yet (the vectors one once `dim` is known, checked against the
        index's), and record the store in the index folder's `store.json`."""
        from retrieval.index_file import atomic_write

        for name in ("meta", "files", "units"):
            self._create(name)
        if dim is not None and dim != self._dim:
            built = self.get_meta("dim")
            if built is not None and int(built) != dim:
                raise IndexOpenError(
                    f"{self.spec} holds {built}-d vectors and this embedder gives {dim}-d ones; index into another "
                    "collection (milvus://HOST:PORT/OTHER) or use the embedder it was built with"
                )
            self._create("vectors", dim)
            if built is None:
                self.set_meta("dim", str(dim))
            self._dim = dim  # checked once per store, not on every batch
        p = self.dir / STORE_FILE
        if not p.exists():
            rec = {"kind": self.spec.kind, "uri": self.spec.uri, "collection": self.spec.collection}
            atomic_write(p, lambda f: f.write(json.dumps(rec, indent=1).encode()))

    def sync_collections(self) -> None:
        """See collections that another process created since this one opened (a reader of an index that an
        ingest elsewhere is writing for the first time)."""
        have = set(self.client.list_collections())
        for name in self.names.values():
            if name in have and name not in self._have:
                self.client.load_collection(name)
        self._have = have

    def _live(self, name: str) -> bool:
        return self.names[name] in self._have

    # -- reads of rows --------------------------------------------------------------------------------
    def _query(self, name: str, flt: str, fields: list[str], limit: int | None = None) -> list[dict]:
        if not self._live(name):
            return []
        if limit is not None:
            return self.client.query(self.names[name], filter=flt, output_fields=fields, limit=limit)
        it = self.client.query_iterator(self.names[name], batch_size=_PAGE, filter=flt, output_fields=fields)
        rows: list[dict] = []
        try:
            while page := it.next():
                rows.extend(page)
        finally:
            it.close()
        return rows

    def _count(self, name: str, flt: str = "") -> int:
        if not self._live(name):
            return 0
        res = self.client.query(self.names[name], filter=flt, output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    # -- meta -----------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        rows = self._query("meta", f"key == {lit(key)}", ["value"], limit=1)
        return rows[0]["value"] if rows else default

    def set_meta(self, key: str, value: str) -> None:
        self._create("meta")
        self.client.upsert(self.names["meta"], [{"key": key, "value": value, "_v": [0.0, 0.0]}])

    @property
    def version(self) -> int:
        """Changes with every write of units (a time stamp in microseconds: writers on several machines need
        no counter to agree on)."""
        return int(self.get_meta("version", "0"))

    def _bump(self) -> None:
        self.set_meta("version", str(max(self.version + 1, time.time_ns() // 1000)))

    # -- files ----------------------------------------------------------------------------------------
    _FILE_FIELDS = ["path", "root", "sha256", "size", "mtime", "status", "reason", "n_units"]

    def file(self, path: str) -> FileRecord | None:
        rows = self._query("files", f"path == {lit(path)}", self._FILE_FIELDS, limit=1)
        return record_of_row(rows[0]) if rows else None

    def files(self, under: str | None = None) -> list[FileRecord]:
        recs = [record_of_row(r) for r in self._query("files", "", self._FILE_FIELDS)]
        if under is not None:
            prefix = under.rstrip("/") + "/"
            recs = [r for r in recs if r.path.startswith(prefix) or r.path == under]
        return recs

    def path_with_hash(self, sha256: str) -> str | None:
        rows = self._query("files", f'sha256 == {lit(sha256)} and status == "ok"', ["path"], limit=1)
        return rows[0]["path"] if rows else None

    def roots(self) -> list[str]:
        return sorted({r["root"] for r in self._query("files", 'status == "ok"', ["root"])})

    def touch(self, path: str, size: int, mtime: float) -> None:
        rec = self.file(path)
        if rec is not None:
            rec.size, rec.mtime = size, mtime
            self.client.upsert(self.names["files"], [file_row(rec, rec.n_units, time.time())])

    # -- writes ---------------------------------------------------------------------------------------
    def commit(self, batch: Iterable[PendingFile]) -> None:
        """Write each file's units and vectors, then its record (see the module docstring for what a crash
        leaves). Units a file no longer has are deleted first."""
        batch = list(batch)
        dims = {v.shape[-1] for pf in batch for vecs in pf.vectors for v in vecs}
        if len(dims) > 1:
            raise ValueError(f"one batch holds vectors of sizes {sorted(dims)}; an index holds one embedder's vectors")
        self.create_collections(dims.pop() if dims else None)
        changed = False
        for pf in batch:
            for gone in filter(None, (pf.replaces, pf.record.path)):
                changed |= self._delete_path(gone, keep_file=gone == pf.record.path)
            if not pf.units:
                continue
            self.client.upsert(self.names["units"], [unit_row(u, pf.record.path, self.tokenize) for u in pf.units])
            vrows = [
                dict(filter_fields(u, pf.record.path), vid=vid, uid=u.uid, part=i, vec=row)
                for u, vecs in zip(pf.units, pf.vectors)
                for i, v in enumerate(vecs)
                for vid, row in vector_rows(u.uid, i, v)
            ]
            for s in range(0, len(vrows), _PAGE):
                self.client.upsert(self.names["vectors"], vrows[s : s + _PAGE])
            changed = True
        now = time.time()
        rows = [file_row(pf.record, len(pf.units), now) for pf in batch]
        if rows:
            self.client.upsert(self.names["files"], rows)
        if changed:
            self._bump()

    def flush(self) -> None:
        """Seal what this run wrote into indexed segments. Until then Milvus holds new rows in growing segments that
        every search scans without an index; on the dev corpus, Milvus Lite searched about ten times slower so."""
        for name in self.names.values():
            if name in self._have:
                self.client.flush(name)

    def remove_files(self, paths: Iterable[str]) -> int:
        n = 0
        for p in paths:
            if self.file(p) is not None:
                n += 1
            self._delete_path(p, keep_file=False)
        if n:
            self._bump()
        return n

    def _delete_path(self, path: str, keep_file: bool) -> bool:
        flt = f"path == {lit(path)}"
        had = self._count("units", flt) > 0
        for name in ("vectors", "units") + (() if keep_file else ("files",)):
            if self._live(name):
                self.client.delete(self.names[name], filter=flt)
        return had

    # -- reads ----------------------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Milvus has no read transaction: reads see what is committed when each runs."""
        yield

    def count_units(self, flt: str = "") -> int:
        return self._count("units", flt)

    def count_vectors(self) -> int:
        return self._count("vectors")

    def units(self) -> tuple[np.ndarray, list[Unit]]:
        """(positions, units) of the whole index in uid order: what offline tools (synth, bench) read."""
        rows = sorted(self._query("units", "", ["uid", "text", "data"]), key=lambda r: r["uid"])
        units = [unit_of_row(r) for r in rows]
        return np.array([position(u.uid) for u in units], dtype=np.int64), units

    def units_by_uid(self, uids: list[str]) -> dict[str, Unit]:
        if not uids:
            return {}
        rows = self._query("units", f"uid in {lit(uids)}", ["uid", "text", "data"], limit=len(uids))
        return {r["uid"]: unit_of_row(r) for r in rows}

    def duplicate_uids(self) -> int:
        """Units sharing one uid: 0 by construction (uid is the primary key)."""
        return 0

    # -- search ---------------------------------------------------------------------------------------
    def bm25(self, text: str, n: int, flt: str) -> dict[str, float]:
        """{uid: BM25 score} of the best `n` units for `text`, analysed as the units' text was."""
        terms = " ".join(term(t) for t in self.tokenize(text))
        if not terms or not self._live("units"):
            return {}
        res = self.client.search(
            self.names["units"], data=[terms], anns_field="sparse", limit=n, filter=flt, output_fields=["uid"]
        )
        # Milvus reports the BM25 score as the distance; Milvus Lite reports its negative. Either way its size
        # is the score, and a term that matched gives a score above 0.
        return {h["entity"]["uid"]: abs(float(h["distance"])) for h in res[0] if abs(float(h["distance"])) > 0}

    def dense(self, q: np.ndarray, n: int, flt: str) -> dict[str, float]:
        """{uid: best inner product of its vectors} for the best `n` units, for one (dim,) query vector.

        A filter that leaves few vectors (one document's pages) is scored exactly over them, as the local index
        does: an approximate graph search that may visit only allowed rows loses the few it is asked for (on the
        dev set, doc-scoped dense R@5 fell from 0.656 to 0.642 through Milvus Lite's HNSW)."""
        if not self._live("vectors"):
            return {}
        if flt and self._count("vectors", flt) <= EXACT_FILTER_MAX:
            rows = self._query("vectors", flt, ["uid", "vec"])
            if not rows:
                return {}
            scores = np.asarray([r["vec"] for r in rows], np.float32) @ np.asarray(q, np.float32).reshape(-1)
            best: dict[str, float] = {}
            for r, sc in zip(rows, scores.tolist()):
                best[r["uid"]] = max(sc, best.get(r["uid"], -np.inf))
            return dict(sorted(best.items(), key=lambda kv: -kv[1])[:n])
        res = self.client.search(
            self.names["vectors"],
            data=[np.asarray(q, np.float32).reshape(-1).tolist()],
            anns_field="vec",
            limit=n,
            filter=flt,
            group_by_field="uid",
            output_fields=["uid"],
            search_params={"metric_type": "IP"},
        )
        best: dict[str, float] = {}
        for h in res[0]:
            uid, s = h["entity"]["uid"], float(h["distance"])
            best[uid] = max(s, best.get(uid, -np.inf))
        return best

    def late_interaction(self, q: np.ndarray, n: int, flt: str, per_token: int = 64) -> dict[str, float]:
        """{uid: exact MaxSim} for the best `n` units: each query token's `per_token` nearest token rows give a
        shortlist of units, whose every token is then read back and scored exactly."""
        from retrieval.maxsim import maxsim_scores

        if not self._live("vectors"):
            return {}
        q = np.asarray(q, np.float32)  # (n_q_tokens, dim)
        res = self.client.search(
            self.names["vectors"], data=q.tolist(), anns_field="vec", limit=per_token, filter=flt, output_fields=["uid"]
        )
        short = sorted({h["entity"]["uid"] for hits in res for h in hits})
        if not short:
            return {}
        rows = self._query("vectors", f"uid in {lit(short)}", ["vid", "uid", "part", "vec"])
        mats: dict[tuple[str, int], list[tuple[int, list[float]]]] = {}
        for r in rows:
            mats.setdefault((r["uid"], int(r["part"])), []).append((token_no(r["vid"]), r["vec"]))
        keys = list(mats)
        docs = [np.asarray([v for _, v in sorted(mats[k])], np.float32) for k in keys]
        scores = maxsim_scores(q, docs)
        best: dict[str, float] = {}
        for (uid, _), s in zip(keys, scores.tolist()):
            best[uid] = max(s, best.get(uid, -np.inf))  # a unit scores by its best page / keyframe matrix
        return dict(sorted(best.items(), key=lambda kv: -kv[1])[:n])

    def is_multi(self) -> bool:
        rows = self._query("vectors", "", ["vid"], limit=1)
        return bool(rows) and "." in rows[0]["vid"].rpartition("#")[2]
