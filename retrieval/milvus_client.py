"""Connecting to Milvus: pymilvus's `MilvusClient` for a `StoreSpec`, its errors turned into `IndexOpenError`s
that say which store failed, on what, and what to do. The token comes from the caller or $VIMRAG_MILVUS_TOKEN.
"""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.errors import IndexOpenError, missing_dependency
from retrieval.store_spec import StoreSpec

TOKEN_ENV = "VIMRAG_MILVUS_TOKEN"
_AUTH = ("auth", "credential", "token", "unauthenticated", "permission denied")


def connect(spec: StoreSpec, token: str | None):
    """A client of the Milvus `spec` names, with `token` (None: $VIMRAG_MILVUS_TOKEN)."""
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
        raise open_error(spec, e) from e


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
                    raise open_error(self._spec, e) from e
                raise IndexOpenError(f"{self._spec.where} refused {name} ({e})") from e

        return call


def open_error(spec: StoreSpec, e: Exception) -> IndexOpenError:
    """The error for a store that cannot be opened, reached or logged into: the cause and the fix."""
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
