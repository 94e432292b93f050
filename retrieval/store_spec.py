"""Where an index lives: `StoreSpec` (local, milvus-lite:PATH or milvus://HOST:PORT[/COLLECTION]), and the index
folder's `store.json` that records it. The record never holds the token: readers take it from $VIMRAG_MILVUS_TOKEN
(retrieval/milvus_client.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import IndexOpenError

STORE_FILE = "store.json"
DEFAULT_COLLECTION = "vimrag"
LITE_FILE = "milvus.db"
_NAME_OK = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


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
