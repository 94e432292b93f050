"""`to_dict` / `from_dict` for the dataclasses that cross a boundary (graph items and nodes, agent events,
steps and traces), written once.

A `Record` serializes its fields as plain JSON values: nested records through their own `to_dict`, lists and
dicts element by element. `from_dict` rebuilds the fields whose type is a record, a list of records or an
optional record, read from the type annotations. Two field flags in `dataclasses.field(metadata=...)` cover
what the agent's events need: `LIVE` keeps a field out of the dict (model tensors held by reference for the
trainer), and `OMIT_NONE` leaves an optional field out while it is None, so a record without it serializes as
it always did. It lives here, at the bottom of the layers, so that memory_graph and agent share it.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from typing import Any

LIVE = {"live": True}  # held in memory only, never serialized
OMIT_NONE = {"omit_none": True}  # serialized only when set
_RECORDS: dict[str, type] = {}  # every Record class by name, to resolve annotations that name one


def plain(value: Any) -> Any:
    """`value` as JSON values: records through their `to_dict`, containers element by element."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Record:
    """Mixin for a dataclass: `to_dict` (plain JSON values) and `from_dict` (nested records rebuilt).

    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Hit(Record):
    ...     info_id: str = ""
    ...     score: float = 0.0
    >>> @dataclass
    ... class Found(Record):
    ...     query: str = ""
    ...     hits: list[Hit] = field(default_factory=list)
    ...     note: str | None = field(default=None, metadata=OMIT_NONE)
    >>> Found("q", [Hit("Picture 1", 0.5)]).to_dict()
    {'query': 'q', 'hits': [{'info_id': 'Picture 1', 'score': 0.5}]}
    >>> Found.from_dict({"query": "q", "hits": [{"info_id": "Picture 1"}]})
    Found(query='q', hits=[Hit(info_id='Picture 1', score=0.0)], note=None)
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _RECORDS.setdefault(cls.__name__, cls)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("live") or (value is None and f.metadata.get("omit_none")):
                continue
            out[f.name] = plain(value)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        return cls(**cls.decode(d))

    @classmethod
    def decode(cls, d: dict[str, Any]) -> dict[str, Any]:
        """`d` with its record-typed fields rebuilt as records (a list of them, or one)."""
        d = dict(d)
        for name, kind, many in _record_fields(cls):
            value = d.get(name)
            if value is not None:
                d[name] = [kind.from_dict(v) for v in value] if many else kind.from_dict(value)
        return d


@functools.cache
def _record_fields(cls: type) -> tuple[tuple[str, type, bool], ...]:
    """(name, record class, whether a list) for each field of `cls` typed `R`, `list[R]` or `R | None`."""
    hints = typing.get_type_hints(cls, globalns={**_RECORDS, **vars(sys.modules[cls.__module__])})
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        origin = typing.get_origin(hint)
        many = origin is list
        options = typing.get_args(hint) if many or origin in (typing.Union, types.UnionType) else (hint,)
        kind = next((a for a in options if isinstance(a, type) and issubclass(a, Record)), None)
        if kind is not None:
            out.append((f.name, kind, many))
    return tuple(out)
