"""Milvus rows: a unit, its vectors and a file record as the rows of the collections (retrieval/milvus_schema.py)
and back, a unit's stable number, and the expressions that select rows (`filter_expr` for search filters).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.store import FileRecord
from retrieval.units import Filters, Unit

_MAX_TEXT = 60_000  # bytes of a unit's text kept in Milvus (a VARCHAR holds at most 65,535)


def position(uid: str) -> int:
    """A unit's stable number on Milvus (VRAG's `indice`): 62 bits of its uid's SHA-1. Milvus has no row order,
    and a number derived from the content-keyed uid is the same on every worker and every rerun."""
    return int.from_bytes(hashlib.sha1(uid.encode()).digest()[:8], "big") >> 2


def lit(x: Any) -> str:
    """A Milvus expression literal: a string or a list of strings, JSON-quoted."""
    return json.dumps(x, ensure_ascii=False)


def term(token: str) -> str:
    # Milvus's standard analyzer splits on non-word characters; "31.5" and "don't" stay one term as `_` joins.
    return re.sub(r"\W", "_", token)


def _cut(text: str, limit: int = _MAX_TEXT) -> str:
    raw = text.encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore")


def filter_fields(u: Unit, path: str) -> dict:
    """The fields filters read, copied into a unit's row and each of its vector rows."""
    return {
        "path": path,
        "name": Path(u.source).name,
        "doc": u.doc or "",
        "modality": u.modality,
        "t_start": float(u.start or 0.0),
        "t_end": float(u.end or 0.0),
    }


def unit_row(u: Unit, path: str, tok) -> dict:
    """A unit's row: its filter fields, text, the rest of it as JSON, and its terms as `tok` analyses them."""
    data = u.to_dict()
    data.pop("text", None)
    terms = " ".join(term(t) for t in tok(u.text)) or "\u2205"  # an empty unit still needs one term
    return dict(
        filter_fields(u, path), uid=u.uid, text=_cut(u.text), data=_cut(json.dumps(data), 65_000), terms=_cut(terms)
    )


def unit_of_row(row: dict) -> Unit:
    """The Unit a units row holds."""
    return Unit.from_dict(dict(json.loads(row["data"]), text=row["text"]))


def vector_rows(uid: str, part: int, v: np.ndarray) -> list[tuple[str, list[float]]]:
    """(vid, vector) rows of a unit's `part`-th vector: one for a (dim,) vector, one per token of a matrix."""
    v = np.asarray(v, np.float32)
    if v.ndim == 1:
        return [(f"{uid}#{part}", v.tolist())]
    return [(f"{uid}#{part}.{j}", row.tolist()) for j, row in enumerate(v)]  # token rows of one matrix


def token_no(vid: str) -> int:
    """The token number j of a token row's vid `uid#i.j`."""
    return int(vid.rpartition(".")[2])


def file_row(r: FileRecord, n_units: int, now: float) -> dict:
    """A file record's row, written at `now`."""
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


def record_of_row(row: dict) -> FileRecord:
    """The FileRecord a files row holds."""
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
        parts.append(f"modality in {lit(list(filters.modalities))}")
    if filters.docs:
        alts = []
        for d in filters.docs:
            name = Path(d).name
            alts += [f"path == {lit(d)}", f"name == {lit(d)}", f"doc == {lit(name)}"]
            w = d.replace("\\", "/").lstrip("./")
            if w:
                alts.append(f"path like {lit('%/' + w.replace('%', '_'))}")
        parts.append("(" + " or ".join(alts) + ")")
    if filters.time_span is not None:
        a, b = filters.time_span
        parts.append(f'(modality != "video" or (t_end >= {float(a)!r} and t_start <= {float(b)!r}))')
    return " and ".join(parts)
