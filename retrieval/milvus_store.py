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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from retrieval.errors import IndexOpenError, missing_dependency
from retrieval.store import FileRecord, PendingFile
from retrieval.units import Filters, Unit

STORE_FILE = "store.json"
TOKEN_ENV = "VIMRAG_MILVUS_TOKEN"
DEFAULT_COLLECTION = "vimrag"
LITE_FILE = "milvus.db"
_MAX_TEXT = 60_000  # bytes of a unit's text kept in Milvus (a VARCHAR holds at most 65,535)
_PAGE = 1000  # rows per query-iterator page
# Filtered dense searches over at most this many vectors are scored exactly here (they are read back: 4,096 x 384
# floats are 6 MB); larger ones go to Milvus's index with the filter.
EXACT_FILTER_MAX = 4096
_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")
_NOT_FOUND = ("not found", "not exist", "can't find", "cannot find")
_AUTH = ("auth", "credential", "token", "unauthenticated", "permission denied")


# ---------------------------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class StoreSpec:
    """Where an index lives: `local`, `milvus-lite:PATH` or `milvus://HOST:PORT[/COLLECTION]`."""

    kind: str  # "local" | "milvus-lite" | "milvus"
    uri: str = ""  # a file path for milvus-lite, http://HOST:PORT for a server
    collection: str = DEFAULT_COLLECTION

    @classmethod
    def parse(cls, text: str, index_dir: str | Path | None = None) -> StoreSpec:
        """The spec a user wrote; a relative milvus-lite PATH is taken from the working folder.

        >>> StoreSpec.parse("milvus://127.0.0.1:19530/papers")
        StoreSpec(kind='milvus', uri='http://127.0.0.1:19530', collection='papers')
        >>> StoreSpec.parse("local").kind
        'local'
        """
        text = (text or "local").strip()
        if text == "local":
            return cls("local")
        if text == "milvus-lite" or text.startswith("milvus-lite:"):
            path = text.partition(":")[2] if ":" in text else ""
            if not path:
                if index_dir is None:
                    raise ValueError("milvus-lite needs a file: --store milvus-lite:PATH (e.g. milvus-lite:i/m.db)")
                path = str(Path(index_dir) / LITE_FILE)
            return cls("milvus-lite", str(Path(path).expanduser().resolve()))
        m = re.fullmatch(r"milvus://([^/:\s]+):(\d+)(?:/([^/\s]*))?/?", text)
        if m:
            coll = m.group(3) or DEFAULT_COLLECTION
            if not _NAME_OK.match(coll):
                raise ValueError(
                    f"collection name {coll!r} is not valid in Milvus; use letters, digits and underscores, "
                    "starting with a letter"
                )
            return cls("milvus", f"http://{m.group(1)}:{m.group(2)}", coll)
        raise ValueError(
            f"--store {text!r} is not a store; use local (SQLite + FAISS, the default), milvus-lite:PATH "
            "(embedded Milvus Lite) or milvus://HOST:PORT[/COLLECTION] (a Milvus server or cluster)"
        )

    def __str__(self) -> str:
        if self.kind == "local":
            return "local"
        if self.kind == "milvus-lite":
            return f"milvus-lite:{self.uri}"
        return f"milvus://{self.uri.removeprefix('http://')}/{self.collection}"

    @property
    def where(self) -> str:
        return f"Milvus Lite file {self.uri}" if self.kind == "milvus-lite" else f"Milvus at {self.uri}"


def recorded_spec(index_dir: str | Path) -> StoreSpec | None:
    """The store `index_dir/store.json` names, or None for a folder without one (a local index, or none yet)."""
    p = Path(index_dir) / STORE_FILE
    if not p.is_file():
        return None
    try:
        d = json.loads(p.read_text())
        return StoreSpec(d["kind"], d["uri"], d["collection"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IndexOpenError(f"{p} is not a readable store record ({e}); delete it and index again") from e


# ---------------------------------------------------------------------------------------------- the store
def _client(spec: StoreSpec, token: str | None):
    try:
        from pymilvus import MilvusClient
    except ImportError as e:
        raise missing_dependency("pymilvus", extra="milvus", purpose=f"an index on {spec}") from e
    import logging

    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # its RPC tracebacks; our errors say the cause and fix
    if spec.kind == "milvus-lite":  # the embedded server logs each call it lacks (AllocTimestamp), then falls back
        logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    token = token if token is not None else os.environ.get(TOKEN_ENV, "")
    try:
        if spec.kind == "milvus-lite":
            Path(spec.uri).parent.mkdir(parents=True, exist_ok=True)
            return _Client(MilvusClient(spec.uri), spec)
        return _Client(MilvusClient(uri=spec.uri, token=token, timeout=10), spec)
    except Exception as e:  # noqa: BLE001 - pymilvus raises several types for one cause; say the cause and fix
        raise _open_error(spec, e) from e


class _Client:
    """pymilvus's MilvusClient, whose errors come out as `IndexOpenError`s that say which store failed, on what,
    and what to do, so that a server going away mid-session fails one search (which the agent reports to the
    model) instead of ending the session."""

    def __init__(self, client, spec: StoreSpec) -> None:
        self._client, self._spec = client, spec

    def __getattr__(self, name: str):
        fn = getattr(self._client, name)
        if not callable(fn):
            return fn

        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - pymilvus and grpc raise many types; each gets a message with a fix
                low = str(e).lower()
                if any(w in low for w in ("unavailable", "connect", "deadline", "timeout", "closed")) or any(
                    w in low for w in _AUTH
                ):
                    raise _open_error(self._spec, e) from e
                raise IndexOpenError(f"{self._spec.where} refused {name} ({e})") from e

        return call


def _open_error(spec: StoreSpec, e: Exception) -> IndexOpenError:
    msg = str(e)
    low = msg.lower()
    if spec.kind == "milvus-lite":  # pymilvus says only "Open local milvus failed" when another process holds it
        return IndexOpenError(
            f"{spec.where} could not be opened ({msg}); an embedded Milvus Lite file serves one process: stop the "
            f"other one, or serve the data with `milvus-lite server --data-dir DIR --host 127.0.0.1 --port 19530` "
            f"and use --store milvus://127.0.0.1:19530/{spec.collection}"
        )
    if any(w in low for w in _AUTH):
        return IndexOpenError(
            f"{spec.where} refused the credentials ({msg}); set ${TOKEN_ENV} (or --milvus-token) to a valid "
            "token, USER:PASSWORD or API key for that server"
        )
    return IndexOpenError(
        f"cannot reach {spec.where} ({msg}); start the server (for a local one: `milvus-lite server --data-dir "
        "DIR --host 127.0.0.1 --port PORT`) or fix the host and port in --store"
    )


class MilvusStore:
    """The `Store` interface on four Milvus collections (see the module docstring)."""

    kind = "milvus"

    def __init__(self, index_dir: str | Path, spec: StoreSpec, create: bool = False, token: str | None = None) -> None:
        self.dir = Path(index_dir)
        self.spec = spec
        self.client = _client(spec, token)
        c = spec.collection
        self.names = {"meta": f"{c}_meta", "files": f"{c}_files", "units": f"{c}_units", "vectors": f"{c}_vectors"}
        try:
            have = set(self.client.list_collections())
        except Exception as e:  # noqa: BLE001 - the first call is where a server that is down or refuses us shows
            raise _open_error(spec, e) from e
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
        from pymilvus import DataType, Function, FunctionType

        full = self.names[name]
        if full in self._have:
            return
        cl = self.client
        s = cl.create_schema(auto_id=False, enable_dynamic_field=False)
        ip = cl.prepare_index_params()
        if name == "meta":
            s.add_field("key", DataType.VARCHAR, is_primary=True, max_length=256)
            s.add_field("value", DataType.VARCHAR, max_length=65535)
        elif name == "files":
            s.add_field("path", DataType.VARCHAR, is_primary=True, max_length=4096)
            s.add_field("root", DataType.VARCHAR, max_length=4096)
            s.add_field("sha256", DataType.VARCHAR, max_length=64)
            s.add_field("size", DataType.INT64)
            s.add_field("mtime", DataType.DOUBLE)
            s.add_field("status", DataType.VARCHAR, max_length=16)
            s.add_field("reason", DataType.VARCHAR, max_length=4096)
            s.add_field("n_units", DataType.INT64)
            s.add_field("indexed_at", DataType.DOUBLE)
        else:
            s.add_field("uid" if name == "units" else "vid", DataType.VARCHAR, is_primary=True, max_length=512)
            if name == "vectors":
                s.add_field("uid", DataType.VARCHAR, max_length=512)
                s.add_field("part", DataType.INT64)
            s.add_field("path", DataType.VARCHAR, max_length=4096)
            s.add_field("name", DataType.VARCHAR, max_length=1024)
            s.add_field("doc", DataType.VARCHAR, max_length=1024)
            s.add_field("modality", DataType.VARCHAR, max_length=16)
            s.add_field("t_start", DataType.DOUBLE)
            s.add_field("t_end", DataType.DOUBLE)
        if name == "units":
            s.add_field("text", DataType.VARCHAR, max_length=65535)
            s.add_field("data", DataType.VARCHAR, max_length=65535)
            s.add_field("terms", DataType.VARCHAR, max_length=65535, enable_analyzer=True)
            s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            s.add_function(
                Function(
                    name="bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=["terms"],
                    output_field_names=["sparse"],
                )
            )
            # k1 and b as the local BM25 (retrieval/bm25.py: bm25s, Lucene scoring).
            bm25 = {"bm25_k1": 1.2, "bm25_b": 0.75}
            ip.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params=bm25)
        elif name == "vectors":
            s.add_field("vec", DataType.FLOAT_VECTOR, dim=int(dim))
            ip.add_index("vec", index_type="AUTOINDEX", metric_type="IP")
        else:  # Milvus wants a vector field in every collection: a 2-d placeholder, never searched
            s.add_field("_v", DataType.FLOAT_VECTOR, dim=2)
            ip.add_index("_v", index_type="FLAT", metric_type="L2")
        try:
            cl.create_collection(full, schema=s, index_params=ip, consistency_level="Strong")
        except Exception:
            if full not in cl.list_collections():  # not another worker creating it at the same moment
                raise
            cl.load_collection(full)
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
        rows = self._query("meta", f"key == {_lit(key)}", ["value"], limit=1)
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
        rows = self._query("files", f"path == {_lit(path)}", self._FILE_FIELDS, limit=1)
        return _record(rows[0]) if rows else None

    def files(self, under: str | None = None) -> list[FileRecord]:
        recs = [_record(r) for r in self._query("files", "", self._FILE_FIELDS)]
        if under is not None:
            prefix = under.rstrip("/") + "/"
            recs = [r for r in recs if r.path.startswith(prefix) or r.path == under]
        return recs

    def path_with_hash(self, sha256: str) -> str | None:
        rows = self._query("files", f'sha256 == {_lit(sha256)} and status == "ok"', ["path"], limit=1)
        return rows[0]["path"] if rows else None

    def roots(self) -> list[str]:
        return sorted({r["root"] for r in self._query("files", 'status == "ok"', ["root"])})

    def touch(self, path: str, size: int, mtime: float) -> None:
        rec = self.file(path)
        if rec is not None:
            rec.size, rec.mtime = size, mtime
            self.client.upsert(self.names["files"], [_file_row(rec, rec.n_units, time.time())])

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
            self.client.upsert(self.names["units"], [_unit_row(u, pf.record.path, self.tokenize) for u in pf.units])
            vrows = [
                dict(_filter_fields(u, pf.record.path), vid=vid, uid=u.uid, part=i, vec=row)
                for u, vecs in zip(pf.units, pf.vectors)
                for i, v in enumerate(vecs)
                for vid, row in _vector_rows(u.uid, i, v)
            ]
            for s in range(0, len(vrows), _PAGE):
                self.client.upsert(self.names["vectors"], vrows[s : s + _PAGE])
            changed = True
        now = time.time()
        rows = [_file_row(pf.record, len(pf.units), now) for pf in batch]
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
        flt = f"path == {_lit(path)}"
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
        units = [_unit(r) for r in rows]
        return np.array([position(u.uid) for u in units], dtype=np.int64), units

    def units_by_uid(self, uids: list[str]) -> dict[str, Unit]:
        if not uids:
            return {}
        rows = self._query("units", f"uid in {_lit(uids)}", ["uid", "text", "data"], limit=len(uids))
        return {r["uid"]: _unit(r) for r in rows}

    def duplicate_uids(self) -> int:
        """Units sharing one uid: 0 by construction (uid is the primary key)."""
        return 0

    # -- search ---------------------------------------------------------------------------------------
    def bm25(self, text: str, n: int, flt: str) -> dict[str, float]:
        """{uid: BM25 score} of the best `n` units for `text`, analysed as the units' text was."""
        terms = " ".join(_term(t) for t in self.tokenize(text))
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
        rows = self._query("vectors", f"uid in {_lit(short)}", ["vid", "uid", "part", "vec"])
        mats: dict[tuple[str, int], list[tuple[int, list[float]]]] = {}
        for r in rows:
            mats.setdefault((r["uid"], int(r["part"])), []).append((_token_no(r["vid"]), r["vec"]))
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


# ---------------------------------------------------------------------------------------------- rows
def position(uid: str) -> int:
    """A unit's stable number on Milvus (VRAG's `indice`): 62 bits of its uid's SHA-1. Milvus has no row order,
    and a number derived from the content-keyed uid is the same on every worker and every rerun."""
    return int.from_bytes(hashlib.sha1(uid.encode()).digest()[:8], "big") >> 2


def _lit(x: Any) -> str:
    """A Milvus expression literal: a string or a list of strings, JSON-quoted."""
    return json.dumps(x, ensure_ascii=False)


def _term(token: str) -> str:
    # Milvus's standard analyzer splits on non-word characters; "31.5" and "don't" stay one term as `_` joins.
    return re.sub(r"\W", "_", token)


def _cut(text: str, limit: int = _MAX_TEXT) -> str:
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def _filter_fields(u: Unit, path: str) -> dict:
    return {
        "path": path,
        "name": Path(u.source).name,
        "doc": u.doc or "",
        "modality": u.modality,
        "t_start": float(u.start or 0.0),
        "t_end": float(u.end or 0.0),
    }


def _unit_row(u: Unit, path: str, tok) -> dict:
    data = u.to_dict()
    data.pop("text", None)
    terms = " ".join(_term(t) for t in tok(u.text)) or "\u2205"  # an empty unit still needs one term
    return dict(
        _filter_fields(u, path), uid=u.uid, text=_cut(u.text), data=_cut(json.dumps(data), 65_000), terms=_cut(terms)
    )


def _unit(row: dict) -> Unit:
    return Unit.from_dict(dict(json.loads(row["data"]), text=row["text"]))


def _vector_rows(uid: str, part: int, v: np.ndarray) -> list[tuple[str, list[float]]]:
    v = np.asarray(v, np.float32)
    if v.ndim == 1:
        return [(f"{uid}#{part}", v.tolist())]
    return [(f"{uid}#{part}.{j}", row.tolist()) for j, row in enumerate(v)]  # token rows of one matrix


def _token_no(vid: str) -> int:
    return int(vid.rpartition(".")[2])


def _file_row(r: FileRecord, n_units: int, now: float) -> dict:
    return {
        "path": r.path,
        "root": r.root,
        "sha256": r.sha256 or "",
        "size": int(r.size or 0),
        "mtime": float(r.mtime or 0.0),
        "status": r.status,
        "reason": _cut(r.reason or "", 4000),
        "n_units": int(n_units),
        "indexed_at": now,
        "_v": [0.0, 0.0],
    }


def _record(row: dict) -> FileRecord:
    return FileRecord(
        row["path"], row["root"], row["sha256"] or None, row["size"], row["mtime"], row["status"], row["reason"],
        row["n_units"],
    )  # fmt: skip


def filter_expr(filters: Filters | None) -> str:
    """The Milvus expression for `filters` ("" for none). Documents match by name, full path or path suffix, as
    `Filters.accepts` does; the caller still checks each hit with `accepts`, which is exact where a LIKE pattern
    is loose (`_` matches any one character in Milvus)."""
    if filters is None or filters.is_empty():
        return ""
    parts = []
    if filters.modalities:
        parts.append(f"modality in {_lit(list(filters.modalities))}")
    if filters.docs:
        alts = []
        for d in filters.docs:
            name = Path(d).name
            alts += [f"path == {_lit(d)}", f"name == {_lit(d)}", f"doc == {_lit(name)}"]
            w = d.replace("\\", "/").lstrip("./")
            if w:
                alts.append(f"path like {_lit('%/' + w.replace('%', '_'))}")
        parts.append("(" + " or ".join(alts) + ")")
    if filters.time_span is not None:
        a, b = filters.time_span
        parts.append(f'(modality != "video" or (t_end >= {float(a)!r} and t_start <= {float(b)!r}))')
    return " and ".join(parts)
