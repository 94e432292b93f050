"""Opening an index's store, whichever it is: the SQLite `Store` (retrieval/store.py) or a `MilvusStore`
(retrieval/milvus_store.py), as the index folder's `store.json` says. Here, apart from both, so that neither store
module imports the other."""

from __future__ import annotations

from pathlib import Path

from retrieval.errors import IndexOpenError
from retrieval.milvus_store import MilvusStore
from retrieval.store import DB_NAME, Store
from retrieval.store_spec import StoreSpec, recorded_spec


def open_store(index_dir: str | Path, create: bool = False, store: str | None = None, token: str | None = None):
    """The store of the index at `index_dir`: the SQLite `Store`, or a `MilvusStore` where the folder's
    `store.json` says the index lives in Milvus (retrieval/milvus_store.py).

    `store` is what the user asked for (`--store`): None means the index's own store, or local for a new index.
    Asking an existing index for another store than its own is an error that says so.
    """
    index_dir = Path(index_dir)
    recorded = recorded_spec(index_dir)
    if recorded is None and (index_dir / DB_NAME).exists():
        recorded = StoreSpec("local")
    try:
        wanted = StoreSpec.parse(store, index_dir) if store else None
    except ValueError as e:
        raise IndexOpenError(str(e)) from None
    if recorded and wanted and recorded != wanted:
        raise IndexOpenError(
            f"{index_dir} is an index on {recorded}, not {wanted}; leave out --store to use it, "
            "or index into a new folder"
        )
    spec = wanted or recorded or StoreSpec("local")
    if spec.kind == "local":
        return Store(index_dir, create=create)
    return MilvusStore(index_dir, spec, create=create, token=token)
