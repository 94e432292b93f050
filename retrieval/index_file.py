"""The on-disk format of the FAISS indexes, and atomic writes.

One file per index: the magic line `VIMRAG-FAISS`, a little-endian u64 length, a JSON header (the index's
type and settings, `format`, and the names of the arrays that follow), those arrays in .npy format, then
the FAISS index in its own serialisation. A file of another type or format, or a truncated one, raises
`IndexOpenError` saying to rebuild it from the SQLite store, which always holds the vectors.

Files are replaced atomically (`atomic_write`): a crash while saving leaves the previous file intact.
What the header holds is each index's business (`VectorIndex._meta`, `MultiVectorIndex._meta`); this module
knows only the container.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from retrieval.errors import IndexOpenError
from retrieval.index_base import get_faiss

MAGIC = b"VIMRAG-FAISS\n"
FORMAT = 1


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Write `path` through a temp file in the same folder: fsync, then os.replace, then fsync the folder.

    If `write` raises (or the process dies) the old file stays as it was and the temp file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable; not every platform lets us open a folder
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_container(f, meta: dict, arrays: dict[str, np.ndarray], index) -> None:
    """File layout: magic, u64 json length, json meta, the named .npy arrays, then the FAISS index."""
    faiss = get_faiss()
    meta = dict(meta, format=FORMAT, arrays=list(arrays))
    blob = json.dumps(meta).encode()
    f.write(MAGIC)
    f.write(struct.pack("<Q", len(blob)))
    f.write(blob)
    for arr in arrays.values():
        np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)
    faiss.write_index(index, faiss.PyCallbackIOWriter(f.write))


def read_container(path: str | os.PathLike, expect: str) -> tuple[dict, dict[str, np.ndarray], Any]:
    faiss = get_faiss()
    path = Path(path)
    if not path.is_file():
        raise IndexOpenError(f"{path}: no index file here; build the index first (or rebuild it from the store)")
    with open(path, "rb") as f:
        try:
            if f.read(len(MAGIC)) != MAGIC:
                raise ValueError("bad header")
            (n,) = struct.unpack("<Q", f.read(8))
            meta = json.loads(f.read(n))
            if meta.get("format") != FORMAT or meta.get("type") != expect:
                raise ValueError(f"holds a {meta.get('type')} (format {meta.get('format')}), not a {expect}")
            arrays = {name: np.lib.format.read_array(f, allow_pickle=False) for name in meta["arrays"]}
            index = faiss.read_index(faiss.PyCallbackIOReader(f.read))
        except (ValueError, KeyError, struct.error, RuntimeError, EOFError) as e:
            raise IndexOpenError(
                f"{path}: not a readable VimRAG {expect} file ({e}); delete it and rebuild from the store"
            ) from e
    return meta, arrays, index


def save_container(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray], index) -> None:
    """`write_container` into `path` through `atomic_write`."""
    atomic_write(path, lambda f: write_container(f, meta, arrays, index))
